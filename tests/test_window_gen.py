"""hw.window_gen in Amaranth's simulator, beside a ByteBuffer holding the input: for random CONV_2D layers of every
geometry (strides, dilations, SAME and VALID, batch, 1 to 17 channels, zero points at both ends, several column
tiles) every array step it produces equals the golden model's im2col matrix (host.windows.steps, itself checked
against golden in tests/test_windows.py), every buffer read is the one host.windows.blocks lists, in order, and at
full rate a layer whose runs are whole reads takes exactly SETUP + pipeline + one cycle a step."""

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring

from int8_systolic.host.windows import Geometry, blocks, steps, stored
from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.hw.window_gen import WindowGenerator
from int8_systolic.sim.amaranth_bench import simulate

DEPTH = 4096


class Bench(wiring.Component):
    """The generator reading a ByteBuffer; the buffer's write port is the test's, to load the input."""

    def __init__(self, rows, width):
        self.gen = WindowGenerator(rows, width, addr_width=(DEPTH - 1).bit_length())
        self.buf = ByteBuffer(width, DEPTH)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen, m.submodules.buf = self.gen, self.buf
        m.d.comb += [self.buf.r_en.eq(self.gen.r_en), self.buf.r_addr.eq(self.gen.r_addr),
                     self.gen.r_data.eq(self.buf.r_data)]
        return m


