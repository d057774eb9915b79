"""hw.layer_check in Amaranth's simulator against a Python statement of the same checks: random MAC commands (good
ones, and ones broken in each way the check names) give the same error bits and the same sizes, and done comes
LayerCheck.check_cycles + 1 cycles after start."""

import random

import pytest

from int8_systolic.hw import commands
from int8_systolic.hw.depthwise_gen import InputLayout, input_pitch, input_split
from int8_systolic.hw.layer_check import ERRORS, LayerCheck
from int8_systolic.sim.amaranth_bench import simulate

ROWS, COLS, NB = 8, 8, 8
DEPTHS = {"in_depth": 4096, "w_depth": 8192, "out_depth": 2048, "max_col_tiles": 16}
RO, RW = (0x1000, 0x9000), (0x10000, 0x20000)


def model(c, rows=ROWS, cols=COLS):
    """(error bits, values) of a command, as docs/engine.md states the checks."""
    up = lambda v: -(-v // NB) * NB   # noqa: E731
    dw = c["op"] == commands.OPS["DEPTHWISE_CONV_2D"]
    k = c["kernel_h"] * c["kernel_w"] * (1 if dw else c["in_c"])
    n_tiles = -(-c["out_c"] // cols)
    pixels = c["batch"] * c["out_h"] * c["out_w"]
    in_len = up(c["batch"] * c["in_h"] * c["in_w"] * c["in_c"])
    w_len = up(n_tiles * k * cols)
    t_len = up(12 * c["out_c"])
    out_len = pixels * c["out_c"]
    fc = c["op"] == commands.OPS["FULLY_CONNECTED"]
    ones = all(c[f] == 1 for f in ("in_h", "in_w", "out_h", "out_w", "kernel_h", "kernel_w"))
    shape = (fc and not ones) or (c["out_h"] - 1) * c["stride_h"] >= c["in_h"] + c["pad_top"] or \
        (c["out_w"] - 1) * c["stride_w"] >= c["in_w"] + c["pad_left"] or \
        c["pad_top"] > (c["kernel_h"] - 1) * c["dilation_h"] or c["pad_left"] > (c["kernel_w"] - 1) * c["dilation_w"] \
        or c["act_min"] > c["act_max"] or \
        (c["out_c"] != c["in_c"] * c["depth_multiplier"] if dw else c["depth_multiplier"] != 1)
    shape = shape or (c["stack"] and c["op"] != commands.OPS["CONV_2D"])
    # an output kept split by parity must be whole bus words a pixel
    shape = shape or ((c["out_split_h"] or c["out_split_w"]) and c["out_c"] % NB != 0)
    khc = c["kernel_h"] * c["in_c"]
    unsupported = c["bypass"] or (c["stack"] and (c["dilation_h"] != 1 or khc >= 1 << 16 or c["in_c"] > NB))
    if c["stack"]:     # row-stacked: out_h rows of in_w pixels of kernel_h * in_c bytes (host.windows.stacked)
        in_buf = c["batch"] * c["out_h"] * c["in_w"] * khc
    # the input and the kept output as hw.depthwise_gen.InputLayout places them (a stride-2 depthwise input split)
    split = input_split(c["in_c"], c["stride_h"], c["stride_w"], NB) if dw else (False, False)
    layout = InputLayout(c["in_h"], c["in_w"], input_pitch(c["in_c"], 8, NB), *split)
    out_layout = InputLayout(c["out_h"], c["out_w"], input_pitch(c["out_c"], 8, NB), bool(c["out_split_h"]),
                             bool(c["out_split_w"]))
    if not c["stack"]:
        in_buf = c["batch"] * layout.image_bytes
    out_buf = c["batch"] * out_layout.image_bytes
    beside = in_buf + out_buf + 64 <= DEPTHS["in_depth"]      # (the output after the input and a row of banks)
    too_big = w_len > DEPTHS["w_depth"] or out_len > DEPTHS["out_depth"] or \
        n_tiles > DEPTHS["max_col_tiles"] or k >= 1 << 24 or in_buf > DEPTHS["in_depth"] or \
        (c["keep"] and not beside)
    misaligned = any(c[f] % NB for f in ("input_addr", "weights_addr", "table_addr", "output_addr"))

    def inside(a, n, win):
        return win[0] <= a and a + n <= win[1]
    window = not (inside(c["input_addr"], in_len, RW) and inside(c["output_addr"], out_len, RW)
                  and inside(c["weights_addr"], w_len, RO) and inside(c["table_addr"], t_len, RO))
    failed = [n for n, b in (("INCONSISTENT", shape), ("UNSUPPORTED", unsupported), ("TOO_BIG", too_big),
                             ("MISALIGNED", misaligned), ("WINDOW", window)) if b]
    bits = 1 << ERRORS[failed[0]] if failed else 0     # the first failed check only
    values = {"k": k, "n_tiles": n_tiles, "pixels": pixels, "m_tiles": -(-pixels // rows)}
    if not too_big:     # sizes past the buffers may saturate: compared only when they fit
        values.update(in_len=in_len, w_len=w_len, t_len=t_len, out_len=out_len, in_buf=in_buf, out_buf=out_buf,
                      capture=int(beside), split_h=int(split[0]), split_w=int(split[1]), rp=layout.row_bytes,
                      odd_w=layout.odd_w, out_rp=out_layout.row_bytes, out_odd_w=out_layout.odd_w)
        if c["stack"] and not unsupported:
            values.update(khc=khc, shc=c["stride_h"] * c["in_c"], row_bytes=c["in_w"] * khc)
    return bits, values


def good_command(rng):
    kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    c = {f.name: 0 for f in commands.FIELDS}
    c.update(op=commands.OPS["CONV_2D"], batch=rng.randint(1, 2), in_h=rng.randint(3, 8), in_w=rng.randint(3, 8),
             in_c=rng.randint(1, 8), kernel_h=kh, kernel_w=kw, stride_h=rng.randint(1, 2), stride_w=rng.randint(1, 2),
             dilation_h=1, dilation_w=1, pad_top=(kh - 1) // 2, pad_left=(kw - 1) // 2, out_c=rng.randint(1, 20),
             depth_multiplier=1, act_min=-128, act_max=127)
    c["out_h"] = -(-c["in_h"] // c["stride_h"])
    c["out_w"] = -(-c["in_w"] // c["stride_w"])
    if rng.random() < 0.3:
        c.update(op=commands.OPS["DEPTHWISE_CONV_2D"], depth_multiplier=rng.randint(1, 3))
        if rng.random() < 0.5:      # whole bus words a pixel: split at stride 2
            c["in_c"] = NB * rng.randint(1, 3)
        c["out_c"] = c["in_c"] * c["depth_multiplier"]
    if c["out_c"] % NB == 0 and rng.random() < 0.5:
        c.update(out_split_h=rng.randint(0, 1), out_split_w=rng.randint(0, 1))
    elif rng.random() < 0.4:
        c["stack"] = 1
    c.update(input_addr=RW[0], output_addr=RW[0] + 0x8000, weights_addr=RO[0], table_addr=RO[0] + 0x4000)
    return c


BREAKS = [
    lambda c, r: c.update(op=commands.OPS["FULLY_CONNECTED"], in_h=2),
    # a FULLY_CONNECTED with exactly one of its six sides not 1 (a sampled mutant joining two of the tests with an OR
    # passed the random breaks, whose other sides were seldom all 1)
    *(lambda c, r, side=side: c.update({**dict.fromkeys(("in_h", "in_w", "out_h", "out_w", "kernel_h", "kernel_w",
                                                         "stride_h", "stride_w", "depth_multiplier"), 1),
                                        "op": commands.OPS["FULLY_CONNECTED"], "pad_top": 0, "pad_left": 0,
                                        "stack": 0, side: 2})
      for side in ("in_h", "in_w", "out_h", "out_w", "kernel_h", "kernel_w")),
    lambda c, r: c.update(out_h=c["in_h"] + c["pad_top"] + 1, stride_h=1),
    lambda c, r: c.update(pad_left=c["kernel_w"] * c["dilation_w"]),
    lambda c, r: c.update(act_min=5, act_max=4),
    lambda c, r: c.update(op=commands.OPS["DEPTHWISE_CONV_2D"], out_c=c["in_c"] * 2 + 1, depth_multiplier=2),
    lambda c, r: c.update(op=commands.OPS["CONV_2D"], depth_multiplier=2),
    # a depthwise input that fits unpadded but not at its pitch (64 channels take 72 bytes a pixel)
    lambda c, r: c.update(op=commands.OPS["DEPTHWISE_CONV_2D"], in_c=64, out_c=64, batch=1, in_h=8, in_w=8,
                          out_h=4, out_w=4, stride_h=2, stride_w=2, depth_multiplier=1),
    # a stored row of 2**17 bytes: the products' second factor is 17 bits, so a wide one must go first
    lambda c, r: c.update(op=commands.OPS["CONV_2D"], depth_multiplier=1, batch=1, in_h=1, in_w=16384, in_c=8,
                          out_h=1, out_w=1, out_c=1, kernel_h=1, kernel_w=1, pad_top=0, pad_left=0, stack=0,
                          out_split_h=0, out_split_w=0, keep=0),
    lambda c, r: c.update(bypass=1),
    # an output kept split whose pixels are not whole bus words
    lambda c, r: c.update(out_c=NB + 1, out_split_w=1, op=commands.OPS["CONV_2D"], depth_multiplier=1),
    lambda c, r: c.update(in_h=60, out_h=60, in_w=60, out_w=60, stride_h=1, stride_w=1),
    lambda c, r: c.update(out_c=200),
    lambda c, r: c.update(in_c=65535, batch=65535, in_h=65535, in_w=65535),   # products past 2**32
    # an input of exactly 2**32 bytes: wrapping would make it 0 and fit
    lambda c, r: c.update(in_c=256, batch=256, in_h=256, in_w=256, out_h=1, out_w=1, out_c=4, kernel_h=1,
                          kernel_w=1, pad_top=0, pad_left=0),
    lambda c, r: c.update(kernel_h=255, kernel_w=255, in_c=300, pad_top=0, pad_left=0),
    lambda c, r: c.update(input_addr=RW[0] + r.choice([1, 4])),
    lambda c, r: c.update(table_addr=RO[1] - 8),
    lambda c, r: c.update(output_addr=RW[1]),
    lambda c, r: c.update(weights_addr=RW[0]),
    lambda c, r: c.update(input_addr=0xFFFFFFF8),
    lambda c, r: c.update(stack=1, op=commands.OPS["FULLY_CONNECTED"], in_h=1, in_w=1, out_h=1, out_w=1,
                          kernel_h=1, kernel_w=1, pad_top=0, pad_left=0),
    lambda c, r: c.update(stack=1, op=commands.OPS["CONV_2D"], dilation_h=2, pad_top=0),
    lambda c, r: c.update(stack=1, op=commands.OPS["CONV_2D"], depth_multiplier=1, kernel_h=2, in_c=40000,
                          out_c=4, pad_top=0),
    # an output to keep on chip that does not fit after the input (2 KB of input, 2 KB of output in 4 KB)
    lambda c, r: c.update(keep=1, op=commands.OPS["CONV_2D"], depth_multiplier=1, batch=1, in_h=16, in_w=16,
                          in_c=8, out_h=16, out_w=16, stride_h=1, stride_w=1, kernel_h=1, kernel_w=1, pad_top=0,
                          pad_left=0, out_c=8),
    # row-stacked with a pixel of more than a bus word (the stacker writes whole pixels from one)
    lambda c, r: c.update(stack=1, op=commands.OPS["CONV_2D"], depth_multiplier=1, dilation_h=1, in_c=NB + 1,
                          pad_top=0),
    # row-stacked: the stacked input is larger than the buffer (the plain one would fit)
    lambda c, r: c.update(stack=1, op=commands.OPS["CONV_2D"], depth_multiplier=1, batch=1, in_h=16, in_w=16,
                          in_c=1, out_h=16, out_w=16, stride_h=1, stride_w=1, kernel_h=17, kernel_w=1, pad_top=8,
                          pad_left=0, out_c=4),
]


def run(cmds, rows=ROWS, cols=COLS):
    dut = LayerCheck(rows, cols, data_width=8 * NB, **DEPTHS)
    got = []

    async def bench(ctx):
        ctx.set(dut.ro_base, RO[0])
        ctx.set(dut.ro_limit, RO[1])
        ctx.set(dut.rw_base, RW[0])
        ctx.set(dut.rw_limit, RW[1])
        for c in cmds:
            ctx.set(dut.command, c)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for t in range(200):
                if ctx.get(dut.done):
                    assert t == dut.cycles, t
                    got.append((ctx.get(dut.error), {f: ctx.get(getattr(dut, f)) for f in (
                        "k", "n_tiles", "pixels", "m_tiles", "in_len", "w_len", "t_len", "out_len", "in_buf",
                        "out_buf", "khc", "shc", "row_bytes", "capture", "split_h", "split_w", "rp", "odd_w",
                        "out_rp", "out_odd_w")}))
                    break
                await ctx.tick()
            await ctx.tick()

    simulate(dut, bench)
    return got


@pytest.mark.parametrize(("rows", "cols"), [(ROWS, COLS), (5, 3)])
def test_checks_equal_the_model(rows, cols):
    """An array of powers of two divides by shifts, another by a quotient a bit a cycle: the same values."""
    rng = random.Random(1)
    cmds = [good_command(rng) for _ in range(6)]
    for b in BREAKS:
        c = good_command(rng)
        b(c, rng)
        cmds.append(c)
    got = run(cmds, rows, cols)
    for c, (bits, values) in zip(cmds, got, strict=True):
        want_bits, want_values = model(c, rows, cols)
        assert bits == want_bits, c
        assert {k: values[k] for k in want_values} == want_values, c
    assert sum(1 for c in cmds if model(c)[0] == 0) >= 6, "the good commands are good"
    assert all(model(c)[0] for c in cmds[6:]), "each break fails a check"


def test_every_error_bit_is_provoked():
    rng = random.Random(2)
    seen = 0
    for b in BREAKS:
        c = good_command(rng)
        b(c, rng)
        seen |= model(c)[0]
    assert seen == (1 << len(ERRORS)) - 1


@pytest.mark.parametrize("seed", range(2))
def test_random_fields(seed):
    """Commands with every field random (within its minimum): mostly refused, each for the model's reasons."""
    rng = random.Random(seed)
    cmds = []
    for _ in range(10):
        c = {f.name: rng.randint(f.lo, min(f.hi, rng.choice([3, 20, f.hi]))) for f in commands.FIELDS}
        c["op"] = rng.choice([1, 2, 3])
        for f in ("input_addr", "output_addr", "weights_addr", "table_addr"):
            c[f] = rng.choice([RO[0], RW[0], rng.randrange(0, 1 << 32)]) & ~rng.choice([0, 7])
        cmds.append(c)
    for c, (bits, values) in zip(cmds, run(cmds), strict=True):
        want_bits, want_values = model(c)
        assert bits == want_bits, c
        assert {k: values[k] for k in want_values if k in ("k", "n_tiles")} == \
            {k: want_values[k] for k in ("k", "n_tiles")}, c
