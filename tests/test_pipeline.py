"""hw.pipeline's ring delay lines in Amaranth's simulator, against a model: a value given in cycle t comes out in
cycle t + cycles, for every length the rings take, several lines and lengths sharing a write pointer."""

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from int8_systolic.hw.pipeline import RING_DEPTH, ring_delayed
from int8_systolic.sim.amaranth_bench import simulate

LENGTHS = [2, 3, 7, RING_DEPTH - 1, RING_DEPTH, 7]   # two lines of one length share a read pointer


class _Rings(wiring.Component):
    def __init__(self, lengths):
        self.lengths = lengths
        super().__init__({"i": In(8).array(len(lengths)), "o": Out(8).array(len(lengths)), "en": In(1)})

    def elaborate(self, platform):
        m = Module()
        outs = ring_delayed(m, list(zip(self.i, self.lengths, strict=True)), "t", en=self.en)
        m.d.comb += [o.eq(v) for o, v in zip(self.o, outs, strict=True)]
        return m


@pytest.mark.parametrize("p_en", [1.0, 0.6])
def test_ring_delayed_lines_are_exactly_their_length_late(seed, p_en):
    """Every cycle's outputs against a model of ``cycles`` registers a line, all enabled by ``en`` (always high, or
    random): the rings' outputs hold in a disabled cycle and move in an enabled one, as those registers do."""
    rng = np.random.default_rng(seed + 1)
    dut = _Rings(LENGTHS)
    n = 8 * RING_DEPTH
    values = rng.integers(0, 256, size=(n, len(LENGTHS)))
    enables = (rng.random(n) < p_en).astype(int)
    seen = []

    async def bench(ctx):
        for t in range(n):
            ctx.set(dut.en, int(enables[t]))
            for k in range(len(LENGTHS)):
                ctx.set(dut.i[k], int(values[t, k]))
            seen.append([ctx.get(dut.o[k]) for k in range(len(LENGTHS))])
            await ctx.tick()

    simulate(dut, bench)
    regs = [[None] * c for c in LENGTHS]       # the model: each line's registers, regs[k][-1] its output
    compared = 0
    for t in range(n):
        outs = [line[-1] for line in regs]
        if None not in outs:
            assert seen[t] == outs, f"cycle {t}: {seen[t]}, want {outs} (lengths {LENGTHS}, en {p_en})"
            compared += 1
        if enables[t]:
            regs = [[int(values[t, k]), *line[:-1]] for k, line in enumerate(regs)]
    assert compared > n // 2


@pytest.mark.parametrize("cycles", [0, 1, RING_DEPTH + 1])
def test_ring_delayed_refuses_a_length_it_cannot_hold(cycles):
    m = Module()
    m._MustUse__silence = True  # refused before anything was built: nothing to elaborate
    with pytest.raises(ValueError, match=f"2 to {RING_DEPTH} cycles long, got {cycles}"):
        ring_delayed(m, [(Signal(8), cycles)], "t")
