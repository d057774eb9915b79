"""hw.result_packer alone in Amaranth's simulator: result rows in the core's tile order (padding rows and lanes
holding garbage) become the packed NHWC int8 tensor, drained as write beats whose bytes (strobes honoured) are
exactly the tensor, under random valid and ready; the first row tiles' beats leave before the last rows come."""

import random

import numpy as np
import pytest

from int8_systolic.hw.result_packer import ResultPacker
from int8_systolic.sim.amaranth_bench import simulate


def tile_rows(out, rows, cols, rng):
    """The core's result rows for output [M, N]: row tile outer, column tile inner; padding is garbage."""
    m, n = out.shape
    for mt in range(-(-m // rows)):
        for nt in range(-(-n // cols)):
            for i in range(rows):
                row = []
                for j in range(cols):
                    p, c = mt * rows + i, nt * cols + j
                    row.append(int(out[p, c]) if p < m and c < n else rng.randint(-128, 127))
                yield row


async def start(ctx, dut, m, n):
    """A layer of ``m`` pixels and ``n`` channels started."""
    ctx.set(dut.pixels, m)
    ctx.set(dut.channels, n)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)


@pytest.mark.parametrize(("rows", "cols", "data_width", "m", "n"), [
    (8, 8, 64, 13, 21), (4, 8, 32, 9, 8), (8, 8, 128, 1, 10), (3, 5, 64, 7, 11), (8, 8, 64, 16, 64)])
def test_rows_become_the_packed_tensor(rows, cols, data_width, m, n):
    rng = random.Random(m * n)
    out = np.random.default_rng(m * n).integers(-128, 128, (m, n)).astype(np.int8)
    dut = ResultPacker(rows, cols, data_width=data_width, depth=4096)
    feed = list(tile_rows(out, rows, cols, rng))
    nbytes = data_width // 8
    got = bytearray()
    strobes = []
    first_beat = {}

    async def bench(ctx):
        await start(ctx, dut, m, n)
        rows_left = list(feed)
        for _ in range(4000):
            offer = bool(rows_left) and rng.random() < 0.8
            ctx.set(dut.res.valid, offer)
            if offer:
                ctx.set(dut.res.payload, [v & 0xFFFFFFFF for v in rows_left[0]])
                assert ctx.get(dut.res.ready)        # ready for every row of the layer, then not
                rows_left.pop(0)
            ready = rng.random() < 0.6
            ctx.set(dut.beats.ready, ready)
            if ready and ctx.get(dut.beats.valid):
                first_beat.setdefault("rows_left", len(rows_left))
                b = ctx.get(dut.beats.payload)
                strobes.append(b["strb"])
                data = b["data"].to_bytes(nbytes, "little")
                got.extend(data[k] for k in range(nbytes) if b["strb"] >> k & 1)
            await ctx.tick()
            if not rows_left and len(got) == m * n:
                for _ in range(5):
                    await ctx.tick()
                assert not ctx.get(dut.busy)
                assert not ctx.get(dut.beats.valid)
                assert not ctx.get(dut.res.ready)     # the next layer's rows wait for its start
                return
        raise AssertionError("the output did not drain")

    simulate(dut, bench)
    assert bytes(got) == out.tobytes()
    if -(-m // rows) > 2:       # several row tiles: the first ones leave while later rows come
        assert first_beat["rows_left"] > 0
    assert all(s == (1 << nbytes) - 1 for s in strobes[:-1])
    assert len(strobes) == -(-m * n // nbytes)


def test_parameters_refused():
    with pytest.raises(ValueError, match="cols must be <= 32"):
        ResultPacker(8, 40)


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_a_dense_output_drains_a_beat_every_cycle(data_width):
    """A layer of K = 8 on 8x8 gives a result row (8 bytes) every cycle. Once its first row tile is out, its beats
    leave one a cycle with nothing in between (the drain's queue covers the buffer's read latency and the credit's
    return), so the packer keeps up with the core; it once drained five beats in six cycles, and the core waited
    for it."""
    rows, cols, m, n = 8, 8, 64, 16
    out = np.random.default_rng(7).integers(-128, 128, (m, n)).astype(np.int8)
    dut = ResultPacker(rows, cols, data_width=data_width, depth=4096)
    feed = list(tile_rows(out, rows, cols, random.Random(7)))
    nbytes = data_width // 8
    beat_cycles, got = [], bytearray()

    async def bench(ctx):
        await start(ctx, dut, m, n)
        ctx.set(dut.beats.ready, 1)
        for t in range(2000):
            ctx.set(dut.res.valid, bool(feed))
            if feed:
                ctx.set(dut.res.payload, [v & 0xFFFFFFFF for v in feed.pop(0)])
            if ctx.get(dut.beats.valid):
                beat_cycles.append(t)
                got.extend(ctx.get(dut.beats.payload)["data"].to_bytes(nbytes, "little"))
            await ctx.tick()
            if not ctx.get(dut.busy):
                return
        raise AssertionError("the output did not drain")

    simulate(dut, bench)
    assert bytes(got) == out.tobytes()
    beats = m * n // nbytes
    assert len(beat_cycles) == beats
    if nbytes <= cols:          # (a wider bus drains a row tile in fewer cycles than its rows take to come)
        assert beat_cycles[-1] - beat_cycles[0] == beats - 1
