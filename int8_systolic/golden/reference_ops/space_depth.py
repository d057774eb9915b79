"""SPACE_TO_DEPTH, SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (spec: same scale/zero point in and out).

TFLM micro/kernels/space_to_depth.cc (NHWC, ``block_size``), space_to_batch_nd.cc and
batch_to_space_nd.cc (3-D or 4-D input, ``block_shape`` and ``paddings``/``crops`` constant
inputs), reference space_to_batch_nd.h / batch_to_space_nd.h. SPACE_TO_BATCH_ND pads with
the output zero point (real 0), as TFLite's reference kernel (``output_offset``) and LiteRT
do; TFLM's int8 kernel leaves the padding uninitialised.
"""

import numpy as np

from ._base import Op, int32_data

__all__ = ["OPS"]


def _same_q(ctx):
    if ctx.inputs[0].type == "INT8":
        ctx.same_quantization([0], clause=f"the spec requires {ctx.op}'s input and output to have the same "
                                          f"scale/zero_point (TFLM copies raw values)")


def _check_shape(ctx, shape):
    if tuple(ctx.outputs[0].shape) != tuple(shape):
        ctx.fail(f"{ctx.op} gives {list(shape)} but output '{ctx.outputs[0].name}' is {list(ctx.outputs[0].shape)}")


def prepare_space_to_depth(ctx):
    t = ctx.tensor(0)
    _same_q(ctx)
    bs = int(ctx.option("blockSize", 0))
    if len(t.shape) != 4 or bs < 1 or t.shape[1] % bs or t.shape[2] % bs:
        ctx.fail(f"input {list(t.shape)} must be NHWC with height and width divisible by block_size {bs}")
    b, h, w, c = t.shape
    _check_shape(ctx, (b, h // bs, w // bs, c * bs * bs))
    return {"block_size": bs}


def eval_space_to_depth(p, inputs):
    x, bs = inputs[0], p["block_size"]
    b, h, w, c = x.shape
    y = x.reshape(b, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
    return [y.reshape(b, h // bs, w // bs, bs * bs * c)]


def _block_params(ctx, second):
    t = ctx.tensor(0)
    _same_q(ctx)
    if len(t.shape) not in (3, 4):
        ctx.fail(f"input {list(t.shape)} must be 3-D or 4-D")
    block = int32_data(ctx, 1, "block_shape")
    pads = int32_data(ctx, 2, second)
    spatial = len(t.shape) - 2
    if block is None or pads is None:
        ctx.fail(f"block_shape and {second} must be constant tensors")
    if block.size != spatial or pads.size != 2 * spatial:
        ctx.fail(f"block_shape {block.tolist()} and {second} {pads.tolist()} must cover the {spatial} spatial "
                 f"dimension(s)")
    if np.any(block < 1) or np.any(pads < 0):
        ctx.fail(f"block_shape {block.tolist()} must be >= 1 and {second} {pads.tolist()} >= 0")
    return t, [int(v) for v in block], [tuple(int(v) for v in r) for r in pads.reshape(spatial, 2)]


def prepare_space_to_batch(ctx):
    t, block, pads = _block_params(ctx, "paddings")
    padded = [t.shape[1 + i] + a + b for i, (a, b) in enumerate(pads)]
    if any(d % s for d, s in zip(padded, block, strict=True)):
        ctx.fail(f"padded spatial size {padded} is not divisible by block_shape {block}")
    shape = (t.shape[0] * int(np.prod(block)), *[d // s for d, s in zip(padded, block, strict=True)], t.shape[-1])
    _check_shape(ctx, shape)
    pad_value = ctx.quant(ctx.outputs[0], "output")[1] if t.type == "INT8" else 0
    return {"block_shape": block, "paddings": pads, "pad_value": pad_value}


def eval_space_to_batch(p, inputs):
    x = inputs[0]
    block, pads = p["block_shape"], p["paddings"]
    spatial = len(block)
    x = np.pad(x, [(0, 0), *pads, (0, 0)], constant_values=p["pad_value"])
    b, c = x.shape[0], x.shape[-1]
    dims = x.shape[1:-1]
    shape = [b]
    for d, s in zip(dims, block, strict=True):
        shape += [d // s, s]
    y = x.reshape(*shape, c)
    # [b, d0/s0, s0, d1/s1, s1, c] -> [s0, s1, b, d0/s0, d1/s1, c]
    order = [2 + 2 * i for i in range(spatial)] + [0] + [1 + 2 * i for i in range(spatial)] + [1 + 2 * spatial]
    y = y.transpose(order)
    return [y.reshape(b * int(np.prod(block)), *[d // s for d, s in zip(dims, block, strict=True)], c)]


def prepare_batch_to_space(ctx):
    t, block, crops = _block_params(ctx, "crops")
    n = int(np.prod(block))
    if t.shape[0] % n:
        ctx.fail(f"batch {t.shape[0]} is not divisible by the block size product {n}")
    full = [t.shape[1 + i] * s for i, s in enumerate(block)]
    if any(a + b > d for d, (a, b) in zip(full, crops, strict=True)):
        ctx.fail(f"crops {crops} exceed the spatial size {full}")
    shape = (t.shape[0] // n, *[d - a - b for d, (a, b) in zip(full, crops, strict=True)], t.shape[-1])
    _check_shape(ctx, shape)
    return {"block_shape": block, "crops": crops}


def eval_batch_to_space(p, inputs):
    x = inputs[0]
    block, crops = p["block_shape"], p["crops"]
    spatial = len(block)
    b = x.shape[0] // int(np.prod(block))
    dims, c = x.shape[1:-1], x.shape[-1]
    y = x.reshape(*block, b, *dims, c)
    # [s0, s1, b, d0, d1, c] -> [b, d0, s0, d1, s1, c]
    order = [spatial]
    for i in range(spatial):
        order += [spatial + 1 + i, i]
    order.append(2 * spatial + 1)
    y = y.transpose(order).reshape(b, *[d * s for d, s in zip(dims, block, strict=True)], c)
    index = (slice(None), *[slice(a, y.shape[1 + i] - e) for i, (a, e) in enumerate(crops)], slice(None))
    return [np.ascontiguousarray(y[index])]


OPS = {
    "SPACE_TO_DEPTH": Op(prepare_space_to_depth, eval_space_to_depth),
    "SPACE_TO_BATCH_ND": Op(prepare_space_to_batch, eval_space_to_batch),
    "BATCH_TO_SPACE_ND": Op(prepare_batch_to_space, eval_batch_to_space),
}
