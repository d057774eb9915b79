"""cocotb testbench for the exported accelerator (Icarus and Verilator).

Structure (cf. cocotb's matrix_multiplier example and verilog-axis tb/): a :class:`TB`
owns the clock and reset, one :class:`StreamSource` per input stream (``act``, ``wts``,
``cfg``), one :class:`StreamSink` per output stream (``res``) and a :class:`Scoreboard`
fed by the golden model. Inputs are driven at the falling edge and handshakes are decided
there too (in ReadOnly when a valid/ready input changed), deterministic on both simulators.

Configuration comes from the environment (set by tests/test_cocotb.py): ``TB_ROWS``,
``TB_COLS``, ``TB_ROUNDING``, ``TB_MAX_COL_TILES``, ``TB_SEED``, ``TB_PROBLEMS`` (number
of random GEMMs), ``TB_MAX_DIM``, ``TB_PAUSES`` (1: random idle gaps and backpressure),
``TB_RESULTS`` (JSON file for the summary), ``TB_COVERAGE`` (path stem: functional coverage,
:mod:`sim.coverage`, written to <stem>.yml and <stem>.xml after each test), ``TB_LONG_K`` (1: also
the K = 132 105 GEMM whose accumulators wrap int32).
"""

import json
import os

import cocotb
import numpy as np
from amaranth.hdl import Const
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from int8_systolic.host.problem import GemmProblem
from int8_systolic.hw.accelerator import Accelerator, config_layout
from int8_systolic.hw.gemm_control import settings_layout
from int8_systolic.sim import coverage, stimulus

ROWS = int(os.environ.get("TB_ROWS", "2"))
COLS = int(os.environ.get("TB_COLS", "2"))
ROUNDING = os.environ.get("TB_ROUNDING", "double")
MAX_COL_TILES = int(os.environ.get("TB_MAX_COL_TILES", "8"))
SEED = int(os.environ.get("TB_SEED", "1"))
N_PROBLEMS = int(os.environ.get("TB_PROBLEMS", "4"))
MAX_DIM = int(os.environ.get("TB_MAX_DIM", "20"))
PAUSES = os.environ.get("TB_PAUSES", "1") == "1"
RESULTS = os.environ.get("TB_RESULTS")
COVERAGE = os.environ.get("TB_COVERAGE")
LONG_K = os.environ.get("TB_LONG_K", "0") == "1"


def pack(values, bits):
    """Pack signed lane values into one integer, lane 0 in the low bits."""
    if bits == 8:
        return int.from_bytes(np.asarray(values, np.int64).astype(np.int8).tobytes(), "little")
    mask = (1 << bits) - 1
    out = 0
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (i * bits)
    return out


def unpack(word, n, bits):
    half, full, mask = 1 << (bits - 1), 1 << bits, (1 << bits) - 1
    return [((word >> (i * bits)) & mask) - (full if (word >> (i * bits)) & half else 0) for i in range(n)]


def pause_generator(rng, p_pause):
    """Random idle/backpressure pattern; ``None`` (no pauses) lets the drivers skip redundant writes."""
    if p_pause <= 0:
        return None
    return (bool(x < p_pause) for x in iter(rng.random, None))


class StreamSource:
    """Drives one valid/ready input stream from a queue of packed payloads, with idle gaps.

    Signals are written only when their value changes: a stream at full rate costs one
    payload write per transfer, which keeps the testbench fast on Verilator.
    """

    def __init__(self, dut, name, pauses):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.queue = []
        self.pos = 0
        self.pauses = pauses
        self.driving = False
        self.presented = None  # index of the queue item on the payload wires

    def reset(self):
        self.valid.value = 0
        self.queue, self.pos, self.driving, self.presented = [], 0, False, None

    def drive(self, allowed=True):
        """Called at the falling edge: present the next item, or idle."""
        driving = allowed and self.pos < len(self.queue) and (self.pauses is None or not next(self.pauses))
        if driving and self.presented != self.pos:
            self.payload.value = self.queue[self.pos]
            self.presented = self.pos
        if driving == self.driving:
            return False
        self.valid.value = int(driving)
        self.driving = driving
        return True

    def observe(self):
        """Advance if the item is transferred at the coming edge (``ready`` must be settled); return
        the payload transferred, or None."""
        if self.driving and self.ready.value:
            self.pos += 1
            return self.queue[self.pos - 1]
        return None

    @property
    def idle(self):
        return self.pos >= len(self.queue)


