"""Fixed-point requantization primitives, bit-exact with TFLite and gemmlowp.

Sources mirrored here:

* ``QuantizeMultiplier`` and ``QuantizeMultiplierSmallerThanOneExp``:
  tensorflow/lite/kernels/internal/quantization_util.cc
* ``SaturatingRoundingDoublingHighMul`` and ``RoundingDivideByPOT``: gemmlowp
  fixedpoint/fixedpoint.h
* ``MultiplyByQuantizedMultiplier`` (both the default "double rounding" form and the
  ``TFLITE_SINGLE_ROUNDING`` form): tensorflow/lite/kernels/internal/common.h/.cc

All functions are vectorised: integer arguments may be numpy arrays that broadcast
against each other (for example an accumulator matrix against per-channel multipliers
and shifts). Arithmetic is carried in int64 and results are int32. Where TFLite's C++
overflows a signed int32 (undefined behaviour that every compiler we care about turns
into two's-complement wrap-around) we wrap explicitly, because that is what TFLite
computes in practice.
"""

import numpy as np

from ._checks import INT32_MAX, INT32_MIN, int_array, rounding_param

__all__ = [
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "quantize_multiplier",
    "quantize_multiplier_smaller_than_one_exp",
    "round_half_away",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "wrap_int32",
    "wrap_int32_in_int64",
]


def wrap_int32(x):
    """Reduce integers to int32 with two's-complement wrap-around (what C++ ``int32_t`` += does)."""
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuO":
        raise ValueError(f"x must be integers (int64 or Python ints), got dtype {arr.dtype}")
    return wrap_int32_in_int64(arr).astype(np.int32)


