"""hw.depthwise_gen in Amaranth's simulator, beside a banked ByteBuffer holding the input at the generator's pitch:
for random DEPTHWISE_CONV_2D layers (strides, dilations, SAME and VALID, batch, 1 to 40 channels, depth multipliers
1 to cols + 1, zero points at both ends, the input still loading) every array step equals the golden model's
patches (golden.staged.im2col, channel n reading input channel n // depth_multiplier); at stride 1 a step a cycle,
at stride 2 two, counted exactly."""

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring

from int8_systolic.golden import staged
from int8_systolic.host.windows import Geometry, depthwise_step_cycles
from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.hw.depthwise_gen import DepthwiseWindows, InputLayout, input_pitch, input_split
from int8_systolic.sim.amaranth_bench import simulate

DEPTH = 8192


class Bench(wiring.Component):
    def __init__(self, rows, cols, banks, bank_bytes):
        self.gen = DepthwiseWindows(rows, cols, banks=banks, bank_bytes=bank_bytes,
                                    addr_width=(DEPTH - 1).bit_length())
        self.buf = ByteBuffer(16, DEPTH, lanes=banks * bank_bytes, bank_bytes=bank_bytes, bank_port=True)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen, m.submodules.buf = self.gen, self.buf
        m.d.comb += [self.buf.g_en.eq(self.gen.g_en), self.buf.g_rows.eq(self.gen.g_rows),
                     self.gen.g_data.eq(self.buf.g_data)]
        return m


