"""cocotb testbench of the AXI top (hw.axi_top), through the register-level driver (sim.axi_driver).

Every result row of every GEMM is compared with the golden model. Configuration from the
environment, as sim.tb_accelerator: TB_ROWS, TB_COLS, TB_ROUNDING, TB_MAX_COL_TILES, TB_SEED,
TB_PROBLEMS, TB_MAX_DIM, TB_PAUSES, TB_RESULTS.
"""

import json
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import Event, RisingEdge, SimTimeoutError, with_timeout

from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.hw.axi_top import WRITE_LATENCY
from int8_systolic.hw.gemm_scheduler import GemmScheduler
from int8_systolic.hw.registers import ERROR_BITS, ID_MAGIC, VERSION, reg
from int8_systolic.hw.result_framer import ResultFramer

from ..host.axi_driver import AxiDriver
from . import coverage
from .stimulus import random_problem

# (the configuration from the environment, as the core's testbench reads it)
from .tb_accelerator import (
    COLS,
    COVERAGE,
    MAX_COL_TILES,
    MAX_DIM,
    N_PROBLEMS,
    PAUSES,
    RESULTS,
    ROUNDING,
    ROWS,
    SEED,
    Scoreboard,
)

QUEUE_DEPTH = 4


def error_bit(name):
    return 1 << reg("ERROR").field(name).lsb


def pauses(seed, p):
    rng = random.Random(seed)
    while True:
        yield rng.random() < p


