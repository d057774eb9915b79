"""The MAC layers: CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED, int8.

Spec: int8 input and output per tensor; weights int8 in [-127, 127] with zero point 0,
per axis (CONV_2D dim 0, DEPTHWISE_CONV_2D dim 3) or per tensor (FULLY_CONNECTED; a
one-element per-axis scale array, as converters write it, is per tensor too); bias int32
with zero point 0. Prepare derives each channel's multiplier as TFLM's
``PopulateConvolutionQuantizationParams`` / ``CalculateOpDataFullyConnected`` do
(:func:`golden.ops.conv_params`); the interpreter hands the layer out as a
:class:`~golden.tflite.interpreter.MacLayer`, so it can run in the golden model
(:mod:`golden.kernels`) or on the RTL.
"""

import numpy as np

from .. import kernels, ops, staged
from . import mac_plan
from ._base import ACTIVATION_NAMES, Op

__all__ = ["OPS"]


def prepare(ctx):
    x_t = ctx.tensor(0, what="input")
    if x_t.type != "INT8":
        ctx.fail(f"input tensor '{x_t.name}' is {x_t.type}; only int8 models are supported (is this a float model?)")
    w_t = ctx.tensor(1, what="weights")
    b_t = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    out_t = ctx.tensor(0, output=True)
    for t, what in ((x_t, "input"), (w_t, "weights"), (out_t, "output")):
        if t.type != "INT8" or t.quantization is None:
            ctx.fail(f"{what} tensor '{t.name}' must be quantized int8, got {t.describe()}")
    if w_t.data is None:
        ctx.fail(f"weights tensor '{w_t.name}' is not a constant")
    if b_t is not None and (b_t.type != "INT32" or b_t.data is None):
        ctx.fail(f"bias tensor '{b_t.name}' must be a constant int32, got {b_t.describe()}")
    bias_type = ctx.option("quantizedBiasType", 0)
    if bias_type not in (0, 2):   # TensorType: 0 (FLOAT32) means unset, 2 is INT32
        ctx.fail(f"option quantized_bias_type is {bias_type}; an int8 layer's bias is INT32 (2), or the option is "
                 f"unset (0) [rule builtin-options]")
    if np.any(w_t.quantization.zero_point != 0):
        ctx.fail(f"weights '{w_t.name}' have non-zero zero points (the spec requires symmetric int8 weights, "
                 f"zero point 0)")
    activation = ctx.option("fusedActivationFunction", 0)
    activation = ACTIVATION_NAMES.get(activation, f"code {activation}")
    if activation not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        ctx.fail(f"fused activation {activation} is not supported by TFLM's int8 {ctx.op} (supported: NONE, RELU, "
                 f"RELU6, RELU_N1_TO_1)")
    (s_in, zp_in), (s_out, zp_out) = ctx.quant(x_t, "input"), ctx.quant(out_t, "output")
    quant = {"input_scale": float(s_in), "input_zero_point": zp_in, "output_scale": float(s_out),
             "output_zero_point": zp_out, "activation": activation, "rounding": ctx.rounding}
    w = w_t.data
    if np.any(w == -128):
        ctx.fail(f"weights '{w_t.name}' hold -128; the spec's int8 weights are in [-127, 127]")
    w_scale = w_t.quantization.scale
    ctx.output_count(1)
    try:
        if ctx.op == "FULLY_CONNECTED":
            if ctx.option("weightsFormat", 0) != 0:
                ctx.fail("shuffled FULLY_CONNECTED weights are not supported")
            if w.ndim != 2:
                ctx.fail(f"weights '{w_t.name}' must be 2-D [N, K], got {list(w.shape)}")
            n, k = w.shape
            size = int(np.prod(x_t.shape))
            if k == 0 or size % k:
                ctx.fail(f"input of {size} elements does not split into rows of K = {k} [rule mac-operands]")
            _weight_axis(ctx, w_t, 0, n)
            _bias_length(ctx, b_t, n)
            if int(np.prod(out_t.shape)) != size // k * n or (out_t.shape and out_t.shape[-1] != n):
                ctx.fail(f"computes {size // k} rows of {n} outputs, but tensor '{out_t.name}' is declared "
                         f"{list(out_t.shape)} [rule output-shape]")
            params = ops.fully_connected_params(w.shape, weight_scale=w_scale, **quant)
            return {"kind": ctx.op, "params": params, "geometry": {}, "k": int(k),
                    "output_shape": tuple(out_t.shape),
                    "plan": mac_plan.plan(ctx.op, w, None if b_t is None else b_t.data, params, {})}
        if w.ndim != 4 or len(x_t.shape) != 4:
            ctx.fail(f"input and weights must be 4-D, got {list(x_t.shape)} and {list(w.shape)}")
        geometry = {"stride": ctx.pair("stride", "strideH", "strideW"),
                    "dilation": ctx.pair("dilation", "dilationHFactor", "dilationWFactor"),
                    "padding": ctx.padding()}
        batch, h, wd, cin = x_t.shape
        if ctx.op == "CONV_2D":
            channels, kh, kw = w.shape[0], w.shape[1], w.shape[2]
            if w.shape[3] != cin:
                ctx.fail(f"weights '{w_t.name}' {list(w.shape)} (OHWI) take {w.shape[3]} input channels, but input "
                         f"'{x_t.name}' has {cin} (grouped convolution is not supported) [rule mac-operands]")
            axis = 0
        else:
            channels, kh, kw = w.shape[3], w.shape[1], w.shape[2]
            option = int(ctx.option("depthMultiplier", 0))
            multiplier = option or (channels // cin if cin else 0)
            if w.shape[0] != 1 or multiplier < 1 or channels != cin * multiplier:
                ctx.fail(f"weights '{w_t.name}' {list(w.shape)} must be [1, KH, KW, C * depth_multiplier] with "
                         f"C = {cin} input channels and depth_multiplier {option or '(unset)'} [rule mac-operands]")
            geometry["depth_multiplier"] = multiplier
            axis = 3
        _weight_axis(ctx, w_t, axis, channels)
        _bias_length(ctx, b_t, channels)
        out_hw = [staged.compute_out_size(geometry["padding"], n, f, st, d)
                  for n, f, st, d in zip((h, wd), (kh, kw), geometry["stride"], geometry["dilation"], strict=True)]
        if min(out_hw) < 1:
            ctx.fail(f"the {kh}x{kw} filter (dilation {geometry['dilation'][0]}x{geometry['dilation'][1]}) does not "
                     f"fit in the {h}x{wd} input with {geometry['padding']} padding [rule geometry]")
        ctx.output_shape((batch, *out_hw, channels))
        scale = w_scale.reshape(()) if w_scale.size == 1 else w_scale   # per tensor, stored as per axis or not
        params = ops.conv_params(weight_scale=scale, channels=channels, **quant)
    except ValueError as exc:
        if isinstance(exc, ctx.error):
            raise
        ctx.fail(str(exc))
    return {"kind": ctx.op, "params": params, "geometry": geometry, "output_shape": tuple(out_t.shape),
            "plan": mac_plan.plan(ctx.op, w, None if b_t is None else b_t.data, params, geometry, x_t.shape)}


def _weight_axis(ctx, w_t, axis, channels):
    """Per-channel weights are quantized on the op's channel dimension, one scale per channel."""
    q = w_t.quantization
    if q.scale.size == 1:
        return
    if q.axis != axis or q.scale.size != channels:
        ctx.fail(f"weights '{w_t.name}' {list(w_t.shape)} are quantized per axis on dimension {q.axis} with "
                 f"{q.scale.size} scales; {ctx.op} needs one scale per output channel on dimension {axis} "
                 f"({channels}) [rule weights-axis]")


def _bias_length(ctx, b_t, channels):
    if b_t is not None and tuple(b_t.shape) != (channels,):
        ctx.fail(f"bias '{b_t.name}' has shape {list(b_t.shape)}; it needs one int32 per output channel "
                 f"[{channels}] [rule bias-length]")


def eval_mac(p, inputs, return_stages=False):
    """The golden model's result of a MAC layer (``inputs``: input, weights, bias or None).

    Without stages it takes the precomputed fast path (:mod:`.mac_plan`) when Prepare made
    one; with stages, the staged kernels of :mod:`golden.kernels`.
    """
    x, w = inputs[0], inputs[1]
    if not return_stages and p.get("plan") is not None:
        x = x.reshape(-1, p["k"]) if p["kind"] == "FULLY_CONNECTED" else x
        return [mac_plan.run(p["plan"], x, p["output_shape"])]
    b = inputs[2] if len(inputs) > 2 else None
    if p["kind"] == "FULLY_CONNECTED":
        out = kernels.fully_connected_kernel(x.reshape(-1, p["k"]), w, b, return_stages=return_stages,
                                             **p["params"])
    elif p["kind"] == "CONV_2D":
        out = kernels.conv_2d_kernel(x, w, b, return_stages=return_stages, **p["geometry"], **p["params"])
    else:
        out = kernels.depthwise_conv_2d_kernel(x, w, b, return_stages=return_stages, **p["geometry"], **p["params"])
    return out if return_stages else [out.reshape(p["output_shape"])]


OPS = {name: Op(prepare, eval_mac, mac=True) for name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")}