def wrap_int32_in_int64(x):
    """:func:`wrap_int32` keeping int64 storage, for int64 pipelines that go on computing."""
    return ((np.asarray(x, dtype=np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def round_half_away(x):
    """``std::round`` / ``roundf``: round to nearest, ties away from zero, in x's own precision.

    Computed as trunc(x) plus a carry when the discarded fraction is at least one half;
    ``x - trunc(x)`` is exact in floating point, so there is no double rounding (unlike
    ``floor(x + 0.5)``, which rounds 0.49999997f up).
    """
    x = np.asarray(x)
    t = np.trunc(x)
    return t + np.sign(x) * (np.abs(x - t) >= 0.5)


def quantize_multiplier(real_multiplier, rounding="double"):
    """Decompose a real multiplier into a Q0.31 mantissa and a power-of-two shift.

    ``real_multiplier ~= multiplier * 2**(shift - 31)``, mirroring TFLite's
    ``QuantizeMultiplier``: ``frexp``, round half away from zero of ``q * 2**31``, the
    fix-up when that rounds to exactly ``2**31`` (halve it, increment the shift), and
    the flush of multipliers below about 2^-31 to ``(0, 0)`` when ``shift < -31``.
    With ``rounding="single"`` (``TFLITE_SINGLE_ROUNDING`` builds) a shift above 30 is
    saturated to ``(2**31 - 1, 30)`` as TFLite does.

    Accepts a scalar or an array of non-negative finite reals (float64, as TFLite
    computes the effective scale in double). Returns ``(multiplier, shift)`` as Python
    ints for a scalar, int32/int64 arrays for an array.
    """
    rounding_param(rounding)
    real = np.asarray(real_multiplier, dtype=np.float64)
    if not np.all(np.isfinite(real)) or np.any(real < 0):
        raise ValueError(f"real_multiplier must be finite and >= 0, got {real_multiplier!r}")
    mantissa, shift = np.frexp(real)
    q_fixed = round_half_away(mantissa * 2.0**31).astype(np.int64)
    shift = shift.astype(np.int64)
    carry = q_fixed == 2**31
    q_fixed = np.where(carry, q_fixed // 2, q_fixed)
    shift = np.where(carry, shift + 1, shift)
    flush = shift < -31
    q_fixed = np.where(flush, 0, q_fixed)
    shift = np.where(flush, 0, shift)
    if rounding == "single":
        sat = shift > 30
        q_fixed = np.where(sat, INT32_MAX, q_fixed)
        shift = np.where(sat, 30, shift)
    zero = real == 0.0
    q_fixed = np.where(zero, 0, q_fixed)
    shift = np.where(zero, 0, shift)
    if real.ndim == 0:
        return int(q_fixed), int(shift)
    return q_fixed.astype(np.int32), shift


def quantize_multiplier_smaller_than_one_exp(real_multiplier):
    """TFLite's ``QuantizeMultiplierSmallerThanOneExp``: requires 0 < m < 1, returns (multiplier, shift <= 0)."""
    m = float(real_multiplier)
    if not 0.0 < m < 1.0:
        raise ValueError(f"real_multiplier must be in (0, 1) for QuantizeMultiplierSmallerThanOneExp, got {m!r}")
    return quantize_multiplier(m)  # frexp of m < 1 gives shift <= 0


def _int32_operand(name, x):
    """An integer operand of a gemmlowp primitive, checked to lie in int32 (the C functions take int32), as int64."""
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an int32 value or array (the primitive's C operand type), got dtype "
                         f"{arr.dtype}")
    if arr.dtype.itemsize > 4 or arr.dtype == np.uint32:
        int_array(name, arr, np.int32)
    return arr.astype(np.int64)


def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 operands.

    ``(a * b + nudge) / 2**31`` with C's truncating division, nudge ``2**30`` for a
    non-negative product and ``1 - 2**30`` otherwise. That is ``a*b/2**31`` rounded to
    nearest with ties toward +infinity: a positive tie rounds away from zero but a
    negative tie rounds toward zero (the ``1 -`` in the negative nudge). The one
    overflowing case ``INT32_MIN * INT32_MIN`` saturates to ``INT32_MAX``.
    """
    ab = _int32_operand("a", a) * _int32_operand("b", b)
    # The C code's trunc((ab + nudge) / 2**31), nudge 2**30 or 1 - 2**30 by the sign of ab, equals
    # floor((ab + 2**30) / 2**31) for every ab: for ab = -t < 0, trunc((1 - 2**30 - t) / 2**31) =
    # -floor((t + 2**30 - 1) / 2**31) = floor((2**30 - t) / 2**31). So one add and an arithmetic
    # shift. Only INT32_MIN * INT32_MIN = 2**62 yields 2**31, one above INT32_MAX: a minimum.
    return np.minimum((ab + (1 << 30)) >> 31, INT32_MAX).astype(np.int32)


def rounding_divide_by_pot(x, exponent):
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero, 0 <= exponent <= 31."""
    x = _int32_operand("x", x)
    exponent = _int32_operand("exponent", exponent)
    if np.any(exponent < 0) or np.any(exponent > 31):
        bad = int(exponent.min()) if np.any(exponent < 0) else int(exponent.max())
        raise ValueError(f"exponent must be in [0, 31], got {bad}")
    if exponent.size > 1 and np.all(exponent == exponent.flat[0]):
        exponent = exponent.flat[0]  # a scalar shift is several times faster in numpy
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) - (x >> 63)  # + 1 for negative x
    return ((x >> exponent) + ((x & mask) > threshold)).astype(np.int32)


def _check_requant_args(x, quantized_multiplier, shift, rounding):
    rounding_param(rounding)
    x = int_array("x", x, np.int32).astype(np.int64)
    lo_m = 0 if rounding == "single" else INT32_MIN
    m = int_array("quantized_multiplier", quantized_multiplier, np.int32, lo=lo_m).astype(np.int64)
    s = int_array("shift", shift, np.int64, lo=-31, hi=30)
    return x, m, s


def multiply_by_quantized_multiplier(x, quantized_multiplier, shift, rounding="double"):
    """TFLite's ``MultiplyByQuantizedMultiplier``: ``x * multiplier * 2**(shift-31)``, rounded, as int32.

    ``rounding="double"`` (the default; TFLite's and TFLM's reference kernels): for
    ``shift > 0`` pre-multiply by ``2**shift`` with int32 wrap-around, then
    ``SaturatingRoundingDoublingHighMul``, then ``RoundingDivideByPOT(-shift)`` for
    ``shift < 0``. Two roundings, each half away from zero.

    ``rounding="single"`` (``TFLITE_SINGLE_ROUNDING``): one 64-bit product, add
    ``2**(30 - shift)`` and arithmetic-shift right by ``31 - shift`` (round half up);
    the multiplier must be non-negative. The result is truncated to int32 as the C++
    ``static_cast`` does.

    ``x``, ``quantized_multiplier`` and ``shift`` broadcast; ``shift`` in [-31, 30].
    """
    x, m, s = _check_requant_args(x, quantized_multiplier, shift, rounding)
    if rounding == "double":
        left = np.maximum(s, 0)
        right = np.maximum(-s, 0)
        pre = wrap_int32(x << left) if np.any(left) else x
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(pre, m), right)
    total_shift = 31 - s
    rnd = np.int64(1) << (total_shift - 1)
    return wrap_int32((x * m + rnd) >> total_shift)


def multiply_by_quantized_multiplier_smaller_than_one_exp(x, quantized_multiplier, shift, rounding="double"):
    """TFLite's ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (used by ADD): shift <= 0.

    In double rounding this is ``RoundingDivideByPOT(SRDHM(x, m), -shift)``; in
    single-rounding builds TFLite routes it to ``MultiplyByQuantizedMultiplier``.
    """
    if np.any(np.asarray(shift) > 0):
        raise ValueError("shift must be <= 0 for MultiplyByQuantizedMultiplierSmallerThanOneExp")
    return multiply_by_quantized_multiplier(x, quantized_multiplier, shift, rounding)
