"""The engine's convolution windows, as the hardware will read them: the reference for its window generator.

A CONV_2D layer's im2col matrix is never stored. For each row tile of ``rows`` output pixels
(row-major over batch, height, width) and each *run* of the reduction axis, the window generator
reads from the byte-banked input buffer, for every pixel of the tile, the next ``width`` bytes of
that pixel's run: a *block* (``hw.transpose`` turns it into up to ``width`` array steps). The
reduction order is TFLite's (kh, kw, c), the order of OHWI weights flattened, so the weights need
no reordering.

A run is what is contiguous in an NHWC input: with dilation_w 1, for one kh, the taps kw = 0..KW-1
and c = 0..C-1 are ``KW * C`` consecutive bytes of one input row (``C`` bytes per kw otherwise). A
byte whose tap falls outside the input (padding, or a pixel past the layer's last) reads the input
zero point instead: each read carries a mask.

:func:`blocks` lists the reads (what the hardware generator must produce, cycle for cycle);
:func:`steps` plays them against an input tensor, and tests/test_windows.py checks the result is
exactly the im2col matrix of the golden model (:func:`golden.staged.im2col`, TFLite's padding).

**Row-stacked layers** (few channels: a run of ``kernel_w * in_c`` bytes shorter than a read). The
engine's stacker (:class:`hw.stacker.Stacker`) stores the input so that, for each output row, position x
holds the ``kernel_h`` input rows' channels of column x (:func:`stack_input`; rows in the padding
hold the zero point). A window is then ``kernel_w * kernel_h * in_c`` contiguous bytes, one run, and
the generator runs unchanged on :func:`stacked`'s geometry: ``out_h`` rows of ``in_w`` pixels of
``kernel_h * in_c`` bytes, a 1 x ``kernel_w`` filter. The reduction order becomes (kw, kh, c), so
the weights go in that order (:func:`host.engine_layout.weights_image`).
"""

import dataclasses

import numpy as np

from ..golden import staged
from ..hw.depthwise_gen import InputLayout

__all__ = ["Geometry", "Read", "blocks", "depthwise_step_cycles", "feed_efficiency", "runs", "stack_cycles",
           "stack_group", "stack_input", "stackable", "stacked", "stacked_bytes", "steps", "stored"]


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A CONV_2D layer's shapes and geometry, as in a command descriptor (SAME/VALID resolved to padding)."""

    batch: int
    in_h: int
    in_w: int
    in_c: int
    out_h: int
    out_w: int
    kernel_h: int
    kernel_w: int
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    pad_top: int = 0
    pad_left: int = 0

    @classmethod
    def of(cls, input_shape, filter_hw, stride, dilation, padding):
        """The geometry TFLite computes for an NHWC input, a filter, stride, dilation and SAME/VALID."""
        b, h, w, c = input_shape
        (kh, kw), (sh, sw), (dh, dw) = filter_hw, stride, dilation
        oh = staged.compute_out_size(padding, h, kh, sh, dh)
        ow = staged.compute_out_size(padding, w, kw, sw, dw)
        pt, _ = staged.compute_padding(sh, dh, h, kh, oh)
        pl, _ = staged.compute_padding(sw, dw, w, kw, ow)
        return cls(b, h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)

    @property
    def pixels(self):
        return self.batch * self.out_h * self.out_w

    @property
    def k(self):
        return self.kernel_h * self.kernel_w * self.in_c


@dataclasses.dataclass(frozen=True)
class Read:
    """One read of a block: ``width`` bytes at byte ``addr`` of the input, byte j replaced by the zero point where
    bit j of ``pad`` is set (its tap outside the input, or a pixel past the layer's last)."""

    addr: int
    pad: int


def runs(g, pitch=None):
    """The reduction axis as runs: (kh, kw of the run's first tap, length in bytes), in (kh, kw, c) order. With a
    ``pitch`` (bytes a pixel in the buffer) other than ``in_c`` a run is one pixel's channels."""
    if g.dilation_w == 1 and pitch in (None, g.in_c):
        return [(kh, 0, g.kernel_w * g.in_c) for kh in range(g.kernel_h)]
    return [(kh, kw, g.in_c) for kh in range(g.kernel_h) for kw in range(g.kernel_w)]