class TB:
    """Clock, reset, the driver, a monitor of the ports (steps, TVALID gaps, stalls) and the scoreboard."""

    def __init__(self, dut):
        self.dut = dut
        self.drv = AxiDriver(dut, ROWS, COLS)
        self.scoreboard = Scoreboard(dut._log)
        self.cycles = 0
        self.watch = {"steps": 0, "act_starved": 0, "wts_starved": 0, "res_stalled": 0, "busy": 0, "within": False,
                      "outstanding": 0, "pushes": {}, "spans": [], "results": []}
        cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
        cocotb.start_soon(self._monitor())

    def set_pauses(self, seed, on=PAUSES):
        d = self.drv
        if on:
            d.act.set_pause_generator(pauses(seed, 0.2))
            d.wts.set_pause_generator(pauses(seed + 1, 0.2))
            d.res.set_pause_generator(pauses(seed + 2, 0.3))
        else:
            # (cocotbext-axi stops the generator but leaves `pause` at its last value: cleared here)
            for s in (d.act, d.wts, d.res):
                s.set_pause_generator(None)
                s.pause = False

    async def reset(self, cycles=4):
        self.drv.forget()
        self.dut.aresetn.value = 0
        for _ in range(cycles):
            await RisingEdge(self.dut.aclk)
        self.dut.aresetn.value = 1
        await RisingEdge(self.dut.aclk)

    async def _monitor(self):
        """Counts at the ports what the performance counters count, independently: steps, cycles
        strictly between a GEMM's first and last step without TVALID, result stalls, and busy
        cycles (STATUS.BUSY: from WRITE_LATENCY + 3 cycles after an accepted DESC_PUSH write to the second
        cycle after its GEMM's last result row is transferred); records each GEMM's first and last step and
        its last result's cycle. Each sample at a rising edge is of the cycle that edge ends."""
        dut, w = self.dut, self.watch
        push = reg("DESC_PUSH").offset
        while True:
            await RisingEdge(dut.aclk)
            self.cycles += 1
            c = self.cycles
            if not dut.aresetn.value:
                w.update(within=False, outstanding=0, pushes={})
                continue
            w["outstanding"] += w["pushes"].pop(c, 0)
            w["busy"] += w["outstanding"] > 0
            step = bool(dut.s_axis_act_tvalid.value and dut.s_axis_act_tready.value)
            if w["within"] and not step:
                w["act_starved"] += not dut.s_axis_act_tvalid.value
                w["wts_starved"] += not dut.s_axis_wts_tvalid.value
            if step:
                w["steps"] += 1
                if not w["within"]:
                    w["spans"].append([c, None])
                w["within"] = not dut.s_axis_act_tlast.value
                if not w["within"]:
                    w["spans"][-1][1] = c
            w["res_stalled"] += bool(dut.m_axis_res_tvalid.value and not dut.m_axis_res_tready.value)
            if dut.m_axis_res_tvalid.value and dut.m_axis_res_tready.value and dut.m_axis_res_tlast.value:
                w["pushes"][c + 3] = w["pushes"].get(c + 3, 0) - 1
                w["results"].append(c)
            if (dut.s_axil_awvalid.value and dut.s_axil_awready.value and dut.s_axil_awaddr.value == push
                    and dut.s_axil_wstrb.value == 0b1111):
                lag = WRITE_LATENCY + 3
                w["pushes"][c + lag] = w["pushes"].get(c + lag, 0) + 1

    def check(self, problem, got, label):
        return self.scoreboard.compare(problem, got, label)

    @property
    def compared(self):
        return self.scoreboard.compared

    @property
    def failures(self):
        return self.scoreboard.failures

    async def run_queue(self, problems, label, bases):
        """Problems through the queue, GEMM i's table at bases[i % len(bases)]: the first len(bases)
        GEMMs' tables and descriptors are written before any step is sent, so they run back to back
        (and overlap in the pipeline); each later GEMM's table is written, and its descriptor
        pushed, once the GEMM that last used its rows has all its results in."""
        done = [Event() for _ in problems]
        ok = [True]
        budget = 2000 + 50 * sum(p.shape[1] * np.prod(p.tiles(ROWS, COLS)) + 3 * p.shape[2] for p in problems)

        async def receiver():
            for i, p in enumerate(problems):
                try:
                    got = await with_timeout(self.drv.receive(p), 10 * budget, "ns")
                except SimTimeoutError:
                    # (what the accelerator was doing, for whoever reads the log)
                    status, error, steps = [await self.drv.read(r) for r in ("STATUS", "ERROR", "STEPS")]
                    cocotb.log.error(f"{label}: no result frame for GEMM {i} {p.shape} in {10 * budget} ns; "
                                     f"STATUS {status:#x}, ERROR {error:#x}, STEPS {steps}")
                    raise
                ok[0] &= self.check(p, got, f"{label} GEMM {i} M,K,N={p.shape}")
                done[i].set()

        first_span, first_result = len(self.watch["spans"]), len(self.watch["results"])
        rx = cocotb.start_soon(receiver())
        ahead = len(bases)
        for i, p in enumerate(problems[:ahead]):
            await self.drv.load_table(p, bases[i])
            await self.drv.push(p, bases[i])
        for p in problems[:ahead]:
            cocotb.start_soon(self.drv.send_steps(p))
        for i, p in enumerate(problems[ahead:], start=ahead):
            await done[i - ahead].wait()
            await self.drv.load_table(p, bases[i % ahead])
            await self.drv.push(p, bases[i % ahead])
            cocotb.start_soon(self.drv.send_steps(p))
        await rx
        spans, results = self.watch["spans"][first_span:], self.watch["results"][first_result:]
        if len(spans) == len(results) == len(problems):
            coverage.sample_mode_switches([p.depthwise for p in problems], [s[0] for s in spans], results)
        return ok[0]

    def write_results(self, name):
        if COVERAGE:
            coverage.export(COVERAGE)
        if RESULTS:
            with open(RESULTS, "a") as f:
                f.write(json.dumps({"test": name, "compared": self.compared, "failures": self.failures,
                                    "cycles": self.cycles}) + "\n")


def problems_in_layers(rng, count):
    """Random GEMMs, in runs of one to three sharing an output stage (the GEMMs of a layer, which
    the queue starts without draining), some in bypass, a third in the depthwise mode (so the mode
    changes between GEMMs that follow each other in the pipeline)."""
    out = []
    while len(out) < count:
        first = random_problem(rng, *(int(x) for x in rng.integers(1, MAX_DIM + 1, 3)), rounding=ROUNDING,
                               bypass=rng.random() < 0.15, depthwise=rng.random() < 0.35)
        out.append(first)
        for _ in range(int(rng.integers(0, 3))):
            p = random_problem(rng, *(int(x) for x in rng.integers(1, MAX_DIM + 1, 3)), rounding=ROUNDING,
                               depthwise=rng.random() < 0.35)
            p.output_offset, p.act_min, p.act_max, p.bypass = first.output_offset, first.act_min, first.act_max, \
                first.bypass
            out.append(p)
    return out[:count]


def table_regions(count):
    """``count`` disjoint table regions (their bases) and the most column tiles a GEMM may use."""
    size = MAX_COL_TILES // count
    return tuple(range(0, count * size, size)), size


