"""Joining and splitting: CONCATENATION (spec: same scale/zero point everywhere), PACK, UNPACK,
SPLIT, SPLIT_V.

TFLM micro/kernels/concatenation.cc (int8: no fused activation), pack.cc, unpack.cc,
split.cc (inputs: axis, then the tensor), split_v.cc (inputs: tensor, size_splits with at
most one -1, axis). Negative axes count from the end. Raw values are copied.
"""

import numpy as np

from ._base import Op, int32_data

__all__ = ["OPS"]


def _same_q(ctx, indices):
    if any(ctx.inputs[i] is not None and ctx.inputs[i].type == "INT8" for i in indices):
        ctx.same_quantization(indices, clause=f"the spec requires {ctx.op}'s inputs and outputs to have the same "
                                              f"scale/zero_point (TFLM copies raw values)")


def prepare_concatenation(ctx):
    rank = len(ctx.tensor(0).shape)
    _same_q(ctx, list(range(len(ctx.inputs))))
    if ctx.option("fusedActivationFunction", 0) != 0:
        ctx.fail("TFLM's CONCATENATION supports no fused activation")
    return {"axis": ctx.axis(ctx.option("axis", 0), rank)}


def prepare_pack(ctx):
    rank = len(ctx.tensor(0).shape)
    _same_q(ctx, list(range(len(ctx.inputs))))
    if ctx.option("valuesCount", len(ctx.inputs)) != len(ctx.inputs):
        ctx.fail(f"values_count {ctx.option('valuesCount')} but {len(ctx.inputs)} inputs")
    return {"axis": ctx.axis(ctx.option("axis", 0), rank + 1)}


def prepare_unpack(ctx):
    t = ctx.tensor(0)
    _same_q(ctx, [0])
    axis = ctx.axis(ctx.option("axis", 0), len(t.shape))
    if t.shape[axis] != len(ctx.outputs):
        ctx.fail(f"unpacking axis {axis} of size {t.shape[axis]} into {len(ctx.outputs)} outputs")
    return {"axis": axis}


def eval_unpack(p, inputs):
    return [a.squeeze(p["axis"]).copy() for a in np.split(inputs[0], inputs[0].shape[p["axis"]],
                                                                         axis=p["axis"])]


def prepare_split(ctx):
    t = ctx.tensor(1)
    _same_q(ctx, [1])
    axis = int32_data(ctx, 0, "the axis")
    if axis is None or axis.size != 1:
        ctx.fail("the axis input must be a constant with one element")
    axis = ctx.axis(axis[0], len(t.shape))
    n = len(ctx.outputs)
    if t.shape[axis] % n:
        ctx.fail(f"dimension {axis} of size {t.shape[axis]} does not split into {n} equal parts")
    return {"axis": axis, "sections": n}


def prepare_split_v(ctx):
    t = ctx.tensor(0)
    _same_q(ctx, [0])
    sizes = int32_data(ctx, 1, "size_splits")
    axis = int32_data(ctx, 2, "the axis")
    if sizes is None or axis is None or axis.size != 1:
        ctx.fail("size_splits and axis must be constants (axis with one element)")
    axis = ctx.axis(axis[0], len(t.shape))
    sizes = [int(s) for s in sizes]
    if sizes.count(-1) > 1:
        ctx.fail(f"more than one -1 in size_splits {sizes}")
    if -1 in sizes:
        sizes[sizes.index(-1)] = t.shape[axis] - sum(s for s in sizes if s != -1)
    if sum(sizes) != t.shape[axis] or min(sizes) < 0 or len(sizes) != len(ctx.outputs):
        ctx.fail(f"size_splits {sizes} do not split dimension {axis} of size {t.shape[axis]} into "
                 f"{len(ctx.outputs)} outputs")
    return {"axis": axis, "sections": list(np.cumsum(sizes)[:-1])}


OPS = {
    "CONCATENATION": Op(prepare_concatenation, lambda p, inputs: [np.concatenate(inputs, axis=p["axis"])]),
    "PACK": Op(prepare_pack, lambda p, inputs: [np.stack(inputs, axis=p["axis"])]),
    "UNPACK": Op(prepare_unpack, eval_unpack),
    "SPLIT": Op(prepare_split, lambda p, inputs: np.split(inputs[1], p["sections"], axis=p["axis"])),
    "SPLIT_V": Op(prepare_split_v, lambda p, inputs: np.split(inputs[0], p["sections"], axis=p["axis"])),
}
