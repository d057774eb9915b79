"""hw.output_fifo alone in Amaranth's simulator: OutputFIFO, RowFIFO and nonempty_flag against models of
their documented contracts.

FIFO contract (the module and class docstrings): first-word-fall-through, one row per cycle in and
out; a row written (``w_en``) in cycle c into an empty FIFO is at ``r_data`` with ``r_rdy`` in cycle
c + latency (``OutputFIFO.LATENCY``; for RowFIFO "the next cycle"); a read is ``r_en`` in a cycle with
``r_rdy`` (``r_en`` without ``r_rdy`` does nothing); the writer never writes when ``depth`` rows are in
the FIFO; ``r_rdy_copy`` is ``r_rdy`` when asked for, else 0.

The model is an ideal FIFO with that latency: the writer counts its credits (``depth`` minus the rows
written and not yet read, a read giving its credit back the cycle after it) and writes only with one
left; in every cycle the model's oldest unread row, if written ``latency`` or more cycles before, is
the one at ``r_data`` with ``r_rdy`` high, and otherwise ``r_rdy`` is low (so a row is never late
and never early, and rows are neither lost nor duplicated: each carries its sequence number).
``r_rdy`` and ``r_rdy_copy`` are compared in every cycle, ``r_data`` in every cycle with ``r_rdy``.
(The docstrings give the latency for an empty FIFO; behind other rows, "one row per cycle in and out"
is taken to mean no bubble: a row is out ``latency`` cycles after its write or the cycle after the row
ahead of it is read, whichever is later. The RTL meets this even when the OutputFIFO's queue is
throttled by its credits.)

Stimulus: single rows into an empty FIFO, a fill to exactly ``depth`` rows with ``r_en`` low then a
full-rate drain, random writes and reads with gaps and backpressure (``r_en`` independent of
``r_rdy``) in phases that fill, drain or hover, full-rate streaming, and a final drain.
``dsp="ecp5"`` (DP16KD primitives, which Amaranth's simulator cannot run) is not simulated here.
"""

import random

import pytest
from amaranth import Elaboratable, Module, Signal

from int8_systolic.hw.output_fifo import OutputFIFO, RowFIFO, nonempty_flag
from int8_systolic.sim.amaranth_bench import simulate

WIDTH = 32
SEQ_BITS = 16   # the low bits of each row: its sequence number (the rest random)


