"""RTL benchmark (``make bench``): cycles, array utilization and simulation speed.

Every GEMM goes through the accelerator at full rate (no idle gaps, no backpressure)
and every output is compared with the golden model, so a benchmark figure is never
reported for a wrong answer. Runs, in order:

* Verilator through the cocotb testbench: 64x64x64 and 256x256x256 on 4x4 and 8x8,
  256x256x256 on 16x16;
* Icarus through the same testbench: 64x64x64 on 4x4 and 8x8;
* Amaranth's simulator (``sim.amaranth_bench``): 64x64x64 on 4x4 and 8x8;
* for the utilization plot, on Verilator 8x8 and 16x16: cubes M=K=N from 8 to 128 and a K sweep
  (M=N=64, K from 8 to 512).

Every measured cycle count must equal :meth:`hw.accelerator.Accelerator.cycles` (the bench
fails otherwise); ``build/bench/utilization.png`` plots utilization against GEMM size, the
measured points as markers over that closed form for sizes 8..512.

Utilization is ``M*K*N / (rows*cols*cycles)`` with cycles counted from the first input
accepted to the last output; simulation speed is simulated cycles per wall-clock second
of the whole run (stimulus packing, table programming and golden comparison included;
simulator build time excluded). Prints a table and writes build/bench/rtl.json.
"""

import json
import os
import time

import numpy as np

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.hw.accelerator import Accelerator

from ..paths import build_root
from .amaranth_bench import run_full_rate
from .runner import run_tb
from .stimulus import random_problem

SPEED = (64, 64, 64)
BIG = (256, 256, 256)
SIZES = [8, 16, 32, 64, 128, 256, 512]
CUBES = [(s, s, s) for s in SIZES if s <= 128]
K_SWEEP = [(64, k, 64) for k in SIZES if k != 64]
RUNS = [  # (simulator, rows, cols, shapes)
    ("verilator", 4, 4, [SPEED, BIG]),
    ("verilator", 8, 8, [SPEED, BIG, *(s for s in CUBES if s != SPEED), *K_SWEEP]),
    ("verilator", 16, 16, [BIG, *CUBES, *K_SWEEP]),
    ("icarus", 4, 4, [SPEED]),
    ("icarus", 8, 8, [SPEED]),
    ("amaranth", 4, 4, [SPEED]),
    ("amaranth", 8, 8, [SPEED]),
]
UTILIZATION_TARGET = 0.99   # on 256x256x256, 8x8 and 16x16
SPEED_TARGET = 30_000       # testbench cycles/s on 8x8 under Verilator


