"""hw.write_queue in Amaranth's simulator: every write queued reaches the port once, in order and unchanged, whatever
the holds; a write is presented the cycle after it is queued when nothing holds it; ``ready`` falls only with two
writes waiting; ``filled`` is a landed write's count, a cycle after it lands; ``drained`` says the queue empties."""

import random

import pytest

from int8_systolic.hw.write_queue import WriteQueue
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize("p_hold", [0.0, 0.3, 0.8])
def test_writes_arrive_in_order_and_filled_follows_them(p_hold):
    rng = random.Random(int(p_hold * 10))
    dut = WriteQueue(addr_width=10, width=4, filled_width=12)
    sent, got = [], []

    async def bench(ctx):
        count, last_filled = 0, 0
        for t in range(600):
            pending = len(sent) - len(got)
            # ready is the level: it falls only with two writes waiting
            assert ctx.get(dut.ready) == (pending < 2)
            en = pending < 2 and rng.random() < 0.7 and t < 500
            if en:
                count += rng.randint(0, 4)
                w = (rng.randrange(1 << 10), rng.randrange(1 << 32), rng.randrange(16), count)
                sent.append(w)
                for port, v in zip((dut.i_addr, dut.i_data, dut.i_strb, dut.i_filled), w, strict=True):
                    ctx.set(port, v)
            ctx.set(dut.i_en, en)
            hold = rng.random() < p_hold
            ctx.set(dut.hold, hold)
            assert ctx.get(dut.w_en) == (pending > 0)
            assert ctx.get(dut.filled) == last_filled, "filled moved without a write landing"
            lands = pending > 0 and not hold
            if lands:
                got.append((ctx.get(dut.w_addr), ctx.get(dut.w_data), ctx.get(dut.w_strb)))
            assert ctx.get(dut.drained) == (pending - lands == 0)
            await ctx.tick()
            if lands:
                last_filled = sent[len(got) - 1][3]
            if p_hold == 0 and en:
                # nothing holds it: presented the next cycle
                assert ctx.get(dut.w_en)
                assert ctx.get(dut.w_addr) == sent[-1][0]
        assert got == [w[:3] for w in sent]
        assert len(sent) > 80

    simulate(dut, bench)


def test_clear_sets_filled_to_zero():
    dut = WriteQueue(addr_width=4, width=1, filled_width=8)

    async def bench(ctx):
        for port, v in ((dut.i_en, 1), (dut.i_addr, 3), (dut.i_data, 7), (dut.i_strb, 1), (dut.i_filled, 9)):
            ctx.set(port, v)
        await ctx.tick()
        ctx.set(dut.i_en, 0)
        await ctx.tick()
        assert ctx.get(dut.filled) == 9
        ctx.set(dut.clear, 1)
        await ctx.tick()
        assert ctx.get(dut.filled) == 0

    simulate(dut, bench)


def test_parameters_refused():
    with pytest.raises(ValueError, match="addr_width must be in"):
        WriteQueue(addr_width=0, width=4)
