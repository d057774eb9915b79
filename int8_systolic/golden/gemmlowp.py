"""gemmlowp's fixed-point arithmetic (fixedpoint/fixedpoint.h) and TFLite's helpers built on it.

The int8 kernels of LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX and L2_NORMALIZATION compute
transcendental functions without tables or floats, in gemmlowp's ``FixedPoint<int32_t, N>``
types: a raw int32 with N integer bits (Q N.(31-N)). Every function here is a vectorised
port of the scalar C++: values are int64 numpy arrays holding int32 raw values, additions
wrap like int32, ``*`` between fixed-point values is SaturatingRoundingDoublingHighMul
(the result has the sum of the integer bits), and ``Rescale``/``ExactMulByPot`` change
the integer bits. Constants are the raw values gemmlowp checks them against.

Sources: gemmlowp fixedpoint/fixedpoint.h (exp_on_negative_values,
one_over_one_plus_x_for_x_in_0_1, logistic, tanh); tensorflow/lite/kernels/internal/
common.h (GetReciprocal, log_x_for_x_greater_than_or_equal_to_1,
GetInvSqrtQuantizedMultiplierExp, SaturatingRoundingMultiplyByPOTParam, CountLeadingZeros).
"""

import numpy as np

from ._checks import INT32_MAX, INT32_MIN
from .fixedpoint import wrap_int32
from .fixedpoint import wrap_int32_in_int64 as _wrap

__all__ = [
    "count_leading_zeros",
    "exp_on_negative_values",
    "get_inv_sqrt_quantized_multiplier_exp",
    "get_reciprocal",
    "log_x_for_x_greater_than_or_equal_to_1",
    "logistic",
    "mul",
    "one_minus_x_over_one_plus_x_for_x_in_0_1",
    "one_over_one_plus_x_for_x_in_0_1",
    "rescale",
    "saturating_rounding_multiply_by_pot",
    "tanh",
]


def mul(a, b):
    """FixedPoint ``operator*``: SaturatingRoundingDoublingHighMul of the raw values, in int64.

    ``floor((a*b + 2**30) / 2**31)``, which equals the C code's nudge and truncating
    division for every pair (see :func:`golden.fixedpoint.saturating_rounding_doubling_high_mul`),
    saturated for INT32_MIN * INT32_MIN.
    """
    return np.minimum((np.asarray(a, np.int64) * b + (1 << 30)) >> 31, INT32_MAX)


def add(a, b):
    return _wrap(np.asarray(a, np.int64) + b)


def sub(a, b):
    return _wrap(np.asarray(a, np.int64) - b)


def neg(a):
    return _wrap(-np.asarray(a, np.int64))


def saturating_add(a, b):
    """TFLite ``SaturatingAddNonGemmlowp`` on int32."""
    return np.clip(np.asarray(a, np.int64) + b, INT32_MIN, INT32_MAX)


def saturating_sub(a, b):
    """TFLite ``SaturatingSub`` on int32."""
    return np.clip(np.asarray(a, np.int64) - b, INT32_MIN, INT32_MAX)


def rounding_half_sum(a, b):
    """gemmlowp ``RoundingHalfSum``: (a + b) / 2 rounded half away from zero, C's truncating division."""
    s = np.asarray(a, np.int64) + b
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t // 2, -((-t) // 2))


def saturating_rounding_multiply_by_pot(x, exponent):
    """``SaturatingRoundingMultiplyByPOT<exponent>``: a saturating left shift, or RoundingDivideByPOT.

    ``exponent`` may be an array (``SaturatingRoundingMultiplyByPOTParam``, which TFLite only
    calls with exponents >= 0).
    """
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    if e.ndim == 0:
        e = int(e)
        if e == 0:
            return x
        if e < 0:   # RoundingDivideByPOT: (x + 2**(r-1) - [x < 0]) >> r, half away from zero
            r = -e
            return (x + (1 << (r - 1)) + (x >> 63)) >> r
        threshold = (1 << (31 - e)) - 1
        # x > threshold saturates to INT32_MAX, x < -threshold to INT32_MIN: clip, shift, and the top value
        # 2**31 down to INT32_MAX
        return np.minimum(np.clip(x, -threshold - 1, threshold + 1) << e, INT32_MAX)
    if np.any(e < 0):
        raise ValueError("an array of exponents must be >= 0 (SaturatingRoundingMultiplyByPOTParam)")
    threshold = (np.int64(1) << (31 - e)) - 1
    shifted = wrap_int32(x << e).astype(np.int64)
    return np.where(e == 0, x, np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, shifted)))