def run(g, x, mult, zero_point, rows, cols, banks, bank_bytes, rng, *, p_out=0.8, ramp=None, beat=8,
        max_cycles=80000, base=0):
    """Load ``x`` at the pitch (all before ``start``, or with ``ramp`` a 16-byte chunk every ``ramp`` cycles after
    it, the buffer garbage until then), run the layer; the steps as [rows][cols] int8 arrays and the cycle of each."""
    bench = Bench(rows, cols, banks, bank_bytes)
    gen, buf = bench.gen, bench.buf
    pitch = input_pitch(g.in_c, bank_bytes, beat)
    layout = InputLayout(g.in_h, g.in_w, pitch, *input_split(g.in_c, g.stride_h, g.stride_w, beat))
    pixels = np.asarray(x, np.int8).reshape(-1, g.in_c).view(np.uint8)
    places = [layout.address(b, y, xx) for b in range(g.batch) for y in range(g.in_h) for xx in range(g.in_w)]
    total = len(pixels) * pitch
    out_c = g.in_c * mult
    n_tiles = -(-out_c // cols)
    expect = -(-g.pixels // rows) * n_tiles * g.kernel_h * g.kernel_w
    out = {"steps": [], "when": [], "setup": gen.SETUP}

    # the input's 16-byte chunks at their places from base (hw.depthwise_gen.InputLayout), and what avail is once
    # each is written (the pixels' bytes in NHWC order at the pitch: a pixel's last chunk completes its pitch)
    chunks = [(places[p] + a, px[a:a + 16], (p + 1) * pitch if a + 16 >= px.size else p * pitch + a + 16)
              for p, px in enumerate(pixels) for a in range(0, px.size, 16)]

    def drive(ctx, offset, chunk):
        """Present a write of ``chunk`` at ``offset`` from base (taken at the next tick)."""
        ctx.set(buf.w_en, 1)
        ctx.set(buf.w_addr, (base + offset) % DEPTH)
        ctx.set(buf.w_data, int.from_bytes(chunk.tobytes(), "little"))
        ctx.set(buf.w_strb, (1 << chunk.size) - 1)

    async def write(ctx, offset, chunk):
        drive(ctx, offset, chunk)
        await ctx.tick()
        ctx.set(buf.w_en, 0)

    async def testbench(ctx):
        if ramp is None:
            for offset, chunk, _ in chunks:
                await write(ctx, offset, chunk)
        else:
            # streamed: the buffer holds garbage until a chunk is written, so a read before avail says the bytes are
            # in takes garbage and fails the comparison
            garbage = np.random.default_rng(len(chunks)).integers(0, 256, DEPTH, np.uint8)
            for a in range(0, DEPTH, 16):
                await write(ctx, a - base, garbage[a:a + 16])
        ctx.set(gen.geometry, {**{f: getattr(g, f) for f in (
            "batch", "in_h", "in_w", "out_h", "out_w", "kernel_h", "kernel_w", "stride_h", "stride_w",
            "dilation_h", "dilation_w", "pad_top", "pad_left")}, "depth_multiplier": mult,
            "n_tiles": n_tiles, "zero_point": zero_point, "pitch": pitch, "split_h": layout.split_h,
            "split_w": layout.split_w})
        ctx.set(gen.base, base)
        ctx.set(gen.avail, total if ramp is None else 0)
        ctx.set(gen.start, 1)
        await ctx.tick()
        ctx.set(gen.start, 0)
        written, avail = 0, 0
        for t in range(max_cycles):
            if ramp is not None:
                # a chunk every `ramp` cycles; avail counts it from the cycle after its write
                ctx.set(gen.avail, avail)
                ctx.set(buf.w_en, 0)
                if written < len(chunks) and t % ramp == 0:
                    offset, chunk, avail_after = chunks[written]
                    drive(ctx, offset, chunk)
                    written += 1
                    avail = avail_after
            ready = rng.random() < p_out
            ctx.set(gen.o.ready, ready)
            if ready and ctx.get(gen.o.valid):
                raw = np.frombuffer(ctx.get(gen.o.payload).to_bytes(rows * cols, "little"), np.int8)
                out["steps"].append(raw.reshape(cols, rows).T)      # element j * rows + i is cell (i, j)'s
                out["when"].append(t)
            await ctx.tick()
            if len(out["steps"]) == expect:
                for _ in range(8):
                    ctx.set(gen.o.ready, 1)
                    assert not ctx.get(gen.o.valid), "a step past the layer's last"
                    await ctx.tick()
                assert not ctx.get(gen.busy)
                return
        raise AssertionError(f"{len(out['steps'])} of {expect} steps after {max_cycles} cycles")

    simulate(bench, testbench)
    return out


def check_steps(got, g, x, mult, zero_point, rows, cols, padding):
    patches = staged.im2col(np.asarray(x, np.int8), (g.kernel_h, g.kernel_w), (g.stride_h, g.stride_w),
                            (g.dilation_h, g.dilation_w), padding, zero_point)
    patches = patches.reshape(g.pixels, g.kernel_h * g.kernel_w, g.in_c)
    out_c = g.in_c * mult
    n_tiles = -(-out_c // cols)
    taps = g.kernel_h * g.kernel_w
    n = 0
    for mt in range(-(-g.pixels // rows)):
        for nt in range(n_tiles):
            for k in range(taps):
                step = got[n]
                for i in range(rows):
                    p = mt * rows + i
                    for j in range(cols):
                        c = nt * cols + j
                        if c >= out_c:
                            continue          # a lane past the last channel: its weight is 0
                        want = zero_point if p >= g.pixels else patches[p, k, c // mult]
                        assert step[i, j] == want, (f"{g}, multiplier {mult}: step {n} (tile {mt}, column tile {nt}, "
                                                    f"tap {k}) cell ({i}, {j}): got {step[i, j]}, want {want}")
                n += 1
    assert n == len(got)


def random_layer(rng, seed):
    b, h, w = rng.choice([1, 1, 2]), rng.randint(1, 9), rng.randint(1, 9)
    c = rng.choice([1, 3, 8, 16, 17, 24, 32, 40])
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    stride, dilation = (rng.randint(1, 3), rng.randint(1, 3)), (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
    padding = rng.choice(["SAME", "VALID"])
    if padding == "VALID" and ((kh - 1) * dilation[0] + 1 > h or (kw - 1) * dilation[1] + 1 > w):
        padding = "SAME"
    x = np.random.default_rng(seed).integers(-128, 128, (b, h, w, c)).astype(np.int8)
    return Geometry.of(x.shape, (kh, kw), stride, dilation, padding), x, padding


@pytest.mark.parametrize("seed", range(12))
def test_steps_equal_the_golden_patches(seed):
    rng = random.Random(seed)
    rows, cols, banks, bank_bytes = rng.choice([(8, 8, 8, 8), (4, 4, 8, 4), (3, 5, 4, 8), (8, 8, 8, 8)])
    g, x, padding = random_layer(rng, seed)
    mult = rng.choice([1, 1, 2, 3, cols, cols + 1]) if g.in_c < 24 else 1
    zero_point = rng.choice([-128, 127, rng.randint(-128, 127)])
    out = run(g, x, mult, zero_point, rows, cols, banks, bank_bytes, rng, ramp=rng.choice([None, 1, 3]),
              base=rng.choice([0, rng.randrange(DEPTH)]))
    check_steps(out["steps"], g, x, mult, zero_point, rows, cols, padding)


@pytest.mark.parametrize(("shape", "stride", "padding", "mult", "per_step"), [
    ((1, 7, 9, 16), (1, 1), "SAME", 1, 1), ((1, 6, 11, 64), (1, 1), "SAME", 1, 1),
    ((2, 5, 5, 24), (1, 1), "SAME", 1, 1), ((1, 8, 16, 32), (2, 2), "SAME", 1, 1),
    ((1, 5, 7, 48), (2, 2), "SAME", 1, 1), ((2, 5, 7, 48), (2, 2), "SAME", 1, None),
    ((1, 7, 6, 16), (2, 1), "SAME", 1, 1),
    ((1, 6, 9, 8), (1, 2), "SAME", 1, 1), ((1, 8, 16, 20), (2, 2), "SAME", 1, 2),
    ((1, 9, 9, 16), (1, 1), "VALID", 1, None), ((1, 9, 13, 16), (2, 2), "VALID", 1, None),
    ((1, 5, 6, 5), (2, 1), "SAME", 3, None)])
def test_cycles(shape, stride, padding, mult, per_step):
    """At full rate each step takes exactly the cycles host.windows.depthwise_step_cycles gives. SAME 3x3 at stride
    1: a row tile's pixels are consecutive input pixels at every tap, a step a cycle. At stride 2 with whole-word
    pixels the input is split by parity (hw.depthwise_gen.InputLayout), odd sizes included: a step a cycle again
    (but where a tile spans two images, or, as at stride 1, two rows of a VALID layer). Without the split (20
    channels, not whole 8-byte words) the pixels fall in half the banks, up to two cycles a step. The first step's
    cycle is counted exactly."""
    rows = cols = banks = bank_bytes = 8
    rng = random.Random(1)
    x = np.random.default_rng(2).integers(-128, 128, shape).astype(np.int8)
    g = Geometry.of(shape, (3, 3), stride, (1, 1), padding)
    out = run(g, x, mult, -3, rows, cols, banks, bank_bytes, rng, p_out=1.0)
    check_steps(out["steps"], g, x, mult, -3, rows, cols, padding)
    pitch = input_pitch(shape[3], bank_bytes, 8)
    want = depthwise_step_cycles(g, mult, rows, cols, banks, bank_bytes,
                                 InputLayout(g.in_h, g.in_w, pitch, *input_split(g.in_c, *stride, 8)))
    assert np.diff(out["when"]).tolist() == want[1:]
    # `when` counts from the cycle after start's; the first step takes its own cycles too
    assert out["when"][0] == out["setup"] + rows + 2 + DepthwiseWindows.LATENCY - 1 + want[0] - 1
    if per_step == 1:
        assert set(want) == {1}
    elif per_step:
        assert max(want) == per_step
        assert sum(want) > 1.3 * len(want)



@pytest.mark.parametrize("mult", [3, 5])
def test_one_tap_layers_advance_the_lanes_channels_every_step(mult):
    """A 1x1 DEPTHWISE_CONV_2D with a depth multiplier: every step ends a column tile, so the lanes' input channels
    (quotient, remainder and carry) advance in consecutive cycles, and wrap at every row tile."""
    rng = random.Random(mult)
    x = np.random.default_rng(mult).integers(-128, 128, (1, 4, 5, 7)).astype(np.int8)
    g = Geometry.of(x.shape, (1, 1), (1, 1), (1, 1), "VALID")
    out = run(g, x, mult, -7, 8, 8, 8, 8, rng, p_out=1.0)
    check_steps(out["steps"], g, x, mult, -7, 8, 8, "VALID")

def test_a_slow_consumer_fills_the_output_queue_and_loses_no_step():
    """o ready a cycle in four on a layer of one-cycle steps: the serve stage stops at the output queue's last free
    place (its credit), so every step arrives, in order."""
    rng = random.Random(3)
    x = np.random.default_rng(4).integers(-128, 128, (1, 6, 11, 16)).astype(np.int8)
    g = Geometry.of(x.shape, (3, 3), (1, 1), (1, 1), "SAME")
    out = run(g, x, 1, 5, 8, 8, 8, 8, rng, p_out=0.25)
    check_steps(out["steps"], g, x, 1, 5, 8, 8, "SAME")


def test_pitch():
    assert [input_pitch(c, 8, 8) for c in (64, 24, 17, 16)] == [72, 24, 17, 24]
    assert [input_pitch(c, 4, 16) for c in (16, 8)] == [20, 8]       # a beat never straddles two pixels


def test_parameters_refused():
    with pytest.raises(ValueError, match="rows <= banks"):
        DepthwiseWindows(8, 8, banks=4, bank_bytes=8)
    with pytest.raises(ValueError, match="cols <= bank_bytes"):
        DepthwiseWindows(4, 8, banks=8, bank_bytes=4)
