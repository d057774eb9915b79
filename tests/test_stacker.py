"""hw.stacker in Amaranth's simulator: a CONV_2D's input, given as the loader's beats with random gaps, lands in
the buffer row-stacked exactly as host.windows.stack_input says, each stacked byte written once and nothing outside
the stacked input; a write held (the port taken) stays until taken; ``filled`` never passes a byte not yet written;
with a beat always offered and never held it takes host.windows.stack_cycles cycles (+ its latency): a write a
cycle of as many pixels as fit (host.windows.stack_group)."""

import random

import numpy as np
import pytest

from int8_systolic.host.windows import Geometry, stack_cycles, stack_group, stack_input
from int8_systolic.hw.stacker import Stacker
from int8_systolic.sim.amaranth_bench import simulate

ADDR_BITS = 14


def _random_layer(rng, beat=4):
    while True:
        c = rng.choice([1, 1, 2, 3, 4, beat])
        kh, kw = rng.randint(1, 10), rng.randint(1, 4)
        shape = (rng.choice([1, 1, 2]), rng.randint(1, 14), rng.randint(1, 6), c)
        stride = (rng.choice([1, 2, 2, 3, 5, 12]), rng.randint(1, 2))
        padding = rng.choice(["SAME", "VALID"])
        if padding == "VALID" and (kh > shape[1] or kw > shape[2]):
            continue
        g = Geometry.of(shape, (kh, kw), stride, (1, 1), padding)
        if g.batch * g.out_h * g.in_w * kh * c <= 1 << (ADDR_BITS - 1):
            return g


