"""Element-wise activations, int8: LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU, PRELU, HARD_SWISH.

* LOGISTIC (spec: output (1/256, -128)) and TANH (spec: output (1/128, 0)): TFLM's
  ``CalculateArithmeticOpDataLogistic``/tanh.cc Prepare rescale the input to Q4.27
  (multiplier from ``frexp(input_scale * 2**27)``, no 2**31 fix-up) with an input radius
  beyond which the output saturates; reference ``integer_ops::Logistic``/``Tanh`` then run
  gemmlowp's fixed-point ``logistic``/``tanh`` and round to Q0.8 / Q0.7.
* RELU (micro/kernels/activations_common.cc ``CalculateReluOpData``, ``ReluQuantized``):
  requantize ``in_scale / out_scale`` (a float32 ratio) and clamp at the output's zero.
* RELU6 (``Relu6Prepare``): clamps raw values to [zp, zp + round(6 / scale)] of the *input*;
  TFLM ignores the output's quantization.
* LEAKY_RELU (leaky_relu_common.cc, reference ``QuantizeLeakyRelu``): two multipliers,
  identity ``float32(in_s / out_s)`` and alpha ``float32(in_s * alpha / out_s)``.
* PRELU (prelu_common.cc, reference ``BroadcastPrelu4DSlow``): a quantized alpha tensor,
  ``(q - z) * (alpha - z_alpha)`` through ``in_s * alpha_s / out_s`` on the negative side.
* HARD_SWISH (hard_swish_common.cc, reference ``HardSwish``): int16 fixed point with a
  "reluish" ramp; multipliers reduced to int16 with ``DownScaleInt32ToInt16Multiplier``.
"""

import math

import numpy as np

from .. import gemmlowp
from ..fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier, rounding_divide_by_pot
from ..logistic import logistic_int8, q4_input_params
from ._base import Op
from .broadcast import check_broadcast

__all__ = ["OPS"]

INPUT_INTEGER_BITS = 4


def _q4_input_params(ctx, s_in):
    """TFLM's shared LOGISTIC/TANH int8 Prepare (:func:`golden.logistic.q4_input_params`)."""
    try:
        return q4_input_params(s_in)
    except ValueError as exc:
        ctx.fail(str(exc))


def prepare_logistic(ctx):
    ((s_in, zp_in),), _ = ctx.int8_in_out(1)
    ctx.fixed_output()
    m, shift, radius = _q4_input_params(ctx, s_in)
    return {"input_zero_point": zp_in, "input_multiplier": m, "input_left_shift": shift,
            "input_range_radius": radius}


def eval_logistic(p, inputs):
    return [logistic_int8(inputs[0], p["input_zero_point"], p["input_multiplier"], p["input_left_shift"],
                          p["input_range_radius"])]


def prepare_tanh(ctx):
    """As LOGISTIC's Prepare (TFLM shares it), with TANH's fixed output."""
    ((s_in, zp_in),), _ = ctx.int8_in_out(1)
    ctx.fixed_output()
    m, shift, radius = _q4_input_params(ctx, s_in)
    return {"input_zero_point": zp_in, "input_multiplier": m, "input_left_shift": shift,
            "input_range_radius": radius}


def eval_tanh(p, inputs):
    """``reference_integer_ops::Tanh``: Q4.27 input, gemmlowp tanh, Q0.7 output, saturation by radius."""
    inp = inputs[0].astype(np.int64) - p["input_zero_point"]
    radius = p["input_range_radius"]
    in_q4 = multiply_by_quantized_multiplier(inp, p["input_multiplier"], p["input_left_shift"])
    out = rounding_divide_by_pot(gemmlowp.tanh(in_q4, INPUT_INTEGER_BITS), 31 - 7).astype(np.int64)
    out = np.clip(out, -128, 127)
    return [np.where(inp <= -radius, -128, np.where(inp >= radius, 127, out)).astype(np.int8)]


