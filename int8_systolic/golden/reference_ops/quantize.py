"""QUANTIZE (float32 -> int8, and requantization between int8/uint8) and DEQUANTIZE (int8 -> float32).

TFLM micro/kernels/quantize_common.cc and reference quantize.h / requantize.h /
dequantize.h:

* float32 -> int8 (``AffineQuantize``): ``round_half_away(float32(x / float32(scale))) + zp``,
  clamped;
* int8/uint8 -> int8/uint8 (``Requantize``): ``effective = double(s_in) / double(s_out)``
  through QuantizeMultiplier, ``MultiplyByQuantizedMultiplier(q - zp_in) + zp_out``, clamped
  to the output type;
* int8 -> float32 (``Dequantize``): ``float32(double(scale) * (q - zp))``.
"""

import numpy as np

from ..fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier
from ._base import Op

__all__ = ["OPS", "requantize"]

_INTS = ("INT8", "UINT8")


def prepare_quantize(ctx):
    t_in = ctx.tensor(0, types=("FLOAT32", *_INTS))
    t_out = ctx.tensor(0, output=True, types=_INTS)
    s_out, zp_out = ctx.quant(t_out, "output")
    info = np.iinfo(t_out.dtype)
    if t_in.type == "FLOAT32":
        return {"kind": "affine", "scale": s_out, "zero_point": zp_out, "min": int(info.min), "max": int(info.max),
                "dtype": t_out.dtype}
    if t_in.type == "UINT8" and t_out.type == "UINT8":
        ctx.fail("QUANTIZE uint8 -> uint8 is not supported by TFLM")
    s_in, zp_in = ctx.quant(t_in, "input")
    m, shift = quantize_multiplier(np.float64(s_in) / np.float64(s_out))
    if shift > 30:
        ctx.fail(f"input/output scale ratio {float(s_in) / float(s_out)!r} is too large (shift {shift} > 30)")
    return {"kind": "requantize", "input_zero_point": zp_in, "output_zero_point": zp_out,
            "requantize_output_multiplier": m, "requantize_output_shift": shift, "min": int(info.min),
            "max": int(info.max), "dtype": t_out.dtype}


def requantize(x, input_zero_point, multiplier, shift, output_zero_point, lo, hi, dtype):
    """``reference_ops::Requantize``: MultiplyByQuantizedMultiplier(q - zp_in) + zp_out, clamped."""
    scaled = multiply_by_quantized_multiplier(np.asarray(x, np.int64) - input_zero_point, multiplier, shift)
    return np.clip(scaled.astype(np.int64) + output_zero_point, lo, hi).astype(dtype)


def eval_quantize(p, inputs):
    x = inputs[0]
    if p["kind"] == "affine":
        # TfLiteRound(val / float(scale)): the quotient in float32, then half away from zero: trunc(v +- 0.5),
        # exact in float64 for a float32 v (no second rounding). (TFLM's cast of NaN is undefined.)
        v = (np.asarray(x, np.float32) / p["scale"]).astype(np.float64)
        q = np.trunc(v + np.copysign(0.5, v))
        q += p["zero_point"]
        return [np.clip(q, p["min"], p["max"], out=q).astype(p["dtype"])]
    return [requantize(x, p["input_zero_point"], p["requantize_output_multiplier"], p["requantize_output_shift"],
                       p["output_zero_point"], p["min"], p["max"], p["dtype"])]


def prepare_dequantize(ctx):
    t = ctx.tensor(0, types=_INTS)
    ctx.tensor(0, output=True, types=("FLOAT32",))
    s, zp = ctx.quant(t, "input")
    return {"scale": float(s), "zero_point": zp}


def eval_dequantize(p, inputs):
    return [(np.float64(p["scale"]) * (inputs[0].astype(np.int64) - p["zero_point"])).astype(np.float32)]


OPS = {"QUANTIZE": Op(prepare_quantize, eval_quantize, unary=True),
       "DEQUANTIZE": Op(prepare_dequantize, eval_dequantize, unary=True)}
