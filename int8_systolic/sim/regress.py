"""The RTL regression (``make sim``): every configuration on both simulators, in parallel, with a summary.

Jobs: int8_systolic/sim/tb_accelerator.py through cocotb-test for each (simulator, rows x cols, rounding)
below; int8_systolic/sim/tb_axi.py (the AXI top, through the register-level driver) for each of AXI_CONFIGS;
int8_systolic/sim/tb_engine.py (the memory engine from command lists in memory) for each of ENGINE_CONFIGS,
int8_systolic/sim/tb_engine_top.py (the engine's top through its registers), the models of ENGINE_MODELS on the
engine;
then the four wake-word models (20 steps each), the generated CNN and the five MLPerf
Tiny class models (one inference each) with every MAC layer on the RTL (int8_systolic/sim/tb_model.py,
compared with golden and TFLM), and two of them through the AXI top's descriptor queue: the
models of each block run one after another in one simulation, so they share one Verilator build.
Verilator models are compiled with less C++ optimization (``run_tb(optimize=False)``): these runs
are short, and compiling was most of their time.
Each job runs in its own process and build directory, its
output going to build/sim/logs/<job>.log; ``JOBS`` of them at a time (default: the number
of cores). A line per job as it finishes, then a table of tests, outputs compared and
failures; each job's JUnit XML goes to build/sim/junit/, all of them merged into
build/sim/junit.xml, and the figures to build/sim/summary.json. Each job's functional coverage
(:mod:`sim.coverage`) goes to build/sim/coverage/<job>.{yml,xml}, merged into
build/sim/coverage.{yml,xml}; the coverage table is printed, and a full run fails when a bin
of the model was never hit.

``SHARD=i/n`` runs the i-th of n deterministic, disjoint parts of the job list (for a CI
matrix) and writes build/sim/shards/summary-<i>of<n>.json; ``python -m int8_systolic.sim.regress --merge
FILE...`` (``make sim-merge``) checks that the shards add up to the whole list and prints and
writes the merged summary, JUnit and coverage (failing on a bin never hit). ``WAVES=1`` dumps FST waveforms (Icarus:
<build>/<top>.fst; Verilator: --trace-fst). ``SEED=n`` reproduces or varies the stimulus.
Exit status non-zero on any failure or missing job.
"""

import argparse
import concurrent.futures
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from int8_systolic.cli_support import ArgumentParser, command

from ..paths import build_root
from . import coverage

SHAPES = [(1, 1), (2, 3), (4, 4), (8, 8)]
CONFIGS = ([("icarus", r, c, rnd, "generic") for r, c in SHAPES for rnd in ("double", "single")]
           + [("verilator", r, c, rnd, "generic") for r, c in [*SHAPES, (16, 16)] for rnd in ("double", "single")]
           # The ECP5 build (MULT18X18D and DP16KD primitives, simulated with sim/ecp5_models.py's models).
           + [("icarus", 4, 4, "double", "ecp5")]
           + [("verilator", 8, 8, rnd, "ecp5") for rnd in ("double", "single")])
# Real models, every MAC layer on the RTL (Verilator, 8x8): (model, steps). The MLPerf Tiny class models
# (golden.tflite.mlperf) run one inference each.
MODELS = [("alexa", 20), ("hey_jarvis", 20), ("hey_mycroft", 20), ("okay_nabu", 20), ("cnn", 5),
          ("image_classification", 1), ("keyword_spotting", 1), ("visual_wake_words", 1), ("anomaly_detection", 1),
          ("keyword_spotting_mobilenetv2", 1)]
# The AXI top (int8_systolic/sim/tb_axi.py): (simulator, rows, cols, rounding, dsp)
# (1x4: one row a tile, so a GEMM's first result row may be its last: the framer's other case)
AXI_CONFIGS = [("icarus", 1, 4, "double", "generic"), ("icarus", 2, 3, "double", "generic"),
               ("icarus", 4, 4, "single", "generic"), ("verilator", 4, 4, "double", "generic"),
               ("verilator", 8, 8, "double", "generic"), ("verilator", 8, 8, "single", "ecp5")]
