"""Fixed-point primitives against exact rational arithmetic and the scalar loop ports.

The oracles here are independent of the code under test: ``fractions.Fraction``
computes the exact real value of each operation, and rounding is applied to it from
its mathematical definition.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from int8_systolic.golden import fixedpoint as fp
from int8_systolic.golden import reference as ref

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
CORNERS = [I32_MIN, I32_MIN + 1, -(2**30) - 1, -(2**30), -65537, -3, -2, -1, 0, 1, 2, 3, 65537, 2**30,
           2**30 + 1, I32_MAX - 1, I32_MAX]


def round_half_away_exact(q: Fraction) -> int:
    n = math.floor(abs(q) + Fraction(1, 2))
    return n if q >= 0 else -n


def wrap(x):
    return ((x + 2**31) % 2**32) - 2**31


def srdhm_oracle(a, b):
    """Nearest integer to a*b / 2**31, ties toward +inf (gemmlowp's negative nudge is 1 - 2**30)."""
    if a == b == I32_MIN:
        return I32_MAX
    return math.floor(Fraction(a * b, 2**31) + Fraction(1, 2))


def rdbpot_oracle(x, e):
    return round_half_away_exact(Fraction(x, 2**e))


def mbqm_double_oracle(x, m, s):
    pre = wrap(x * 2 ** max(s, 0))
    return rdbpot_oracle(srdhm_oracle(pre, m), max(-s, 0))


def mbqm_single_oracle(x, m, s):
    # round half up (toward +inf) of x * m / 2**(31 - s), then int32 truncation
    return wrap(math.floor(Fraction(x * m, 2 ** (31 - s)) + Fraction(1, 2)))


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


def random_int32(rng, n):
    return rng.integers(I32_MIN, I32_MAX, size=n, endpoint=True, dtype=np.int64)


def test_srdhm_corners_and_random(rng):
    a = np.array([x for x in CORNERS for _ in CORNERS] + list(random_int32(rng, 20000)))
    b = np.array([y for _ in CORNERS for y in CORNERS] + list(random_int32(rng, 20000)))
    got = fp.saturating_rounding_doubling_high_mul(a, b)
    assert got.dtype == np.int32
    for x, y, g in zip(a.tolist(), b.tolist(), got.tolist(), strict=True):
        assert g == srdhm_oracle(x, y) == ref.SaturatingRoundingDoublingHighMul(x, y), (x, y)


def test_srdhm_ties_round_toward_positive_infinity():
    # a*b/2**31 = +-1073741823.5: the positive tie rounds up (away), the negative one toward zero.
    assert int(fp.saturating_rounding_doubling_high_mul(2**31 - 1, 2**30)) == 1073741824
    assert int(fp.saturating_rounding_doubling_high_mul(-(2**31) + 1, 2**30)) == -1073741823


def test_srdhm_int32_min_squared_saturates():
    assert fp.saturating_rounding_doubling_high_mul(I32_MIN, I32_MIN) == I32_MAX
    assert srdhm_oracle(I32_MIN, I32_MIN) == I32_MAX


def test_rdbpot_every_exponent(rng):
    xs = np.array(CORNERS + list(random_int32(rng, 3000)))
    for e in range(32):
        got = fp.rounding_divide_by_pot(xs, e)
        for x, g in zip(xs.tolist(), got.tolist(), strict=True):
            assert g == rdbpot_oracle(x, e) == ref.RoundingDivideByPOT(x, e), (x, e)


def test_rdbpot_ties_round_away_from_zero():
    for e in range(1, 32):
        half = 1 << (e - 1)
        for k in range(-3, 3):
            x = (2 * k + 1) * half  # an exact .5 tie
            if I32_MIN <= x <= I32_MAX:
                assert int(fp.rounding_divide_by_pot(x, e)) == round_half_away_exact(Fraction(x, 2**e))


@pytest.mark.parametrize("rounding", ["double", "single"])
def test_multiply_by_quantized_multiplier_matches_oracle(rng, rounding):
    n = 30000
    x = np.concatenate([random_int32(rng, n), np.array(CORNERS * 3)])
    m = np.concatenate([rng.integers(2**30, 2**31, size=n), np.array([2**30, 2**31 - 1, 0] * len(CORNERS))])
    s = np.concatenate([rng.integers(-31, 31, size=n), np.array([-31, 0, 30] * len(CORNERS))])
    got = fp.multiply_by_quantized_multiplier(x, m, s, rounding)
    oracle = mbqm_double_oracle if rounding == "double" else mbqm_single_oracle
    for xi, mi, si, g in zip(x.tolist(), m.tolist(), s.tolist(), got.tolist(), strict=True):
        assert g == oracle(xi, mi, si) == ref.MultiplyByQuantizedMultiplier(xi, mi, si, rounding), (xi, mi, si)


def test_double_rounding_negative_multiplier_and_int32_min():
    """Double rounding accepts any int32 multiplier, including the INT32_MIN x INT32_MIN case."""
    x = np.array([I32_MIN, I32_MIN, -5, 7])
    m = np.array([I32_MIN, -(2**30), I32_MIN, -(2**30) - 12345])
    s = np.array([0, -3, -1, 2])
    got = fp.multiply_by_quantized_multiplier(x, m, s)
    assert got.tolist() == [mbqm_double_oracle(*v) for v in zip(x.tolist(), m.tolist(), s.tolist(), strict=True)]


def test_single_and_double_rounding_differ_on_negative_ties():
    # x * 2**30 * 2**-33 = x / 8: -4 / 8 = -0.5 is a tie; double rounds away (-1), single up (0).
    assert int(fp.multiply_by_quantized_multiplier(-4, 2**30, -2, "double")) == -1
    assert int(fp.multiply_by_quantized_multiplier(-4, 2**30, -2, "single")) == 0


def test_quantize_multiplier_accuracy(rng):
    reals = np.exp(rng.uniform(np.log(2.0**-31), np.log(2.0**29), size=20000))
    mult, shift = fp.quantize_multiplier(reals)
    for r, m, s in zip(reals.tolist(), mult.tolist(), shift.tolist(), strict=True):
        if m == 0:
            assert r < 2.0**-31
            continue
        assert 2**30 <= m < 2**31
        exact = Fraction(r) * 2 ** (31 - s)  # the ideal Q0.31 mantissa
        assert abs(Fraction(m) - exact) <= Fraction(1, 2)
        assert (m, s) == fp.quantize_multiplier(r)  # scalar path agrees with the vector path


def test_quantize_multiplier_mantissa_fixup_to_2_pow_31():
    real = 1 - 2.0**-46  # mantissa * 2**31 = 2**31 - 2**-15 rounds up to 2**31
    assert fp.quantize_multiplier(real) == (2**30, 1)
    real = 0.5 * (1 - 2.0**-40)
    assert fp.quantize_multiplier(real) == (2**30, 0)


def test_quantize_multiplier_flush_zero_and_single_saturation():
    assert fp.quantize_multiplier(0.0) == (0, 0)
    assert fp.quantize_multiplier(2.0**-33) == (0, 0)          # frexp exponent -32 < -31: flushed
    assert fp.quantize_multiplier(2.0**-32) == (2**30, -31)    # the smallest power of two kept
    assert fp.quantize_multiplier(2.0**-31) == (2**30, -30)
    assert fp.quantize_multiplier(2.0**31, "double") == (2**30, 32)
    assert fp.quantize_multiplier(2.0**31, "single") == (2**31 - 1, 30)


def test_quantize_multiplier_rejects_negative_and_nan():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="real_multiplier"):
            fp.quantize_multiplier(bad)


def test_wrap_int32():
    assert fp.wrap_int32([2**31, -(2**31) - 1, 2**32 + 5]).tolist() == [I32_MIN, I32_MAX, 5]


def test_round_half_away_float32_edge():
    x = np.float32(0.49999997)  # floor(x + 0.5) would give 1 in float32
    assert fp.round_half_away(x) == 0
    assert fp.round_half_away(np.array([0.5, -0.5, 2.5, -2.5])).tolist() == [1, -1, 3, -3]
