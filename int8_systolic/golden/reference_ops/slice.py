"""SLICE and STRIDED_SLICE (spec: same scale/zero point in and out), raw values copied.

SLICE (TFLM micro/kernels/slice.cc): begin and size (size -1 = to the end), up to 5-D.
STRIDED_SLICE (strided_slice_common.cc, kernels/internal/strided_slice_logic.h
``StartForAxis``/``StopForAxis``), up to 4-D: constant int32 begin/end/strides with
begin_mask, end_mask and
shrink_axis_mask; indices are wrapped once if negative, then clamped to the axis. TFLM
does not implement ellipsis_mask, new_axis_mask or offset (they are refused), and reads
out of bounds for a shrunk axis whose index is outside the dimension or whose stride is
negative: such a slice is refused here with the offending axis named.
"""

import numpy as np

from ._base import Op

__all__ = ["OPS"]


def _same_q(ctx):
    if ctx.inputs[0].type == "INT8":
        ctx.same_quantization([0], clause=f"the spec requires {ctx.op}'s input and output to have the same "
                                          f"scale/zero_point (TFLM copies raw values)")


def _ints(values):
    return [int(v) for v in np.asarray(values).reshape(-1)]


def prepare_slice(ctx):
    t = ctx.tensor(0)
    _same_q(ctx)
    for i, what in ((1, "begin"), (2, "size")):
        ctx.tensor(i, types=("INT32", "INT64"), what=what)
    if len(t.shape) > 5:
        ctx.fail(f"TFLM's SLICE takes up to 5 dimensions, got {len(t.shape)}")
    return {}


def eval_slice(p, inputs):
    x, begin, size = inputs[0], _ints(inputs[1]), _ints(inputs[2])
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise ValueError(f"begin {begin} and size {size} need {x.ndim} entries")
    index = []
    for axis, (b, s, dim) in enumerate(zip(begin, size, x.shape, strict=True)):
        end = dim if s == -1 else b + s
        if not (0 <= b <= dim and b <= end <= dim):
            raise ValueError(f"axis {axis}: begin {b}, size {s} is outside the dimension of size {dim}")
        index.append(slice(b, end))
    return [x[tuple(index)]]


def prepare_strided_slice(ctx):
    t = ctx.tensor(0)
    _same_q(ctx)
    for i, what in ((1, "begin"), (2, "end"), (3, "strides")):
        ctx.tensor(i, types=("INT32",), what=what)
        ctx.const(i, what)   # TFLM sizes the output from them in Prepare
    if ctx.option("ellipsisMask", 0) or ctx.option("newAxisMask", 0) or ctx.option("offset", False):
        ctx.fail("ellipsis_mask, new_axis_mask and offset are not supported by TFLM's STRIDED_SLICE")
    if len(t.shape) > 4:
        ctx.fail(f"TFLM's STRIDED_SLICE takes up to 4 dimensions, got {len(t.shape)}")
    p = {"begin_mask": ctx.option("beginMask", 0), "end_mask": ctx.option("endMask", 0),
         "shrink_axis_mask": ctx.option("shrinkAxisMask", 0), "output_shape": tuple(ctx.outputs[0].shape),
         "index": None}
    # begin/end/strides are constants and the input shape is static: the slice is known now
    try:
        p["index"] = _index(p, t.shape, *(ctx.const(i) for i in (1, 2, 3)))
    except ValueError as exc:
        ctx.fail(str(exc))
    return p


def _clamp(v, lo, hi):
    return min(max(v, lo), hi)


def strided_slice_index(shape, begin, end, strides, begin_mask, end_mask, shrink_axis_mask):
    """Per-axis (start, stop, stride) as TFLite's ``StartForAxis``/``StopForAxis`` compute them.

    Raises ``ValueError`` naming the axis for what TFLM cannot compute: a zero stride, a
    shrunk axis with a negative stride or with an index outside the dimension.
    """
    out = []
    for axis, dim in enumerate(shape):
        stride = strides[axis]
        if stride == 0:
            raise ValueError(f"stride 0 on axis {axis}")
        shrink = shrink_axis_mask >> axis & 1
        if dim == 0:
            out.append((0, 0, stride, shrink))
            continue
        start = begin[axis]
        if begin_mask >> axis & 1:
            start = 0 if stride > 0 else dim - 1
        elif start < 0:
            start += dim
        start = _clamp(start, 0, dim) if stride > 0 else _clamp(start, -1, dim - 1)
        if shrink:
            if stride < 0:
                raise ValueError(f"shrink_axis_mask on axis {axis} with negative stride {stride} (TFLM copies "
                                 f"nothing there)")
            if start >= dim:
                raise ValueError(f"shrink_axis_mask on axis {axis}: index {begin[axis]} is outside the dimension "
                                 f"of size {dim} (TFLM would read out of bounds)")
            out.append((start, start + 1, 1, True))
            continue
        if end_mask >> axis & 1:
            stop = dim if stride > 0 else -1
        else:
            stop = end[axis] + dim if end[axis] < 0 else end[axis]
            stop = _clamp(stop, 0, dim) if stride > 0 else _clamp(stop, -1, dim - 1)
        out.append((start, stop, stride, False))
    return out


def _index(p, shape, begin, end, strides):
    """The numpy index of the slice (``ValueError`` for what TFLM cannot compute)."""
    begin, end, strides = _ints(begin), _ints(end), _ints(strides)
    if not len(begin) == len(end) == len(strides) == len(shape):
        raise ValueError(f"begin, end and strides need {len(shape)} entries, got {begin}, {end}, {strides}")
    axes = strided_slice_index(shape, begin, end, strides, p["begin_mask"], p["end_mask"], p["shrink_axis_mask"])
    # A negative stride from -1 is empty in TFLite; Python would read -1 as the last element.
    index = tuple(slice(0, 0) if s < 0 and a < 0 else slice(a, None if b < 0 else b, s) for a, b, s, _ in axes)
    sliced = np.empty(shape, np.bool_)[index].shape
    kept = tuple(d for d, (_, _, _, shrink) in zip(sliced, axes, strict=True) if not shrink)
    if int(np.prod(kept)) != int(np.prod(p["output_shape"])):
        raise ValueError(f"the slice has shape {list(kept)} but the output tensor is {list(p['output_shape'])}")
    return index


def eval_strided_slice(p, inputs):
    index = p["index"] if p["index"] is not None else _index(p, inputs[0].shape, *inputs[1:4])
    return [inputs[0][index].reshape(p["output_shape"])]


OPS = {"SLICE": Op(prepare_slice, eval_slice), "STRIDED_SLICE": Op(prepare_strided_slice, eval_strided_slice)}
