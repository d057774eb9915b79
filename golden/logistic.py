"""int8 LOGISTIC, bit-exact with TFLite-Micro's reference kernel.

TFLM computes int8 sigmoid without tables or floats at run time:

* ``Prepare`` (tensorflow/lite/micro/kernels/logistic_common.cc): the input is rescaled
  to Q4.27 (``kInputIntegerBits = 4``) by a multiplier from ``frexp(input_scale * 2**27)``,
  rounded with ``TfLiteRound`` and *no* 2**31 fix-up, and ``input_range_radius`` =
  ``floor(15 * 2**27 / 2**input_left_shift)`` (``CalculateInputRadius``) bounds the
  inputs that are not saturated;
* ``reference_integer_ops::Logistic`` (integer_ops/logistic.h): inputs at or beyond the
  radius saturate to -128/127; the others go through ``MultiplyByQuantizedMultiplier``
  into Q4.27, gemmlowp's fixed-point ``logistic`` (fixedpoint/fixedpoint.h: exp on
  negative values by a Taylor step and a barrel shifter, 1/(1+x) by Newton-Raphson), a
  rounding shift to Q0.8 and the output zero point -128.

Each gemmlowp helper below is a vectorised port of the scalar int32 version: values are
int64 numpy arrays holding int32 raw fixed-point numbers, and additions wrap like int32.
"""

import math

import numpy as np

from ._checks import INT32_MAX, INT32_MIN, finite_real, int_array, zero_point_param
from .fixedpoint import (
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)

__all__ = ["logistic", "logistic_int8", "logistic_int8_params"]

INPUT_INTEGER_BITS = 4  # TFLM's kInputIntegerBits for int8


def _mul(a, b):
    """FixedPoint ``operator*``: SaturatingRoundingDoublingHighMul of the raw values."""
    return saturating_rounding_doubling_high_mul(a, b).astype(np.int64)


def _add(a, b):
    return wrap_int32(np.asarray(a, np.int64) + b).astype(np.int64)


def _sub(a, b):
    return wrap_int32(np.asarray(a, np.int64) - b).astype(np.int64)


def _neg(a):
    return wrap_int32(-np.asarray(a, np.int64)).astype(np.int64)


def _rounding_half_sum(a, b):
    """(a + b) / 2 rounded half away from zero, with C's truncating division."""
    s = np.asarray(a, np.int64) + b
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def _mul_by_pot(x, exponent):
    """``SaturatingRoundingMultiplyByPOT<exponent>``: saturating left shift or rounding right shift."""
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent).astype(np.int64)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor expansion around -1/8."""
    constant_term = 1895147668   # exp(-1/8)
    constant_1_over_3 = 715827883
    x = _add(a, 1 << 28)         # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _mul_by_pot(x4, -2)
    poly = _mul_by_pot(_add(_mul(_add(x4_over_4, x3), constant_1_over_3), x2), -1)
    return _add(constant_term, _mul(constant_term, _add(x, poly)))


# exp(-2**e) in Q0.31 for the barrel shifter, e = -2..4.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))


def _exp_on_negative_values(a, integer_bits):
    """exp(a) for a <= 0 given in Q(integer_bits).(31 - integer_bits); result in Q0.31."""
    a = np.asarray(a, np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = _sub(a & (one_quarter - 1), one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        _mul_by_pot(a_mod_quarter_minus_one_quarter, integer_bits))   # Rescale<0>
    remainder = _sub(a_mod_quarter_minus_one_quarter, a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, _mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def _one_over_one_plus_x_for_x_in_0_1(a):
    """1 / (1 + a) for a in (0, 1), Q0.31 in and out: three Newton-Raphson steps in Q2.29."""
    half_denominator = _rounding_half_sum(a, INT32_MAX)
    x = _add(1515870810, _mul(half_denominator, -1010580540))   # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus_half_denominator_times_x = _sub(1 << 29, _mul(half_denominator, x))
        x = _add(x, _mul_by_pot(_mul(x, one_minus_half_denominator_times_x), 2))   # Rescale<2> from Q4
    return _mul_by_pot(x, 1)   # ExactMulByPot<-1> then Rescale<0> from Q1


def logistic(a, integer_bits=INPUT_INTEGER_BITS):
    """gemmlowp ``logistic``: 1 / (1 + exp(-a)) for raw Q(integer_bits) int32 input, Q0.31 output."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, _neg(a))
    result_if_positive = _one_over_one_plus_x_for_x_in_0_1(_exp_on_negative_values(_neg(abs_input), integer_bits))
    result_if_negative = _sub(INT32_MAX, result_if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, result_if_positive, result_if_negative))


def logistic_int8_params(input_scale, input_zero_point, output_scale, output_zero_point):
    """TFLM ``CalculateArithmeticOpDataLogistic`` for int8: (input_multiplier, input_left_shift, input_range_radius).

    The output must be quantized with zero point -128 (TFLM checks this) and scale 1/256
    (the kernel assumes it: it writes ``round(sigmoid * 256) - 128``).
    """
    input_scale = finite_real("input_scale", input_scale)
    if not input_scale > 0:
        raise ValueError(f"input_scale must be > 0, got {input_scale}")
    zero_point_param("input_zero_point", input_zero_point)
    if int(output_zero_point) != -128:
        raise ValueError(f"LOGISTIC int8 output_zero_point must be -128 (TFLM requires it), got {output_zero_point}")
    if float(np.float32(output_scale)) != 1.0 / 256:
        raise ValueError(f"LOGISTIC int8 output_scale must be 1/256 (the kernel's fixed output format), "
                         f"got {output_scale}")
    real = float(np.float32(input_scale)) * float(1 << (31 - INPUT_INTEGER_BITS))
    q, left_shift = math.frexp(real)
    if left_shift < 0 or left_shift > 30:
        raise ValueError(f"LOGISTIC input_scale {input_scale} is outside the range TFLM's kernel handles "
                         f"(input_left_shift {left_shift} not in [0, 30])")
    scaled = q * (1 << 31)
    multiplier = math.floor(abs(scaled) + 0.5)   # TfLiteRound: half away from zero, q > 0
    if multiplier == 1 << 31:
        multiplier = INT32_MIN  # static_cast<int32_t>(2^31) on x86; TFLM has no fix-up here
    max_input_rescaled = 1.0 * ((1 << INPUT_INTEGER_BITS) - 1) * (1 << (31 - INPUT_INTEGER_BITS)) / (1 << left_shift)
    return multiplier, left_shift, math.floor(max_input_rescaled)


def logistic_int8(x, input_zero_point, input_multiplier, input_left_shift, input_range_radius):
    """``reference_integer_ops::Logistic`` for int8 (output zero point -128, scale 1/256)."""
    x = int_array("input", x, np.int8).astype(np.int64)
    inp = x - int(input_zero_point)
    in_q4 = multiply_by_quantized_multiplier(inp, input_multiplier, input_left_shift)
    out_q0 = logistic(in_q4, INPUT_INTEGER_BITS)
    out_q23 = rounding_divide_by_pot(out_q0, 31 - 8).astype(np.int64)
    out = np.clip(out_q23 - 128, -128, 127)
    out = np.where(inp <= -input_range_radius, -128, np.where(inp >= input_range_radius, 127, out))
    return out.astype(np.int8)
