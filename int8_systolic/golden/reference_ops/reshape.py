"""Shape-only ops: RESHAPE, SQUEEZE, EXPAND_DIMS (spec: same scale/zero point in and out) and SHAPE.

TFLM micro/kernels/reshape_common.cc, squeeze.cc, expand_dims.cc, shape.cc: the data is
copied unchanged; RESHAPE's new shape comes from its shape input (constant or computed,
as in models that build it with SHAPE/STRIDED_SLICE/PACK), else from ``new_shape``, with
one -1 resolved from the element count.
"""

import numpy as np

from ._base import Op

__all__ = ["OPS"]


def _same_q(ctx):
    if ctx.inputs[0] is not None and ctx.inputs[0].type == "INT8":
        ctx.same_quantization([0], clause=f"the spec requires {ctx.op}'s input and output to have the same "
                                          f"scale/zero_point (TFLM copies raw values)")


def prepare_reshape(ctx):
    ctx.tensor(0)
    _same_q(ctx)
    shape_t = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    if shape_t is not None and shape_t.type not in ("INT32", "INT64"):
        ctx.fail(f"shape input '{shape_t.name}' must be int32, got {shape_t.type}")
    new_shape = ctx.option("newShape")
    p = {"output_shape": tuple(ctx.outputs[0].shape),
         "new_shape": None if new_shape is None else [int(d) for d in new_shape],
         "shape_input": shape_t is not None, "static_shape": None}
    if shape_t is None or shape_t.data is not None:   # the shape is known now: resolve it once
        inputs = [np.zeros(ctx.inputs[0].shape, np.int8), None if shape_t is None else shape_t.data]
        try:
            p["static_shape"] = eval_reshape(p, inputs)[0].shape
        except ValueError as exc:
            ctx.fail(str(exc))
    return p


def eval_reshape(p, inputs):
    x = inputs[0]
    if p["static_shape"] is not None:
        return [x.reshape(p["static_shape"])]
    if p["shape_input"] and inputs[1] is not None and np.size(inputs[1]):
        shape = [int(d) for d in np.asarray(inputs[1]).reshape(-1)]
    elif p["new_shape"] is not None and len(p["new_shape"]):
        shape = p["new_shape"]
    else:
        shape = list(p["output_shape"])
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1]))
        if known == 0 or x.size % known:
            raise ValueError(f"cannot reshape {x.size} elements to {shape}")
        shape[shape.index(-1)] = x.size // known
    if int(np.prod(shape)) != x.size or any(d < 0 for d in shape):
        raise ValueError(f"cannot reshape {list(x.shape)} ({x.size} elements) to {shape}")
    return [x.reshape(shape)]


def prepare_squeeze(ctx):
    t = ctx.tensor(0)
    _same_q(ctx)
    squeeze_dims = ctx.option("squeezeDims")
    dims = [ctx.axis(d, len(t.shape), "squeeze dimension") for d in ([] if squeeze_dims is None else squeeze_dims)]
    for d in dims:
        if t.shape[d] != 1:
            ctx.fail(f"cannot squeeze dimension {d} of size {t.shape[d]}")
    return {"axis": tuple(dims) if dims else None}


def prepare_expand_dims(ctx):
    t = ctx.tensor(0)
    _same_q(ctx)
    axis_t = ctx.tensor(1, types=("INT32", "INT64"), what="axis")
    if axis_t.data is None or axis_t.data.size != 1:
        ctx.fail("the axis input must be a constant with one element")
    return {"axis": ctx.axis(int(axis_t.data.reshape(-1)[0]), len(t.shape) + 1)}


def prepare_shape(ctx):
    ctx.tensor(0)
    ctx.tensor(0, output=True, types=("INT32",))   # TFLM: "Output type INT64 (4) not supported"
    return {}


OPS = {
    "RESHAPE": Op(prepare_reshape, eval_reshape),
    "SQUEEZE": Op(prepare_squeeze, lambda p, inputs: [np.squeeze(inputs[0], axis=p["axis"])]),
    "EXPAND_DIMS": Op(prepare_expand_dims, lambda p, inputs: [np.expand_dims(inputs[0], p["axis"])]),
    "SHAPE": Op(prepare_shape, lambda p, inputs: [np.array(inputs[0].shape, np.int32)]),
}