def fitting(rng, problems, max_tiles):
    for p in problems:
        n_tiles = p.tiles(ROWS, COLS)[1]
        if n_tiles > max_tiles:
            p.rhs = p.rhs[:, :max_tiles * COLS]
            if p.depthwise:
                p.lhs = p.lhs[:, :, :max_tiles * COLS]
            p.bias = p.bias[:max_tiles * COLS]
            p.output_multiplier = np.asarray(p.output_multiplier)[:max_tiles * COLS]
            p.output_shift = np.asarray(p.output_shift)[:max_tiles * COLS]
    return problems


@cocotb.test()
async def registers(dut):
    """ID, configuration, SLVERR on unmapped and read-only offsets, ERROR's write-1-to-clear."""
    tb = TB(dut)
    await tb.reset()
    d = tb.drv
    info = await d.identify()
    model = Accelerator.model(ROWS, COLS, rounding=ROUNDING, max_col_tiles=MAX_COL_TILES)
    want = {"rows": ROWS, "cols": COLS, "rounding": ROUNDING, "queue_depth": QUEUE_DEPTH,
            "table_depth": MAX_COL_TILES, "latency": model.latency, "min_tile_steps": model.min_tile_steps}
    assert info == want, f"configuration registers {info}, elaborated {want}"
    assert await d.read("ID") == ID_MAGIC
    assert await d.read("VERSION") == VERSION[0] << 16 | VERSION[1]
    value, resp = await d.read_offset(0x3FC)
    assert resp != 0, f"an unmapped read answered {resp}"
    assert value == 0, f"an unmapped read returned {value}"
    assert await d.write_offset(reg("ID").offset, 5) != 0, "a write to ID was not refused"
    assert await d.read("ERROR") == error_bit("BAD_ACCESS")
    assert await d.write_offset(0x7F0, 5) != 0, "a write to an unmapped offset was not refused"
    await d.write("ERROR", error_bit("BAD_ACCESS"))
    assert await d.read("ERROR") == 0, "ERROR did not clear on write-1"
    for name in ("DESC_K", "DESC_OUTPUT", "TABLE_BIAS"):
        await d.write(name, 0x00ABCDEF)
        assert await d.read(name) == 0x00ABCDEF, f"{name} does not read back"
        # bits outside the register's fields read 0
        fields = reg(name).mask
        await d.write(name, 0xFFFFFFFF)
        assert await d.read(name) == fields, f"{name} reads {await d.read(name):#x} after 0xFFFFFFFF, want {fields:#x}"
    tb.write_results("registers")


@cocotb.test()
async def random_gemms(dut):
    """Random GEMMs through the descriptor queue with double-buffered tables, idle gaps and
    backpressure on every stream, every output compared with golden."""
    tb = TB(dut)
    tb.set_pauses(SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED)
    bases, max_tiles = table_regions(4)
    problems = fitting(rng, problems_in_layers(rng, N_PROBLEMS), max_tiles)
    ok = await tb.run_queue(problems, "random", bases)
    assert await tb.drv.read("ERROR") == 0, f"ERROR = {await tb.drv.read('ERROR'):#x} after legal GEMMs"
    tb.write_results("random_gemms")
    assert ok, f"{tb.failures} of {tb.compared} outputs differ from golden (seed {SEED})"


@cocotb.test()
async def directed(dut):
    """The core testbench's directed corners (accumulators at +-16256 K, every output an exact
    rounding tie, a RELU6-style clamp, the bias add wrapping, K = 1 tiles at the shortest period
    across column tiles) through the queue, every output compared with golden."""
    from .tb_accelerator import directed_problems

    tb = TB(dut)
    tb.set_pauses(SEED + 30)
    await tb.reset()
    rng = np.random.default_rng(SEED + 31)
    bases, max_tiles = table_regions(2)
    problems = fitting(rng, directed_problems(rng), max_tiles)
    ok = await tb.run_queue(problems, "directed", bases)
    tb.write_results("directed")
    assert ok, f"{tb.failures} of {tb.compared} outputs differ from golden (seed {SEED})"