def blocks(g, rows, width, pitch=None):
    """Every block of the layer, in the order the window generator reads them: row tile outer, run, chunk of
    ``width`` bytes; each block is (its ``rows`` reads, steps). Addresses are byte offsets into the NHWC input,
    stored ``pitch`` bytes a pixel (``in_c`` unless given: :func:`hw.depthwise_gen.input_pitch`)."""
    pitch = g.in_c if pitch is None else pitch
    contiguous = g.dilation_w == 1 and pitch == g.in_c
    out = []
    for mt in range(-(-g.pixels // rows)):
        pixels = []
        for i in range(rows):
            p = mt * rows + i
            if p >= g.pixels:
                pixels.append(None)
                continue
            b, rem = divmod(p, g.out_h * g.out_w)
            oy, ox = divmod(rem, g.out_w)
            pixels.append((b, oy * g.stride_h - g.pad_top, ox * g.stride_w - g.pad_left))
        for kh, kw0, length in runs(g, pitch):
            for offset in range(0, length, width):
                n = min(width, length - offset)
                reads = []
                for pix in pixels:
                    if pix is None:
                        reads.append(Read(0, (1 << width) - 1))
                        continue
                    b, y0, x0 = pix
                    y = y0 + kh * g.dilation_h
                    pad = 0
                    for j in range(width):
                        r = offset + j                      # byte of the run
                        kw = r // g.in_c if contiguous else kw0
                        x = x0 + kw * g.dilation_w
                        if j >= n or not (0 <= y < g.in_h and 0 <= x < g.in_w):
                            pad |= 1 << j
                    # the run's first byte: pixel (y, x0 + kw0 * dilation_w), channel 0, plus the offset
                    addr = ((b * g.in_h + y) * g.in_w + x0 + kw0 * g.dilation_w) * pitch + offset
                    reads.append(Read(addr, pad))
                out.append((reads, n))
    return out


def stored(x, pitch=None):
    """The NHWC int8 input ``x`` as the engine's input buffer holds it: ``pitch`` bytes a pixel (the bytes past the
    channels 0), flat."""
    x = np.asarray(x, np.int8)
    c = x.shape[-1]
    pitch = c if pitch is None else pitch
    out = np.zeros((x.size // c, pitch), np.int8)
    out[:, :c] = x.reshape(-1, c)
    return out.reshape(-1)


def steps(g, x, zero_point, rows, width, pitch=None):
    """Play :func:`blocks` against the NHWC int8 input ``x`` (stored at ``pitch``) as the buffer and the transpose
    would: the array's steps, shape [row tiles, K, rows] (step k of tile mt holds tap k of the tile's pixels)."""
    flat = stored(x, pitch)
    tiles = []
    current = []
    per_tile = sum(-(-length // width) for _, _, length in runs(g, pitch))
    for n_block, (reads, n) in enumerate(blocks(g, rows, width, pitch)):
        block = np.empty((rows, width), np.int8)
        for i, rd in enumerate(reads):
            for j in range(width):
                a = rd.addr + j
                block[i, j] = zero_point if rd.pad >> j & 1 or not 0 <= a < flat.size else flat[a]
        current.extend(block[:, k] for k in range(n))
        if (n_block + 1) % per_tile == 0:
            tiles.append(np.stack(current))
            current = []
    return np.stack(tiles)


def feed_efficiency(g, rows, width, pitch=None):
    """Array steps per read cycle of the window generator over a full row tile (1.0: the array fed at full rate):
    K steps from ``rows`` reads per block."""
    return g.k / (rows * sum(-(-length // width) for _, _, length in runs(g, pitch)))


def depthwise_step_cycles(g, depth_multiplier, rows, cols, banks, bank_bytes, layout):
    """Cycles each array step of a DEPTHWISE_CONV_2D takes in :class:`hw.depthwise_gen.DepthwiseWindows` (its order:
    row tile, column tile, tap), the input stored as ``layout`` says (:class:`hw.depthwise_gen.InputLayout`, or a
    pitch: the plain order) in ``banks`` banks of ``bank_bytes``.

    A step reads, for each pixel of its tile whose tap is inside the input, ``cols`` bytes from the tap's first
    channel: one bank, two when the read does not start on a bank's first byte. A bank serves one of them a cycle,
    so the step takes as many cycles as its most used bank serves reads (at least one)."""
    if isinstance(layout, int):
        layout = InputLayout(g.in_h, g.in_w, layout)
    out_c = g.in_c * depth_multiplier
    out = []
    for mt in range(-(-g.pixels // rows)):
        pixels = []
        for i in range(rows):
            p = mt * rows + i
            if p < g.pixels:
                b, rem = divmod(p, g.out_h * g.out_w)
                oy, ox = divmod(rem, g.out_w)
                pixels.append((b, oy * g.stride_h - g.pad_top, ox * g.stride_w - g.pad_left))
        for nt in range(-(-out_c // cols)):
            channel = nt * cols // depth_multiplier
            for kh in range(g.kernel_h):
                for kw in range(g.kernel_w):
                    load = [0] * banks
                    for b, y0, x0 in pixels:
                        y, x = y0 + kh * g.dilation_h, x0 + kw * g.dilation_w
                        if 0 <= y < g.in_h and 0 <= x < g.in_w:
                            addr = layout.address(b, y, x) + channel
                            first = addr // bank_bytes % banks
                            load[first] += 1
                            if addr % bank_bytes:
                                load[(first + 1) % banks] += 1
                    out.append(max(1, *load))
    return out


def stackable(g, beat):
    """Whether the engine can hold this CONV_2D's input row-stacked (:class:`hw.stacker.Stacker`): dilation_h 1,
    a stacked pixel (``kernel_h * in_c`` bytes) below 2**16 and a pixel of at most a bus word (``beat`` bytes)."""
    return g.dilation_h == 1 and g.kernel_h * g.in_c < 1 << 16 and g.in_c <= beat


def stack_group(g, width, beat):
    """The pixels the stacker writes at once (:class:`hw.stacker.Stacker`): as many consecutive pixels of an input
    row as fit one write of ``width`` bytes at their stacked places (``kernel_h * in_c`` apart) and one bus word of
    ``beat`` bytes of the input; at least one."""
    khc, c = g.kernel_h * g.in_c, g.in_c
    p = 1
    while p * khc + c <= width and (p + 1) * c <= beat:
        p += 1
    return p


def stacked(g):
    """The geometry the window generator runs a row-stacked layer on: ``out_h`` rows of ``in_w`` pixels of
    ``kernel_h * in_c`` bytes, a 1 x ``kernel_w`` filter (the vertical stride and padding are in the stacking)."""
    return Geometry(g.batch, g.out_h, g.in_w, g.kernel_h * g.in_c, g.out_h, g.out_w, 1, g.kernel_w, 1, g.stride_w,
                    1, g.dilation_w, 0, g.pad_left)


def stacked_bytes(g):
    """The bytes a row-stacked input takes: ``out_h`` rows of ``in_w`` pixels of ``kernel_h * in_c`` bytes per
    image."""
    return g.batch * g.out_h * g.in_w * g.kernel_h * g.in_c


def stack_input(x, g, zero_point):
    """The NHWC input ``x`` row-stacked, as the stacker leaves it in the buffer: [batch, out_h, in_w, kernel_h,
    in_c], element (b, oy, x, kh, c) the input at row ``oy * stride_h + kh - pad_top`` (the zero point outside)."""
    x = np.asarray(x, np.int8)
    out = np.full((g.batch, g.out_h, g.in_w, g.kernel_h, g.in_c), zero_point, np.int8)
    for oy in range(g.out_h):
        for kh in range(g.kernel_h):
            y = oy * g.stride_h + kh - g.pad_top
            if 0 <= y < g.in_h:
                out[:, oy, :, kh, :] = x[:, y]
    return out


def stack_cycles(g, width, beat):
    """Cycles the stacker takes to store a layer's input: a write a cycle of a group of pixels
    (:func:`stack_group`) for each stacked row it goes to (at least one: a row no output row reads is still
    taken), over the input rows and the padding rows the windows reach."""
    per_image = 0
    groups = -(-g.in_w // stack_group(g, width, beat))
    last = max(g.in_h - 1, (g.out_h - 1) * g.stride_h + g.kernel_h - 1 - g.pad_top)
    for y in range(-g.pad_top, last + 1):
        targets = sum(1 for oy in range(g.out_h) if 0 <= y + g.pad_top - oy * g.stride_h < g.kernel_h)
        per_image += groups * max(1, targets)
    return g.batch * per_image
