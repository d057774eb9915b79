"""hw.weight_streamer in Amaranth's simulator, reading a ByteBuffer holding a layer's weights in the engine's
layout: its words come out in the core's step order (the column tiles' K words, once per row tile) through random
backpressure, and at full rate one a cycle."""

import random

import pytest
from amaranth import Module
from amaranth.lib import wiring

from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.hw.weight_streamer import WeightStreamer
from int8_systolic.sim.amaranth_bench import simulate


class Bench(wiring.Component):
    def __init__(self, cols, width):
        self.dut = WeightStreamer(cols, buffer_width=width, addr_width=12)
        self.buf = ByteBuffer(width, 4096)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut, m.submodules.buf = self.dut, self.buf
        m.d.comb += [self.buf.r_en.eq(self.dut.r_en), self.buf.r_addr.eq(self.dut.r_addr),
                     self.dut.r_data.eq(self.buf.r_data)]
        return m


def run(cols, width, k, n_tiles, m_tiles, p_out, rng, ramp=None):
    bench = Bench(cols, width)
    dut, buf = bench.dut, bench.buf
    words = k * n_tiles
    weights = rng.randbytes(words * cols)
    out, when = [], []

    async def tb(ctx):
        for a in range(0, len(weights), width):
            chunk = weights[a:a + width]
            ctx.set(buf.w_en, 1)
            ctx.set(buf.w_addr, a)
            ctx.set(buf.w_data, int.from_bytes(chunk, "little"))
            ctx.set(buf.w_strb, (1 << len(chunk)) - 1)
            await ctx.tick()
        ctx.set(buf.w_en, 0)
        ctx.set(dut.k, k)
        ctx.set(dut.n_tiles, n_tiles)
        ctx.set(dut.m_tiles, m_tiles)
        ctx.set(dut.avail, len(weights) if ramp is None else 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for t in range(words * m_tiles * 8 + 50 + (0 if ramp is None else len(weights) // ramp)):
            avail = len(weights) if ramp is None else min(len(weights), ramp * t)
            ctx.set(dut.avail, avail)
            if ctx.get(dut.r_en):
                assert ctx.get(dut.r_addr) + cols <= avail, "a word read before it was loaded"
            ready = rng.random() < p_out
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload).to_bytes(cols, "little"))
                when.append(t)
            await ctx.tick()
        assert not ctx.get(dut.busy)

    simulate(bench, tb)
    want = [weights[w * cols:(w + 1) * cols] for _ in range(m_tiles) for w in range(words)]
    return out, want, when


@pytest.mark.parametrize(("cols", "width"), [(8, 8), (4, 8), (3, 4), (16, 16)])
def test_words_in_step_order(cols, width):
    rng = random.Random(cols)
    out, want, _ = run(cols, width, rng.randint(1, 15), rng.randint(1, 3), rng.randint(1, 4), 0.6, rng)
    assert out == want


def test_words_wait_for_the_load():
    rng = random.Random(3)
    out, want, _ = run(8, 8, 12, 2, 3, 0.9, rng, ramp=2)
    assert out == want


def test_full_rate():
    out, want, when = run(8, 8, 10, 2, 3, 1.0, random.Random(1))
    assert out == want
    assert when == list(range(when[0], when[0] + 60))
    assert when[0] == ByteBuffer.LATENCY + 2      # avail tested, the first read, then the queue


def test_parameters_refused():
    with pytest.raises(ValueError, match="cols must be an integer in"):
        WeightStreamer(9, buffer_width=8)
