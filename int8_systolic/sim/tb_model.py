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

Environment as in :mod:`sim.tb_accelerator`, plus ``TB_MODEL`` (paths, separated by the path
separator), ``TB_STEPS`` (steps, one for all or one per model, separated likewise),
``TB_INPUT`` ("features", "random" or "auto"), ``TB_BLOCK``, ``TB_QUEUE``. One JSON document goes to
``TB_RESULTS``.
"""

import json
import os
import pathlib
import time

import cocotb
import numpy as np

from int8_systolic.golden.tflite.inputs import model_inputs
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.golden.tflite.runtimes import TflmModel
from int8_systolic.host.mapping import depthwise_cycles, gemm_cycles, map_layer
from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.sim import coverage
from int8_systolic.sim.model_checks import check_layer, check_step
from int8_systolic.sim.tb_accelerator import COLS, COVERAGE, MAX_COL_TILES, RESULTS, ROWS, SEED, TB

MODEL = os.environ.get("TB_MODEL", "")
STEPS = [int(s) for s in os.environ.get("TB_STEPS", "3").split(os.pathsep)]
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
        from int8_systolic.sim import tb_axi

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


def _layer_figures(layer, mapped):
    """What the benchmark reports of a mapped layer, from its GEMMs' shapes (one step): the cycle
    formula (each GEMM at full rate on the core), the steps streamed (tiles padded to the shortest
    period: the cycles without the pipeline's fill and drain), the activation bytes streamed
    (``rows`` per GEMM-mode step, ``rows * cols`` per depthwise-mode step) and, for a depthwise
    layer, the formula of the block-diagonal GEMMs (the mapping without the depthwise mode)."""
    core = Accelerator.model(ROWS, COLS, max_col_tiles=MAX_COL_TILES)
    p_min = core.min_tile_steps
    steps = [int(np.prod(p.tiles(ROWS, COLS))) * p.shape[1] for p in mapped.problems]
    figures = {
        "modes": ["depthwise" if p.depthwise else "gemm" for p in mapped.problems],
        "formula_cycles": gemm_cycles(core, mapped.problems),
        "fill_steps": sum(int(np.prod(p.tiles(ROWS, COLS))) * max(p.shape[1], p_min) for p in mapped.problems),
        "act_bytes": sum(s * (ROWS * COLS if p.depthwise else ROWS) for s, p in zip(steps, mapped.problems,
                                                                                       strict=True)),
        "input_bytes": int(layer.input.size),
    }
    if layer.kind == "DEPTHWISE_CONV_2D":
        figures["gemm_mode_cycles"] = depthwise_cycles(layer, ROWS, COLS, MAX_COL_TILES * COLS)["gemm"]
    return figures


@cocotb.test()
async def run_model(dut):
    """Every MAC layer of every step on the RTL; every layer and step compared with golden and TFLM.
    ``TB_MODEL`` may list several models (separated by the path separator), run one after another
    on one simulation, each with its own result."""
    tb = AxiLayers(dut) if BLOCK == "axi" else CoreLayers(dut)
    failed = []
    models = MODEL.split(os.pathsep)
    for model, steps in zip(models, STEPS * len(models) if len(STEPS) == 1 else STEPS, strict=True):
        failures = await _run_one(dut, tb, pathlib.Path(model), steps)
        if failures:
            failed.append(f"{pathlib.Path(model).name}: {failures}")
    assert not failed, f"mismatches (seed {SEED}): {failed}"


async def _run_one(dut, tb, path, steps):
    """One model; writes its result and returns its failures (GEMM outputs and layer or TFLM mismatches)."""
    raw = path.read_bytes()
    interp, tflm = Interpreter(raw, path.name), TflmModel(raw)
    await tb.start()
    compared0, failures0, cycles0 = tb.compared, tb.failures, tb.cycles
    max_n = MAX_COL_TILES * COLS
    layers, mismatches, tflm_checked = {}, [], 0
    t0 = time.perf_counter()
    inputs = model_inputs(interp.model, steps, SEED, INPUT)
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
                if layer.op_index not in layers:   # (a layer's figures, from its shapes, once)
                    layers[layer.op_index] = {
                        "op_index": layer.op_index, "op": layer.kind, "input": _shape(layer.input.shape),
                        "weights": _shape(layer.weights.shape), "output": _shape(layer.output_shape),
                        "macs": layer.macs, "gemms": len(mapped.problems),
                        "gemm_shapes": [_shape(p.shape) for p in mapped.problems], "cycles": [], "exact_steps": 0,
                        "first_mismatch": None, **_layer_figures(layer, mapped)}
                rec = layers[layer.op_index]
                rec["cycles"].append(cycles)
                check_layer(rec, hw, stages, step, layer, mismatches, dut._log, what="RTL", seed=SEED)
                layer = gen.send(hw)
        except StopIteration as stop:
            final.append([o.ravel().tolist() for o in stop.value])
        tflm_checked += check_step(interp, tflm, x, step, len(inputs), path.name, mismatches, dut._log, t0,
                                   f"{len(interp.macs)} MAC layers on the RTL")
    result = {"test": "run_model", "model": path.name, "rows": ROWS, "cols": COLS, "steps": len(inputs),
              "block": BLOCK, "queue": QUEUE if BLOCK == "axi" else None,
              "layers": sorted(layers.values(), key=lambda r: r["op_index"]), "tflm_tensors_compared": tflm_checked,
              "mismatches": mismatches, "final_outputs": final, "seconds": time.perf_counter() - t0,
              "compared": tb.compared - compared0, "failures": tb.failures - failures0 + len(mismatches),
              "sim_cycles": tb.cycles - cycles0}
    if COVERAGE:
        coverage.export(COVERAGE)
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps(result) + "\n")
    return result["failures"]
