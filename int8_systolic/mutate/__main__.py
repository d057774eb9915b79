"""`make mutate`: mutation testing of the RTL sources against the tests `make test` runs.

    python -m int8_systolic.mutate [--files int8_systolic/hw/requantizer.py ...] [--jobs N] [--only TEXT]
                                   [--limit N] [--timeout S]

Every mutant of the files (:mod:`mutate.operators`) goes through, in a worker with its own
copy of the repository (build/mutate/work/<n>/, the mutated file written into it):

1. ``fast``: a quick subset of `make test`'s RTL tests (:data:`FAST`), stopping at the first
   failure; a failing run kills the mutant (a mutant that does not elaborate fails here too);
2. ``netlist``: the RTLIL of every configuration in :data:`CONFIGS`, source locations removed,
   compared with the unmutated design's: identical for all of them means the change does not
   reach the hardware, and the mutant is counted equivalent (automatically, the argument
   being the identity itself);
3. ``full``: the rest of `make test`'s RTL tests (:data:`FULL`), both simulators included.

A mutant still alive is *listed* equivalent when ``int8_systolic/mutate/equivalent.toml`` gives its id with the
argument why no behaviour at the ports changes, else it *survived*. A worker that makes no
progress for ``--timeout`` seconds is killed and its mutant counted *timeout*, not killed (only a
failure the test run reports counts).

Each mutant's result is kept in build/mutate/results.json with a digest of its file's source: a
later run (``--only``, ``--files``) replaces the results it retests and keeps the others, and a
file whose source changed loses all of its results. build/mutate/report.json and report.md cover
every result kept for a file of ``--files`` (per file: generated, not run, killed, equivalent,
survived, timeouts, the score killed / (tested - equivalent), every survivor with its diff, the
runs the results came from) and the table is printed. Exit status 1 if a non-equivalent mutant
survived or a mutant of those files has no result.
"""

import argparse
import collections
import concurrent.futures
import contextlib
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import tomllib

from int8_systolic.cli_support import ArgumentParser, command

from .operators import mutants

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout (mutation testing works on one)
OUT = ROOT / "build" / "mutate"
STORE = OUT / "results.json"
EQUIVALENT = ROOT / "int8_systolic" / "mutate" / "equivalent.toml"
FILES = [f"int8_systolic/hw/{name}.py" for name in ("requantizer", "array", "accelerator", "sequencer", "credit",
                                                    "channel_table", "output_fifo", "ecp5_ram")]
# The tests each stage runs, by mutated file (all of them run by `make test`). A mutant of the
# array or the top cannot change the Requantizer alone, so its tests run only for that file.
_REQUANT_FAST = ["tests/test_requantizer.py::test_requantizer_directed",
                 "tests/test_requantizer.py::test_requantizer_full_rate_without_stalls"]
FAST = {"int8_systolic/hw/requantizer.py": [*_REQUANT_FAST, "tests/test_accelerator.py"]}
# (the cocotb runs on Icarus only: they cover both roundings, both DSP kinds and, on 1x1, the
# K = 132 105 GEMM; each Verilator configuration would add a ~25 s C++ build per mutant)
_COCOTB = [f"tests/test_cocotb.py::test_rtl[{c}]"
           for c in ("icarus-1-1-double-generic", "icarus-2-3-single-generic", "icarus-2-2-double-ecp5")]
# (the requantizer's random tests last: they take ~80 s, and `--quick` leaves them out)
_REQUANT_RANDOM = "tests/test_requantizer.py::test_requantizer_random"
FULL = {"int8_systolic/hw/requantizer.py": ["tests/test_export.py", *_COCOTB, _REQUANT_RANDOM]}
FAST_DEFAULT = ["tests/test_accelerator.py", "tests/test_accelerator_credit.py"]
FULL_DEFAULT = ["tests/test_export.py", *_COCOTB]
# The memory engine's files (issue 41; `--files engine`): each component's own Amaranth test first, then the
# engine's (its Amaranth tests and its cocotb run on Icarus: every layer kind, refusals, reset mid-list).
ENGINE_FILES = [f"int8_systolic/hw/{name}.py" for name in (
    "stacker", "loader", "layer_check", "window_gen", "depthwise_gen", "command_fetch", "table_loader",
    "result_packer", "read_arbiter", "byte_buffer", "transpose", "weight_prefetch", "weight_streamer", "axi_reader",
    "axi_writer", "products", "write_queue", "engine", "engine_top")]