def run(g, x, zero_point, n_tiles, rows, width, rng, p_out=0.8, max_cycles=60000, ramp=None, pitch=None, base=0):
    """Load ``x`` into the buffer, run the layer; returns (steps out, reads issued, cycles from start to the
    last step, the cycle of each step). With ``ramp``, ``avail`` says only ``ramp`` bytes more of the input are
    in each cycle (as while the loader runs); each read's ``avail`` when it was issued goes in ``read_avail``."""
    bench = Bench(rows, width)
    gen, buf = bench.gen, bench.buf
    flat = stored(x, pitch).view(np.uint8)
    m_tiles = -(-g.pixels // rows)
    expect = m_tiles * n_tiles * g.k
    out = {"steps": [], "reads": [], "when": [], "read_avail": []}

    async def testbench(ctx):
        for a in range(0, flat.size, width):
            chunk = flat[a:a + width]
            ctx.set(buf.w_en, 1)
            ctx.set(buf.w_addr, (base + a) % DEPTH)
            ctx.set(buf.w_data, int.from_bytes(chunk.tobytes(), "little"))
            ctx.set(buf.w_strb, (1 << chunk.size) - 1)
            await ctx.tick()
        ctx.set(buf.w_en, 0)
        ctx.set(gen.geometry, {**{f: getattr(g, f) for f in (
            "batch", "in_h", "in_w", "in_c", "out_h", "out_w", "kernel_h", "kernel_w", "stride_h", "stride_w",
            "dilation_h", "dilation_w", "pad_top", "pad_left")}, "n_tiles": n_tiles, "zero_point": zero_point,
            "pitch": g.in_c if pitch is None else pitch})
        ctx.set(gen.base, base)
        ctx.set(gen.total, flat.size)
        ctx.set(gen.avail, flat.size if ramp is None else 0)
        ctx.set(gen.start, 1)
        await ctx.tick()
        ctx.set(gen.start, 0)
        avail_before = 0
        for t in range(max_cycles):
            avail = flat.size if ramp is None else min(flat.size, ramp * t)
            ctx.set(gen.avail, avail)
            ready = rng.random() < p_out
            ctx.set(gen.o.ready, ready)
            if ctx.get(gen.r_en):            # (issued in the cycle before)
                out["reads"].append(ctx.get(gen.r_addr))
                out["read_avail"].append(avail_before)
            avail_before = avail
            if ready and ctx.get(gen.o.valid):
                out["steps"].append(ctx.get(gen.o.payload).to_bytes(rows, "little"))
                out["when"].append(t)
            await ctx.tick()
            if len(out["steps"]) == expect:
                for _ in range(8):        # nothing more comes, and the generator goes idle
                    ctx.set(gen.o.ready, 1)
                    assert not ctx.get(gen.o.valid), "a step past the layer's last"
                    await ctx.tick()
                assert not ctx.get(gen.busy)
                out["cycles"] = t + 1
                return
        raise AssertionError(f"{len(out['steps'])} of {expect} steps after {max_cycles} cycles")

    simulate(bench, testbench)
    return out


def expected_steps(g, x, zero_point, n_tiles, rows, width, pitch=None):
    tiles = steps(g, x, zero_point, rows, width, pitch)        # [m_tiles, K, rows]
    return [tiles[mt, k].tobytes() for mt in range(tiles.shape[0]) for _ in range(n_tiles) for k in range(g.k)]


def expected_reads(g, n_tiles, rows, width, pitch=None, base=0):
    """Each read's buffer address, None for a pixel past the layer's last (every byte masked: any address)."""
    bl = blocks(g, rows, width, pitch)
    m_tiles = -(-g.pixels // rows)
    per = len(bl) // m_tiles
    out = []
    for mt in range(m_tiles):
        for _ in range(n_tiles):
            for reads, _ in bl[mt * per:(mt + 1) * per]:
                out += [None if rd.pad == (1 << width) - 1 and rd.addr == 0 else (rd.addr + base) % DEPTH
                        for rd in reads]
    return out


def same_reads(got, want):
    return len(got) == len(want) and all(w is None or g == w for g, w in zip(got, want, strict=True))


def random_layer(rng, seed):
    b, h, w, c = rng.choice([1, 1, 2]), rng.randint(1, 9), rng.randint(1, 9), rng.choice([1, 2, 3, 8, 9, 16, 17])
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    stride, dilation = (rng.randint(1, 3), rng.randint(1, 3)), (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
    padding = rng.choice(["SAME", "VALID"])
    if padding == "VALID" and ((kh - 1) * dilation[0] + 1 > h or (kw - 1) * dilation[1] + 1 > w):
        padding = "SAME"
    x = np.random.default_rng(seed).integers(-128, 128, (b, h, w, c)).astype(np.int8)
    return Geometry.of(x.shape, (kh, kw), stride, dilation, padding), x


@pytest.mark.parametrize("seed", range(12))
def test_steps_and_reads_equal_the_reference(seed):
    rng = random.Random(seed)
    rows, width = rng.choice([(8, 8), (4, 8), (8, 4), (3, 16)])
    g, x = random_layer(rng, seed)
    zero_point = rng.choice([-128, 127, rng.randint(-128, 127)])
    n_tiles = rng.choice([1, 1, 2, 3])
    # the input at a pitch of one bank more (as the engine stores 16, 32, ... channels) and at any base
    pitch = g.in_c + rng.choice([0, 0, 8])
    base = rng.choice([0, rng.randrange(DEPTH)])
    out = run(g, x, zero_point, n_tiles, rows, width, rng, pitch=pitch, base=base)
    assert out["steps"] == expected_steps(g, x, zero_point, n_tiles, rows, width, pitch), str(g)
    assert same_reads(out["reads"], expected_reads(g, n_tiles, rows, width, pitch, base)), str(g)


@pytest.mark.parametrize(("shape", "filter_hw", "stride", "dilation", "padding"), [
    ((1, 5, 7, 2), (3, 3), (1, 1), (2, 2), "SAME"),     # padding of 2: a run wholly left of the input
    ((2, 6, 6, 3), (3, 3), (2, 2), (1, 1), "SAME"),     # ResNet-8's first layer, stride 2, two images
    ((1, 4, 4, 1), (5, 5), (1, 1), (1, 1), "SAME"),     # a filter larger than the input
    ((1, 9, 3, 5), (3, 1), (3, 1), (3, 1), "VALID"),
])
def test_edge_geometries(shape, filter_hw, stride, dilation, padding):
    rng = random.Random(7)
    g = Geometry.of(shape, filter_hw, stride, dilation, padding)
    x = np.random.default_rng(7).integers(-128, 128, shape).astype(np.int8)
    out = run(g, x, 127, 1, 8, 8, rng)
    assert out["steps"] == expected_steps(g, x, 127, 1, 8, 8), str(g)
    assert same_reads(out["reads"], expected_reads(g, 1, 8, 8)), str(g)


@pytest.mark.parametrize("seed", range(3))
def test_reads_wait_for_their_bytes_while_the_input_loads(seed):
    """With the input arriving a few bytes a cycle, no read of a real byte is issued before that byte is in, and
    the steps are unchanged."""
    rng = random.Random(100 + seed)
    g, x = random_layer(rng, 100 + seed)
    out = run(g, x, 5, 2, 8, 8, rng, ramp=rng.choice([1, 3, 8]))
    assert out["steps"] == expected_steps(g, x, 5, 2, 8, 8), str(g)
    flat_reads = [rd for reads, _ in blocks(g, 8, 8) for rd in reads]
    m_tiles = -(-g.pixels // 8)
    per = len(flat_reads) // m_tiles
    ref = [rd for mt in range(m_tiles) for _ in range(2) for rd in flat_reads[mt * per:(mt + 1) * per]]
    size = x.size
    assert len(ref) == len(out["read_avail"])
    for rd, avail in zip(ref, out["read_avail"], strict=True):
        real = [rd.addr + j for j in range(8) if not rd.pad >> j & 1]
        if real and avail < size:
            assert max(real) < avail, (rd, avail)


def test_reads_issue_as_their_bytes_arrive():
    """Nor is a read held until the whole input is in: a 1x1 layer whose 12x12x8 input arrives a byte a cycle (1 152
    cycles, against 288 steps) issues most of its reads while the rest loads."""
    rng = random.Random(7)
    x = np.random.default_rng(7).integers(-128, 128, (1, 12, 12, 8)).astype(np.int8)
    g = Geometry.of(x.shape, (1, 1), (1, 1), (1, 1), "VALID")
    out = run(g, x, 5, 2, 8, 8, rng, ramp=1)
    assert out["steps"] == expected_steps(g, x, 5, 2, 8, 8)
    early = sum(avail < x.size for avail in out["read_avail"])
    assert early > len(out["read_avail"]) // 2, (early, len(out["read_avail"]))


def test_fully_connected_is_a_one_by_one_convolution():
    """[batch, K] as [batch, 1, 1, K]: each row tile's K steps are its rows' inputs, in order."""
    rng = random.Random(5)
    g = Geometry(batch=11, in_h=1, in_w=1, in_c=40, out_h=1, out_w=1, kernel_h=1, kernel_w=1)
    x = np.random.default_rng(5).integers(-128, 128, (11, 1, 1, 40)).astype(np.int8)
    out = run(g, x, -3, 2, 8, 8, rng)
    a = np.full((16, 40), -3, np.int8)
    a[:11] = x.reshape(11, 40)
    want = [a[mt * 8:mt * 8 + 8, k].tobytes() for mt in range(2) for _ in range(2) for k in range(40)]
    assert out["steps"] == want


def test_full_rate_one_step_a_cycle():
    """Runs of whole reads (3x3 over 16 channels: 48 bytes a run) feed a step every cycle after the setup and the
    pipeline: the last step comes exactly SETUP + latency + steps - 1 cycles after start."""
    rng = random.Random(2)
    g = Geometry.of((1, 6, 6, 16), (3, 3), (1, 1), (1, 1), "SAME")
    x = np.random.default_rng(2).integers(-128, 128, (1, 6, 6, 16)).astype(np.int8)
    out = run(g, x, 7, 2, 8, 8, rng, p_out=1.0)
    n = len(out["steps"])
    assert out["steps"] == expected_steps(g, x, 7, 2, 8, 8)
    # the first step: SETUP cycles, the first block's 8 reads, then the pipeline to the transpose's output
    # (SETUP + rows + LATENCY cycles after the cycle of start; `when` counts from the cycle after it)
    first = WindowGenerator.SETUP + 8 + WindowGenerator.LATENCY - 1
    assert out["when"] == list(range(first, first + n))


def test_parameters_refused():
    with pytest.raises(ValueError, match="rows must be an integer >= 1, width 4, 8, 16 or 32"):
        WindowGenerator(8, 5)
