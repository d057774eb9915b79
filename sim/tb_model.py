"""cocotb testbench: a whole .tflite model with every MAC layer computed on the RTL.

The golden interpreter (:mod:`golden.tflite.interpreter`) runs the model step by step;
each FULLY_CONNECTED / CONV_2D / DEPTHWISE_CONV_2D layer is mapped onto the accelerator
(:mod:`sim.mapping`), streamed through the same :class:`~sim.tb_accelerator.TB` as the
random tests, and the RTL's int8 result is what the next op consumes. Checked per layer
and step: every GEMM against the golden model (the scoreboard), the assembled layer
against the golden layer (a mismatch is reported with its golden stages), and after each
step every tensor of the model against TFLite-Micro's preserved tensors.

With ``TB_BLOCK=axi`` the layers run on the AXI top (:mod:`hw.axi_top`) through the
register-level driver (:mod:`sim.axi_driver`): a layer's tables are written first, then its GEMMs
go through the descriptor queue back to back (``TB_QUEUE=1``, the default; a layer's cycles are
from its first step to its last result) or one at a time, each waiting for the previous one's
results (``TB_QUEUE=0``; the sum of each GEMM's cycles from first step to last result). Table
writes over AXI4-Lite are host time and are not counted.

Environment as in :mod:`sim.tb_accelerator`, plus ``TB_MODEL`` (path), ``TB_STEPS``,
``TB_INPUT`` ("features", "random" or "auto"), ``TB_BLOCK``, ``TB_QUEUE``. One JSON document goes to
``TB_RESULTS``.
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
BLOCK = os.environ.get("TB_BLOCK", "core")
QUEUE = os.environ.get("TB_QUEUE", "1") == "1"


class CoreLayers:
    """A layer's GEMMs one after another on the core's own streams (sim.tb_accelerator.TB)."""

    def __init__(self, dut):
        self.tb = TB(dut, SEED)
        self.scoreboard = self.tb.scoreboard

    async def start(self):
        await self.tb.reset()

    async def run(self, problems, label):
        results, cycles = [], 0
        for i, problem in enumerate(problems):
            await self.tb.run(problem, f"{label} GEMM {i}")
            results.append(self.tb.scoreboard.last_output.astype(np.int8))
            cycles += self.tb.last_run_cycles
        return results, cycles

    @property
    def failures(self):
        return self.tb.scoreboard.failures

    @property
    def compared(self):
        return self.tb.scoreboard.compared

    @property
    def cycles(self):
        return self.tb.cycles


class AxiLayers:
    """A layer's GEMMs on the AXI top: tables first (rows allocated in order), then the GEMMs
    through the descriptor queue (or one at a time without it); every result compared with golden."""

    def __init__(self, dut):
        from sim import tb_axi

        self.tb = tb_axi.TB(dut)
        self.queue_depth = tb_axi.QUEUE_DEPTH

    async def start(self):
        await self.tb.reset()

    async def run(self, problems, label):
        tb, d, w = self.tb, self.tb.drv, self.tb.watch
        bases, row = [], 0
        for p in problems:
            bases.append(row)
            row += p.tiles(ROWS, COLS)[1]
        if row > MAX_COL_TILES:
            raise ValueError(f"{label}: the layer's GEMMs need {row} table rows, the tables hold {MAX_COL_TILES}")
        for p, base in zip(problems, bases, strict=True):
            await d.load_table(p, base)
        first_span, first_result = len(w["spans"]), len(w["results"])
        results = [None] * len(problems)

        async def receive(i, p):
            tb.check(p, await d.receive(p), f"{label} GEMM {i}")
            results[i] = tb.scoreboard.last_output.astype(np.int8)

        if QUEUE:
            async def receiver():
                for i, p in enumerate(problems):
                    await receive(i, p)

            rx = cocotb.start_soon(receiver())
            for i, (p, base) in enumerate(zip(problems, bases, strict=True)):
                while i > self.queue_depth and await d.field("STATUS", "QUEUED") >= self.queue_depth:
                    pass
                await d.push(p, base)
                cocotb.start_soon(d.send_steps(p))
            await rx
            cycles = w["results"][-1] - w["spans"][first_span][0] + 1
        else:
            for i, (p, base) in enumerate(zip(problems, bases, strict=True)):
                await d.push(p, base)
                cocotb.start_soon(d.send_steps(p))
                await receive(i, p)
            cycles = sum(w["results"][first_result + i] - w["spans"][first_span + i][0] + 1
                         for i in range(len(problems)))
        return results, cycles

    @property
    def failures(self):
        return self.tb.failures

    @property
    def compared(self):
        return self.tb.compared

    @property
    def cycles(self):
        return self.tb.cycles


def _shape(a):
    return "x".join(str(d) for d in a)


@cocotb.test()
async def run_model(dut):
    """Every MAC layer of every step on the RTL; every layer and step compared with golden and TFLM."""
    path = pathlib.Path(MODEL)
    raw = path.read_bytes()
    interp, tflm = Interpreter(raw, path.name), TflmModel(raw)
    tb = AxiLayers(dut) if BLOCK == "axi" else CoreLayers(dut)
    await tb.start()
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
                results, cycles = await tb.run(mapped.problems, f"step {step} operator {layer.op_index} ({layer.kind})")
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
              "block": BLOCK, "queue": QUEUE if BLOCK == "axi" else None,
              "layers": sorted(layers.values(), key=lambda r: r["op_index"]), "tflm_tensors_compared": tflm_checked,
              "mismatches": mismatches, "final_outputs": final, "seconds": time.perf_counter() - t0,
              "compared": tb.compared, "failures": tb.failures + len(mismatches),
              "sim_cycles": tb.cycles}
    if COVERAGE:
        coverage.export(COVERAGE)
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(result) + "\n")
    assert not tb.failures, f"{tb.failures} GEMM outputs differ from golden (seed {SEED})"
    assert not mismatches, f"{len(mismatches)} mismatches (seed {SEED}): {mismatches[:3]}"
