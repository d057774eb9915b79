"""cocotb testbench: the conformance pack's MAC cases (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D) on the RTL.

Each case's single-op model runs in the golden interpreter built with the RTL's rounding;
its MAC layer is mapped onto the accelerator (:mod:`sim.mapping`) and streamed through
the same :class:`~sim.tb_accelerator.TB` as every other test, whose scoreboard compares
each GEMM with golden. The assembled int8 output of every case is written to
``TB_OUTPUTS/<case id>/output0.npy`` for the conformance harness, which compares it with
the pack's expected outputs (:mod:`sim.conformance_rtl`).

Environment as in :mod:`sim.tb_accelerator`, plus ``TB_PACK`` (the pack's directory),
``TB_OUTPUTS``, ``TB_OPS`` and ``TB_TAGS`` (comma-separated; empty tags: every case).
"""

import contextlib
import json
import os
import pathlib
import time

import cocotb
import numpy as np

from int8_systolic.golden.conformance.harness import load_pack, select
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.host.mapping import map_layer
from int8_systolic.sim.tb_accelerator import COLS, MAX_COL_TILES, RESULTS, ROUNDING, ROWS, SEED, TB

PACK = os.environ.get("TB_PACK", "")
OUTPUTS = pathlib.Path(os.environ.get("TB_OUTPUTS", "."))
OPS = tuple(os.environ.get("TB_OPS", "FULLY_CONNECTED,CONV_2D,DEPTHWISE_CONV_2D").split(","))
TAGS = tuple(t for t in os.environ.get("TB_TAGS", "").split(",") if t) or None


@cocotb.test()
async def conformance_cases(dut):
    """Every MAC case of the pack on the RTL; every GEMM output compared with golden by the scoreboard."""
    pack = load_pack(PACK)
    cases = select(pack, OPS, TAGS)
    tb = TB(dut, SEED)
    await tb.reset()
    max_n = MAX_COL_TILES * COLS
    t0, gemms = time.perf_counter(), 0
    for i, pc in enumerate(cases):
        dc = pc.dut_case()
        interp = Interpreter(dc.model_path.read_bytes(), pc.id, rounding=ROUNDING)
        gen = interp.steps(dc.inputs)
        layer = next(gen)
        mapped = map_layer(layer, ROWS, COLS, max_n)
        results = []
        for g, problem in enumerate(mapped.problems):
            await tb.run(problem, f"{pc.id} ({dc.description}) GEMM {g}")
            results.append(tb.scoreboard.last_output.astype(np.int8))
        gemms += len(mapped.problems)
        out = mapped.assemble(results)
        d = OUTPUTS / pc.id
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "output0.npy", out, allow_pickle=False)
        with contextlib.suppress(StopIteration):   # the single op's outputs are the RTL's; nothing else runs
            gen.send(out)
        if (i + 1) % 20 == 0 or i + 1 == len(cases):
            done = (i + 1) * 30 // len(cases)
            print(f"[conformance-rtl] [{'#' * done}{'.' * (30 - done)}] {i + 1}/{len(cases)} cases, {gemms} GEMMs, "
                  f"{tb.scoreboard.failures} GEMM elements differ from golden, {time.perf_counter() - t0:.0f} s",
                  flush=True)
    result = {"test": "conformance_cases", "rows": ROWS, "cols": COLS, "rounding": ROUNDING, "cases": len(cases),
              "gemms": gemms, "compared": tb.scoreboard.compared, "failures": tb.scoreboard.failures,
              "sim_cycles": tb.cycles, "seconds": time.perf_counter() - t0}
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(result) + "\n")
    assert not tb.scoreboard.failures, f"{tb.scoreboard.failures} GEMM outputs differ from golden (seed {SEED})"
