"""Random MAC layers for the memory engine's tests, the memory image they run from, and the check of the result.

Shared by the Amaranth-simulator tests (tests/test_engine.py) and the cocotb testbench (sim/tb_engine.py). A
:class:`Layer` is a random CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED layer (any geometry, depth multipliers,
zero points at both ends, per-channel multipliers putting outputs across the int8 range) with its golden output
(:mod:`golden.kernels`, computed here, never by the engine's own code). An :class:`Image` lays layers out in
memory as the compiler would: the command list and the weights and tables in the read-only window, inputs and
outputs in the read-write window. :func:`check_memory` compares every output with golden and checks nothing else
changed.
"""

import random

import numpy as np

from ..golden import staged
from ..golden.fixedpoint import quantize_multiplier
from ..golden.kernels import conv_2d_kernel, depthwise_conv_2d_kernel
from ..golden.tflite.builder import ModelBuilder, _spatial_options, schema
from ..host.engine_layout import mac_command, table_image, weights_image
from ..host.windows import Geometry, stackable, stacked_bytes
from ..hw import commands

__all__ = ["LIST", "MEMORY", "RO", "RW", "Image", "Layer", "check_memory", "pad_conv_model", "poke", "small_dw_layer"]

RO = (0x0000, 0x10000)      # commands, weights, tables
RW = (0x10000, 0x20000)     # activations
MEMORY = 0x20000
LIST = 0x0