@cocotb.test()
async def counters(dut):
    """Back-to-back GEMMs of one layer: the performance counters against the port monitor, and,
    at full rate, the gap between GEMMs against the scheduler's launch timing."""
    tb = TB(dut)
    await tb.reset()
    rng = np.random.default_rng(SEED + 3)
    bases, max_tiles = table_regions(4)
    d = tb.drv
    # (the third run: one-tile GEMMs of K = 1, whose rows fill the result stream at full rate when
    # a tile takes `rows` cycles, as on 8x8: a cycle lost between GEMMs delays the last result)
    for run, (paused, shapes) in enumerate((
            (False, [(int(rng.integers(ROWS, 3 * ROWS)), int(rng.integers(1, 9)), int(rng.integers(1, 3 * COLS)))
                     for _ in range(3)]),
            (True, [(int(rng.integers(ROWS, 3 * ROWS)), int(rng.integers(1, 9)), int(rng.integers(1, 3 * COLS)))
                    for _ in range(3)]),
            (False, [(ROWS, 1, COLS)] * 4))):
        tb.set_pauses(SEED + 10 * run, on=paused)
        problems = fitting(rng, [random_problem(rng, *shape, rounding=ROUNDING) for shape in shapes], max_tiles)
        for p in problems[1:]:
            p.output_offset, p.act_min, p.act_max = problems[0].output_offset, problems[0].act_min, problems[0].act_max
        await d.write("CONTROL", 1)
        for w in ("steps", "act_starved", "wts_starved", "res_stalled", "busy"):
            tb.watch[w] = 0
        tb.watch.update(spans=[], results=[])
        ok = await tb.run_queue(problems, f"counters run {run}", bases)
        for _ in range(5):
            await RisingEdge(dut.aclk)
        got = {name: await d.read(name) for name in ("STEPS", "ACT_STARVED", "WTS_STARVED", "RES_STALLED",
                                                      "GEMMS_DONE", "BUSY_CYCLES")}
        want = {"STEPS": tb.watch["steps"], "ACT_STARVED": tb.watch["act_starved"],
                "WTS_STARVED": tb.watch["wts_starved"], "RES_STALLED": tb.watch["res_stalled"],
                "GEMMS_DONE": len(problems), "BUSY_CYCLES": tb.watch["busy"]}
        if not paused:
            check_full_rate(problems, tb.watch["spans"], tb.watch["results"])
        steps = sum(p.shape[1] * np.prod(p.tiles(ROWS, COLS)) for p in problems)
        assert want["STEPS"] == steps, f"monitor saw {want['STEPS']} steps, the GEMMs have {steps}"
        assert got == want, f"counters {got}, monitor {want}"
        assert ok, f"{tb.failures} outputs differ from golden"
    tb.write_results("counters")


@cocotb.test()
async def mode_switch(dut):
    """GEMMs of one output stage, alternating between the GEMM and the depthwise mode, queued and at
    full rate, so each starts while the one before is still in the pipeline: every output compared
    with golden, each switch seen not drained, and the step and result timing the core's, mode or not."""
    tb = TB(dut)
    await tb.reset()
    tb.set_pauses(SEED, on=False)
    rng = np.random.default_rng(SEED + 41)
    bases, max_tiles = table_regions(4)
    # (four: as many as the table regions, so all are queued before the first step, see run_queue)
    modes = [False, True, False, True]
    problems = fitting(rng, [random_problem(rng, int(rng.integers(ROWS, 3 * ROWS)), int(rng.integers(1, 26)),
                                            int(rng.integers(1, 3 * COLS)), rounding=ROUNDING, depthwise=dw)
                             for dw in modes], max_tiles)
    for p in problems[1:]:
        p.output_offset, p.act_min, p.act_max = problems[0].output_offset, problems[0].act_min, problems[0].act_max
    tb.watch.update(spans=[], results=[])
    ok = await tb.run_queue(problems, "mode switch", bases)
    spans, results = tb.watch["spans"], tb.watch["results"]
    check_full_rate(problems, spans, results)
    for i in range(1, len(problems)):
        assert spans[i][0] < results[i - 1], \
            f"GEMM {i} started after GEMM {i - 1}'s last result: the pipeline drained between modes"
    tb.write_results("mode_switch")
    assert ok, f"{tb.failures} of {tb.compared} outputs differ from golden (seed {SEED})"


