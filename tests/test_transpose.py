"""hw.transpose alone in Amaranth's simulator: random blocks (random step counts) through random valid and
ready, every output word compared with the transposed block; at full rate a step leaves every cycle."""

import random

import pytest

from int8_systolic.hw.transpose import Transpose
from int8_systolic.sim.amaranth_bench import simulate


def run(dut, blocks, rng, p_in, p_out, cycles=4000):
    """``blocks``: (vectors, steps). Returns the output words and the cycle of each."""
    out, when = [], []
    vectors = [(v, steps if i == len(vs) - 1 else 0) for vs, steps in blocks for i, v in enumerate(vs)]

    async def bench(ctx):
        feed = list(vectors)
        for t in range(cycles):
            offer = bool(feed) and rng.random() < p_in
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload, {"data": int.from_bytes(feed[0][0], "little"), "steps": feed[0][1]})
            ready = rng.random() < p_out
            ctx.set(dut.o.ready, ready)
            if offer and ctx.get(dut.i.ready):
                feed.pop(0)
            if ready and ctx.get(dut.o.valid):
                out.append(ctx.get(dut.o.payload).to_bytes(dut.rows, "little"))
                when.append(t)
            await ctx.tick()

    simulate(dut, bench)
    return out, when


def expected(blocks, width):
    return [bytes(v[k] for v in vs) for vs, steps in blocks for k in range(steps)]


@pytest.mark.parametrize(("rows", "width"), [(8, 8), (4, 8), (3, 4), (16, 16)])
def test_random_blocks_come_out_transposed(rows, width):
    rng = random.Random(rows * width)
    dut = Transpose(rows, width)
    blocks = [([rng.randbytes(width) for _ in range(rows)], rng.choice([width, width, 1, 0, rng.randint(1, width)]))
              for _ in range(30)]
    out, _ = run(dut, blocks, rng, 0.7, 0.7)
    assert out == expected(blocks, width)


def test_full_rate_one_step_a_cycle():
    rng = random.Random(1)
    dut = Transpose(8, 8)
    blocks = [([rng.randbytes(8) for _ in range(8)], 8) for _ in range(20)]
    out, when = run(dut, blocks, rng, 1.0, 1.0, cycles=200)
    assert out == expected(blocks, 8)
    # the first step the cycle after the first block's last vector; then one every cycle
    assert when[0] == 8
    assert when == list(range(8, 8 + len(out)))


def test_parameters_refused():
    with pytest.raises(ValueError, match="rows must be an integer >= 1 and width 4, 8, 16 or 32"):
        Transpose(0, 8)