_ENGINE_FULL = ["tests/test_engine.py",
                "tests/test_engine_cocotb.py::test_engine_layers_errors_and_reset[icarus-4-4-64-20-2-generic]"]
for _f in ENGINE_FILES:
    _own = f"tests/test_{_f.rsplit('/', 1)[1]}"
    # (a file with no test of its own, the engine and its top: the Icarus run first, ~15 s, then the Amaranth
    # tests, ~8 min on one core)
    FAST[_f] = [_own] if (pathlib.Path(__file__).resolve().parents[2] / _own).is_file() else _ENGINE_FULL[1:]
    FULL[_f] = [t for t in _ENGINE_FULL if t not in FAST[_f]]


# A test taking this long fails (pytest-timeout): a mutant that makes elaboration loop is reported
# as a failure by the test run, so it is killed by the run and not stalled until --timeout. (The
# slowest test a stage runs takes ~50 s on an idle machine.)
TEST_TIMEOUT = 300


def stage_tests(file, quick=False):
    """(fast, full) test lists for a mutant of ``file``; ``quick`` leaves the requantizer's random
    tests out of the full stage."""
    full = FULL.get(file, FULL_DEFAULT)
    return FAST.get(file, FAST_DEFAULT), [t for t in full if not (quick and t == _REQUANT_RANDOM)]
# (what the netlist stage elaborates: both roundings, both DSP kinds, both RAM styles, one and
# several table banks, square and non-square arrays)
CONFIGS = [
    ("Requantizer", {"rounding": "double"}), ("Requantizer", {"rounding": "single"}),
    ("Requantizer", {"rounding": "double", "dsp": "ecp5"}),
    ("Accelerator", {"rows": 1, "cols": 1, "rounding": "double", "max_col_tiles": 4}),
    ("Accelerator", {"rows": 2, "cols": 3, "rounding": "single", "max_col_tiles": 20}),
    ("Accelerator", {"rows": 3, "cols": 2, "rounding": "double", "max_col_tiles": 8, "ram": "block"}),
    ("Accelerator", {"rows": 2, "cols": 2, "rounding": "double", "max_col_tiles": 4, "dsp": "ecp5"}),
    ("Accelerator", {"rows": 4, "cols": 5, "rounding": "single", "max_col_tiles": 40}),
    # (the engine's build: the long delay lines in LUT-RAM rings, on 4x4 some of the array's too)
    ("Requantizer", {"rounding": "double", "ring_delays": True}),
    ("Accelerator", {"rows": 4, "cols": 4, "rounding": "double", "max_col_tiles": 8, "ring_delays": True}),
]
# (the engine's files: its netlist at two configurations, as its tests build it)
ENGINE_CONFIGS = [
    ("Engine", {"rows": 4, "cols": 4, "data_width": 64, "in_depth": 1024, "w_depth": 1024, "out_depth": 1024,
                "max_col_tiles": 8}),
    ("Engine", {"rows": 4, "cols": 4, "data_width": 32, "in_depth": 2048, "w_depth": 2048, "out_depth": 2048,
                "max_col_tiles": 8, "dsp": "ecp5"}),
    ("EngineTop", {"rows": 4, "cols": 4, "data_width": 64, "in_depth": 1024, "w_depth": 1024, "out_depth": 1024,
                   "max_col_tiles": 8}),
]
COPY = ["int8_systolic", "tests", "pyproject.toml"]
BATCH = 25


# ---------------------------------------------------------------- worker (one process per job slot)

def _purge():
    # (the package's modules but this tool's, so that the next run imports the mutated copy afresh)
    for name in list(sys.modules):
        if (name.startswith("int8_systolic.") and not name.startswith("int8_systolic.mutate")) \
                or name.split(".")[0] in ("tests", "conftest") or name.startswith("test_"):
            del sys.modules[name]


def _configs(file):
    return ENGINE_CONFIGS if file in ENGINE_FILES else CONFIGS


