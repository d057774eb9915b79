"""hw.loader in Amaranth's simulator: a copy's beats, given by a read port with random gaps, land at consecutive
buffer addresses from 0 with every byte strobed; the read command is the one asked for; done pulses once, after
the last write."""

import random

import pytest

from int8_systolic.hw.loader import Loader
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize(("data_width", "buffer_width"), [(64, 8), (32, 8), (128, 16)])
def test_beats_land_in_order(data_width, buffer_width):
    rng = random.Random(data_width)
    dut = Loader(data_width, buffer_width=buffer_width, addr_width=12)
    nbytes = data_width // 8
    copies = [(rng.randrange(0, 1 << 20) * nbytes, rng.randint(1, 40) * nbytes) for _ in range(3)]
    seen = {"cmds": [], "writes": [], "done": 0}

    async def bench(ctx):
        for addr, length in copies:
            beats = [rng.getrandbits(data_width) for _ in range(length // nbytes)]
            ctx.set(dut.addr, addr)
            ctx.set(dut.length, length)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            writes, done_at = [], None
            for t in range(2000):
                ctx.set(dut.rd_cmd.ready, rng.random() < 0.5)
                offer = bool(beats) and rng.random() < 0.7 and len(seen["cmds"]) == len(seen["writes"]) + 1
                ctx.set(dut.rd_data.valid, offer)
                if offer:
                    ctx.set(dut.rd_data.payload, {"data": beats[0], "last": len(beats) == 1})
                if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                    seen["cmds"].append(ctx.get(dut.rd_cmd.payload))
                if offer and ctx.get(dut.rd_data.ready):
                    beats.pop(0)
                if ctx.get(dut.w_en):
                    writes.append((ctx.get(dut.w_addr), ctx.get(dut.w_data), ctx.get(dut.w_strb)))
                if ctx.get(dut.done):
                    assert done_at is None
                    done_at = t
                await ctx.tick()
                if done_at is not None and t > done_at + 3:
                    break
            assert not beats
            assert done_at is not None
            assert not ctx.get(dut.busy)
            seen["writes"].append(writes)

    simulate(dut, bench)
    assert [(c["addr"], c["length"]) for c in seen["cmds"]] == copies
    for (_, length), writes in zip(copies, seen["writes"], strict=True):
        assert [w[0] for w in writes] == [n * nbytes for n in range(length // nbytes)]
        assert all(w[2] == (1 << nbytes) - 1 for w in writes)


def test_parameters_refused():
    with pytest.raises(ValueError, match="at least a beat"):
        Loader(128, buffer_width=8)