def rescale(x, src_integer_bits, dst_integer_bits):
    """gemmlowp ``Rescale<dst>`` of a FixedPoint with ``src`` integer bits."""
    return saturating_rounding_multiply_by_pot(x, src_integer_bits - dst_integer_bits)


def count_leading_zeros(x):
    """``CountLeadingZeros`` of ``static_cast<uint32_t>(x)`` (32 for 0)."""
    u = np.asarray(x, np.int64) & 0xFFFFFFFF
    _, exponent = np.frexp(u.astype(np.float64))  # exact: u < 2**32, and frexp's exponent is its bit length
    return 32 - exponent.astype(np.int64)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a):
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor expansion around -1/8."""
    constant_term = 1895147668   # exp(-1/8)
    constant_1_over_3 = 715827883
    x = add(a, 1 << 28)          # a + 1/8
    x2 = mul(x, x)
    x3 = mul(x2, x)
    x4 = mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(add(mul(add(x4_over_4, x3), constant_1_over_3), x2), -1)
    return add(constant_term, mul(constant_term, add(x, poly)))


# exp(-2**e) in Q0.31 for the barrel shifter, e = -2..4.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
               (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits):
    """exp(a) for a <= 0 given in Q(integer_bits).(31 - integer_bits); result in Q0.31."""
    a = np.asarray(a, np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_one_quarter = sub(a & (one_quarter - 1), one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_one_quarter, integer_bits, 0))
    remainder = sub(a_mod_quarter_minus_one_quarter, a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a):
    """1 / (1 + a) for a in [0, 1), Q0.31 in and out: three Newton-Raphson steps in Q2.29."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = add(1515870810, mul(half_denominator, -1010580540))   # 48/17 - 32/17 * d
    for _ in range(3):
        one_minus_half_denominator_times_x = sub(1 << 29, mul(half_denominator, x))
        x = add(x, rescale(mul(x, one_minus_half_denominator_times_x), 4, 2))
    return rescale(x, 1, 0)   # ExactMulByPot<-1> of a Q2 value is the same raw in Q1


def one_minus_x_over_one_plus_x_for_x_in_0_1(a):
    """(1 - a) / (1 + a) for a in [0, 1), Q0.31 in and out (gemmlowp, used by tanh)."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = add(1515870810, mul(half_denominator, -1010580540))
    for _ in range(3):
        one_minus_half_denominator_times_x = sub(1 << 29, mul(half_denominator, x))
        x = add(x, rescale(mul(x, one_minus_half_denominator_times_x), 4, 2))
    return rescale(sub(x, 1 << 29), 2, 0)


def logistic(a, integer_bits):
    """gemmlowp ``logistic``: 1 / (1 + exp(-a)) for raw Q(integer_bits) int32 input, Q0.31 output."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, neg(a))
    result_if_positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(neg(abs_input), integer_bits))
    result_if_negative = sub(INT32_MAX, result_if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, result_if_positive, result_if_negative))


def tanh(a, integer_bits):
    """gemmlowp ``tanh`` for raw Q(integer_bits) int32 input, Q0.31 output.

    ``exp(-2|a|)`` is ``exp_on_negative_values`` of ``ExactMulByPot<1>(-|a|)``: the same raw
    value read with one more integer bit.
    """
    a = np.asarray(a, np.int64)
    negative = a < 0
    abs_a = np.where(negative, neg(a), a)
    result = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(neg(abs_a), integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, neg(result), result))