class Layer:
    """A random CONV_2D (FULLY_CONNECTED with ``fc``, DEPTHWISE_CONV_2D with ``dw``) layer, its parameters and its
    golden output. ``w`` is OHWI (for a depthwise layer [out_c, KH, KW]: the engine's reduction over the taps)."""

    def __init__(self, rng, seed, *, fc=False, dw=False, shape=None, filter_hw=None, stride=None, dilation=None,
                 padding=None, out_c=None, depth_multiplier=None):
        nrng = np.random.default_rng(seed)
        if fc:
            batch, k = shape or (rng.randint(1, 6), rng.randint(1, 40))
            shape, filter_hw, stride, dilation, padding = (batch, 1, 1, k), (1, 1), (1, 1), (1, 1), "VALID"
        else:
            channels = [1, 3, 8, 16, 17, 24, 32] if dw else [1, 3, 4, 8, 9]
            shape = shape or (rng.choice([1, 1, 2]), rng.randint(1, 7), rng.randint(1, 7), rng.choice(channels))
            filter_hw = filter_hw or (rng.randint(1, 3), rng.randint(1, 3))
            stride = stride or (rng.randint(1, 2), rng.randint(1, 2))
            dilation = dilation or (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
            padding = padding or rng.choice(["SAME", "VALID"])
            if padding == "VALID" and any((k - 1) * d + 1 > s for k, d, s in zip(filter_hw, dilation, shape[1:3],
                                                                                  strict=True)):
                padding = "SAME"
        self.op = "FULLY_CONNECTED" if fc else "DEPTHWISE_CONV_2D" if dw else "CONV_2D"
        self.g = Geometry.of(shape, filter_hw, stride, dilation, padding)
        self.depth_multiplier = 1
        if dw:
            self.depth_multiplier = depth_multiplier or rng.choice([1, 1, 1, 2, 3, 9])
            self.out_c = shape[3] * self.depth_multiplier
            self.w = nrng.integers(-127, 128, (self.out_c, *filter_hw)).astype(np.int8)
            k = filter_hw[0] * filter_hw[1]
        else:
            self.out_c = out_c or rng.randint(1, 11)
            self.w = nrng.integers(-127, 128, (self.out_c, *filter_hw, shape[3])).astype(np.int8)
            k = self.g.k
        self.x = nrng.integers(-128, 128, shape).astype(np.int8)
        self.bias = nrng.integers(-(2**16), 2**16, self.out_c).astype(np.int32)
        # outputs spread over the int8 range (an accumulator's spread is about 5000 * sqrt(K))
        real = np.exp(nrng.uniform(np.log(2.0**-4), np.log(2.0), self.out_c)) / (np.sqrt(k) * 128)
        self.mult, shift = quantize_multiplier(real, "double")
        self.shift = np.minimum(shift, 30)
        self.zp_in = rng.choice([-128, 127, rng.randint(-128, 127)])
        self.zp_out = rng.choice([-128, 127, rng.randint(-128, 127)])
        self.act = sorted(rng.sample(range(-128, 128), 2)) if rng.random() < 0.3 else [-128, 127]
        self.stride, self.dilation, self.padding = stride, dilation, padding
        self.stack = False       # a CONV_2D's input row-stacked (host.windows.stacked): set by stack_if_fits
        self.keep = False        # the output kept on chip only, for the next layer (the command's keep)

    def stack_if_fits(self, in_depth, beat):
        """Row-stack this CONV_2D's input (the command's ``stack``) if the engine can: dilation_h 1, a pixel of at
        most a bus word (``beat`` bytes), the stacked input within half the input buffer. Returns whether it did."""
        self.stack = (self.op == "CONV_2D" and stackable(self.g, beat)
                      and stacked_bytes(self.g) <= in_depth // 2)
        return self.stack

    @classmethod
    def following(cls, prev, rng, seed, **kw):
        """A random CONV_2D (``dw``: DEPTHWISE_CONV_2D) layer whose input is ``prev``'s output: its shape, and its
        values (golden's, so a wrong first layer shows in the second's output too)."""
        shape = (prev.g.batch, prev.g.out_h, prev.g.out_w, prev.out_c)
        layer = cls(rng, seed, shape=shape, **kw)
        layer.x = np.frombuffer(prev.expected(), np.int8).reshape(shape).copy()
        return layer

    @property
    def macs(self):
        taps = self.g.kernel_h * self.g.kernel_w
        return self.g.pixels * (taps if self.op == "DEPTHWISE_CONV_2D" else self.g.k) * self.out_c

    def expected(self):
        common = {"input_offset": -self.zp_in, "output_multiplier": self.mult, "output_shift": self.shift,
                  "output_offset": self.zp_out, "stride": self.stride, "dilation": self.dilation,
                  "padding": self.padding, "quantized_activation_min": self.act[0],
                  "quantized_activation_max": self.act[1]}
        if self.op == "DEPTHWISE_CONV_2D":
            out = depthwise_conv_2d_kernel(self.x, self.w.transpose(1, 2, 0)[None], self.bias,
                                           depth_multiplier=self.depth_multiplier, **common)
        else:
            out = conv_2d_kernel(self.x, self.w, self.bias, **common)
        return out.astype(np.int8).tobytes()


def pad_conv_model(seed, paddings, *, depthwise=True, shape=(1, 6, 5, 8), filter_hw=(3, 3), stride=(2, 2),
                   padding="VALID", constant=None):
    """A .tflite model of two operators: PAD (PADV2 with ``constant``, an int8 value) by ``paddings`` ([4, 2]), then
    a DEPTHWISE_CONV_2D (a CONV_2D to 5 channels unless ``depthwise``) of random int8 weights over the padded
    tensor, zero points random (``constant="zero_point"``: PADV2's constant is the input's), the output's scale
    putting results across the int8 range."""
    rng = np.random.default_rng(seed)
    padded = tuple(int(d + a + b) for d, (a, b) in zip(shape, paddings, strict=True))
    c = padded[3]
    zp, s_in = int(rng.integers(-128, 128)), float(rng.uniform(0.01, 0.1))
    constant = zp if constant == "zero_point" else constant
    n = c if depthwise else 5
    w = rng.integers(-127, 128, (1, *filter_hw, n) if depthwise else (n, *filter_hw, c)).astype(np.int8)
    k = filter_hw[0] * filter_hw[1] * (1 if depthwise else c)
    w_scale = rng.uniform(0.002, 0.01, n).astype(np.float32)
    mb = ModelBuilder()
    x = mb.tensor("input", shape, np.int8, scale=s_in, zero_point=zp)
    pads = mb.tensor("paddings", (4, 2), np.int32, data=np.asarray(paddings, np.int32))
    ins = [x, pads]
    if constant is not None:
        ins.append(mb.tensor("constant", (1,), np.int8, scale=s_in, zero_point=zp, data=np.array([constant], np.int8)))
    xp = mb.tensor("padded", padded, np.int8, scale=s_in, zero_point=zp)
    mb.operator(schema.BuiltinOperator.PADV2 if constant is not None else schema.BuiltinOperator.PAD, ins, [xp])
    wt = mb.tensor("weights", w.shape, np.int8, scale=w_scale, zero_point=0, quantized_dimension=3 if depthwise else 0,
                   data=w)
    bias = rng.integers(-2000, 2000, n).astype(np.int32)
    b = mb.tensor("bias", (n,), np.int32, scale=np.float32(s_in) * w_scale.astype(np.float64), zero_point=0, data=bias)
    oh, ow = (staged.compute_out_size(padding, padded[i], filter_hw[i - 1], stride[i - 1], 1) for i in (1, 2))
    y = mb.tensor("output", (1, oh, ow, n), np.int8, scale=s_in * float(w_scale.mean()) * 75 * 75 * k ** 0.5 / 50,
                  zero_point=int(rng.integers(-20, 20)))
    if depthwise:
        opts = _spatial_options(schema.DepthwiseConv2DOptionsT(), stride, (1, 1), padding, "NONE")
        opts.depthMultiplier = 1
        mb.operator(schema.BuiltinOperator.DEPTHWISE_CONV_2D, [xp, wt, b], [y],
                    schema.BuiltinOptions.DepthwiseConv2DOptions, opts, version=3)
    else:
        opts = _spatial_options(schema.Conv2DOptionsT(), stride, (1, 1), padding, "NONE")
        mb.operator(schema.BuiltinOperator.CONV_2D, [xp, wt, b], [y], schema.BuiltinOptions.Conv2DOptions, opts)
    return mb.finish([x], [y])


def small_dw_layer(rng, seed):
    """A random DEPTHWISE_CONV_2D layer within 1 KB buffers and 8 column tiles of 4 (depth multipliers to 9)."""
    c = rng.choice([3, 8, 16])
    mult = rng.choice({3: [1, 2, 9], 8: [1, 2], 16: [1]}[c])
    return Layer(rng, seed, dw=True, shape=(rng.choice([1, 2]), rng.randint(1, 5), rng.randint(1, 5), c),
                 depth_multiplier=mult)


class Image:
    """A memory image: command list at LIST, weights and tables after it (read-only window), inputs and outputs in
    the read-write window; every tensor aligned to 64 bytes. With ``run``, each list's weights are laid out as the
    compiler lays them: in command order one after another (from ``WEIGHTS_RUN``, each at 16 bytes), every command's
    ``weights_ahead`` the bytes of the list's run after its own, so the engine reads them ahead."""

    WEIGHTS_RUN = 0x4000    # (the tables from 0x1000 below it)

    def __init__(self, seed, cols, *, run=False):
        self.cols = cols
        self.mem = bytearray(random.Random(seed).randbytes(MEMORY))   # not zeros: a stray write shows
        self.ro, self.rw = 0x1000, RW[0]
        self.run, self.wr, self.run_cmds = run, self.WEIGHTS_RUN, []
        self.list = []
        self.outputs = []        # (addr, expected bytes)
        self.inputs = []         # (addr, bytes)

    def _put(self, region, data):
        addr = getattr(self, region)
        self.mem[addr:addr + len(data)] = data
        setattr(self, region, addr + -(-max(len(data), 1) // 64) * 64)
        return addr

    def _reserve(self, n):
        addr = self.rw
        self.rw += -(-n // 64) * 64
        return addr

    def add(self, layer, *, chained=False, **override):
        """Place ``layer`` and append its command (``override``: fields set to any bits, :func:`poke`). ``chained``:
        its input is the last layer's output, in place (a :meth:`Layer.following` layer)."""
        wimg = weights_image(layer.w, self.cols, stack=layer.stack)
        if self.run:
            w_addr, self.wr = self.wr, self.wr + -(-len(wimg) // 16) * 16
            assert self.wr <= RO[1], "the weights' run past the read-only window"
            self.mem[w_addr:w_addr + len(wimg)] = wimg
            if "weights_ahead" not in override:
                self.run_cmds.append((len(self.list), w_addr + len(wimg)))
        else:
            w_addr = self._put("ro", wimg)
        t_addr = self._put("ro", table_image(layer.bias, layer.w, layer.zp_in, layer.mult, layer.shift))
        if chained:
            in_addr, prev = self.outputs[-1]
            assert prev == layer.x.tobytes(), "a chained layer's input is the last layer's output"
        else:
            in_addr = self._put("rw", layer.x.tobytes())
        self.inputs.append((in_addr, layer.x.nbytes))
        expected = layer.expected()
        out_addr = self._reserve(len(expected))
        fields = {"input_addr": in_addr, "weights_addr": w_addr, "table_addr": t_addr, "output_addr": out_addr,
                      "input_zero_point": layer.zp_in, "output_zero_point": layer.zp_out, "act_min": layer.act[0],
                      "act_max": layer.act[1]}
        raw = mac_command(layer.op, layer.g, layer.out_c, depth_multiplier=layer.depth_multiplier, stack=layer.stack,
                          keep=layer.keep, **fields)
        if override:
            raw = poke(raw, **override)
        self.list.append(raw)
        self.outputs.append((out_addr, expected))

    def raw(self, raw):
        self.list.append(raw)

    def finish(self, at=LIST):
        """Write the list so far, with END, at ``at``; the next list starts empty."""
        for i, w_end in self.run_cmds:
            self.list[i] = poke(self.list[i], weights_ahead=self.wr - w_end)
        self.run_cmds = []
        data = b"".join(self.list) + commands.pack(op="END")
        assert at + len(data) <= 0x1000
        self.mem[at:at + len(data)] = data
        self.list = []


def poke(raw, **fields):
    """A descriptor with fields set to any bits (pack refuses what the engine must refuse too)."""
    bits = int.from_bytes(raw, "little")
    for name, value in fields.items():
        f = next(f for f in commands.FIELDS if f.name == name)
        bits = bits & ~(((1 << f.width) - 1) << f.bit) | (value & ((1 << f.width) - 1)) << f.bit
    return bits.to_bytes(len(raw), "little")


def check_memory(mem, before, written):
    """Every output (address, expected bytes) in ``written`` is in ``mem``, and no other byte differs from
    ``before``."""
    allowed = bytearray(before)
    for addr, want in written:
        got = bytes(mem[addr:addr + len(want)])
        assert got == want, f"output at {addr:#x}: {np.frombuffer(got, np.int8)} != {np.frombuffer(want, np.int8)}"
        allowed[addr:addr + len(want)] = want
    changed = [a for a in range(len(mem)) if mem[a] != allowed[a]]
    assert not changed, f"bytes written outside the outputs: {[hex(a) for a in changed[:8]]}"