def _netlist(configs):
    """A digest of the RTLIL of every configuration of ``configs`` (source locations removed)."""
    import warnings

    from amaranth.back import rtlil

    _purge()
    from int8_systolic.hw.accelerator import Accelerator
    from int8_systolic.hw.engine import Engine
    from int8_systolic.hw.engine_top import EngineTop
    from int8_systolic.hw.requantizer import Requantizer

    classes = {"Accelerator": Accelerator, "Requantizer": Requantizer, "Engine": Engine, "EngineTop": EngineTop}
    h = hashlib.sha256()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cls, kw in configs:
            text = rtlil.convert(classes[cls](**kw))
            h.update(re.sub(r"attribute \\src \"[^\"]*\"\n", "", text).encode())
    return h.hexdigest()


# Failures of the machine, not of the mutant: the stage is run again (twice at most).
_INFRASTRUCTURE = ("Text file busy",)


def _pytest(args, log, retries=2):
    """Run pytest on ``args`` in this process; its exit status (non-zero: a test failed)."""
    start = log.stat().st_size if log.exists() else 0
    rc = _pytest_once(args, log)
    text = log.read_text(errors="replace")[start:] if rc else ""
    if rc and retries and any(s in text for s in _INFRASTRUCTURE):
        with open(log, "a") as f:
            f.write("\n==== an infrastructure error, not the mutant: run again\n")
        return _pytest(args, log, retries - 1)
    return rc


def _collect():
    """Collect the last run's garbage now, its warnings ignored: an Amaranth object a mutant left
    unelaborated would otherwise warn from its destructor inside the next run's tests (an error
    there, with filterwarnings = error) and kill the next mutant for nothing."""
    import gc
    import warnings

    from amaranth._unused import MustUse

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()
        # Whatever survived (held by a traceback or pytest's state) must not warn later either: only
        # objects the next run creates may fail it.
        for obj in gc.get_objects():
            if isinstance(obj, MustUse):
                obj._MustUse__silence = True


# Set when a run hit the per-test timeout: the mutant may have left gigabytes of objects (an
# elaboration looping), too many to collect; the worker reports the result and exits, and the
# harness starts a fresh one for the rest of its batch.
_spoiled = False