def run_cocotb(simulator, rows, cols, shapes, seed, rounding):
    n = max(s[2] for s in shapes)
    spec = ";".join(",".join(str(x) for x in s) for s in shapes)
    return run_tb(simulator, rows, cols, rounding, seed=seed, pauses=False, module="int8_systolic.sim.tb_bench",
                  extra_env={"TB_BENCH_SHAPES": spec}, tag_suffix="_bench", max_col_tiles=max(4, -(-n // cols)))


def run_amaranth(rows, cols, shapes, seed, rounding):
    rng = np.random.default_rng(seed + 11)
    out = []
    for shape in shapes:
        problem = random_problem(rng, *shape, rounding=rounding)
        dut = Accelerator(rows, cols, rounding, max_col_tiles=problem.tiles(rows, cols)[1])
        result_rows, cycles, sim_cycles, seconds = run_full_rate(problem, dut)
        t0 = time.perf_counter()
        got = problem.assemble(result_rows, rows, cols)
        want, _ = problem.expected()
        failures = int(np.count_nonzero(((got + 128) % 256) - 128 != want))
        seconds += time.perf_counter() - t0  # the comparison counts, as in the cocotb runs
        m, k, n = shape
        out.append({"test": "bench_gemm", "shape": list(shape), "rows": rows, "cols": cols, "compared": want.size,
                    "failures": failures, "cycles": cycles, "sim_cycles": sim_cycles, "seconds": seconds,
                    "utilization": m * k * n / (rows * cols * cycles), "cycles_per_second": sim_cycles / seconds})
    return out


def plot_utilization(rows_out, path):
    """Utilization against GEMM size on 8x8 and 16x16: closed form (lines) and Verilator runs (markers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_cube, ax_k) = plt.subplots(1, 2, figsize=(11, 4))
    for (r, c), color in (((8, 8), "tab:blue"), ((16, 16), "tab:orange")):
        dut = Accelerator.model(r, c)
        grid = list(range(8, 513, 8))
        for ax, shape_of, pick in (
                (ax_cube, lambda s: (s, s, s), lambda x: x["shape"][0] == x["shape"][1] == x["shape"][2]),
                (ax_k, lambda s: (64, s, 64), lambda x: x["shape"][0] == x["shape"][2] == 64)):
            ax.plot(grid, [100 * _util(shape_of(s), r, c, dut.cycles(*shape_of(s))) for s in grid], color=color,
                    label=f"{r}x{c}: Accelerator.cycles()")
            pts = sorted((x for x in rows_out if x["simulator"] == "verilator" and (x["rows"], x["cols"]) == (r, c)
                          and pick(x)), key=lambda x: x["shape"][1])
            xs = [x["shape"][1] for x in pts]
            ax.plot(xs, [100 * x["utilization"] for x in pts], "o", color=color, label=f"{r}x{c}: Verilator run")
    for ax, title in ((ax_cube, "M = K = N"), (ax_k, "M = N = 64, K varies")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K" if ax is ax_k else "M = K = N")
        ax.set_ylabel("array utilization (%)")
        ax.set_title(title)
        ax.axhline(99, color="grey", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("MACs done / (rows x cols x cycles), first input to last output")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _util(shape, rows, cols, cycles):
    m, k, n = shape
    return m * k * n / (rows * cols * cycles)


def check_cycles(rows_out):
    """Every measured run at full rate must take exactly Accelerator.cycles(M, K, N)."""
    bad = []
    for x in rows_out:
        dut = Accelerator.model(x["rows"], x["cols"])
        if x["cycles"] != dut.cycles(*x["shape"]):
            bad.append(f"{x['simulator']} {x['rows']}x{x['cols']} {x['shape']}: {x['cycles']} cycles, "
                       f"Accelerator.cycles() = {dut.cycles(*x['shape'])}")
    return bad


@command("python -m int8_systolic.sim.bench")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run only simulators/arrays whose tag contains this text")
    args = parser.parse_args(argv)
    seed = int(os.environ.get("SEED", "1"))
    rounding = "double"
    runs = [r for r in RUNS if args.only in f"{r[0]}_{r[1]}x{r[2]}"]
    rows_out = []
    for i, (simulator, r, c, shapes) in enumerate(runs, 1):
        t0 = time.monotonic()
        if simulator == "amaranth":
            results = run_amaranth(r, c, shapes, seed, rounding)
        else:
            results = run_cocotb(simulator, r, c, shapes, seed, rounding)
        for res in results:
            res["simulator"] = simulator
        rows_out += results
        print(f"[{i}/{len(runs)}] {simulator} {r}x{c}: {len(results)} GEMMs, "
              f"{sum(x['failures'] for x in results)} failures, {time.monotonic() - t0:.0f} s", flush=True)
    print()
    print(f"{'simulator':<10} {'array':<6} {'M,K,N':>12} {'cycles':>8} {'utilization':>12} {'cycles/s':>9} "
          f"{'compared':>9} {'failures':>9}")
    for x in rows_out:
        shape = ",".join(str(v) for v in x["shape"])
        array = f"{x['rows']}x{x['cols']}"
        print(f"{x['simulator']:<10} {array:<6} {shape:>12} {x['cycles']:>8} "
              f"{100 * x['utilization']:>11.3f}% {x['cycles_per_second']:>9.0f} {x['compared']:>9} "
              f"{x['failures']:>9}")
    out = build_root() / "bench" / "rtl.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seed": seed, "rounding": rounding, "runs": rows_out}, indent=2) + "\n")
    plot = out.parent / "utilization.png"
    plot_utilization(rows_out, plot)
    print(f"\nwritten to {out} and {plot}")
    mismatched = check_cycles(rows_out)
    for line in mismatched:
        print(f"cycle count differs from the closed form: {line}")
    for x in rows_out:
        if x["simulator"] == "verilator" and x["rows"] in (8, 16) and tuple(x["shape"]) == BIG:
            met = "met" if x["utilization"] >= UTILIZATION_TARGET else "NOT met"
            print(f"utilization target (>= {UTILIZATION_TARGET:.0%} on 256^3, {x['rows']}x{x['cols']}): "
                  f"{100 * x['utilization']:.3f}%, {met}")
        if x["simulator"] == "verilator" and x["rows"] == 8 and tuple(x["shape"]) == BIG:
            met = "met" if x["cycles_per_second"] >= SPEED_TARGET else "NOT met"
            print(f"testbench speed target (>= {SPEED_TARGET} cycles/s, 8x8 Verilator): {met}")
    failures = sum(x["failures"] for x in rows_out)
    if failures or not rows_out or mismatched:
        print(f"{failures} outputs differ from the golden model")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