class StreamSink:
    """Takes results from the output stream, with random backpressure."""

    def __init__(self, dut, name, pauses):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.items = []
        self.pauses = pauses
        self.accepting = None

    def reset(self):
        self.ready.value = 0
        self.accepting = False

    def drive(self):
        accepting = self.pauses is None or not next(self.pauses)
        if accepting == self.accepting:
            return False
        self.ready.value = int(accepting)
        self.accepting = accepting
        return True

    def observe(self):
        """Take the item if it is transferred at the coming edge (valid/payload never wait on ready)."""
        if self.accepting and self.valid.value:
            self.items.append(int(self.payload.value))


class Scoreboard:
    """Compares every result element with the golden model and keeps the counts."""

    def __init__(self, log):
        self.log = log
        self.compared = 0
        self.failures = 0

    def check(self, problem, rows, label):
        """Compare the result rows (packed ``res`` words, in arrival order) with golden."""
        return self.compare(problem, problem.assemble([unpack(r, COLS, 32) for r in rows], ROWS, COLS), label)

    def compare(self, problem, got, label):
        """Compare ``got`` (the assembled [M, N] int32 lanes) with golden; keep the int8 view in ``last_output``."""
        want, st = problem.expected()
        if not problem.bypass:
            got = ((got + 128) % 256) - 128
        self.compared += want.size
        self.last_output = got
        bad = np.argwhere(got != want)
        for i, j in bad[:5]:
            a = problem.lhs[i, :, j] if problem.depthwise else problem.lhs[i]
            self.log.error(f"{label}: MISMATCH at [{i},{j}]: hardware {int(got[i, j])}, golden stages "
                           f"{st.at((int(i), int(j)))}; operands lhs {a.tolist()[:16]}..., "
                           f"rhs col {problem.rhs[:, j].tolist()[:16]}..., multiplier "
                           f"{int(np.asarray(problem.output_multiplier)[j])}, shift "
                           f"{int(np.asarray(problem.output_shift)[j])}; reproduce with SEED={SEED}")
        self.failures += len(bad)
        return len(bad) == 0