AXI_MODELS = [("okay_nabu", 20), ("keyword_spotting", 1)]
# The models on the memory engine (int8_systolic/sim/tb_engine_model.py, 8x8, 64-bit port): every MAC layer the
# compiler gives it on the engine's RTL, the others on the host
ENGINE_MODELS = [("okay_nabu", 5), ("cnn", 2), ("image_classification", 1), ("keyword_spotting", 1),
                 ("visual_wake_words", 1), ("anomaly_detection", 1), ("keyword_spotting_mobilenetv2", 1)]
AXI_TESTS = 7
# The memory engine (int8_systolic/sim/tb_engine.py): (simulator, rows, cols, data width, memory latency, random
# layers, primitives); Icarus on 4x4 (it simulates the 8x8 engine ~4x slower); the ECP5 build (DP16KD buffers and
# tables, MULT18X18D multipliers) as make synth builds it
ENGINE_CONFIGS = [("verilator", 8, 8, 64, 20, 8, "generic"), ("verilator", 8, 8, 32, 30, 6, "generic"),
                  ("verilator", 8, 8, 128, 20, 6, "generic"), ("verilator", 8, 8, 64, 20, 6, "ecp5"),
                  ("icarus", 4, 4, 64, 20, 2, "generic")]
ENGINE_TESTS = 3
SIM_DIR = build_root() / "sim"


def engine_for(simulator, rows, cols, data_width, dsp="generic"):
    """The engine a testbench job builds: the default buffers on Verilator; on Icarus 2 KB ones (with the
    testbench's small layers), which it simulates much faster. ``dsp="ecp5"``: built on the ECP5's DP16KD and
    MULT18X18D (simulated with sim/ecp5_models.py)."""
    from ..hw.engine import Engine

    small = {"in_depth": 2048, "w_depth": 2048, "out_depth": 2048} if simulator == "icarus" else {}
    return Engine(rows, cols, data_width=data_width, dsp=dsp, **small)


def long_k(simulator, rows, cols):
    """Whether a configuration also runs the K = 132 105 GEMM (accumulators wrap int32): every
    Verilator build, and the Icarus ones fast enough to simulate its 132 105 cycles (~15 s)."""
    return simulator == "verilator" or rows * cols <= 6


def _keep_coverage(build, tag):
    """Copy a job's coverage.{yml,xml} from its build directory to build/sim/coverage/<tag>.*."""
    (SIM_DIR / "coverage").mkdir(parents=True, exist_ok=True)
    for suffix in (".yml", ".xml"):
        src = (build / "coverage").with_suffix(suffix)
        dst = (SIM_DIR / "coverage" / tag).with_suffix(suffix)
        dst.unlink(missing_ok=True)
        if src.exists():
            shutil.copy(src, dst)


@dataclasses.dataclass(frozen=True)
class Job:
    tag: str
    cost: float                # relative run time, to balance shards and start the long jobs first
    config: tuple = None       # (simulator, rows, cols, rounding, dsp)
    models: tuple = None       # ((name, steps), ...): run one after another in one simulation
    axi: bool = False          # the AXI top's testbench (config) or the model through the AXI top (model)
    engine: tuple = None       # (simulator, rows, cols, data width, latency, layers): the memory engine's testbench
    block: str = None          # for models: "engine" runs them on the memory engine (default: core, or axi)
    engine_top: bool = False   # the engine's top through its registers (int8_systolic/sim/tb_engine_top.py)


def config_tag(simulator, r, c, rounding, dsp):
    return f"{simulator}_{r}x{c}_{rounding}" + ("" if dsp == "generic" else f"_{dsp}")