def check_full_rate(problems, spans, results):
    """At full rate, GEMMs of one output stage queued in time: each GEMM's steps take the core's
    tile timing, the next GEMM's first step comes GemmScheduler.GAP cycles after the last (or
    after the short last tile's padding), and the last result leaves when the result stream's model
    says (each tile's rows from the core's latency, the framer's idle cycles between GEMMs)."""
    core = Accelerator.model(ROWS, COLS, rounding=ROUNDING, max_col_tiles=MAX_COL_TILES)
    p_min = core.min_tile_steps
    assert len(spans) == len(problems), f"{len(spans)} GEMMs seen at the ports, {len(problems)} sent"
    for i, (p, (first, last)) in enumerate(zip(problems, spans, strict=True)):
        k, tiles = p.shape[1], int(np.prod(p.tiles(ROWS, COLS)))
        want = (tiles - 1) * max(k, p_min) + k - 1
        assert last - first == want, f"GEMM {i}: steps span {last - first} cycles, the core's timing {want}"
        if i:
            k_prev = problems[i - 1].shape[1]
            # (the core's padding after a short tile, or the scheduler's gap for this K)
            gap = max(max(k_prev, p_min) - k_prev + 1, GemmScheduler(max_col_tiles=MAX_COL_TILES,
                                                                     min_tile_steps=p_min).gap(p.shape[1]))
            assert first - spans[i - 1][1] == gap, \
                f"GEMM {i} started {first - spans[i - 1][1]} cycles after GEMM {i - 1}'s last step, model {gap}"
    # The result stream as a queue: a tile's rows leave the core one a cycle, its last row
    # core.latency after its last step, and the framer idles ResultFramer.idle(ROWS) cycles after each
    # GEMM's last row.
    leave = None
    for p, (first, _) in zip(problems, spans, strict=True):
        k, tiles = p.shape[1], int(np.prod(p.tiles(ROWS, COLS)))
        for t in range(tiles):
            last_step = first + t * max(k, p_min) + k - 1
            for r in range(ROWS):
                ready = last_step + core.latency - (ROWS - 1 - r)
                gap = 1 + (ResultFramer.idle(ROWS) if t == 0 and r == 0 else 0)
                leave = ready if leave is None else max(ready, leave + gap)
    assert results[-1] == leave, \
        f"last result {results[-1] - spans[-1][1]} cycles after the last step, the model {leave - spans[-1][1]}"