class TB:
    def __init__(self, dut, seed, pauses=PAUSES):
        self.dut = dut
        # The core's `gemm` inputs (hw.gemm_control): no GEMM held, tables from row 0 (an undriven
        # input is X on Icarus); the settings are packed by their layout.
        dut.gemm__hold.value = 0
        self.settings_layout = settings_layout(MAX_COL_TILES)
        self.rng = np.random.default_rng(seed)
        # fills a GEMM-mode step's unused act bytes (past the first ROWS), which the core must ignore
        self.noise = np.random.default_rng(seed + 1)
        p_in, p_out = (0.25, 0.3) if pauses else (0.0, 0.0)
        self.act = StreamSource(dut, "act", pause_generator(self.rng, p_in))
        self.wts = StreamSource(dut, "wts", pause_generator(self.rng, p_in))
        self.cfg = StreamSource(dut, "cfg", pause_generator(self.rng, p_in))
        self.res = StreamSink(dut, "res", pause_generator(self.rng, p_out))
        self.scoreboard = Scoreboard(dut._log)
        self.cfg_layout = config_layout(COLS, MAX_COL_TILES)
        self.monitor = coverage.Monitor(ROWS, COLS, ROUNDING, MAX_COL_TILES,
                                        Accelerator.model(ROWS, COLS, ROUNDING, MAX_COL_TILES).min_tile_steps,
                                        self.cfg_layout)
        self.cycles = 0
        self.running = False  # a GEMM started and not all its results read
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def reset(self, cycles=3):
        await FallingEdge(self.dut.clk)
        # a reset with steps still to send or results still to come
        self.monitor.reset(mid_stream=self.running)
        self.dut.rst.value = 1
        for port in (self.act, self.wts, self.cfg, self.res):
            port.reset()
        for _ in range(cycles):
            await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0

    def load(self, problem):
        problem.check_fits(ROWS, COLS, MAX_COL_TILES)
        registers = problem.layer_registers(ROWS, COLS)
        self.dut.gemm__settings.value = Const.cast(self.settings_layout.const({**registers, "table_base": 0})).value
        self.monitor.begin(registers)
        self.cfg.queue = [Const.cast(self.cfg_layout.const(
            {"addr": a, "lane": lane, "entry": {"bias": b, "multiplier": m, "shift": s}})).value
            for a, lane, b, m, s in problem.table_writes(ROWS, COLS)]
        self.cfg.pos, self.cfg.presented = 0, None
        acts, wts = [], []
        steps = list(problem.steps(ROWS, COLS))
        noise = [] if problem.depthwise else self.noise.integers(-128, 128, (len(steps), ROWS * (COLS - 1))).tolist()
        for n, (a_col, w_row) in enumerate(steps):
            acts.append(pack(a_col if problem.depthwise else a_col + noise[n], 8))
            wts.append(pack(w_row, 8))
        self.act.queue, self.wts.queue = acts, wts
        self.act.pos = self.wts.pos = 0
        self.act.presented = self.wts.presented = None
        self.res.items = []

    async def run(self, problem, label, max_cycles=None, stop_after=None, res_hold=0):
        """Program the tables, then stream the steps and collect every result row (``res`` held not
        ready for the first ``res_hold`` cycles)."""
        self.load(problem)
        # (two cycles before the first table write: the layer registers must be set three cycles
        # before the first step, and a problem may need a single table write)
        await FallingEdge(self.dut.clk)
        await FallingEdge(self.dut.clk)
        want_rows = problem.n_result_rows(ROWS, COLS)
        steps = len(self.act.queue)
        budget = max_cycles or 50 * (steps + want_rows + len(self.cfg.queue)) + 200
        first_in = None
        self.running = True
        for cycle in range(budget):
            await FallingEdge(self.dut.clk)
            if stop_after is not None and cycle >= stop_after:
                return None
            # The registered outputs and every ready are settled at the falling edge. The
            # readies depend combinationally on our valids and on res.ready, so when one of
            # those changes now, wait for ReadOnly before sampling them; otherwise sample at
            # once (one trigger per cycle at full rate).
            if cycle < res_hold:
                changed = self.res.accepting is not False
                if changed:
                    self.res.ready.value = 0
                    self.res.accepting = False
            else:
                changed = self.res.drive()
            self.res.observe()
            changed |= self.cfg.drive()
            tables_done = self.cfg.idle  # tables first, then the steps
            changed |= self.act.drive(tables_done)
            changed |= self.wts.drive(tables_done)
            if changed:
                await ReadOnly()
            monitor = self.monitor
            word = self.cfg.observe()
            if word is not None:
                monitor.cfg(word)
            a_pend, w_pend = tables_done and not self.act.idle, tables_done and not self.wts.idle
            a_word, w_word = self.act.observe(), self.wts.observe()
            if a_word is not None:
                monitor.step(a_word, w_word, cycle)
            # (res.valid read only when it matters: with the inputs done and res not ready)
            draining = not a_pend and not w_pend and not self.res.accepting and bool(self.res.valid.value)
            monitor.cycle((a_pend, self.act.driving, a_word is not None),
                          (w_pend, self.wts.driving, w_word is not None), draining)
            self.cycles += 1
            if first_in is None and self.act.pos:
                first_in = cycle
            if len(self.res.items) == want_rows:
                # Cycles from the first input accepted to the last output, both included.
                self.last_run_cycles = cycle - first_in + 1
                self.running = False
                await RisingEdge(self.dut.clk)
                m, _, n = problem.shape
                self.monitor.end(m, n)
                return self.scoreboard.check(problem, self.res.items, label)
        raise AssertionError(f"{label}: timed out after {budget} cycles with {len(self.res.items)} of "
                             f"{want_rows} result rows (seed {SEED})")


