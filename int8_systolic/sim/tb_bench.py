"""cocotb benchmark: GEMMs through the testbench at full rate, every output compared.

For each shape in ``TB_BENCH_SHAPES`` ("M,K,N;M,K,N;..."), reports the accelerator's
cycles from the first input accepted to the last output (both included), the array
utilization ``M*K*N / (rows*cols*cycles)`` and the testbench's simulation speed (simulated
cycles per wall-clock second of the whole run: packing the stimulus, table programming,
streaming and the scoreboard's golden comparison). One JSON line per shape goes to ``TB_RESULTS``. Other settings as in
:mod:`sim.tb_accelerator` (pauses are off: the runner passes ``TB_PAUSES=0``).
"""

import json
import os
import time

import cocotb
import numpy as np

from int8_systolic.sim.tb_accelerator import COLS, RESULTS, ROWS, SEED, TB, random_problem

SHAPES = [tuple(int(x) for x in s.split(",")) for s in os.environ.get("TB_BENCH_SHAPES", "64,64,64").split(";")]


@cocotb.test()
async def bench_gemm(dut):
    """GEMMs at full rate: utilization and simulated cycles per second."""
    tb = TB(dut, SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED + 11)
    ok = True
    for shape in SHAPES:
        problem = random_problem(rng, *shape)
        compared, failures, cycles = tb.scoreboard.compared, tb.scoreboard.failures, tb.cycles
        t0 = time.perf_counter()
        ok &= await tb.run(problem, f"bench M,K,N={shape}")
        seconds = time.perf_counter() - t0
        m, k, n = shape
        result = {"test": "bench_gemm", "shape": list(shape), "rows": ROWS, "cols": COLS,
                  "compared": tb.scoreboard.compared - compared, "failures": tb.scoreboard.failures - failures,
                  "cycles": tb.last_run_cycles, "sim_cycles": tb.cycles - cycles, "seconds": seconds,
                  "utilization": m * k * n / (ROWS * COLS * tb.last_run_cycles),
                  "cycles_per_second": (tb.cycles - cycles) / seconds}
        dut._log.info(json.dumps(result))
        if RESULTS:
            with open(RESULTS, "a") as f:
                f.write(json.dumps(result) + "\n")
    assert ok, f"{tb.scoreboard.failures} of {tb.scoreboard.compared} bench outputs differ from golden (seed {SEED})"
