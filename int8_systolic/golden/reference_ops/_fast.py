"""Unchecked fixed-point helpers for the interpreter's hot paths (arguments already validated in Prepare).

``mbqm`` is MultiplyByQuantizedMultiplier (double rounding) for a non-negative multiplier
from QuantizeMultiplier, through the identities of :mod:`.mac_plan`:
SaturatingRoundingDoublingHighMul(a, M) = ``(a * M + 2**30) >> 31`` (M != INT32_MIN) and
RoundingDivideByPOT(q, r) = ``(q + 2**(r-1) - [q < 0]) >> r``. tests/test_mac_plan.py
checks it against :func:`golden.fixedpoint.multiply_by_quantized_multiplier`.
"""

import numpy as np

from ..fixedpoint import wrap_int32_in_int64 as wrap

__all__ = ["by_uint8", "mbqm"]


def by_uint8(table):
    """Reorder a table indexed by ``q + 128`` (q int8) so that ``q.view(np.uint8)`` indexes it: one gather."""
    return np.asarray(table)[np.arange(256, dtype=np.uint8).view(np.int8).astype(np.intp) + 128]


def mbqm(x, multiplier, shift):
    """MultiplyByQuantizedMultiplier of int64 ``x`` (int32 values) by scalar ints ``multiplier`` >= 0 and ``shift``."""
    if shift > 0:
        x = wrap(np.asarray(x, np.int64) << shift)
    q = (x * multiplier + (1 << 30)) >> 31
    if shift < 0:
        r = -shift
        q = (q + (1 << (r - 1)) - (q < 0)) >> r
    return q