@cocotb.test()
async def errors(dut):
    """Every ERROR bit provoked (and the refused descriptor or entry not used), IRQ raised, and a
    GEMM exact afterwards."""
    tb = TB(dut)
    await tb.reset()
    d = tb.drv
    rng = np.random.default_rng(SEED + 7)
    p = fitting(rng, [random_problem(rng, ROWS + 1, 5, COLS + 1, rounding=ROUNDING)], 2)[0]
    await d.write("IRQ_ENABLE", 0b10)

    async def expect(bit, what):
        got = await d.read("ERROR")
        assert got == error_bit(bit), f"{what}: ERROR = {got:#x}, expected {bit} only"
        assert dut.irq.value == 1, f"{what}: irq low with IRQ_ENABLE.ERROR set"
        assert await d.read("STATUS") & 0xFF0 == 0, f"{what}: a refused descriptor was queued"
        await d.write("ERROR", got)
        assert await d.read("ERROR") == 0
        assert dut.irq.value == 0

    async def push_bad(name, value):
        # (a valid descriptor staged, then the bad field and DESC_PUSH handed to the bus master at
        # once: the checks are current at the tightest spacing the slave allows)
        await d.push(p, 0, DESC_PUSH=None)
        await d.write_queued((name, value), ("DESC_PUSH", 1))
        d.forget()

    await push_bad("DESC_K", 0)
    await expect("DESC_K", "K = 0")
    await push_bad("DESC_N_TILES", 0)
    await expect("DESC_TILES", "zero column tiles")
    await push_bad("DESC_M_TILES", 0)
    await expect("DESC_TILES", "zero row tiles")
    await push_bad("DESC_TABLE_BASE", MAX_COL_TILES - 1)
    await expect("DESC_TABLE", "tiles past the table")
    await push_bad("DESC_OUTPUT", (5 << 8) | (4 << 16))
    await expect("DESC_BOUNDS", "act_min > act_max")
    await d.write("TABLE_INDEX", MAX_COL_TILES << 8)
    await d.write("TABLE_SHIFT", 0)
    await expect("TABLE_RANGE", "table row out of range")
    await d.write("TABLE_INDEX", COLS)
    await d.write("TABLE_SHIFT", 0)
    await expect("TABLE_RANGE", "lane out of range")
    # a running GEMM's rows refuse writes, from the write that follows its DESC_PUSH on (the
    # tightest spacing the bus allows); the GEMM waits for its steps meanwhile
    await d.load_table(p, 0)
    await d.write("TABLE_INDEX", 0)
    await d.push(p, 0, DESC_PUSH=None)
    await d.write_queued(("DESC_PUSH", 1), ("TABLE_SHIFT", 0))
    await expect_queued(d, tb, "TABLE_BUSY")
    await d.write("TABLE_INDEX", 0)
    await d.write("TABLE_SHIFT", 0)
    await expect_queued(d, tb, "TABLE_BUSY")
    # the queue: one GEMM running (no steps sent), QUEUE_DEPTH queued, one more refused
    for _ in range(QUEUE_DEPTH):
        await d.push(p, 0)
    assert await d.read("ERROR") == 0
    await d.push(p, 0)
    assert await d.read("ERROR") == error_bit("QUEUE_FULL")
    await d.write("ERROR", error_bit("QUEUE_FULL"))
    # run them all; the table written before is intact (the refused writes did not land)
    ok = True
    for i in range(QUEUE_DEPTH + 1):
        await d.send_steps(p)
        ok &= tb.check(p, await d.receive(p), f"queued GEMM {i}")
    # TLAST one step early on the activations, then missing on the weights' last step
    a, w = d.step_frames(p)
    await d.push(p, 0)
    await d.act.send(type(a)(a.tdata[:-d.act_step_bytes]))
    await d.act.send(type(a)(a.tdata[-d.act_step_bytes:]))
    await d.wts.send(w)
    ok &= tb.check(p, await d.receive(p), "act TLAST early")
    assert await d.read("ERROR") == error_bit("ACT_TLAST"), "an early TLAST on s_axis_act was not flagged"
    await d.write("ERROR", error_bit("ACT_TLAST"))
    await d.push(p, 0)
    await d.push(p, 0)
    await d.act.send(a)
    await d.act.send(a)
    await d.wts.send(type(w)(w.tdata + w.tdata))  # one frame for two GEMMs: TLAST missing on the first's end
    ok &= tb.check(p, await d.receive(p), "wts TLAST missing (1)")
    ok &= tb.check(p, await d.receive(p), "wts TLAST missing (2)")
    assert await d.read("ERROR") == error_bit("WTS_TLAST"), "a missing TLAST on s_axis_wts was not flagged"
    await d.write("ERROR", error_bit("WTS_TLAST"))
    assert {b.name for b in ERROR_BITS} == ERROR_BITS_TESTED, "an ERROR bit is not provoked here"
    tb.write_results("errors")
    assert ok, f"{tb.failures} outputs differ from golden"


ERROR_BITS_TESTED = {"DESC_K", "DESC_TILES", "DESC_TABLE", "DESC_BOUNDS", "QUEUE_FULL", "TABLE_RANGE", "TABLE_BUSY",
                     "ACT_TLAST", "WTS_TLAST", "BAD_ACCESS"}


async def expect_queued(d, tb, bit):
    got = await d.read("ERROR")
    assert got == error_bit(bit), f"ERROR = {got:#x}, expected {bit}"
    await d.write("ERROR", got)


@cocotb.test()
async def reset_mid_stream(dut):
    """aresetn in the middle of a GEMM, then a clean GEMM that must be exact."""
    tb = TB(dut)
    tb.set_pauses(SEED + 20)
    await tb.reset()
    rng = np.random.default_rng(SEED + 21)
    bases, max_tiles = table_regions(4)
    p = fitting(rng, [random_problem(rng, 3 * ROWS, 20, 2 * COLS, rounding=ROUNDING)], max_tiles)[0]
    await tb.drv.load_table(p, 0)
    await tb.drv.push(p, 0)
    cocotb.start_soon(tb.drv.send_steps(p))
    for _ in range(int(rng.integers(10, 60))):
        await RisingEdge(dut.aclk)
    await tb.reset()
    assert await tb.drv.read("STATUS") == 0, "busy after reset"
    q = fitting(rng, [random_problem(rng, ROWS + 1, 9, COLS + 1, rounding=ROUNDING)], max_tiles)[0]
    ok = await tb.run_queue([q], "after reset", bases)
    tb.write_results("reset_mid_stream")
    assert ok, f"{tb.failures} outputs differ after a mid-stream reset"
