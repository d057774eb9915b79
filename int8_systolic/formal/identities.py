"""The arithmetic identities the requantizer proof (:mod:`formal.requantizer`) rests on, proved with z3.

Each is a statement for every input of the stated widths, proved (z3 reports ``unsat`` for
its negation), not sampled:

* ``partial products``: for signed 32-bit ``x`` and ``m``, with ``x = xh * 2**16 + xl`` (``xh``
  the signed top half, ``xl`` the low half as an unsigned number) and likewise ``m``,
  ``x * m == xh*mh * 2**32 + (xh*ml + xl*mh) * 2**16 + xl*ml``; and each partial product lies
  in the range the proof's cut multipliers are allowed (:mod:`formal.requantizer`).
* ``srdhm``: gemmlowp's ``SaturatingRoundingDoublingHighMul`` body, C's truncating
  ``(ab + nudge) / 2**31`` with ``nudge = ab >= 0 ? 2**30 : 1 - 2**30``, equals
  ``floor((ab + 2**30) / 2**31)`` for every product ``ab`` of two int32 values.
* ``rdbpot``: gemmlowp's ``RoundingDivideByPOT(x, r)`` (golden's definition: ``(x >> r) +
  ((x & mask) > (mask >> 1) + (x < 0))``, ``mask = 2**r - 1``) equals ``(x + 2**(r-1) - (x < 0))
  >> r`` (``x >> 0`` for ``r = 0``) for every int32 ``x`` and ``r`` in 0..31.
"""

import time

from .requantizer import PRODUCT_RANGE

__all__ = ["IDENTITIES", "prove_all"]


def _partial_products(z3):
    x, m = z3.Ints("x m")
    xh, xl, mh, ml = z3.Ints("xh xl mh ml")
    s = z3.Solver()
    ranges = [x >= -(2**31), x < 2**31, m >= -(2**31), m < 2**31,
              x == xh * 2**16 + xl, m == mh * 2**16 + ml,
              xl >= 0, xl < 2**16, ml >= 0, ml < 2**16, xh >= -(2**15), xh < 2**15, mh >= -(2**15), mh < 2**15]
    hh, hl, lh, ll = xh * mh, xh * ml, xl * mh, xl * ml
    products = {"hh": hh, "hl": hl, "lh": lh, "ll": ll}
    claims = z3.And(x * m == hh * 2**32 + (hl + lh) * 2**16 + ll,
                    *(z3.And(v >= PRODUCT_RANGE[n][0], v <= PRODUCT_RANGE[n][1]) for n, v in products.items()))
    s.add(*ranges, z3.Not(claims))
    return s


def _srdhm(z3):
    ab = z3.Int("ab")
    s = z3.Solver()
    nudge = z3.If(ab >= 0, 2**30, 1 - 2**30)
    num = ab + nudge
    truncated = z3.If(num >= 0, num / 2**31, -((-num) / 2**31))     # C's division truncates toward zero
    floor = (ab + 2**30) / 2**31     # z3's integer division by a positive constant floors (proved below)
    s.add(ab >= -(2**62), ab <= 2**62, truncated != floor)
    return s


def _rdbpot(z3):
    x = z3.BitVec("x", 34)
    r = z3.BitVec("r", 34)
    s = z3.Solver()
    mask = (z3.BitVecVal(1, 34) << r) - 1
    neg = z3.If(x < 0, z3.BitVecVal(1, 34), z3.BitVecVal(0, 34))
    golden = (x >> r) + z3.If(z3.UGT(x & mask, (mask >> 1) + neg), z3.BitVecVal(1, 34), z3.BitVecVal(0, 34))
    half = z3.If(r > 0, ((z3.BitVecVal(1, 34) << r) >> 1) - neg, z3.BitVecVal(0, 34))
    form = (x + half) >> r
    s.add(x >= -(2**31), x < 2**31, r >= 0, r <= 31, golden != form)
    return s


def _floor_division_is_floor(z3):
    a = z3.Int("a")
    s = z3.Solver()
    q = a / 2**31
    s.add(z3.Not(z3.And(q * 2**31 <= a, a < (q + 1) * 2**31)))
    return s


IDENTITIES = {
    "partial products": _partial_products,
    "z3 integer division by 2**31 is floor division": _floor_division_is_floor,
    "srdhm": _srdhm,
    "rdbpot": _rdbpot,
}


def prove_all(progress=print):
    """Prove every identity; returns {name: (proved, seconds)}."""
    import z3

    out = {}
    for name, build in IDENTITIES.items():
        t0 = time.monotonic()
        verdict = build(z3).check()
        out[name] = (verdict == z3.unsat, time.monotonic() - t0)
        progress(f"  {name:<48} {'proved' if verdict == z3.unsat else f'NOT proved ({verdict})':<14} "
                 f"{out[name][1]:.1f} s")
    return out
