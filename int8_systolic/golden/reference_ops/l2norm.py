"""L2_NORMALIZATION, int8 (spec: output fixed at (1/128, 0)).

TFLM micro/kernels/l2norm.cc (no fused activation; rank <= 4) and reference
``integer_ops::L2Normalization``: per row of the last axis, ``acc = sum((q - z)**2)`` in
int32, ``GetInvSqrtQuantizedMultiplierExp(acc, -1)`` (a Newton-Raphson 1/sqrt in Q3.28),
then ``MultiplyByQuantizedMultiplier(q - z, inv, shift + 7)`` clamped to int8.
"""

import numpy as np

from .. import gemmlowp
from ..fixedpoint import multiply_by_quantized_multiplier, wrap_int32
from ._base import Op

__all__ = ["OPS"]


def prepare(ctx):
    ((_, zp_in),), _ = ctx.int8_in_out(1)
    ctx.fixed_output()
    if len(ctx.inputs[0].shape) > 4:
        ctx.fail(f"input of rank {len(ctx.inputs[0].shape)}: TFLM's L2_NORMALIZATION takes rank <= 4")
    if ctx.option("fusedActivationFunction", 0) != 0:
        ctx.fail("TFLM's L2_NORMALIZATION supports no fused activation")
    return {"input_zero_point": zp_in}


def eval_l2norm(p, inputs):
    x = inputs[0]
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64) - p["input_zero_point"]
    acc = wrap_int32((rows * rows).sum(axis=1, keepdims=True)).astype(np.int64)
    inv, shift = gemmlowp.get_inv_sqrt_quantized_multiplier_exp(np.maximum(acc, 0), -1)
    out = multiply_by_quantized_multiplier(rows, inv, shift + 7)
    return [np.clip(out, -128, 127).astype(np.int8).reshape(x.shape)]


OPS = {"L2_NORMALIZATION": Op(prepare, eval_l2norm)}
