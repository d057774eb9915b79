"""The requantization arithmetics real TFLite runtimes implement, selectable, for one accumulator.

TFLite's spec computes ``double`` (gemmlowp's two roundings); runtimes differ from it by one
LSB on exact ties (measured bit for bit, docs/runtimes.md). With ``acc`` the int32
accumulator (bias included), ``(M, shift)`` from QuantizeMultiplier, ``left = max(shift, 0)``
and ``right = max(-shift, 0)``:

================  ========================================================================
variant           arithmetic (runtime that computes it)
================  ========================================================================
``double``        ``RDBPOT(SRDHM(acc << left, M), right)``, the pre-shift wrapping in int32
                  (TFLM; LiteRT's BUILTIN_REF CONV_2D, DEPTHWISE_CONV_2D)
``single``        ``(acc * M + 2**(30 - shift)) >> (31 - shift)`` in 64 bits, ties toward +inf
                  (``TFLITE_SINGLE_ROUNDING`` builds; a shift above 30 saturates)
``upward``        ``v = ((acc << left) * M + 2**30) >> 31``, then ``(v + 2**(right-1)) >> right``:
                  both roundings ties toward +inf (ruy: LiteRT's optimized FC and CONV)
``float64``       ``round(double(acc) * (double(in_s) * double(w_s) / double(out_s)))``, C's
                  ``round`` (half away from zero), no fixed point (LiteRT BUILTIN_REF's FC)
``xnnpack_fp32``  ``scale = float32(float32(in_s * w_s) / out_s)``, ``float32(acc) * scale`` in
                  float32, round half to even (LiteRT's default interpreter: XNNPACK)
================  ========================================================================

Each returns the requantized value before the output offset and clamp, which all variants
share. :func:`mac_output` finishes any MAC layer (FULLY_CONNECTED, CONV_2D,
DEPTHWISE_CONV_2D: the weight scale per channel where the weights are) from its int32
accumulators with a chosen variant; :func:`fully_connected` runs a whole FULLY_CONNECTED
layer. The fixed-point variants add the output offset in int32 (wrapping, as the C++ does);
the floating-point ones cannot overflow.
"""

import numpy as np

from . import ops, staged
from .fixedpoint import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
    wrap_int32,
    wrap_int32_in_int64,
)

__all__ = ["VARIANTS", "fully_connected", "mac_output", "requantize"]

VARIANTS = ("double", "single", "upward", "float64", "xnnpack_fp32")


def requantize(acc, variant, *, input_scale, weight_scale, output_scale, per_tensor_fully_connected=False):
    """``acc`` int32 [..., N] (bias included) requantized by ``variant``; ``weight_scale`` scalar or [N].

    The fixed-point variants derive (M, shift) as TFLM does (for a per-tensor FULLY_CONNECTED
    from the float32 product ``in_s * w_s``, as ``GetQuantizedConvolutionMultipler``).
    Returns int64 values before the output offset.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    acc = np.asarray(acc, np.int64)
    in_s, out_s = np.float32(input_scale), np.float32(output_scale)
    w_s = np.asarray(weight_scale, np.float32)
    if variant == "float64":
        return round_half_away(acc * (np.float64(in_s) * w_s.astype(np.float64) / np.float64(out_s))).astype(np.int64)
    if variant == "xnnpack_fp32":
        scale = (np.float32(in_s * w_s) / out_s).astype(np.float32)
        return np.rint(acc.astype(np.float32) * scale).astype(np.int64)   # float32 product, half to even
    if per_tensor_fully_connected:
        effective = np.float64(np.float32(in_s * w_s)) / np.float64(out_s)
    else:
        effective = np.float64(in_s) * w_s.astype(np.float64) / np.float64(out_s)
    rounding = "single" if variant == "single" else "double"
    mult, shift = quantize_multiplier(effective, rounding)
    if variant in ("double", "single"):
        return multiply_by_quantized_multiplier(acc, mult, shift, rounding).astype(np.int64)
    shift = np.asarray(shift, np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    v = (wrap_int32(acc << left).astype(np.int64) * np.asarray(mult, np.int64) + (1 << 30)) >> 31
    return np.where(right > 0, (v + (np.int64(1) << np.maximum(right - 1, 0))) >> right, v)


def mac_output(kind, acc, variant, *, input_scale, weight_scale, output_scale, output_offset, act_min, act_max):
    """int8 output of a MAC layer ``kind`` from its accumulators ``acc`` [..., N] (bias and zero point folded).

    ``weight_scale``: one value, or one per output channel (the last axis). A per-tensor
    FULLY_CONNECTED forms its effective scale from the float32 product, as TFLM does.
    """
    ws = np.asarray(weight_scale, np.float32)
    per_tensor_fc = kind == "FULLY_CONNECTED" and ws.size == 1
    scaled = requantize(acc, variant, input_scale=input_scale, weight_scale=ws.reshape(()) if ws.size == 1 else ws,
                        output_scale=output_scale, per_tensor_fully_connected=per_tensor_fc)
    out = scaled + output_offset
    if variant in ("double", "single", "upward"):
        out = wrap_int32_in_int64(out)
    return np.clip(out, act_min, act_max).astype(np.int8)


def fully_connected(input, weights, bias, *, input_scale, input_zero_point, weight_scale, output_scale,
                    output_zero_point, activation="NONE", variant="double"):
    """TFLite int8 FULLY_CONNECTED requantized by ``variant`` (the accumulation is the same in every runtime)."""
    params = ops.fully_connected_params(np.shape(weights), input_scale=input_scale,
                                        input_zero_point=input_zero_point, weight_scale=weight_scale,
                                        output_scale=output_scale, output_zero_point=output_zero_point,
                                        activation=activation)
    x = np.asarray(input, np.int8)
    w = np.asarray(weights, np.int8)
    raw, sums = staged.accumulate_with_sums(x, w.T)
    acc = staged.add_bias(raw, staged.fold_bias(bias, sums, params["input_offset"]))
    return mac_output("FULLY_CONNECTED", acc, variant, input_scale=input_scale, weight_scale=weight_scale,
                      output_scale=output_scale, output_offset=params["output_offset"],
                      act_min=params["quantized_activation_min"], act_max=params["quantized_activation_max"])
