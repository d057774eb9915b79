"""hw.weight_prefetch in Amaranth's simulator: a run asked for in order, in commands of at most ``chunk`` bytes that
never pass ``limit`` (ending at it where a whole chunk would pass it); its beats written at consecutive ring places
from ``base``; while lazy, a command only once the last one's beats are in; an abort stops the asking and ends the
run once the beats asked for are written."""

import random

import pytest

from int8_systolic.hw.weight_prefetch import WeightPrefetch
from int8_systolic.sim.amaranth_bench import simulate

DEPTH = 1 << 10     # the ring the test models (addr_width 10)


@pytest.mark.parametrize(("data_width", "buffer_width", "chunk"), [(64, 8, 64), (32, 8, 256), (128, 16, 32)])
def test_a_run_within_its_limit(data_width, buffer_width, chunk):
    """Random runs (one of length 0, one aborted at a random cycle, alternate ones lazy) with a read port that takes
    commands and gives beats at random, and a consumer that frees the ring at random (``limit`` = what it consumed +
    the ring's size): every command is the run's next, at most ``chunk`` bytes, asked only when the bytes asked stay
    within the limit of that cycle (and, lazy, no beat is owed); every beat lands at ``base`` + its offset (mod the
    ring) before the consumer passes it; an aborted run asks nothing more and ends once its beats are in; ``done``
    pulses once as ``busy`` falls."""
    rng = random.Random(data_width + chunk)
    nb = data_width // 8
    dut = WeightPrefetch(data_width, buffer_width=buffer_width, addr_width=10, chunk=chunk)
    runs = [(rng.randrange(1 << 20) * nb, rng.randint(1, 300) * nb, rng.randrange(DEPTH // nb) * nb, None)
            for _ in range(3)]
    runs += [(0x4000, 0, 0, None), (rng.randrange(1 << 20) * nb, 400 * nb, 16, rng.randint(20, 200))]

    shorts = lazy_cmds = 0

    async def bench(ctx):
        nonlocal shorts, lazy_cmds
        for ri, (addr, length, base, abort_at) in enumerate(runs):
            memory = {addr + o: rng.getrandbits(8 * nb) for o in range(0, length, nb)}
            ring = [None] * (DEPTH // nb)
            consumed = 0
            ctx.set(dut.addr, addr)
            ctx.set(dut.length, length)
            ctx.set(dut.base, base)
            ctx.set(dut.limit, DEPTH)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            pending, asked, written, dones, aborted = [], 0, 0, 0, False
            for t in range(20000):
                limit = consumed + DEPTH
                ctx.set(dut.limit, limit)
                aborting = abort_at is not None and t == abort_at
                ctx.set(dut.abort, aborting)
                lazy = ri % 2 == 1
                ctx.set(dut.lazy, lazy)
                ctx.set(dut.rd_cmd.ready, rng.random() < 0.6)
                offer = bool(pending) and rng.random() < 0.7
                ctx.set(dut.rd_data.valid, offer)
                if offer:
                    ctx.set(dut.rd_data.payload, {"data": memory[pending[0]], "last": 0})
                if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                    assert not aborted, "a command asked for after the abort"
                    assert not (lazy and pending), "a lazy command asked for while beats are owed"
                    lazy_cmds += lazy
                    cmd = ctx.get(dut.rd_cmd.payload)
                    assert cmd["addr"] == addr + asked
                    assert 0 < cmd["length"] <= chunk
                    assert asked + cmd["length"] <= min(limit, length)
                    shorts += cmd["length"] < chunk and asked + cmd["length"] < length
                    pending += [cmd["addr"] + o for o in range(0, cmd["length"], nb)]
                    asked += cmd["length"]
                if offer and ctx.get(dut.rd_data.ready):
                    assert ctx.get(dut.w_en)
                    place = ctx.get(dut.w_addr)
                    assert place == (base + written) % DEPTH
                    assert ctx.get(dut.w_strb) == (1 << nb) - 1
                    ring[place // nb] = ctx.get(dut.w_data) & ((1 << 8 * nb) - 1)
                    assert ring[place // nb] == memory[pending.pop(0)]
                    written += nb
                else:
                    assert not ctx.get(dut.w_en)
                aborted |= aborting
                dones += ctx.get(dut.done)
                # the consumer: frees a beat at random, of those written
                if consumed < written and rng.random() < 0.5:
                    consumed += nb
                await ctx.tick()
                assert ctx.get(dut.loaded) == written
                assert ctx.get(dut.asked) == asked
                if not ctx.get(dut.busy):
                    break
            dones += ctx.get(dut.done)
            assert not pending
            assert dones == 1
            if abort_at is None:
                assert written == length
            else:
                assert 0 < written < length, "the abort came too late or too early to test it"

    simulate(dut, bench)
    assert shorts, "no command ended at the limit"
    assert lazy_cmds, "no command asked for while lazy"


def test_parameters_refused():
    with pytest.raises(ValueError, match="at least a beat"):
        WeightPrefetch(128, buffer_width=8)
    with pytest.raises(ValueError, match="chunk a power of two"):
        WeightPrefetch(64, chunk=100)
