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

from .. import kernels, ops
from . import mac_plan
from ._base import ACTIVATION_NAMES, PADDING_NAMES, Op

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
    if np.any(w_t.quantization.zero_point != 0):
        ctx.fail(f"weights '{w_t.name}' have non-zero zero points (the spec requires symmetric int8 weights, "
                 f"zero point 0)")
    activation = ACTIVATION_NAMES.get(ctx.option("fusedActivationFunction", 0))
    if activation not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        ctx.fail(f"unsupported fused activation {activation}")
    (s_in, zp_in), (s_out, zp_out) = ctx.quant(x_t, "input"), ctx.quant(out_t, "output")
    quant = {"input_scale": float(s_in), "input_zero_point": zp_in, "output_scale": float(s_out),
             "output_zero_point": zp_out, "activation": activation, "rounding": ctx.rounding}
    w = w_t.data
    if np.any(w == -128):
        ctx.fail(f"weights '{w_t.name}' hold -128; the spec's int8 weights are in [-127, 127]")
    w_scale = w_t.quantization.scale
    try:
        if ctx.op == "FULLY_CONNECTED":
            if ctx.option("weightsFormat", 0) != 0:
                ctx.fail("shuffled FULLY_CONNECTED weights are not supported")
            if w.ndim != 2:
                ctx.fail(f"weights '{w_t.name}' must be 2-D [N, K], got {list(w.shape)}")
            if int(np.prod(x_t.shape)) % w.shape[1]:
                ctx.fail(f"input of {int(np.prod(x_t.shape))} elements does not split into rows of K = {w.shape[1]}")
            params = ops.fully_connected_params(w.shape, weight_scale=w_scale, **quant)
            return {"kind": ctx.op, "params": params, "geometry": {}, "k": int(w.shape[1]),
                    "output_shape": tuple(out_t.shape),
                    "plan": mac_plan.plan(ctx.op, w, None if b_t is None else b_t.data, params, {})}
        if w.ndim != 4 or len(x_t.shape) != 4:
            ctx.fail(f"input and weights must be 4-D, got {list(x_t.shape)} and {list(w.shape)}")
        geometry = {"stride": (ctx.option("strideH"), ctx.option("strideW")),
                    "dilation": (ctx.option("dilationHFactor"), ctx.option("dilationWFactor")),
                    "padding": PADDING_NAMES[ctx.option("padding", 0)]}
        channels = w.shape[0] if ctx.op == "CONV_2D" else w.shape[3]
        scale = w_scale.reshape(()) if w_scale.size == 1 else w_scale   # per tensor, stored as per axis or not
        if w_scale.size not in (1, channels):
            ctx.fail(f"weights '{w_t.name}' have {w_scale.size} scales for {channels} output channels")
        if ctx.op == "DEPTHWISE_CONV_2D":
            geometry["depth_multiplier"] = int(ctx.option("depthMultiplier", 0)) or w.shape[3] // x_t.shape[3]
        params = ops.conv_params(weight_scale=scale, channels=channels, **quant)
    except ValueError as exc:
        if isinstance(exc, ctx.error):
            raise
        ctx.fail(str(exc))
    return {"kind": ctx.op, "params": params, "geometry": geometry, "output_shape": tuple(out_t.shape),
            "plan": mac_plan.plan(ctx.op, w, None if b_t is None else b_t.data, params, geometry, x_t.shape)}


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