def get_reciprocal(x, x_integer_digits):
    """TFLite ``GetReciprocal``: (1 / x as a Q0.31 ``shifted_scale``, ``num_bits_over_unit``) per element."""
    x = np.asarray(x, np.int64)
    headroom_plus_one = count_leading_zeros(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF
    shifted_sum_minus_one = wrap_int32(shifted - (1 << 31)).astype(np.int64)
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


def log_x_for_x_greater_than_or_equal_to_1(input_val, input_integer_bits, output_integer_bits):
    """TFLite ``log_x_for_x_greater_than_or_equal_to_1_impl``: log(x) for x >= 1, Q(in) in, Q(out) out."""
    accum_bits = output_integer_bits + 1
    log_2, sqrt_sqrt_half, sqrt_half, one_quarter = 1488522236, 1805811301, 1518500250, 536870912
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    shifted_quarter = rescale(one_quarter, 0, accum_bits)

    z_a = np.asarray(input_val, np.int64)
    z_a_headroom_plus_1 = count_leading_zeros(z_a)
    r_a_tmp = saturating_rounding_multiply_by_pot(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = saturating_rounding_multiply_by_pot(mul(r_a_tmp, sqrt_half), 1)
    z_a_pow_2_adj = saturating_add(
        saturating_rounding_multiply_by_pot(input_integer_bits - z_a_headroom_plus_1, 31 - accum_bits),
        shifted_quarter)

    z_b = mul(z_a, sqrt_half)
    z_b_headroom = count_leading_zeros(z_b) - 1
    r_b_raw = saturating_rounding_multiply_by_pot(z_a, z_b_headroom)
    z_b_pow_2_adj = saturating_sub(
        saturating_rounding_multiply_by_pot(input_integer_bits - z_b_headroom, 31 - accum_bits), shifted_quarter)

    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)

    p = rounding_half_sum(r, sqrt_sqrt_half)
    q = sub(r, sqrt_sqrt_half)
    q = add(q, q)
    common_sq = mul(q, q)
    num = add(mul(q, r), mul(mul(q, common_sq), alpha_n))
    denom_minus_one_0 = add(mul(p, add(add(alpha_i, q), mul(alpha_d, common_sq))), mul(alpha_f, q))
    recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one_0)
    num_scaled = rescale(num, 0, accum_bits)
    return rescale(add(mul(z_pow_2_adj, log_2), mul(num_scaled, recip_denom)), accum_bits, output_integer_bits)


def get_inv_sqrt_quantized_multiplier_exp(x, reverse_shift=-1):
    """TFLite ``GetInvSqrtQuantizedMultiplierExp``: 1/sqrt(x) as (multiplier, shift) per element, x >= 0."""
    x = np.asarray(x, np.int64)
    small = x <= 1
    value = np.where(small, 1 << 28, x)       # any value in range; the small ones are replaced at the end
    shift = np.full(value.shape, 11, np.int64)
    while np.any(value >= 1 << 29):
        big = value >= 1 << 29
        value = np.where(big, value // 4, value)
        shift = shift + big
    max_left_shift_bits = count_leading_zeros(value) - 1
    left_shift_bit_pairs = max_left_shift_bits // 2 - 1
    shift = shift - left_shift_bit_pairs
    value = value << (2 * left_shift_bit_pairs)
    fixedpoint_input = value >> 1                                         # Q3.28
    fixedpoint_half_input = saturating_rounding_multiply_by_pot(fixedpoint_input, -1)
    fixedpoint_half_three = (1 << 28) + (1 << 27)
    r = np.full(value.shape, 1 << 28, np.int64)                           # F3::One()
    for _ in range(5):
        x3 = rescale(mul(mul(r, r), r), 9, 3)
        r = rescale(sub(mul(fixedpoint_half_three, r), mul(fixedpoint_half_input, x3)), 6, 3)
    r = mul(r, 1518500250)                                                # * sqrt(2) / 2
    negative = shift < 0
    r = np.where(negative, wrap_int32(r << np.where(negative, -shift, 0)), r).astype(np.int64)
    shift = np.where(negative, 0, shift) * reverse_shift
    return np.where(small, INT32_MAX, r), np.where(small, 0, shift)