def all_jobs():
    """Every job of the regression, in the order the table lists them."""
    jobs = []
    for cfg in CONFIGS:
        simulator, r, c = cfg[:3]
        # seconds measured on the 2-core machine (Icarus runs fewer problems on the large arrays; Verilator
        # pays a C++ build of ~30 s first)
        cost = (40 if r * c == 1 else 20) if simulator == "icarus" else 30 + 0.35 * r * c
        jobs.append(Job(config_tag(*cfg), float(cost), config=cfg))
    for cfg in AXI_CONFIGS:
        simulator, r, c = cfg[:3]
        jobs.append(Job("axi_" + config_tag(*cfg), 20.0 if simulator == "icarus" else 30 + 0.35 * r * c,
                        config=cfg, axi=True))
    for cfg in ENGINE_CONFIGS:
        simulator, r, c, width, dsp = cfg[0], cfg[1], cfg[2], cfg[3], cfg[6]
        suffix = "_ecp5" if dsp == "ecp5" else ""
        jobs.append(Job(f"engine_{simulator}_{r}x{c}_{width}{suffix}", 200.0 if simulator == "icarus" else 70.0,
                        engine=cfg))
    jobs.append(Job("engine_top_verilator_4x4_64", 40.0, engine_top=True))
    # (a Verilator build of ~45 s, then ~10 s of simulation a model)
    jobs.append(Job("models", 45.0 + 10 * len(MODELS), models=tuple(MODELS)))
    jobs.append(Job("models_axi", 45.0 + 10 * len(AXI_MODELS), models=tuple(AXI_MODELS), axi=True))
    jobs.append(Job("models_engine", 60.0 + 20 * len(ENGINE_MODELS), models=tuple(ENGINE_MODELS), block="engine"))
    return jobs


