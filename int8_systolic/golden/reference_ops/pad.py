"""PAD and PADV2 (spec: same scale/zero point in and out).

TFLM micro/kernels/pad_common.cc, pad.cc: constant int32 paddings [rank, 2] (before,
after), up to 5-D; PAD fills int8 with the output's zero point (real 0), PADV2 with its constant
value, which must be quantized as the output.
"""

import numpy as np

from ._base import Op, int32_data

__all__ = ["OPS"]


def prepare(ctx):
    t = ctx.tensor(0)
    out = ctx.tensor(0, output=True)
    if t.type != out.type:
        ctx.fail(f"input is {t.type} but output is {out.type}")
    if t.type == "INT8":
        ctx.same_quantization([0], clause=f"the spec requires {ctx.op}'s input and output to have the same "
                                          f"scale/zero_point (TFLM copies raw values)")
    rank = len(t.shape)
    if rank > 5:
        ctx.fail(f"TFLM's {ctx.op} takes up to 5 dimensions, got {rank}")
    ctx.tensor(1, types=("INT32",), what="paddings")   # TFLM reads them as int32_t
    paddings = int32_data(ctx, 1, "paddings")
    if paddings is None:
        ctx.fail("paddings must be a constant tensor (TFLM requires it)")
    if paddings.size != 2 * rank:
        ctx.fail(f"paddings have {paddings.size} entries; a rank-{rank} input needs [{rank}, 2]")
    paddings = paddings.reshape(rank, 2)
    if np.any(paddings < 0):
        ctx.fail(f"paddings {paddings.tolist()} must be >= 0")
    expected = tuple(int(d + a + b) for d, (a, b) in zip(t.shape, paddings, strict=True))
    if tuple(out.shape) != expected:
        ctx.fail(f"padding {list(t.shape)} by {paddings.tolist()} gives {list(expected)}, but output '{out.name}' "
                 f"is {list(out.shape)}")
    params = {"paddings": tuple(map(tuple, paddings.tolist()))}
    constant = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    if constant is not None:
        if constant.type != t.type or (constant.data is not None and constant.data.size != 1):
            ctx.fail(f"the constant value '{constant.name}' must be one {t.type} element")
        if t.type == "INT8" and (ctx.quant(constant, "constant value") != ctx.quant(out, "output")):
            ctx.fail(f"the constant value '{constant.name}' must be quantized as the output (TFLM requires it)")
        params["pad_value"] = None
    elif t.type == "INT8":
        params["pad_value"] = ctx.quant(out, "output")[1]
    else:
        params["pad_value"] = 0
    return params


def eval_pad(p, inputs):
    x = inputs[0]
    value = p["pad_value"] if p["pad_value"] is not None else np.asarray(inputs[2]).reshape(-1)[0]
    out = np.full(tuple(d + a + b for d, (a, b) in zip(x.shape, p["paddings"], strict=True)), value, x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, p["paddings"], strict=True))] = x
    return [out]


OPS = {"PAD": Op(prepare, eval_pad), "PADV2": Op(prepare, eval_pad)}
