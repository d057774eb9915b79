"""SOFTMAX and LOG_SOFTMAX, int8 (spec: outputs fixed at (1/256, -128) and (16/256, 127)).

Prepare (TFLM micro/kernels/softmax_common.cc, log_softmax.cc): ``PreprocessSoftmaxScaling``
turns ``beta * input_scale * 2**26`` (capped at 2**31 - 1) into a multiplier and left shift
that take an input difference to Q5.26; ``diff_min = -CalculateInputRadius(5, shift)`` drops
differences too negative to matter. LOG_SOFTMAX (beta 1) also gets the reverse scaling
divisor of ``PreprocessLogSoftmaxScalingExp``.

Eval (reference softmax.h ``Softmax<int8, int8>``, log_softmax.h ``LogSoftmaxQuantized``),
per row of the last axis: differences from the row maximum, ``exp_on_negative_values`` in
Q5.26 -> Q0.31, summed in Q12.19; SOFTMAX multiplies each exponential by the sum's
reciprocal (``GetReciprocal``) and rounds to Q0.8 - 128; LOG_SOFTMAX subtracts
``log_x_for_x_greater_than_or_equal_to_1`` of the sum and rounds to Q4.3 + 127.
"""

import math

import numpy as np

from .. import gemmlowp
from ..fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from ._base import Op

__all__ = ["OPS"]

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


def _softmax_scaling(ctx, beta, input_scale):
    """``PreprocessSoftmaxScaling`` + ``CalculateInputRadius``: (multiplier, left_shift, diff_min)."""
    real = min(float(beta) * float(input_scale) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    if not real > 1.0:
        ctx.fail(f"beta * input scale = {float(beta) * float(input_scale)!r} is too small: TFLM's "
                 f"QuantizeMultiplierGreaterThanOne needs beta * scale * 2**26 > 1")
    m, left_shift = quantize_multiplier(real)
    radius = math.floor(1.0 * ((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS))
                        / (1 << left_shift))
    return m, left_shift, -radius


def prepare_softmax(ctx):
    ((s_in, _),), _ = ctx.int8_in_out(1)
    ctx.fixed_output()
    if len(ctx.inputs[0].shape) == 0:
        ctx.fail("SOFTMAX needs an input of rank >= 1")
    beta = np.float32(ctx.option("beta", 1.0))
    m, shift, diff_min = _softmax_scaling(ctx, np.float64(beta), np.float64(s_in))
    return _with_tables({"input_multiplier": m, "input_left_shift": shift, "diff_min": diff_min})


def _with_tables(p):
    """An int8 difference from the row maximum is one of -255..0: its Q5.26 rescale and exponential for all 256,
    computed once with the same functions (Eval looks them up)."""
    diff = np.arange(-255, 1, dtype=np.int64)
    # MultiplyByQuantizedMultiplierGreaterThanOne: SRDHM(diff * 2**shift, multiplier)
    rescaled = saturating_rounding_doubling_high_mul(wrap_int32(diff << p["input_left_shift"]),
                                                     p["input_multiplier"]).astype(np.int64)
    p["rescaled_table"] = rescaled
    p["exp_table"] = gemmlowp.exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    return p


def _exps(x, p):
    """Rows of differences from the row maximum, their Q5.26 rescale and exp in Q0.31, the kept mask."""
    depth = x.shape[-1]
    rows = x.reshape(-1, depth).astype(np.int64)
    diff = rows - rows.max(axis=1, keepdims=True)
    kept = diff >= p["diff_min"]
    return diff, p["rescaled_table"][diff + 255], p["exp_table"][diff + 255], kept


def eval_softmax(p, inputs):
    x = inputs[0]
    _, _, exps, kept = _exps(x, p)
    terms = np.where(kept, gemmlowp.rescale(exps, 0, ACCUMULATION_INTEGER_BITS), 0)
    sum_of_exps = wrap_int32(terms.sum(axis=1, keepdims=True)).astype(np.int64)
    shifted_scale, num_bits_over_unit = gemmlowp.get_reciprocal(sum_of_exps, ACCUMULATION_INTEGER_BITS)
    exponent = num_bits_over_unit + 31 - 8
    if np.any(exponent > 31):
        raise ValueError(f"a row of {x.shape[-1]} values sums to exponentials needing a shift of {int(exponent.max())} "
                         f"(> 31) in RoundingDivideByPOT: TFLM aborts on this input (rows of >= 512 equal values)")
    out = rounding_divide_by_pot(gemmlowp.mul(shifted_scale, exps), exponent).astype(np.int64) - 128
    out = np.where(kept, np.clip(out, -128, 127), -128)
    return [out.astype(np.int8).reshape(x.shape)]


def prepare_log_softmax(ctx):
    ((s_in, _),), _ = ctx.int8_in_out(1)
    ctx.fixed_output()
    if len(ctx.inputs[0].shape) == 0:
        ctx.fail("LOG_SOFTMAX needs an input of rank >= 1")
    m, shift, diff_min = _softmax_scaling(ctx, 1.0, np.float64(s_in))
    if shift < 1:
        ctx.fail(f"input scale {float(s_in)!r} is too small: TFLM computes 1 << (31 - {shift}) in int32")
    real_reverse = (1 << (31 - shift)) / float(m)
    if not 0.0 < real_reverse < 1.0:
        ctx.fail(f"the reverse scaling divisor {real_reverse!r} must be in (0, 1)")
    divisor, reverse_left_shift = quantize_multiplier(real_reverse)
    return _with_tables({"input_multiplier": m, "input_left_shift": shift, "diff_min": diff_min,
                         "reverse_scaling_divisor": divisor, "reverse_scaling_right_shift": -reverse_left_shift})


def eval_log_softmax(p, inputs):
    x = inputs[0]
    diff, rescaled, exps, kept = _exps(x, p)
    terms = np.where(kept, gemmlowp.rescale(exps, 0, ACCUMULATION_INTEGER_BITS), 0)
    sum_of_exps = wrap_int32(terms.sum(axis=1, keepdims=True)).astype(np.int64)
    log_sum = gemmlowp.log_x_for_x_greater_than_or_equal_to_1(sum_of_exps, ACCUMULATION_INTEGER_BITS,
                                                              SCALED_DIFF_INTEGER_BITS)
    shifted_log_sum = wrap_int32(log_sum + np.iinfo(np.int32).min)
    adjusted_diff_min = np.maximum(p["diff_min"] - 1, multiply_by_quantized_multiplier(
        shifted_log_sum, p["reverse_scaling_divisor"], -p["reverse_scaling_right_shift"]))
    out = rounding_divide_by_pot(wrap_int32(rescaled - log_sum), 31 - SCALED_DIFF_INTEGER_BITS - 4)
    out = np.clip(out.astype(np.int64) + 127, -128, 127)
    out = np.where(diff > adjusted_diff_min, out, -128)
    return [out.astype(np.int8).reshape(x.shape)]


OPS = {"SOFTMAX": Op(prepare_softmax, eval_softmax), "LOG_SOFTMAX": Op(prepare_log_softmax, eval_log_softmax)}