def random_problem(rng, m, k, n, bypass=False, depthwise=False):
    return stimulus.random_problem(rng, m, k, n, ROUNDING, bypass, depthwise)


def random_depthwise_problems(rng, count):
    """Random depthwise-mode GEMMs: K = taps from 1 to 25, any M and N up to MAX_DIM."""
    return [random_problem(rng, int(rng.integers(1, MAX_DIM + 1)), int(rng.integers(1, 26)),
                           int(rng.integers(1, MAX_DIM + 1)), bypass=rng.random() < 0.1, depthwise=True)
            for _ in range(count)]


def directed_problems(rng):
    """All -128 activations with +-127 weights (accumulators at +-16256*K), ties, RELU6-like bounds."""
    problems = []
    p = random_problem(rng, ROWS, 64, COLS)
    p.lhs[:] = -128
    p.rhs[:] = np.where(rng.random(p.rhs.shape) < 0.5, -127, 127)
    problems.append(p)
    # Every element an exact .5 tie, positive and negative: K = 1, weights 1, activations
    # -128, -112, ..., 112, biases = 8 (mod 16) and an effective multiplier of 2**-4.
    n = max(COLS, 2)
    p = GemmProblem(lhs=(np.arange(16) * 16 - 128).astype(np.int8).reshape(16, 1),
                    rhs=np.ones((1, n), np.int8), bias=(8 - 16 * np.arange(n)).astype(np.int32), input_offset=0,
                    output_multiplier=np.full(n, 2**30), output_shift=np.full(n, -3), output_offset=3,
                    rounding=ROUNDING)
    problems.append(p)
    p = random_problem(rng, ROWS + 1, 3, COLS)
    p.act_min, p.act_max = 0, 47                 # a RELU6-style clamp
    problems.append(p)
    p = random_problem(rng, ROWS, 5, COLS)
    p.bias = np.full(COLS, 2**31 - 1, np.int32)  # bias add wraps
    problems.append(p)
    # K = 1: tiles back to back at the shortest period, each row tile crossing several column
    # tiles, so every result row reads a different table entry from the row before it.
    problems.append(random_problem(rng, 2 * ROWS + 1, 1, min(3 * COLS + 1, MAX_COL_TILES * COLS)))
    return problems


def write_results(tb, name):
    if COVERAGE:
        coverage.export(COVERAGE)
    if RESULTS:
        with open(RESULTS, "a") as f:
            f.write(json.dumps({"test": name, "compared": tb.scoreboard.compared,
                                "failures": tb.scoreboard.failures, "cycles": tb.cycles}) + "\n")