def _pytest_once(args, log):
    global _spoiled
    import pytest

    _purge()
    _collect()
    t0 = time.monotonic()
    with open(log, "a") as f:
        f.write(f"\n==== pytest {' '.join(args)}\n")
        f.flush()
        old = os.dup(1), os.dup(2)
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            rc = pytest.main([*args, "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                              f"--timeout={TEST_TIMEOUT}"])
        except BaseException as exc:
            # e.g. an ExceptionGroup of this run's unraisable warnings (errors here, as in `make test`),
            # which killed the worker and counted its mutant as a timeout
            print(f"pytest raised {type(exc).__name__}: {exc}", file=sys.stderr)
            rc = 1
        finally:
            if time.monotonic() - t0 > TEST_TIMEOUT:
                _spoiled = True
            else:
                _collect()
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(old[0], 1)
            os.dup2(old[1], 2)
    return int(rc)


def worker(work, batch, results, quick=False):
    """Test each mutant of ``batch`` (a file of JSON lines) in ``work`` (a copy of the repository),
    appending a start line and a result line per mutant to ``results``."""
    work = pathlib.Path(work)
    os.chdir(work)
    sys.path.insert(0, str(work))
    # No bytecode: a .pyc is validated by the source's size and mtime in whole seconds, and a mutant
    # of the same size written within the second of the previous one would run the previous code.
    sys.dont_write_bytecode = True
    log = work / "worker.log"
    originals = {}        # the unmutated netlists, by configuration list (computed when first needed)
    _collect()
    out = open(results, "a", buffering=1)  # noqa: SIM115 (kept open for the worker's life)
    for line in pathlib.Path(batch).read_text().splitlines():
        mut = json.loads(line)
        path = work / mut["file"]
        pristine = path.read_text()
        out.write(json.dumps({"start": mut["id"], "t": time.time()}) + "\n")
        t0 = time.monotonic()
        try:
            for cache in (work / "int8_systolic").rglob("__pycache__"):
                shutil.rmtree(cache)
            path.write_text(mut["source"])
            status, stage = "survived", None
            fast, full = stage_tests(mut["file"], quick)
            if _pytest(fast, log):
                status, stage = "killed", "fast"
            elif _spoiled:
                pass
            else:
                configs = _configs(mut["file"])
                key = id(configs)
                try:
                    if key not in originals:
                        path.write_text(pristine)
                        originals[key] = _netlist(configs)
                        path.write_text(mut["source"])
                    same = _netlist(configs) == originals[key]
                except Exception:
                    same = False
                _collect()
                if same:
                    status, stage = "equivalent", "netlist"
                elif _pytest(full, log):
                    status, stage = "killed", "full"
        finally:
            path.write_text(pristine)
        if _spoiled and status != "killed":
            status, stage = "timeout", None   # (a test passed after all but took too long: not a kill)
        rec = {"id": mut["id"], "status": status, "stage": stage, "seconds": round(time.monotonic() - t0, 1)}
        if quick and status == "survived" and full != stage_tests(mut["file"])[1]:
            rec["quick"] = True   # survived without the full stage's random tests: not final
        out.write(json.dumps(rec) + "\n")
        if _spoiled:
            out.close()
            os._exit(0)
    return 0


# ---------------------------------------------------------------- harness

def _make_copy(n):
    work = OUT / "work" / str(n)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, work / name)
    return work


_live = set()   # worker processes running
_stop = threading.Event()


def _kill(proc):
    """Kill a worker and everything it started (a simulator left running would write into the next
    worker's copy)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _live.discard(proc)


def _run_slot(n, queue, lock, done, timeout, progress, quick):
    """One job slot: a worker process fed mutants from ``queue``; restarted after a timeout."""
    work = _make_copy(n)
    results = work / "results.jsonl"
    while not _stop.is_set():
        with lock:   # a batch per worker process (it pays the imports and the reference netlist once)
            batch = [queue.popleft() for _ in range(min(BATCH, len(queue)))]
        if not batch:
            return
        results.write_text("")
        batch_file = work / "batch.jsonl"
        batch_file.write_text("".join(json.dumps({"id": m.id, "file": m.file, "source": m.source}) + "\n"
                                      for m in batch))
        env = {**os.environ, "PYTHONPATH": str(work), "PYTHONDONTWRITEBYTECODE": "1"}
        with open(work / "worker.stdout", "a") as log:
            cmd = [sys.executable, "-m", "int8_systolic.mutate", "--worker", str(work), "--batch", str(batch_file),
                   "--results", str(results), *(["--quick"] if quick else [])]
            # (a session of its own: killing it kills the simulators it started too)
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=env,
                                    start_new_session=True)
            _live.add(proc)
        pending = {m.id: m for m in batch}
        seen, current, since = 0, None, time.monotonic()
        while True:
            exited = proc.poll() is not None      # before reading: every line it wrote is in the file
            lines = results.read_text().split("\n")[:-1]   # (whole lines only)
            for line in lines[seen:]:
                rec = json.loads(line)
                if "start" in rec:
                    current, since = rec["start"], time.monotonic()
                else:
                    pending.pop(rec["id"], None)
                    done(rec)
                    progress()
                    current = None
            seen = len(lines)
            if exited and not pending:
                _live.discard(proc)
                break
            if exited or (current and time.monotonic() - since > timeout):
                _kill(proc)
                if current and current in pending:
                    # stuck past the timeout (killed), or the worker died (its log says why): not a kill
                    pending.pop(current)
                    done({"id": current, "status": "timeout", "stage": None,
                          "seconds": round(time.monotonic() - since, 1)})
                    progress()
                with lock:
                    for mut in reversed(batch):
                        if mut.id in pending:
                            queue.appendleft(mut)
                break
            time.sleep(0.5)


def _equivalents(path=None):
    """{mutant id: the argument} from int8_systolic/mutate/equivalent.toml: ``[[equivalent]]`` tables with ``id``
    (one mutant) or ``ids`` (several sharing one argument) and ``reason``."""
    path = path or EQUIVALENT
    if not path.exists():
        return {}
    doc = tomllib.loads(path.read_text())
    out = {}
    for entry in doc.get("equivalent", []):
        reason = entry.get("reason", "").strip()
        ids = [entry["id"]] if "id" in entry else entry.get("ids", [])
        if not reason or not ids:
            raise ValueError(f"{path}: every [[equivalent]] entry needs an id (or ids) and a reason: {entry}")
        out.update(dict.fromkeys(ids, reason))
    return out


def _digest(file):
    return hashlib.sha256((ROOT / file).read_bytes()).hexdigest()[:16]


def _load_store(files):
    """The store, with a fresh (empty) entry for each of ``files`` whose source changed since its
    results (written back only by :func:`_save_store`), and {file: {mutant id: record}} for ``files``."""
    doc = json.loads(STORE.read_text()) if STORE.exists() else {"files": {}, "runs": []}
    for f in files:
        entry = doc["files"].get(f)
        if not entry or entry["sha"] != _digest(f):
            doc["files"][f] = {"sha": _digest(f), "mutants": {}}
    return doc, {f: doc["files"][f]["mutants"] for f in files}


def _open_run(doc, run):
    """Add ``run`` to the store's runs; its index."""
    doc["runs"].append(run)
    return len(doc["runs"]) - 1


def _save_store(doc, records, by_id, run_index):
    """Merge ``records`` (results of run ``run_index``) into the store and write it (after every
    result: an interrupted run keeps what it measured)."""
    for mid, rec in records.items():
        doc["files"][by_id[mid].file]["mutants"][mid] = {**rec, "run": run_index}
    STORE.parent.mkdir(parents=True, exist_ok=True)
    tmp = STORE.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(STORE)


def _report(all_mutants, records, listed, files, runs):
    """``all_mutants``: every mutant of ``files``; ``records``: the results kept for (some of) them;
    ``runs``: every run's summary (a record's ``run`` indexes it)."""
    by_id = {m.id: m for m in all_mutants}
    rows = collections.OrderedDict((f, collections.Counter()) for f in files)
    for m in all_mutants:
        rows[m.file]["generated"] += 1
    survivors = []
    unknown_listed = sorted(i for i in listed if i not in by_id and i.split("::")[0] in files)
    for mid, rec in records.items():
        mut = by_id[mid]
        status = rec["status"]
        if status in ("survived", "timeout") and mid in listed:
            status = "listed equivalent"
        rec["final"] = status
        c = rows[mut.file]
        c["tested"] += 1
        c[{"killed": "killed", "equivalent": "equivalent (netlist)", "listed equivalent": "equivalent (listed)",
           "survived": "survived", "timeout": "timeout"}[status]] += 1
        if status in ("survived", "timeout"):
            survivors.append((mut, status + (" (--quick: not final)" if rec.get("quick") else "")))
    for c in rows.values():
        c["not run"] = c["generated"] - c["tested"]
    total = collections.Counter()
    for c in rows.values():
        total.update(c)
    rows["total"] = total

    def score(c):
        eq = c["equivalent (netlist)"] + c["equivalent (listed)"]
        live = c["tested"] - eq
        return 100.0 * c["killed"] / live if live else 100.0

    cols = ["generated", "not run", "killed", "equivalent (netlist)", "equivalent (listed)", "survived", "timeout"]
    lines = [f"{'file':<20} " + " ".join(f"{c:>20}" for c in cols) + f" {'score':>8}"]
    for f, c in rows.items():
        lines.append(f"{f:<20} " + " ".join(f"{c[k]:>20}" for k in cols) + f" {score(c):>7.1f}%")
    t = rows["total"]
    live = t["tested"] - t["equivalent (netlist)"] - t["equivalent (listed)"]
    estimate = []
    if t["not run"] and live:
        # (a sample, --sample: the tested mutants' score estimates the whole set's; Wilson's 95% interval)
        lo, hi = _wilson(t["killed"], live)
        estimate = [f"{t['tested']} of {t['generated']} mutants tested: the score {score(t):.1f}% is a sample's, "
                    f"95% interval {lo:.1f}% to {hi:.1f}% (Wilson, {live} mutants not equivalent)"]
    lines += estimate
    used = sorted({rec["run"] for rec in records.values() if "run" in rec})
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"files": files, "runs": {i: runs[i] for i in used},
           "tests": {f: dict(zip(("fast", "full"), stage_tests(f), strict=True)) for f in files},
           "netlist_configs": {f: [f"{c}({kw})" for c, kw in _configs(f)] for f in files},
           "table": {f: {**{k: c[k] for k in cols}, "score": round(score(c), 2)} for f, c in rows.items()},
           "survivors": [{"id": m.id, "status": s, "diff": m.diff()} for m, s in survivors],
           "listed_but_not_generated": unknown_listed,
           "mutants": [{"id": mid, "file": by_id[mid].file, "line": by_id[mid].line, "operator": by_id[mid].operator,
                        "before": by_id[mid].before, "after": by_id[mid].after, **rec} for mid, rec in records.items()]}
    (OUT / "report.json").write_text(json.dumps(doc, indent=1) + "\n")
    md = ["# Mutation testing of the RTL", "",
          f"{len(records)} mutants tested; netlist identity over {len(CONFIGS)} configurations of the core "
          f"(over {len(ENGINE_CONFIGS)} of the engine for its files). "
          "Tests per file (fast stage, then full stage):", "",
          *[f"- {f}: {', '.join(stage_tests(f)[0])}; then {', '.join(stage_tests(f)[1])}" for f in files], "",
          "| file | " + " | ".join(cols) + " | score |", "|---|" + "---:|" * (len(cols) + 1)]
    for f, c in rows.items():
        md.append(f"| {f} | " + " | ".join(str(c[k]) for k in cols) + f" | {score(c):.1f}% |")
    md += ["", *estimate] if estimate else []
    md += ["", "## Runs the results come from", "", "| run | date | commit | files | mutants | workers | wall time |",
           "|---:|---|---|---|---:|---:|---:|"]
    md += [f"| {i} | {runs[i]['date']} | {runs[i]['commit']} | {', '.join(runs[i]['files'])} | {runs[i]['mutants']} "
           f"| {runs[i]['jobs']} | {runs[i]['wall_seconds'] / 60:.1f} min |" for i in used]
    md += ["", f"## Survivors ({len(survivors)})", ""]
    md += [f"- `{m.id}` ({s}): `{m.diff()}`" for m, s in survivors] or ["(none)"]
    if unknown_listed:
        md += ["", "## Listed in int8_systolic/mutate/equivalent.toml but not generated (stale entries)", ""]
        md += [f"- `{i}`" for i in unknown_listed]
    (OUT / "report.md").write_text("\n".join(md) + "\n")
    return lines, survivors, unknown_listed