def _run(g, data_width, *, seed, gaps, p_offer=0.6):
    rng = random.Random(seed)
    nb = data_width // 8
    zp = rng.randint(-128, 127)
    x = np.random.default_rng(seed).integers(-128, 128, (g.batch, g.in_h, g.in_w, g.in_c)).astype(np.int8)
    raw = x.tobytes() + rng.randbytes(-x.nbytes % nb)      # the last beat's bytes past the input: anything
    beats = [int.from_bytes(raw[i:i + nb], "little") for i in range(0, len(raw), nb)]
    base = rng.randrange(1 << ADDR_BITS)
    total = g.batch * g.out_h * g.in_w * g.kernel_h * g.in_c
    dut = Stacker(data_width, buffer_width=16, addr_width=ADDR_BITS)
    result = {}

    async def bench(ctx):
        geometry = {"batch": g.batch, "in_h": g.in_h, "in_w": g.in_w, "in_c": g.in_c, "out_h": g.out_h,
                    "kernel_h": g.kernel_h, "stride_h": g.stride_h, "pad_top": g.pad_top, "zero_point": zp}
        for name, value in geometry.items():
            ctx.set(dut.geometry[name], value)
        ctx.set(dut.khc, g.kernel_h * g.in_c)
        ctx.set(dut.shc, g.stride_h * g.in_c)
        ctx.set(dut.row_bytes, g.in_w * g.kernel_h * g.in_c)
        ctx.set(dut.base, base)
        if not gaps:       # (at full rate the FIFO holds beats from before the start)
            for _ in range(3):
                ctx.set(dut.i_valid, bool(beats))
                if beats:
                    ctx.set(dut.i_data, beats[0])
                    beats.pop(0)
                await ctx.tick()
        written, last_filled, done_at, held, writes_seen = {}, 0, None, None, []
        for t in range(int(20 / p_offer) * stack_cycles(g, 16, nb) + 200):
            ctx.set(dut.start, t == 0)
            offer = bool(beats) and (not gaps or rng.random() < p_offer)
            ctx.set(dut.i_valid, offer)
            if offer:
                ctx.set(dut.i_data, beats[0])
            filled = ctx.get(dut.filled)
            assert last_filled <= filled <= total
            assert 0 <= ctx.get(dut.room) <= 512
            # every byte below `filled` was written in an earlier cycle
            assert all((base + a) % (1 << ADDR_BITS) in written for a in range(last_filled, filled))
            last_filled = filled
            hold = gaps and rng.random() < 0.2
            ctx.set(dut.hold, hold)
            write = (ctx.get(dut.w_addr), ctx.get(dut.w_data), ctx.get(dut.w_strb))
            if ctx.get(dut.w_en) and hold:
                held = write
            elif ctx.get(dut.w_en):
                if held is not None:
                    assert write == held, "a held write changed"
                held = None
                w_addr, w_data, w_strb = write
                assert w_strb, "a write of no byte"
                assert done_at is None, "a write after done"
                assert not ctx.get(dut.done), "a write in the cycle of done"
                for lane in range(16):
                    if w_strb >> lane & 1:
                        a = (w_addr + lane) % (1 << ADDR_BITS)
                        assert (a - base) % (1 << ADDR_BITS) < total, f"a write outside the stacked input at {a:#x}"
                        assert a not in written, f"byte {a:#x} written twice"
                        written[a] = w_data >> 8 * lane & 0xFF
                writes_seen.append(bin(w_strb).count("1"))
            if offer and ctx.get(dut.i_ready):
                beats.pop(0)
            if ctx.get(dut.done):
                assert done_at is None
                done_at = t
            await ctx.tick()
            if done_at is not None and t > done_at + 3:
                break
        assert done_at is not None, "the stacker never ended"
        assert not beats, f"{len(beats)} beats not taken"
        assert not ctx.get(dut.busy)
        assert ctx.get(dut.filled) == total
        result.update(written=written, done_at=done_at, writes=writes_seen)

    simulate(dut, bench)
    want = stack_input(x, g, zp).reshape(-1).view(np.uint8)
    got = np.array([result["written"].get((base + a) % (1 << ADDR_BITS), -1) for a in range(total)])
    assert len(result["written"]) == total
    np.testing.assert_array_equal(got, want)
    return result["done_at"], result["writes"]


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_random_layers_stack_exactly(data_width):
    """Random layers of up to a bus word of channels; writes of several pixels where they fit; beats given at
    random, on alternate layers seldom (the stacker then waits for the beat a group ends in)."""
    rng = random.Random(data_width)
    sizes = []
    for n in range(8):
        sizes += _run(_random_layer(rng, data_width // 8), data_width, seed=data_width * 100 + n, gaps=True,
                      p_offer=(0.6, 0.05)[n % 2])[1]
    assert max(sizes) > 1


@pytest.mark.parametrize(("g", "group"), [
    (Geometry.of((1, 49, 10, 1), (10, 4), (2, 2), (1, 1), "SAME"), 2),       # DS-CNN's first layer
    (Geometry.of((1, 59, 49, 1), (3, 3), (2, 2), (1, 1), "SAME"), 6),        # KWS MobileNetV2's first layer
    (Geometry.of((2, 7, 3, 3), (3, 3), (1, 1), (1, 1), "SAME"), 2),
    (Geometry.of((1, 9, 2, 2), (2, 1), (5, 1), (1, 1), "VALID"), 4),         # stride above the kernel: rows skipped
    (Geometry.of((1, 1, 5, 1), (1, 3), (1, 1), (1, 1), "VALID"), 8),
    (Geometry.of((1, 4, 7, 8), (1, 1), (1, 1), (1, 1), "VALID"), 1),         # a pixel of a whole bus word
], ids=["ds_cnn", "kws", "batch2", "skip", "one_row", "word"])
def test_cycles_at_full_rate(g, group):
    """The FIFO never empty: a write a cycle of a group of pixels (as many as fit, `group` here) for each stacked
    row it goes to, the formula exactly."""
    assert stack_group(g, 16, 8) == group
    assert _run(g, 64, seed=1, gaps=False)[0] == stack_cycles(g, 16, 8) + 16 + 3    # (Stacker.latency)
