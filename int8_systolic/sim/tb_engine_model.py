"""cocotb testbench: a whole .tflite model with its MAC layers on the memory engine, memory being cocotbext-axi's
``AxiRam`` with latency (``LatencyAxiRam``), under the AXI4 protocol monitor.

The compiler (:mod:`host.engine_compiler`) lays the model out in memory and plans it: segments of
engine layers run from the command list (GO, then the IRQ's cause: BARRIER or END), the other ops on
the host (the golden interpreter), which writes a segment's inputs to memory before GO and reads its
outputs after. Checked per layer and step: every engine layer's output against golden, and after
each step every tensor of the model against TFLite-Micro's. Measured per layer: the engine's cycles
(from GO, or the previous layer's ``layer_done``, to its ``layer_done``: memory stalls included) and
the bytes read and written over the port (commands and tables included).

Environment: ``TB_MODEL`` (paths, separated by the path separator), ``TB_STEPS``, ``TB_INPUT``,
``TB_SEED``, ``TB_LATENCY``, ``TB_ROWS``, ``TB_COLS``; one JSON line per model to ``TB_RESULTS``.
"""

import json
import os
import pathlib
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus

from ..golden.tflite.inputs import model_inputs
from ..golden.tflite.interpreter import Interpreter
from ..golden.tflite.runtimes import TflmModel
from ..host.engine_compiler import compile_model
from .axi_memory import LatencyAxiRam
from .axi_monitor import AxiMonitor
from .model_checks import check_layer, check_step

MODEL = os.environ.get("TB_MODEL", "")
STEPS = [int(s) for s in os.environ.get("TB_STEPS", "1").split(os.pathsep)]
INPUT = os.environ.get("TB_INPUT", "auto")
SEED = int(os.environ.get("TB_SEED", "1"))
LATENCY = int(os.environ.get("TB_LATENCY", "20"))
ROWS = int(os.environ.get("TB_ROWS", "8"))
COLS = int(os.environ.get("TB_COLS", "8"))


def _shape(a):
    return "x".join(str(d) for d in a)


class Engine:
    """The DUT, its memory and monitor (one of each for the simulation); :meth:`load` puts a program in memory,
    :meth:`run_segment` runs one segment of its list."""

    def __init__(self, dut, size):
        self.dut = dut
        self.nbytes = len(dut.m_axi_rdata) // 8
        self.ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=size, latency=LATENCY)
        self.program = None
        self.monitor = AxiMonitor(dut, dut.clk, data_bytes=self.nbytes, max_burst=16,
                                  read_window=lambda: [self.program.ro, self.program.rw],
                                  write_window=lambda: self.program.rw, reset=dut.rst)
        self.cycles = 0

    def load(self, program):
        self.program = program
        self.ram.write(0, bytes(program.memory))

    async def reset(self):
        d = self.dut
        d.go.value = 0
        d.ro_base.value, d.ro_limit.value = self.program.ro
        d.rw_base.value, d.rw_limit.value = self.program.rw
        d.list_addr.value = self.program.list_addr
        d.rst.value = 1
        await ClockCycles(d.clk, 4)
        d.rst.value = 0
        await ClockCycles(d.clk, 2)
        self.marks = (self.monitor.read_bytes, self.monitor.written_bytes)

    async def run_segment(self, n_layers):
        """GO; returns per layer (cycles, bytes read, bytes written) and the stop ("barrier" or "done"). A layer's
        bytes are those moved since the last layer's end, so the bytes the engine reads past a BARRIER (the next
        command, its table and weights, prepared ahead: after the stop too) count with the first layer after it."""
        d, mon = self.dut, self.monitor
        await FallingEdge(d.clk)
        d.go.value = 1
        await FallingEdge(d.clk)
        d.go.value = 0
        figures, last, (r0, w0) = [], 0, self.marks
        for t in range(1, 50_000_000):
            await RisingEdge(d.clk)
            await ReadOnly()
            if int(d.layer_done.value):
                figures.append((t - last, mon.read_bytes - r0, mon.written_bytes - w0))
                last, r0, w0 = t, mon.read_bytes, mon.written_bytes
                self.marks = (r0, w0)
            if int(d.done.value) or int(d.barrier.value):
                stop = "done" if int(d.done.value) else "barrier"
                break
            if not int(d.busy.value) and int(d.error.value):
                raise AssertionError(f"the engine stopped with error {int(d.error.value):#x} at command "
                                     f"{int(d.error_index.value)}")
        self.cycles += t
        assert len(figures) == n_layers, f"{len(figures)} layers done of {n_layers}"
        return figures, stop


