"""MEAN, SUM and ARG_MAX over int8.

MEAN and SUM (TFLM micro/kernels/reduce_common.cc ``PrepareMeanOrSumHelper``, reference
reduce.h ``QuantizedMeanOrSum``): the multiplier of ``in_scale / out_scale``; the sum of raw
values over the resolved axes (negative axes normalised, duplicates dropped) less
``zp_in * n``; for MEAN the multiplier is divided by ``n`` in integers first
(``shift = min(floor(log2 n), 32, 31 + output_shift)``, ``M' = (M << shift) / n``,
``output_shift -= shift``); then MultiplyByQuantizedMultiplier, ``+ zp_out``, clamp.
keep_dims keeps the reduced axes as size 1.

ARG_MAX (reference arg_min_max.h): the index of the first maximum along one axis, as
int32 (TFLM's only output type).
"""

import numpy as np

from ..fixedpoint import quantize_multiplier, wrap_int32
from ._base import Op, int32_data
from ._fast import mbqm

__all__ = ["OPS"]


def _resolve_axes(ctx, axes, rank):
    out = []
    for a in axes:
        a = ctx.axis(a, rank, "reduction axis")
        if a not in out:
            out.append(a)
    return tuple(out)


def prepare_mean_sum(ctx):
    ((s_in, zp_in),), (s_out, zp_out) = ctx.int8_in_out(1)
    axes = int32_data(ctx, 1, "the axis tensor")
    if axes is None:
        ctx.fail("the axis tensor must be a constant")
    in_shape = ctx.inputs[0].shape
    axes = _resolve_axes(ctx, axes, len(in_shape))
    keep = bool(ctx.option("keepDims", False))
    shape = tuple(1 if i in axes else d for i, d in enumerate(in_shape) if keep or i not in axes)
    if int(np.prod(shape)) != int(np.prod(ctx.outputs[0].shape)):
        ctx.fail(f"reducing {list(in_shape)} over axes {list(axes)} (keep_dims {keep}) gives {list(shape)}, but "
                 f"output '{ctx.outputs[0].name}' is {list(ctx.outputs[0].shape)}")
    m, shift = quantize_multiplier(np.float64(s_in) / np.float64(s_out))
    n = int(np.prod([in_shape[a] for a in axes])) if axes else 1
    if ctx.op == "MEAN" and n > 0:
        pot = min(n.bit_length() - 1, 32, 31 + shift)
        m = int((m << pot) // n)     # int64 shift, C's division of non-negative numbers
        shift -= pot
    if not -31 <= shift <= 30:
        ctx.fail(f"the output shift {shift} (from scales {float(s_in)!r} -> {float(s_out)!r} over {n} elements) is "
                 f"outside [-31, 30]; TFLM's MultiplyByQuantizedMultiplier is undefined there")
    return {"axes": axes, "keep_dims": keep, "num_elements_in_axis": n, "input_zero_point": zp_in,
            "output_multiplier": m, "output_shift": shift, "output_zero_point": zp_out,
            "output_shape": tuple(ctx.outputs[0].shape)}


def eval_mean_sum(p, inputs):
    x = inputs[0]
    total = x.astype(np.int64).sum(axis=p["axes"]) if p["axes"] else x.astype(np.int64)
    shifted = wrap_int32(wrap_int32(total) - np.int64(p["input_zero_point"]) * p["num_elements_in_axis"])
    out = mbqm(shifted.astype(np.int64), p["output_multiplier"], p["output_shift"])
    out = np.clip(out + p["output_zero_point"], -128, 127).astype(np.int8)
    return [out.reshape(p["output_shape"])]


def prepare_arg_max(ctx):
    t = ctx.tensor(0, types=("INT8",))
    out = ctx.tensor(0, output=True, types=("INT32",))   # TFLM: "Only int32_t are supported currently"
    axis = int32_data(ctx, 1, "the axis tensor")
    if axis is None or axis.size != 1:
        ctx.fail("the axis tensor must be a constant with one element")
    axis = ctx.axis(axis[0], len(t.shape))
    shape = tuple(d for i, d in enumerate(t.shape) if i != axis)
    if tuple(out.shape) != shape:
        ctx.fail(f"ARG_MAX of {list(t.shape)} over axis {axis} is {list(shape)}, but output '{out.name}' is "
                 f"{list(out.shape)}")
    return {"axis": axis}


def eval_arg_max(p, inputs):
    return [np.argmax(inputs[0], axis=p["axis"]).astype(np.int32)]


OPS = {"MEAN": Op(prepare_mean_sum, eval_mean_sum), "SUM": Op(prepare_mean_sum, eval_mean_sum),
       "ARG_MAX": Op(prepare_arg_max, eval_arg_max)}