def _multiplier(ctx, real, what):
    m, shift = quantize_multiplier(abs(float(real)))
    if shift > 30:
        ctx.fail(f"{what} {float(real)!r} is too large for MultiplyByQuantizedMultiplier (shift {shift} > 30)")
    return (-m if real < 0 else m), shift


def prepare_relu(ctx):
    ((s_in, zp_in),), (s_out, zp_out) = ctx.int8_in_out(1)
    m, shift = _multiplier(ctx, np.float64(s_in / s_out), "the input/output scale ratio")
    return {"input_offset": zp_in, "output_offset": zp_out, "output_multiplier": m, "output_shift": shift,
            "quantized_activation_min": max(-128, zp_out), "quantized_activation_max": 127}


def eval_relu(p, inputs):
    v = multiply_by_quantized_multiplier(inputs[0].astype(np.int64) - p["input_offset"], p["output_multiplier"],
                                         p["output_shift"]).astype(np.int64) + p["output_offset"]
    return [np.clip(v, p["quantized_activation_min"], p["quantized_activation_max"]).astype(np.int8)]


def prepare_relu6(ctx):
    ((s_in, zp_in),), _ = ctx.int8_in_out(1)
    six = zp_in + int(_round_half_away(np.float32(6.0) / s_in))
    return {"zero": zp_in, "six": min(127, max(-128, six))}


def _round_half_away(x):
    t = math.trunc(float(x))
    return t + (1 if x - t >= 0.5 else -1 if t - x >= 0.5 else 0)


def eval_relu6(p, inputs):
    return [np.clip(inputs[0], p["zero"], p["six"]).astype(np.int8)]


def prepare_leaky_relu(ctx):
    ((s_in, zp_in),), (s_out, zp_out) = ctx.int8_in_out(1)
    alpha = np.float32(ctx.option("alpha", 0.0))
    m_alpha, sh_alpha = _multiplier(ctx, np.float64(s_in * alpha / s_out), "alpha's multiplier")
    m_id, sh_id = _multiplier(ctx, np.float64(s_in / s_out), "the identity multiplier")
    return {"input_offset": zp_in, "output_offset": zp_out, "output_multiplier_alpha": m_alpha,
            "output_shift_alpha": sh_alpha, "output_multiplier_identity": m_id, "output_shift_identity": sh_id}


def eval_leaky_relu(p, inputs):
    """``QuantizeLeakyRelu``: identity multiplier for q >= z, alpha's (sign kept apart) below."""
    v = inputs[0].astype(np.int64) - p["input_offset"]
    m_alpha = p["output_multiplier_alpha"]
    ident = multiply_by_quantized_multiplier(v, p["output_multiplier_identity"], p["output_shift_identity"])
    scaled = multiply_by_quantized_multiplier(v, abs(m_alpha), p["output_shift_alpha"]).astype(np.int64)
    neg = -scaled if m_alpha < 0 else scaled
    out = p["output_offset"] + np.where(v >= 0, ident, neg)
    return [np.clip(out, -128, 127).astype(np.int8)]


def prepare_prelu(ctx):
    ((s_in, zp_in), (s_alpha, zp_alpha)), (s_out, zp_out) = ctx.int8_in_out(2)
    check_broadcast(ctx, max_rank=4)
    m1, sh1 = _multiplier(ctx, np.float64(s_in) / np.float64(s_out), "the identity multiplier")
    m2, sh2 = _multiplier(ctx, np.float64(s_in) * np.float64(s_alpha) / np.float64(s_out), "alpha's multiplier")
    return {"input_offset": -zp_in, "alpha_offset": -zp_alpha, "output_offset": zp_out,
            "output_multiplier_1": m1, "output_shift_1": sh1, "output_multiplier_2": m2, "output_shift_2": sh2}