@cocotb.test()
async def run_model(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    failed = []
    models = [pathlib.Path(m) for m in MODEL.split(os.pathsep)]
    nbytes = len(dut.m_axi_rdata) // 8
    compiled = []
    for path in models:
        raw = path.read_bytes()
        interp = Interpreter(raw, path.name)
        compiled.append((path, raw, interp, compile_model(interp, rows=ROWS, cols=COLS, data_width=8 * nbytes)))
    eng = Engine(dut, max(len(c[3].memory) for c in compiled))
    for (path, raw, interp, program), steps in zip(compiled, STEPS * len(models) if len(STEPS) == 1 else STEPS,
                                                   strict=True):
        failures = await _run_one(dut, eng, path, raw, interp, program, steps)
        if failures:
            failed.append(f"{path.name}: {failures}")
    assert not failed, f"mismatches (seed {SEED}): {failed}"


async def _run_one(dut, eng, path, raw, interp, program, steps):
    tflm = TflmModel(raw)
    nbytes = eng.nbytes
    eng.load(program)
    await eng.reset()
    cycles0 = eng.cycles
    sg = interp.model.subgraphs[0]
    layers, mismatches, tflm_checked, compared = {}, [], 0, 0
    command_figures = []      # the first step's commands in list order: [op, cycles, bytes read, bytes written]
    t0 = time.perf_counter()
    inputs = model_inputs(interp.model, steps, SEED, INPUT)
    final = []
    for step, x in enumerate(inputs):
        gen = interp.steps(x)
        results = {}          # op index -> the engine's output, read from memory after its segment
        try:
            layer = next(gen)
            while True:
                op = layer.op_index
                want_stages = layer.golden(return_stages=True)
                want = want_stages.output.reshape(layer.output_shape)
                if op in program.layers:
                    L = program.layers[op]
                    if op not in results:
                        seg = program.segments[L.segment]
                        assert seg[0] == op, f"operator {op} reached before its segment's first ({seg[0]})"
                        for ti in program.segment_inputs(L.segment):
                            value = interp.live.get(ti, sg.tensors[ti].data)
                            eng.ram.write(program.tensor_addr[ti], np.ascontiguousarray(value).tobytes())
                        cmd_ops = program.command_ops[L.segment]
                        figures, _ = await eng.run_segment(len(cmd_ops))
                        if step == 0:
                            command_figures += [[o, *fg] for o, fg in zip(cmd_ops, figures, strict=True)]
                        for o in seg:      # (a tiled layer's commands summed: they may alternate with another's)
                            Lo = program.layers[o]
                            fig = tuple(sum(f) for f in zip(*(fg for fg, c in zip(figures, cmd_ops, strict=True)
                                                              if c == o), strict=True))
                            if Lo.kept:      # (never in memory: checked through its consumer's output)
                                results[o] = (None, fig)
                                continue
                            out = eng.ram.read(Lo.output_addr, int(np.prod(Lo.output_shape)))
                            results[o] = (np.frombuffer(out, np.int8).reshape(Lo.output_shape), fig)
                    hw, (cycles, rd, wr) = results.pop(op)
                    where = "engine"
                    if hw is None:          # (kept on chip only: golden's goes on to the next layer)
                        hw = want
                else:
                    hw, (cycles, rd, wr) = want, (0, 0, 0)
                    where = f"host: {program.host_macs[op]}"
                if op not in layers:
                    layers[op] = {"op_index": op, "op": layer.kind, "input": _shape(layer.input.shape),
                                  "weights": _shape(layer.weights.shape), "output": _shape(layer.output_shape),
                                  "macs": layer.macs, "where": where, "cycles": [], "bytes_read": [],
                                  "bytes_written": [], "exact_steps": 0, "first_mismatch": None,
                                  "tensor_bytes": program.layers[op].tensor_bytes if op in program.layers else 0,
                                  "commands": program.layers[op].commands if op in program.layers else 0,
                                  "kept": op in program.layers and program.layers[op].kept,
                                  "pad_folded": program.layers[op].pad_folded if op in program.layers else None}
                rec = layers[op]
                rec["cycles"].append(cycles)
                rec["bytes_read"].append(rd)
                rec["bytes_written"].append(wr)
                compared += int(hw.size) if op in program.layers and not rec["kept"] else 0
                check_layer(rec, hw, want_stages, step, layer, mismatches, dut._log, what="engine", seed=SEED)
                layer = gen.send(hw)
        except StopIteration as stop:
            final.append([o.ravel().tolist() for o in stop.value])
        tflm_checked += check_step(interp, tflm, x, step, len(inputs), path.name, mismatches, dut._log, t0,
                                   f"{len(program.layers)} MAC layers on the engine")
    await ClockCycles(dut.clk, LATENCY + 10)
    eng.monitor.check_idle()
    mismatches += [f"AXI4: {v}" for v in eng.monitor.violations]
    eng.monitor.violations.clear()
    result = {"test": "run_model", "model": path.name, "rows": ROWS, "cols": COLS, "steps": len(inputs),
              "block": "engine", "bus_bytes": nbytes, "mem_latency": LATENCY,
              "segments": len(program.segments), "host_macs": {str(k): v for k, v in program.host_macs.items()},
              "layers": sorted(layers.values(), key=lambda r: r["op_index"]), "tflm_tensors_compared": tflm_checked,
              "mismatches": mismatches, "final_outputs": final, "seconds": time.perf_counter() - t0,
              "compared": compared, "failures": len(mismatches), "sim_cycles": eng.cycles - cycles0,
              "commands": command_figures}
    with open(os.environ["TB_RESULTS"], "a") as f:
        f.write(json.dumps(result) + "\n")
    return result["failures"]