def stimulus(rng, depth, latency):
    """Per-cycle (write probability, r_en probability) phases: the writer's credit check is the bench's."""
    phases = []
    for _ in range(3):   # single rows into an empty FIFO, read as soon as they come
        phases += [(1.0, 1.0)] + [(0.0, 1.0)] * (latency + 2)
    phases += [(1.0, 0.0)] * (depth + 3)       # fill to depth (the writer stops at its credit)
    phases += [(0.0, 0.0)] * 4                 # full, nothing read
    phases += [(0.0, 1.0)] * (depth + latency + 2)   # drain at full rate
    for _ in range(12):   # random phases: fill, drain, hover, full rate
        w, r = rng.choice(((0.9, 0.3), (0.3, 0.9), (0.5, 0.5), (1.0, 1.0), (0.8, 0.8), (1.0, 0.1)))
        phases += [(w, r)] * rng.randint(depth // 2 + 5, 2 * depth + 40)
    phases += [(1.0, 1.0)] * (3 * depth + 40)  # streaming
    phases += [(1.0, 0.0)] * (depth + 3)       # fill again, then drain it with gaps
    phases += [(0.0, 0.7)] * (2 * depth + latency + 10)
    return phases


def run_fifo(dut, latency, seed, copy):
    """Drive ``dut`` (an OutputFIFO or RowFIFO, or anything with their ports) and check every cycle against
    an ideal FIFO of ``latency``; return (rows read, cycles in which the FIFO held depth rows, reads refused
    for lack of r_rdy)."""
    rng = random.Random(seed)
    depth = dut.depth
    phases = stimulus(rng, depth, latency)
    stats = {"read": 0, "full": 0, "idle_r_en": 0}

    async def bench(ctx):
        queue = []   # the model: (cycle written, row), oldest first
        written = 0
        for t, (p_w, p_r) in enumerate(phases):
            # writer: one credit per row in the FIFO, back the cycle after the row's read
            write = len(queue) < depth and rng.random() < p_w
            stats["full"] += len(queue) == depth
            row = (rng.getrandbits(WIDTH - SEQ_BITS) << SEQ_BITS) | (written % (1 << SEQ_BITS))
            ctx.set(dut.w_en, write)
            ctx.set(dut.w_data, row if write else rng.getrandbits(WIDTH))   # junk when not writing
            r_en = rng.random() < p_r
            ctx.set(dut.r_en, r_en)
            if write:
                queue.append((t, row))
                written += 1
            r_rdy, r_data, r_rdy_copy = ctx.get(dut.r_rdy), ctx.get(dut.r_data), ctx.get(dut.r_rdy_copy)
            want_rdy = queue[0][0] + latency <= t if queue else False
            assert r_rdy == want_rdy, (f"cycle {t}: r_rdy {r_rdy}, want {int(want_rdy)} ({len(queue)} rows in the "
                                       f"FIFO, oldest written in cycle {queue[0][0] if queue else None})")
            assert r_rdy_copy == (r_rdy if copy else 0), f"cycle {t}: r_rdy_copy {r_rdy_copy}, r_rdy {r_rdy}"
            if want_rdy:
                assert r_data == queue[0][1], (f"cycle {t}: r_data {r_data:#x}, want {queue[0][1]:#x} "
                                               f"(written in cycle {queue[0][0]})")
                if r_en:
                    queue.pop(0)
                    stats["read"] += 1
            stats["idle_r_en"] += r_en and not want_rdy
            await ctx.tick()
        assert not queue, f"{len(queue)} rows never came out"
        assert stats["read"] == written

    simulate(dut, bench)
    return stats


@pytest.mark.parametrize("ram", ["distributed", "block"])
@pytest.mark.parametrize(("depth", "copy"), [(1, True), (2, False), (5, True), (16, False), (17, True), (40, False),
                                             (64, True)])
def test_output_fifo_ideal_fifo_of_its_latency(seed, ram, depth, copy):
    """OutputFIFO (dsp="generic"): first-word-fall-through order with no loss or duplication, a row at
    r_data with r_rdy LATENCY cycles after its write on an empty FIFO and never later behind other rows
    (one row per cycle in and out), r_en without r_rdy ignored, backpressure holding r_data, the
    writer filling it to exactly depth rows; r_rdy_copy equal to r_rdy (0 when not asked for)."""
    dut = OutputFIFO(width=WIDTH, depth=depth, ram=ram, dsp="generic", r_rdy_copy=copy)
    stats = run_fifo(dut, dut.LATENCY, seed * 100 + depth, copy)
    assert stats["full"] > 0
    assert stats["idle_r_en"] > 0
    assert stats["read"] > 6 * depth


@pytest.mark.parametrize("ram", ["distributed", "block"])
@pytest.mark.parametrize(("depth", "copy"), [(1, False), (2, True), (4, False), (16, True)])
def test_row_fifo_ideal_fifo_of_one_cycle(seed, ram, depth, copy):
    """RowFIFO: the same contract with a write into an empty queue at r_data the next cycle."""
    dut = RowFIFO(width=WIDTH, depth=depth, attrs={"ram_style": ram}, r_rdy_copy=copy)
    stats = run_fifo(dut, RowFIFO.LATENCY, seed * 100 + depth + 7, copy)
    assert stats["full"] > 0
    assert stats["read"] > 6 * depth


class Flag(Elaboratable):
    """nonempty_flag on signals the bench drives."""

    def __init__(self, limit, keep):
        self.limit, self.keep = limit, keep
        self.add, self.remove, self.nonempty = Signal(), Signal(), Signal()

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.nonempty.eq(nonempty_flag(m, self.add, self.remove, self.limit, "count", keep=self.keep))
        return m


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 16, 40])
def test_nonempty_flag_is_count_not_zero(seed, limit):
    """nonempty_flag: a register that is 1 exactly when a count moved by add - remove each cycle (from 0
    at reset, kept in 0..limit by the stimulus) is not zero; add and remove together leave it alone."""
    rng = random.Random(seed * 10 + limit)
    dut = Flag(limit, keep=limit % 2 == 0)
    checked = [0]

    async def bench(ctx):
        count = 0
        for n in range(60 * limit + 400):
            # a cycle's flag is the count of that cycle (the count before its add/remove)
            assert ctx.get(dut.nonempty) == (count != 0), f"cycle {n}: count {count}"
            checked[0] += 1
            # runs of mostly adds, mostly removes, either, and mostly both at once
            p_add, p_remove = ((0.8, 0.2), (0.2, 0.8), (0.5, 0.5), (0.9, 0.9))[(n // (2 * limit + 5)) % 4]
            a = count < limit and rng.random() < p_add
            r = count > 0 and rng.random() < p_remove
            ctx.set(dut.add, a)
            ctx.set(dut.remove, r)
            count += int(a) - int(r)
            await ctx.tick()

    simulate(dut, bench)
    assert checked[0] == 60 * limit + 400
