"""LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL on int8 (output bool).

TFLM micro/kernels/comparisons.cc Prepare and reference comparisons.h
``ComparisonWithScaling``/``BroadcastComparison4DSlowWithScaling``: each input is offset,
shifted left by 8 and scaled by its own scale through QuantizeMultiplierSmallerThanOneExp,
so inputs quantized differently compare by real value. That requires every input scale
< 1: TFLM aborts the process otherwise; we refuse such a model.
"""

import numpy as np

from ..fixedpoint import multiply_by_quantized_multiplier_smaller_than_one_exp as mbqm_smaller
from ..fixedpoint import quantize_multiplier, wrap_int32
from ._base import Op
from .broadcast import check_broadcast

__all__ = ["OPS"]

LEFT_SHIFT = 8
_FUNCS = {"LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
          "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal}


def prepare(ctx):
    params = {"left_shift": LEFT_SHIFT}
    for i in (0, 1):
        t = ctx.tensor(i, types=("INT8",))
        s, zp = ctx.quant(t, f"input {i}")
        if not float(s) < 1.0:
            ctx.fail(f"input {i} '{t.name}' has scale {float(s)!r}: TFLM rescales comparison inputs with "
                     f"QuantizeMultiplierSmallerThanOneExp, which needs scale < 1 (TFLM aborts)")
        m, shift = quantize_multiplier(np.float64(s))
        params.update({f"input{i + 1}_offset": -zp, f"input{i + 1}_multiplier": m, f"input{i + 1}_shift": shift})
    ctx.tensor(0, output=True, types=("BOOL",))
    check_broadcast(ctx, max_rank=4)
    return params


def _scaled(x, offset, multiplier, shift, left_shift):
    return mbqm_smaller(wrap_int32((x.astype(np.int64) + offset) << left_shift), multiplier, shift)


def _eval(func):
    def eval_comparison(p, inputs):
        a = _scaled(inputs[0], p["input1_offset"], p["input1_multiplier"], p["input1_shift"], p["left_shift"])
        b = _scaled(inputs[1], p["input2_offset"], p["input2_multiplier"], p["input2_shift"], p["left_shift"])
        return [func(a, b)]
    return eval_comparison


OPS = {name: Op(prepare, _eval(func)) for name, func in _FUNCS.items()}
