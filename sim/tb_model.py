"""cocotb testbench: a whole .tflite model with every MAC layer computed on the RTL.

The golden interpreter (:mod:`golden.tflite.interpreter`) runs the model step by step;
each FULLY_CONNECTED / CONV_2D / DEPTHWISE_CONV_2D layer is mapped onto the accelerator
(:mod:`sim.mapping`), streamed through the same :class:`~sim.tb_accelerator.TB` as the
random tests, and the RTL's int8 result is what the next op consumes. Checked per layer
and step: every GEMM against the golden model (the scoreboard), the assembled layer
against the golden layer (a mismatch is reported with its golden stages), and after each
step every tensor of the model against TFLite-Micro's preserved tensors.

Environment as in :mod:`sim.tb_accelerator`, plus ``TB_MODEL`` (path), ``TB_STEPS``,
``TB_INPUT`` ("features", "random" or "auto"). One JSON document goes to ``TB_RESULTS``.
"""

import json
import os
import pathlib
import time

import cocotb
import numpy as np

from golden.tflite.inputs import model_inputs
from golden.tflite.interpreter import Interpreter, compare_with_tflm
from golden.tflite.runtimes import TflmModel
from sim import coverage
from sim.mapping import map_layer
from sim.tb_accelerator import COLS, COVERAGE, MAX_COL_TILES, RESULTS, ROWS, SEED, TB

MODEL = os.environ.get("TB_MODEL", "")
STEPS = int(os.environ.get("TB_STEPS", "3"))
INPUT = os.environ.get("TB_INPUT", "auto")


def _shape(a):
    return "x".join(str(d) for d in a)


@cocotb.test()
async def run_model(dut):
    """Every MAC layer of every step on the RTL; every layer and step compared with golden and TFLM."""
    path = pathlib.Path(MODEL)
    raw = path.read_bytes()
    interp, tflm = Interpreter(raw, path.name), TflmModel(raw)
    tb = TB(dut, SEED)
    await tb.reset()
    max_n = MAX_COL_TILES * COLS
    layers, mismatches, tflm_checked = {}, [], 0
    t0 = time.perf_counter()
    inputs = model_inputs(interp.model, STEPS, SEED, INPUT)
    final = []
    for step, x in enumerate(inputs):
        gen = interp.steps(x)
        try:
            layer = next(gen)
            while True:
                mapped = map_layer(layer, ROWS, COLS, max_n)
                results, cycles = [], 0
                for i, problem in enumerate(mapped.problems):
                    await tb.run(problem, f"step {step} operator {layer.op_index} ({layer.kind}) GEMM {i}")
                    results.append(tb.scoreboard.last_output.astype(np.int8))
                    cycles += tb.last_run_cycles
                hw = mapped.assemble(results)
                stages = layer.golden(return_stages=True)
                want = stages.output.reshape(layer.output_shape)
                rec = layers.setdefault(layer.op_index, {
                    "op_index": layer.op_index, "op": layer.kind, "input": _shape(layer.input.shape),
                    "weights": _shape(layer.weights.shape), "output": _shape(layer.output_shape), "macs": layer.macs,
                    "gemms": len(mapped.problems),
                    "gemm_shapes": [_shape(p.shape) for p in mapped.problems], "cycles": [], "exact_steps": 0,
                    "first_mismatch": None})
                rec["cycles"].append(cycles)
                if np.array_equal(hw, want):
                    rec["exact_steps"] += 1
                else:
                    idx = tuple(int(v) for v in np.argwhere(hw != want)[0])
                    flat = int(np.ravel_multi_index(idx, want.shape))
                    text = (f"step {step}, element {list(idx)}: RTL {int(hw[idx])}, golden stages "
                            f"{stages.at(np.unravel_index(flat, stages.output.shape))}")
                    rec["first_mismatch"] = rec["first_mismatch"] or text
                    mismatches.append(f"operator {layer.op_index} ({layer.kind}) {text}")
                    dut._log.error(f"MISMATCH operator {layer.op_index} ({layer.kind}) {text} (seed {SEED})")
                layer = gen.send(hw)
        except StopIteration as stop:
            final.append([o.ravel().tolist() for o in stop.value])
        tflm.invoke(x)
        tensors, _, differences = compare_with_tflm(interp, tflm)
        tflm_checked += tensors
        for text in differences:
            mismatches.append(f"step {step}: {text}")
            dut._log.error(mismatches[-1])
        done = (step + 1) * 30 // len(inputs)
        print(f"[model] {path.name} [{'#' * done}{'.' * (30 - done)}] step {step + 1}/{len(inputs)}: "
              f"{len(interp.macs)} MAC layers on the RTL, {len(mismatches)} mismatches, "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    result = {"test": "run_model", "model": path.name, "rows": ROWS, "cols": COLS, "steps": len(inputs),
              "layers": sorted(layers.values(), key=lambda r: r["op_index"]), "tflm_tensors_compared": tflm_checked,
              "mismatches": mismatches, "final_outputs": final, "seconds": time.perf_counter() - t0,
              "compared": tb.scoreboard.compared, "failures": tb.scoreboard.failures + len(mismatches),
              "sim_cycles": tb.cycles}
    if COVERAGE:
        coverage.export(COVERAGE)
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(result) + "\n")
    assert not tb.scoreboard.failures, f"{tb.scoreboard.failures} GEMM outputs differ from golden (seed {SEED})"
    assert not mismatches, f"{len(mismatches)} mismatches (seed {SEED}): {mismatches[:3]}"
