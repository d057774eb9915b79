"""The RTL regression (``make sim``): every configuration on both simulators, with a summary.

Runs sim/tb_accelerator.py through cocotb-test for each (simulator, rows x cols, rounding)
below, then the four wake-word models (20 steps each), the generated CNN and the five MLPerf
Tiny class models (one inference each) with every MAC layer on the RTL (sim/tb_model.py,
compared with golden and TFLM); prints a line per run as
it finishes, then a table of tests, outputs compared and failures; copies each run's JUnit
XML to build/sim/junit/ and writes build/sim/summary.json.
``WAVES=1`` dumps FST waveforms (Icarus: <build>/<top>.fst; Verilator: --trace-fst).
``SEED=n`` reproduces or varies the random stimulus. Exits non-zero on any failure.
"""

import argparse
import json
import os
import shutil
import time

from .run_model import run_model
from .runner import ROOT, run_tb

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=24, help="random GEMMs per configuration")
    parser.add_argument("--max-dim", type=int, default=40, help="largest random M, K, N")
    parser.add_argument("--only", default="", help="run only configurations whose tag contains this text")
    args = parser.parse_args(argv)
    seed = int(os.environ.get("SEED", "1"))
    waves = os.environ.get("WAVES", "0") == "1"
    junit = ROOT / "build" / "sim" / "junit"
    junit.mkdir(parents=True, exist_ok=True)
    rows = []
    def tag_of(simulator, r, c, rounding, dsp):
        return f"{simulator}_{r}x{c}_{rounding}" + ("" if dsp == "generic" else f"_{dsp}")

    configs = [c for c in CONFIGS if args.only in tag_of(*c)]
    for n, (simulator, r, c, rounding, dsp) in enumerate(configs, 1):
        tag = tag_of(simulator, r, c, rounding, dsp)
        t0 = time.monotonic()
        # Icarus slows down ~4x per array doubling: fewer problems on the big arrays there.
        problems = args.problems if simulator == "verilator" or r * c <= 16 else max(2, args.problems // 3)
        error = None
        try:
            results = run_tb(simulator, r, c, rounding, seed=seed, problems=problems, max_dim=args.max_dim,
                             waves=waves, dsp=dsp)
        except BaseException as exc:  # cocotb-test raises SystemExit on failing cocotb tests
            if isinstance(exc, KeyboardInterrupt):
                raise
            error, results = str(exc) or type(exc).__name__, []
        build = ROOT / "build" / "sim" / f"{tag}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
        for xml in build.glob("*results.xml"):
            shutil.copy(xml, junit / f"{tag}.xml")
        compared = sum(x["compared"] for x in results)
        failures = sum(x["failures"] for x in results) + (1 if error else 0)
        config = f"{r}x{c} {rounding}" + ("" if dsp == "generic" else f" {dsp}")
        row = {"config": config, "simulator": simulator, "tests": len(results),
               "compared": compared, "failures": failures, "cycles": sum(x["cycles"] for x in results),
               "seconds": round(time.monotonic() - t0, 1), "error": error}
        rows.append(row)
        status = "ok" if not failures and len(results) == 2 else "FAIL"
        print(f"[{n}/{len(configs)}] {tag:<28} {status:<4} {compared:>7} outputs compared, "
              f"{failures} failures, {row['seconds']} s", flush=True)
    models = [m for m in MODELS if args.only in f"model_{m[0]}"]
    for n, (name, steps) in enumerate(models, 1):
        t0 = time.monotonic()
        error = None
        try:
            res = run_model(name, sim="verilator", steps=steps, seed=seed, waves=waves)
            compared, failures = res["compared"], res["failures"]
            tests = 1
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            error, compared, failures, tests = str(exc) or type(exc).__name__, 0, 1, 0
        row = {"config": f"{name} x{steps}", "simulator": "verilator", "tests": tests, "compared": compared,
               "failures": failures, "seconds": round(time.monotonic() - t0, 1), "error": error, "model": True}
        rows.append(row)
        print(f"[model {n}/{len(models)}] {name:<28} {'ok' if not failures and tests else 'FAIL':<4} {steps} steps, "
              f"{compared} GEMM outputs compared, {failures} failures, {row['seconds']} s", flush=True)
    print()
    print(f"{'configuration':<32} {'simulator':<10} {'tests':>5} {'outputs compared':>17} {'failures':>9}")
    for row in rows:
        print(f"{row['config']:<32} {row['simulator']:<10} {row['tests']:>5} {row['compared']:>17} "
              f"{row['failures']:>9}")
    total_c = sum(r["compared"] for r in rows)
    total_f = sum(r["failures"] for r in rows)
    print(f"{'total':<43} {sum(r['tests'] for r in rows):>5} {total_c:>17} {total_f:>9}")
    out = ROOT / "build" / "sim" / "summary.json"
    out.write_text(json.dumps({"seed": seed, "runs": rows}, indent=2) + "\n")
    print(f"JUnit XML: {junit}/   summary: {out}")
    bad = [r for r in rows if r["failures"] or r["tests"] != (1 if r.get("model") else 2)]
    return 1 if bad or not rows else 0


if __name__ == "__main__":
    raise SystemExit(main())