def _commit():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *COPY], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+changes" if dirty else "")


@command("python -m int8_systolic.mutate")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", default=FILES,
                        help="the files to mutate (default: the core's); 'engine': the memory engine's")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or os.cpu_count() or 1))
    parser.add_argument("--only", nargs="+", default=[""], help="only the mutants whose id contains one of these")
    parser.add_argument("--limit", type=int, default=0, help="at most this many mutants (a trial run)")
    parser.add_argument("--sample", type=int, default=0,
                        help="this many mutants of each file, drawn at random (seeded: the same draw for the same "
                             "sources); the report's score is then an estimate, its interval printed")
    parser.add_argument("--seed", type=int, default=1, help="the --sample draw's seed")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help=f"seconds a mutant may take (a test is failed after {TEST_TIMEOUT} s)")
    parser.add_argument("--list", action="store_true", help="print the mutants' ids and exit")
    parser.add_argument("--resume", action="store_true",
                        help="only the mutants with no final result kept: none, a timeout, "
                             "a --quick survivor not listed equivalent")
    parser.add_argument("--quick", action="store_true",
                        help="leave the requantizer's random tests out (a survivor's result is not final)")
    parser.add_argument("--report", action="store_true", help="write the report from the results kept, run nothing")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--batch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.files == ["engine"]:
        args.files = ENGINE_FILES
    if args.worker:
        return worker(args.worker, args.batch, args.results, args.quick)
    all_mutants = []
    for f in args.files:
        if not (ROOT / f).is_file():
            parser.error(f"no file {f}")
        all_mutants += mutants(ROOT / f, ROOT)
    if args.report:
        return _finish(all_mutants, args.files)
    selected = [m for m in all_mutants if any(text in m.id for text in args.only)]
    if args.sample:     # (before --resume: a resumed sample is the same draw, less what has a result)
        selected = _sample(selected, args.sample, args.seed)
    if args.resume:
        kept = _load_store(args.files)[1]
        listed = _equivalents()
        selected = [m for m in selected if m.id not in kept[m.file] or kept[m.file][m.id]["status"] == "timeout"
                    or (kept[m.file][m.id].get("quick") and m.id not in listed)]
    if args.limit:
        selected = selected[:args.limit]
    if args.list:
        print("\n".join(m.id for m in selected))
        return 0
    if not selected:
        print(f"error: no mutant matches --only {' '.join(args.only)!r}", file=sys.stderr)
        return 1
    jobs = max(1, min(args.jobs, len(selected)))
    print(f"make mutate: {len(selected)} mutants of {', '.join(args.files)}, {jobs} workers; logs in "
          f"{OUT / 'work'}/<n>/worker.log", flush=True)
    queue = collections.deque(selected)
    lock = threading.Lock()
    records = {}
    by_id = {m.id: m for m in all_mutants}
    store, _ = _load_store(args.files)
    run = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": _commit(), "files": args.files, "quick": args.quick,
           "mutants": 0, "jobs": jobs, "wall_seconds": 0.0}
    run_index = _open_run(store, run)
    t0 = time.monotonic()

    def done(rec):
        with lock:
            records[rec["id"]] = {k: v for k, v in rec.items() if k != "id"}
            run.update(mutants=len(records), wall_seconds=round(time.monotonic() - t0, 1))
            _save_store(store, {rec["id"]: records[rec["id"]]}, by_id, run_index)

    def progress():
        n = len(records)
        if n % 10 == 0 or n == len(selected):
            c = collections.Counter(r["status"] for r in records.values())
            print(f"[{n}/{len(selected)}] " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                  + f" ({time.monotonic() - t0:.0f} s)", flush=True)

    def interrupted(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)   # (like Ctrl-C: the workers are stopped too)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        slots = [pool.submit(_run_slot, n, queue, lock, done, args.timeout, progress, args.quick)
                 for n in range(jobs)]
        try:
            for fut in slots:
                fut.result()
        except BaseException:   # (interrupted: no worker outlives the run, writing into the next run's copies)
            _stop.set()
            for proc in list(_live):
                _kill(proc)
            raise
    wall = time.monotonic() - t0
    run.update(mutants=len(records), wall_seconds=round(wall, 1))
    _save_store(store, {}, by_id, run_index)
    print(f"this run: {len(records)} mutants, {wall / 60:.1f} min with {jobs} workers")
    return _finish(all_mutants, args.files)


