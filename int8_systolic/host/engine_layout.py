"""A MAC layer in the memory engine's formats: its weights, its per-channel table and its command descriptor.

What the compiler writes into the engine's memory image for a layer (docs/engine.md):

- :func:`weights_image`: OHWI int8 weights as ``[n_tile][k][cols]``, K in TFLite's (kh, kw, c)
  order (the window generator's), output channels past N zero; a DEPTHWISE_CONV_2D's [1, KH, KW, N]
  filter goes in as [N, KH, KW] (K the taps, the depthwise generator's order); a row-stacked CONV_2D's
  K is in (kw, kh, c) order;
- :func:`table_image`: 12 bytes a channel (:func:`hw.table_loader.pack_table`): the bias with the
  input zero point folded in (``bias - z_a * sum_k w[k][n]``: padding taps read the zero point, so
  they add nothing), the multiplier and the shift;
- :func:`mac_command`: the descriptor (:mod:`hw.commands`), geometry from :class:`host.windows.Geometry`.
"""

import numpy as np

from ..golden import staged
from ..hw import commands
from ..hw.table_loader import pack_table

__all__ = ["mac_command", "table_image", "weights_image"]


def weights_image(weights, cols, *, stack=False):
    """OHWI (or [N, K]) int8 weights in the engine's layout: ``[ceil(N / cols)][K][cols]`` bytes; with ``stack`` (a
    row-stacked CONV_2D, :func:`host.windows.stacked`) K in (kw, kh, c) order."""
    w = np.asarray(weights, np.int8)
    if stack:
        w = w.transpose(0, 2, 1, 3)
    n = w.shape[0]
    k = w.size // n
    n_tiles = -(-n // cols)
    mat = np.zeros((n_tiles * cols, k), np.int8)
    mat[:n] = w.reshape(n, k)
    return mat.reshape(n_tiles, cols, k).transpose(0, 2, 1).tobytes()


def table_image(bias, weights, input_zero_point, multiplier, shift):
    """The layer's table: for each output channel the folded bias, the multiplier and the shift."""
    w = np.asarray(weights, np.int64)
    n = w.shape[0]
    bias = np.zeros(n, np.int64) if bias is None else np.asarray(bias, np.int64)
    folded = staged.fold_bias(bias, w.reshape(n, -1).sum(axis=1), -int(input_zero_point))
    return pack_table(folded, multiplier, shift)


def mac_command(op, g, out_c, *, input_addr, weights_addr, table_addr, output_addr, input_zero_point,
                output_zero_point, act_min=-128, act_max=127, depth_multiplier=1, stack=False, keep=False):
    """One MAC command's 64 bytes: ``g`` a :class:`host.windows.Geometry`; ``stack``: the input row-stacked;
    ``keep``: the output kept on chip only, for the next command."""
    return commands.pack(op=op, stack=int(stack), keep=int(keep), input_addr=input_addr, weights_addr=weights_addr,
                         table_addr=table_addr, output_addr=output_addr, batch=g.batch, in_h=g.in_h, in_w=g.in_w,
                         in_c=g.in_c, out_h=g.out_h, out_w=g.out_w, out_c=out_c, depth_multiplier=depth_multiplier,
                         kernel_h=g.kernel_h, kernel_w=g.kernel_w, stride_h=g.stride_h, stride_w=g.stride_w,
                         dilation_h=g.dilation_h, dilation_w=g.dilation_w, pad_top=g.pad_top, pad_left=g.pad_left,
                         input_zero_point=input_zero_point, output_zero_point=output_zero_point, act_min=act_min,
                         act_max=act_max)