def parse_shard(text):
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise ValueError(f"SHARD must be i/n with 1 <= i <= n, got {text!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"SHARD must be i/n with 1 <= i <= n, got {text!r}")
    return i, n


def shard(jobs, i, n):
    """The i-th (1-based) of n disjoint parts: jobs by decreasing cost dealt round robin (deterministic)."""
    order = sorted(jobs, key=lambda j: (-j.cost, j.tag))
    return [j for k, j in enumerate(order) if k % n == i - 1]


def run_job(job, *, seed, problems, max_dim, waves):
    """Run one job in this process; returns its summary row."""
    from .run_model import run_models
    from .runner import build_dir, run_tb

    t0 = time.monotonic()
    error = None
    if job.engine_top:
        from ..hw.engine_top import EngineTop
        from ..hw.export import AxiPorts
        from .runner import component_dir, run_component

        top = EngineTop(4, 4, data_width=64, in_depth=4096, w_depth=4096, out_depth=4096, max_col_tiles=16)
        try:
            results = run_component("verilator", AxiPorts(top), "int8_systolic_engine_top",
                                    "int8_systolic.sim.tb_engine_top", tag="engine_top",
                                    extra_env={"TB_SEED": str(seed), "TB_ROWS": "4", "TB_COLS": "4"}, waves=waves,
                                    optimize=False)
        except SystemExit as exc:
            error, results = str(exc) or type(exc).__name__, []
        _keep_junit(component_dir("verilator", "engine_top"), job.tag)
        # (the register top records no coverage: the engine jobs sample the engine group, sim.coverage)
        return {"job": job.tag, "config": "engine top 4x4 64-bit (registers)", "simulator": "verilator",
                "tests": len(results), "expected_tests": 3, "compared": sum(x["compared"] for x in results),
                "failures": (1 if error else 0), "cycles": 0, "seconds": round(time.monotonic() - t0, 1),
                "error": error, "coverage": False}
    if job.engine:
        from .runner import component_dir, run_component

        simulator, r, c, width, latency, layers, dsp = job.engine
        suffix = "_ecp5" if dsp == "ecp5" else ""
        build = component_dir(simulator, f"engine_{r}x{c}_{width}{suffix}")
        for stale in ("coverage.yml", "coverage.xml"):       # (a failed run's must not count)
            (build / stale).unlink(missing_ok=True)
        try:
            results = run_component(simulator, engine_for(simulator, r, c, width, dsp), "int8_systolic_engine",
                                    "int8_systolic.sim.tb_engine", tag=f"engine_{r}x{c}_{width}{suffix}",
                                    ecp5=dsp == "ecp5",
                                    # (each job its own seed: its own layers)
                                    extra_env={"TB_SEED": str(seed * 1000 + width + (dsp == "ecp5")),
                                               "TB_LATENCY": str(latency), "TB_LAYERS": str(layers),
                                               "TB_COLS": str(c),
                                               "TB_SMALL": str(int(simulator == "icarus")),
                                               "TB_COVERAGE": str(build / "coverage")},
                                    waves=waves, optimize=False)
        except SystemExit as exc:
            error, results = str(exc) or type(exc).__name__, []
        _keep_junit(build, job.tag)
        _keep_coverage(build, job.tag)
        config = f"engine {r}x{c} {width}-bit" + (" ECP5" if dsp == "ecp5" else "")
        return {"job": job.tag, "config": config, "simulator": simulator, "tests": len(results),
                "expected_tests": ENGINE_TESTS, "compared": sum(x["compared"] for x in results),
                "failures": (1 if error else 0), "cycles": sum(x.get("cycles", 0) for x in results),
                "seconds": round(time.monotonic() - t0, 1), "error": error, "coverage": True}
    if job.config and job.axi:
        simulator, r, c, rounding, dsp = job.config
        suffix = ("" if dsp == "generic" else f"_{dsp}") + "_axi"
        try:
            results = run_tb(simulator, r, c, rounding, seed=seed, problems=max(6, problems), max_dim=max_dim,
                             waves=waves, dsp=dsp, max_col_tiles=16, module="int8_systolic.sim.tb_axi", block="axi",
                             tag_suffix="_axi", optimize=False)
        except SystemExit as exc:
            error, results = str(exc) or type(exc).__name__, []
        build = build_dir(simulator, r, c, rounding, suffix)
        _keep_coverage(build, job.tag)
        _keep_junit(build, job.tag)
        config = f"AXI top {r}x{c} {rounding}" + ("" if dsp == "generic" else f" {dsp}")
        return {"job": job.tag, "config": config, "simulator": simulator, "tests": len(results),
                "expected_tests": AXI_TESTS, "compared": sum(x["compared"] for x in results),
                "failures": sum(x["failures"] for x in results) + (1 if error else 0),
                "cycles": sum(x["cycles"] for x in results), "seconds": round(time.monotonic() - t0, 1),
                "error": error}
    if job.config:
        simulator, r, c, rounding, dsp = job.config
        # Icarus slows down ~4x per array doubling: fewer problems on the big arrays there.
        n = problems if simulator == "verilator" or r * c <= 16 else max(2, problems // 3)
        try:
            results = run_tb(simulator, r, c, rounding, seed=seed, problems=n, max_dim=max_dim, waves=waves, dsp=dsp,
                             long_k=long_k(simulator, r, c), optimize=False)
        except SystemExit as exc:     # cocotb-test raises SystemExit on failing cocotb tests
            error, results = str(exc) or type(exc).__name__, []
        build = build_dir(simulator, r, c, rounding, "" if dsp == "generic" else f"_{dsp}")
        _keep_coverage(build, job.tag)
        _keep_junit(build, job.tag)
        config = f"{r}x{c} {rounding}" + ("" if dsp == "generic" else f" {dsp}")
        return {"job": job.tag, "config": config, "simulator": simulator, "tests": len(results),
                "expected_tests": 4, "compared": sum(x["compared"] for x in results),
                "failures": sum(x["failures"] for x in results) + (1 if error else 0),
                "cycles": sum(x["cycles"] for x in results), "seconds": round(time.monotonic() - t0, 1),
                "error": error}
    block = job.block or ("axi" if job.axi else "core")
    names = [name for name, _ in job.models]
    per_model = []
    try:
        res = run_models(names, sim="verilator", steps=[steps for _, steps in job.models], seed=seed, waves=waves,
                         build_tag=f"_{job.tag}", block=block, optimize=False)
        per_model = [{"model": name, "steps": steps, "compared": r["compared"], "failures": r["failures"]}
                     for (name, steps), r in zip(job.models, res, strict=True)]
        compared, failures, tests = sum(r["compared"] for r in res), sum(r["failures"] for r in res), len(res)
    except (SystemExit, RuntimeError, ValueError) as exc:
        error, compared, failures, tests = str(exc) or type(exc).__name__, 0, 1, 0
    if job.block == "engine":
        from .runner import component_dir

        build = component_dir("verilator", "engine_model_8x8_8")
    else:
        build = build_dir("verilator", 8, 8, "double", f"_{job.tag}" + ("_axi" if job.axi else ""))
    _keep_coverage(build, job.tag)
    _keep_junit(build, job.tag)
    where = " (AXI top)" if job.axi else " (engine)" if job.block == "engine" else ""
    return {"job": job.tag, "config": f"{len(names)} models{where}, one build",
            "simulator": "verilator", "tests": tests,
            "expected_tests": len(names), "compared": compared, "failures": failures,
            "seconds": round(time.monotonic() - t0, 1), "error": error, "model": True, "models": per_model,
            "coverage": job.block != "engine"}


def _ok(row):
    return not row["failures"] and row["tests"] == row["expected_tests"]


def _spawn(job, args, seed, waves):
    """Run ``job`` in a child process (its own build directory and log); returns its row."""
    logs = SIM_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    row_file = logs / f"{job.tag}.row.json"
    row_file.unlink(missing_ok=True)
    log = logs / f"{job.tag}.log"
    cmd = [sys.executable, "-m", "int8_systolic.sim.regress", "--run-one", job.tag, "--row-file", str(row_file),
           "--problems", str(args.problems), "--max-dim", str(args.max_dim)]
    env = {**os.environ, "SEED": str(seed), "WAVES": "1" if waves else "0"}
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
    if row_file.exists():
        return json.loads(row_file.read_text())
    return {"job": job.tag, "config": job.tag, "simulator": "-", "tests": 0, "expected_tests": 1, "compared": 0,
            "failures": 1, "seconds": round(time.monotonic() - t0, 1), "error": f"the job exited with {rc}; see {log}"}


def print_table(rows):
    print(f"{'configuration':<32} {'simulator':<10} {'tests':>5} {'outputs compared':>17} {'failures':>9} "
          f"{'seconds':>8}")
    for row in rows:
        print(f"{row['config']:<32} {row['simulator']:<10} {row['tests']:>5} {row['compared']:>17} "
              f"{row['failures']:>9} {row['seconds']:>8}")
        for sub in row.get("models", []):
            print(f"  {sub['model'] + ' x' + str(sub['steps']):<41} {'':>5} {sub['compared']:>17} {sub['failures']:>9}")
    print(f"{'total':<43} {sum(r['tests'] for r in rows):>5} {sum(r['compared'] for r in rows):>17} "
          f"{sum(r['failures'] for r in rows):>9}")


def _keep_junit(build, tag):
    """Copy the job's cocotb results file (the newest in its build directory: a run killed
    earlier leaves its own, possibly empty, under another random name) to build/sim/junit/."""
    xmls = sorted(build.glob("*results.xml"), key=lambda p: p.stat().st_mtime)
    if xmls:
        (SIM_DIR / "junit").mkdir(parents=True, exist_ok=True)
        shutil.copy(xmls[-1], SIM_DIR / "junit" / f"{tag}.xml")
    for stale in xmls[:-1]:
        stale.unlink()


def merge_junit(files, out):
    """One JUnit document with every job's test suites."""
    root = ET.Element("testsuites")
    for path in files:
        doc = ET.parse(path).getroot()
        suites = [doc] if doc.tag == "testsuite" else list(doc)
        for suite in suites:
            suite.set("name", f"{path.stem}.{suite.get('name', '')}")
            root.append(suite)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return out


def report_coverage(stems, out_stem, require_all):
    """Merge the coverage files ``stems`` (.yml and .xml each) into ``out_stem``.{yml,xml} and print
    the table; return the problems (a file missing; with ``require_all``, the bins never hit)."""
    problems = [f"no coverage file {s}.yml" for s in stems if not s.with_suffix(".yml").exists()]
    stems = [s for s in stems if s.with_suffix(".yml").exists()]
    if not stems:
        return problems
    yml = coverage.merge(stems, out_stem)
    print()
    print(f"functional coverage, {len(stems)} runs merged ({yml}, .xml):")
    print("\n".join("  " + line for line in coverage.table(yml)))
    missing = coverage.unhit(yml)
    if require_all and missing:
        problems.append(f"{len(missing)} coverage bins never hit: "
                        + ", ".join(f"{g}.{p}={b}" for g, p, b in missing[:10]) + (" ..." if len(missing) > 10 else ""))
    return problems


def _order(rows):
    index = {j.tag: k for k, j in enumerate(all_jobs())}
    return sorted(rows, key=lambda r: index.get(r["job"], len(index)))


def merge(paths):
    """Merge shard summaries: every job of the regression exactly once. Returns (rows, problems)."""
    docs = [json.loads(pathlib.Path(p).read_text()) for p in paths]
    rows, problems = [], []
    for d in docs:
        rows += d["runs"]
    lists = {tuple(d.get("selected") or ()) for d in docs}
    if len(lists) > 1:
        problems.append("the summaries come from different job lists (another --only?)")
    expected = set(max(lists, key=len)) if lists and max(lists, key=len) else {j.tag for j in all_jobs()}
    seen = [r["job"] for r in rows]
    missing = sorted(expected - set(seen))
    dupes = sorted({t for t in seen if seen.count(t) > 1})
    shards = {tuple(d["shard"]) for d in docs if d.get("shard")}
    n = {s[1] for s in shards}
    if len(n) > 1:
        problems.append(f"shards of different splits: {sorted(shards)}")
    elif n and len(shards) != n.pop():
        problems.append(f"shards present: {sorted(s[0] for s in shards)} of {sorted(shards)[0][1]}")
    if missing:
        problems.append(f"jobs missing: {', '.join(missing)}")
    if dupes:
        problems.append(f"jobs run twice: {', '.join(dupes)}")
    return _order(rows), problems


def _write_summary(rows, seed, shard_spec, wall, jobs, out, selected=None):
    """``selected``: the jobs of the whole run before sharding (what a merge must find)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seed": seed, "shard": shard_spec, "jobs": jobs, "wall_seconds": round(wall, 1),
                               "selected": selected, "runs": rows}, indent=2) + "\n")


@command("python -m int8_systolic.sim.regress")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=24, help="random GEMMs per configuration")
    parser.add_argument("--max-dim", type=int, default=40, help="largest random M, K, N")
    parser.add_argument("--only", default="", help="run only the jobs whose name contains this text")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or os.cpu_count() or 1),
                        help="jobs at a time (default: JOBS, else the number of cores)")
    parser.add_argument("--shard", default=os.environ.get("SHARD", ""), help="i/n: run the i-th of n parts")
    parser.add_argument("--merge", nargs="+", metavar="SUMMARY", help="merge shard summaries and exit")
    parser.add_argument("--list", action="store_true", help="print the jobs (of the shard) and exit")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)
    parser.add_argument("--row-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    seed = int(os.environ.get("SEED", "1"))
    waves = os.environ.get("WAVES", "0") == "1"
    if args.merge:
        try:
            rows, problems = merge(args.merge)
        except (OSError, json.JSONDecodeError, KeyError) as exc:
            print(f"error: cannot read the shard summaries: {exc}", file=sys.stderr)
            return 2
        print_table(rows)
        _write_summary(rows, seed, None, 0.0, None, SIM_DIR / "summary.json", [r["job"] for r in rows])
        shard_junits = [pathlib.Path(p).with_name(pathlib.Path(p).stem.replace("summary-", "junit-") + ".xml")
                        for p in args.merge]
        junit = merge_junit([j for j in shard_junits if j.exists()], SIM_DIR / "junit.xml")
        problems += report_coverage([pathlib.Path(p).with_name(pathlib.Path(p).stem.replace("summary-", "coverage-"))
                                     for p in args.merge], SIM_DIR / "coverage", require_all=True)
        for p in problems:
            print(f"error: {p}", file=sys.stderr)
        print(f"merged {len(args.merge)} summaries: {SIM_DIR / 'summary.json'}, {junit}")
        return 1 if problems or not all(_ok(r) for r in rows) else 0
    if args.run_one:
        job = next((j for j in all_jobs() if j.tag == args.run_one), None)
        if job is None:
            parser.error(f"no job {args.run_one!r}")
        row = run_job(job, seed=seed, problems=args.problems, max_dim=args.max_dim, waves=waves)
        with open(args.row_file, "w") as f:
            json.dump(row, f)
        return 0 if _ok(row) else 1
    if args.jobs < 1:
        parser.error("--jobs must be >= 1")
    jobs = [j for j in all_jobs() if args.only in j.tag]
    selected = [j.tag for j in jobs]
    shard_spec = None
    if args.shard:
        try:
            shard_spec = parse_shard(args.shard)
        except ValueError as exc:
            parser.error(str(exc))
        jobs = shard(jobs, *shard_spec)
    if args.list:
        print("\n".join(j.tag for j in jobs))
        return 0
    if not jobs:
        print(f"error: no job matches --only {args.only!r}", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    print(f"make sim: {len(jobs)} jobs, {args.jobs} at a time"
          + (f", shard {shard_spec[0]}/{shard_spec[1]}" if shard_spec else "") + f", SEED={seed}; logs in "
          f"{SIM_DIR / 'logs'}/", flush=True)
    rows = []
    started = sorted(jobs, key=lambda j: -j.cost)      # the long ones first: the pool drains evenly
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(_spawn, j, args, seed, waves): j for j in started}
        for fut in concurrent.futures.as_completed(futures):
            row = fut.result()
            rows.append(row)
            status = "ok" if _ok(row) else "FAIL"
            print(f"[{len(rows)}/{len(jobs)}] {row['job']:<34} {status:<4} {row['compared']:>7} outputs compared, "
                  f"{row['failures']} failures, {row['seconds']} s ({time.monotonic() - t0:.0f} s elapsed)",
                  flush=True)
            if status == "FAIL":
                log = SIM_DIR / "logs" / f"{row['job']}.log"
                tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
                print("\n".join("    " + line for line in tail) + (f"\n    ({row['error']})" if row["error"] else ""))
    rows = _order(rows)
    wall = time.monotonic() - t0
    print()
    print_table(rows)
    print(f"wall time {wall / 60:.1f} min with {args.jobs} jobs at a time")
    if shard_spec:
        out = SIM_DIR / "shards" / f"summary-{shard_spec[0]}of{shard_spec[1]}.json"
    else:
        out = SIM_DIR / "summary.json"
    _write_summary(rows, seed, shard_spec, wall, args.jobs, out, selected)
    xmls = [SIM_DIR / "junit" / f"{r['job']}.xml" for r in rows]
    name = "junit.xml" if not shard_spec else f"shards/junit-{shard_spec[0]}of{shard_spec[1]}.xml"
    junit = merge_junit([x for x in xmls if x.exists()], SIM_DIR / name)
    print(f"JUnit XML: {junit}   summary: {out}")
    # A shard or an --only run covers part of the model: only the whole run (or the merge) must hit every bin.
    cov_out = (SIM_DIR / "coverage" if not shard_spec
               else SIM_DIR / "shards" / f"coverage-{shard_spec[0]}of{shard_spec[1]}")
    problems = report_coverage([SIM_DIR / "coverage" / r["job"] for r in rows if r.get("coverage", True)], cov_out,
                               require_all=not shard_spec and not args.only)
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 0 if all(_ok(r) for r in rows) and not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