def eval_prelu(p, inputs):
    x = inputs[0].astype(np.int64) + p["input_offset"]
    a = inputs[1].astype(np.int64) + p["alpha_offset"]
    x, a = np.broadcast_arrays(x, a)
    pos = multiply_by_quantized_multiplier(x, p["output_multiplier_1"], p["output_shift_1"])
    neg = multiply_by_quantized_multiplier(x * a, p["output_multiplier_2"], p["output_shift_2"])
    out = np.where(x >= 0, pos, neg).astype(np.int64) + p["output_offset"]
    return [np.clip(out, -128, 127).astype(np.int8)]


def _downscale_to_int16(m):
    """``DownScaleInt32ToInt16Multiplier``."""
    return 32767 if m >= 2**31 - 1 - (1 << 15) else (m + (1 << 15)) >> 16


def prepare_hard_swish(ctx):
    ((s_in, zp_in),), (s_out, zp_out) = ctx.int8_in_out(1)
    hires_input_scale = np.float32(1.0 / 128.0) * s_in
    reluish_scale = np.float32(3.0) / np.float32(32768.0)
    m_out, e_out = quantize_multiplier(np.float64(hires_input_scale / s_out))
    if e_out > 0:
        ctx.fail(f"output scale {float(s_out)!r} is too small for the input scale {float(s_in)!r}: TFLM requires "
                 f"the output multiplier's exponent <= 0, got {e_out}")
    m_rel, e_rel = quantize_multiplier(np.float64(hires_input_scale / reluish_scale))
    return {"input_zero_point": zp_in, "output_zero_point": zp_out,
            "output_multiplier_fixedpoint_int16": _downscale_to_int16(m_out), "output_multiplier_exponent": e_out,
            "reluish_multiplier_fixedpoint_int16": _downscale_to_int16(m_rel), "reluish_multiplier_exponent": e_rel}


def _wrap16(x):
    return ((np.asarray(x, np.int64) + 2**15) & 0xFFFF) - 2**15


def _srdhm16(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul on int16."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    s = ab + nudge
    q = np.where(s >= 0, s // (1 << 15), -((-s) // (1 << 15)))
    return np.where((a == b) & (a == -32768), 32767, _wrap16(q))


def _rdbpot16(x, exponent):
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def eval_hard_swish(p, inputs):
    """``reference_ops::HardSwish`` for int8, every intermediate an int16 as in the C++."""
    v = inputs[0].astype(np.int64) - p["input_zero_point"]
    hires = v * (1 << 7)
    preshift_out_scale = _srdhm16(hires, p["output_multiplier_fixedpoint_int16"])
    reluish = hires
    e = p["reluish_multiplier_exponent"]
    if e > 0:
        reluish = np.clip(reluish * (1 << (e - 1)), -32768, 32767)
    reluish = _srdhm16(reluish, p["reluish_multiplier_fixedpoint_int16"])
    if e > 0:
        reluish = np.clip(reluish * 2, -32768, 32767)
    if e < 0:
        reluish = _rdbpot16(reluish, -e)
    reluish = _wrap16((reluish + (1 << 15)) >> 1)
    ab = reluish * preshift_out_scale
    preshift_output = np.where((reluish == preshift_out_scale) & (reluish == -32768), 32767,
                               _wrap16(np.where(ab >= 0, ab // (1 << 15), -((-ab) // (1 << 15)))))
    out = _wrap16(_rdbpot16(preshift_output, -p["output_multiplier_exponent"]) + p["output_zero_point"])
    return [np.clip(out, -128, 127).astype(np.int8)]


OPS = {
    "LOGISTIC": Op(prepare_logistic, eval_logistic, unary=True),
    "TANH": Op(prepare_tanh, eval_tanh, unary=True),
    "RELU": Op(prepare_relu, eval_relu, unary=True),
    "RELU6": Op(prepare_relu6, eval_relu6, unary=True),
    "LEAKY_RELU": Op(prepare_leaky_relu, eval_leaky_relu, unary=True),
    "PRELU": Op(prepare_prelu, eval_prelu),
    "HARD_SWISH": Op(prepare_hard_swish, eval_hard_swish, unary=True),
}
