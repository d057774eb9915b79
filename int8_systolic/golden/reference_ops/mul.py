"""MUL, int8 (spec: inputs and output int8 per tensor).

TFLM ``CalculateOpDataMul`` (micro/kernels/mul_common.cc): ``real = double(s1) *
double(s2) / double(s_out)`` through QuantizeMultiplier; reference
``integer_ops::MulElementwise``/``BroadcastMul6DSlow``: ``clamp(output_offset +
MultiplyByQuantizedMultiplier((q1 - z1) * (q2 - z2), M, shift))``.
"""

import numpy as np

from ..fixedpoint import quantize_multiplier
from ._base import Op
from ._fast import mbqm
from .broadcast import check_broadcast

__all__ = ["OPS"]


def prepare(ctx):
    ((s1, zp1), (s2, zp2)), (s_out, zp_out) = ctx.int8_in_out(2)
    check_broadcast(ctx, max_rank=6)
    real = np.float64(s1) * np.float64(s2) / np.float64(s_out)
    m, shift = quantize_multiplier(real)
    if shift > 30:
        ctx.fail(f"the output multiplier {float(real)!r} is too large (shift {shift} > 30)")
    act_min, act_max = ctx.fused_activation(s_out, zp_out)
    return {"input1_offset": -zp1, "input2_offset": -zp2, "output_multiplier": m, "output_shift": shift,
            "output_offset": zp_out, "quantized_activation_min": act_min, "quantized_activation_max": act_max}


def eval_mul(p, inputs):
    a = inputs[0].astype(np.int64) + p["input1_offset"]
    b = inputs[1].astype(np.int64) + p["input2_offset"]
    out = mbqm(a * b, p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    return [np.clip(out, p["quantized_activation_min"], p["quantized_activation_max"]).astype(np.int8)]


OPS = {"MUL": Op(prepare, eval_mul)}