def _wilson(k, n, z=1.96):
    """Wilson's score interval of a proportion ``k`` / ``n``, in percent."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def _sample(mutants, per_file, seed):
    """``per_file`` of each file's ``mutants`` (all of them where it has fewer), drawn with ``seed``, in their order."""
    by_file = collections.defaultdict(list)
    for m in mutants:
        by_file[m.file].append(m)
    keep = set()
    for file, ms in by_file.items():
        rng = random.Random(f"{seed}:{file}")
        keep |= {m.id for m in rng.sample(ms, min(per_file, len(ms)))}
    return [m for m in mutants if m.id in keep]


def _finish(all_mutants, files):
    """Report every result kept for ``files``; the exit status."""
    store, kept = _load_store(files)
    lines, survivors, stale = _report(all_mutants, {k: v for f in files for k, v in kept[f].items()},
                                      _equivalents(), files, store["runs"])
    print("\n".join(lines))
    print(f"report (every result kept in {STORE}): {OUT / 'report.md'}, {OUT / 'report.json'}")
    for m, s in survivors:
        print(f"{s}: {m.id}\n    {m.diff()}")
    for mid in stale:
        print(f"error: int8_systolic/mutate/equivalent.toml lists {mid!r}, which is not generated any more",
              file=sys.stderr)
    not_run = sum(1 for m in all_mutants if m.id not in kept[m.file])
    if not_run:
        print(f"{not_run} mutants of {', '.join(files)} have no result yet (make mutate MUTATE_ARGS=--resume)",
              file=sys.stderr)
    return 1 if survivors or stale or not_run else 0


if __name__ == "__main__":
    raise SystemExit(main())