@cocotb.test()
async def random_gemms(dut):
    """Random shapes and quantization parameters, plus directed corners, every output compared."""
    tb = TB(dut, SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED + 1)
    problems = [random_problem(rng, *(int(x) for x in rng.integers(1, MAX_DIM + 1, 3))) for _ in range(N_PROBLEMS)]
    problems.append(random_problem(rng, ROWS, 7, COLS, bypass=True))
    problems += directed_problems(rng)
    problems += random_depthwise_problems(rng, max(2, N_PROBLEMS // 2))
    ok = True
    for i, p in enumerate(problems):
        ok &= await tb.run(p, f"problem {i} M,K,N={p.shape}")
    write_results(tb, "random_gemms")
    assert ok, f"{tb.scoreboard.failures} of {tb.scoreboard.compared} outputs differ from golden (seed {SEED})"


@cocotb.test()
async def depthwise_layers(dut):
    """DEPTHWISE_CONV_2D layers (sim.stimulus.depthwise_layers: depth multipliers 1, 2, 3 and cols + 1,
    channels not a multiple of cols, K = 1 .. 25, strides, dilations, both paddings) mapped onto the
    depthwise mode (sim.mapping): every GEMM output compared with golden, and every layer, assembled
    from the RTL's results, with golden's DEPTHWISE_CONV_2D kernel."""
    from int8_systolic.golden.kernels import depthwise_conv_2d_kernel
    from int8_systolic.host.mapping import map_layer

    tb = TB(dut, SEED + 12)
    await tb.reset()
    rng = np.random.default_rng(SEED + 13)
    ok = True
    for layer in stimulus.depthwise_layers(rng, COLS, ROUNDING):
        g = layer.geometry
        label = (f"depthwise layer {layer.op_index} input {list(layer.input.shape)} taps "
                 f"{list(layer.weights.shape[1:3])} stride {g['stride']} dilation {g['dilation']} {g['padding']} "
                 f"depth multiplier {g['depth_multiplier']}")
        mapped = map_layer(layer, ROWS, COLS, MAX_COL_TILES * COLS, depthwise="depthwise")
        results = []
        for i, p in enumerate(mapped.problems):
            ok &= await tb.run(p, f"{label} GEMM {i} M,K,N={p.shape}")
            results.append(tb.scoreboard.last_output.astype(np.int8))
        want = depthwise_conv_2d_kernel(layer.input, layer.weights, layer.bias, **layer.params, stride=g["stride"],
                                        dilation=g["dilation"], padding=g["padding"],
                                        depth_multiplier=g["depth_multiplier"])
        got = mapped.assemble(results)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            tb.scoreboard.failures += len(bad)
            ok = False
            dut._log.error(f"{label}: the assembled layer differs from golden's DEPTHWISE_CONV_2D at {len(bad)} "
                           f"elements, first {bad[0].tolist()}: RTL {int(got[tuple(bad[0])])}, golden "
                           f"{int(want[tuple(bad[0])])} (seed {SEED})")
    write_results(tb, "depthwise_layers")
    assert ok, f"{tb.scoreboard.failures} of {tb.scoreboard.compared} outputs differ from golden (seed {SEED})"


@cocotb.test()
async def reset_mid_stream(dut):
    """A reset in the middle of a stream, then a clean run that must be exact."""
    tb = TB(dut, SEED + 5)
    await tb.reset()
    rng = np.random.default_rng(SEED + 6)
    await tb.run(random_problem(rng, 2 * ROWS, 30, 2 * COLS), "interrupted", stop_after=int(rng.integers(20, 60)))
    await tb.reset()
    ok = await tb.run(random_problem(rng, ROWS + 1, 9, COLS + 1), "after reset")
    write_results(tb, "reset_mid_stream")
    assert ok, f"{tb.scoreboard.failures} outputs differ after a mid-stream reset (seed {SEED})"


@cocotb.test()
async def coverage_corners(dut):
    """Directed GEMMs for the coverage bins random stimulus misses (sim.coverage), every output compared:
    the requantizer's corners, K classes, the tables full, the output FIFO filled until credit holds
    the inputs off, and with TB_LONG_K the K = 132 105 GEMM whose accumulators wrap int32."""
    tb = TB(dut, SEED + 9, pauses=False)
    await tb.reset()
    rng = np.random.default_rng(SEED + 10)
    ok = True
    problems = stimulus.coverage_corners(rng, ROWS, COLS, ROUNDING, MAX_COL_TILES)
    for i, p in enumerate(problems):
        ok &= await tb.run(p, f"corner {i} M,K,N={p.shape}")
    # res held not ready while K = 1 tiles arrive at full rate: the output FIFO fills and the credit
    # check holds act/wts off until res is read again
    depth = Accelerator.model(ROWS, COLS, ROUNDING, MAX_COL_TILES).fifo_depth
    p = random_problem(rng, ROWS * (depth // ROWS + 4), 1, COLS)
    ok &= await tb.run(p, f"output FIFO full M,K,N={p.shape}", res_hold=4 * depth + 50)
    if LONG_K:
        p = stimulus.long_k_problem(ROWS, COLS, ROUNDING)
        ok &= await tb.run(p, f"accumulators wrap M,K,N={p.shape}")
    write_results(tb, "coverage_corners")
    assert ok, f"{tb.scoreboard.failures} of {tb.scoreboard.compared} outputs differ from golden (seed {SEED})"
