"""A small int8 CNN the project generates itself, covering what the wake-word models lack.

``input [1, 16, 16, 8]`` -> CONV_2D 3x3 stride 2 SAME RELU6 (16 channels, per-channel
weights) -> DEPTHWISE_CONV_2D 3x3 SAME dilation 2, depth multiplier 2, RELU (32) ->
CONV_2D 1x1 VALID (24) -> RESHAPE [1, 1536] -> FULLY_CONNECTED per-tensor (10) ->
LOGISTIC. Random float weights and biases are quantized the way TFLite's converter does
(symmetric int8 weights, int32 bias at input_scale * weight_scale); activation scales and
zero points come from calibrating a float forward pass (of the dequantized weights) on
random inputs with :func:`golden.quantization.choose_quantization_params`, so the
quantization parameters are realistic rather than hand-picked.
"""

import numpy as np

from int8_systolic.golden import staged
from int8_systolic.golden.quantization import choose_quantization_params, quantize_weights_symmetric

from .builder import _PADDING_CODES, ModelBuilder, _activation, schema

__all__ = ["generated_cnn"]


def _float_conv(x, w, b, stride, dilation, padding, depthwise=False, m=1):
    kh, kw = w.shape[1:3]
    cols = staged.im2col(x, (kh, kw), stride, dilation, padding, pad_value=0.0)
    bb, oh, ow, t = cols.shape
    if not depthwise:
        return (cols.reshape(-1, t) @ w.reshape(w.shape[0], -1).T + b).reshape(bb, oh, ow, -1)
    cin = x.shape[3]
    patches = cols.reshape(-1, kh * kw, cin).repeat(m, axis=2)   # output channel c*m+q reads channel c
    return (np.einsum("ptc,tc->pc", patches, w.reshape(kh * kw, cin * m)) + b).reshape(bb, oh, ow, -1)


def generated_cnn(seed=0, calibration=8):
    """The model as .tflite bytes."""
    rng = np.random.default_rng(seed)
    x_float = rng.uniform(-0.6, 1.4, (calibration, 16, 16, 8)).astype(np.float32)
    in_scale, in_zp = choose_quantization_params(float(x_float.min()), float(x_float.max()))

    mb = ModelBuilder()
    x = mb.tensor("input", (1, 16, 16, 8), np.int8, scale=in_scale, zero_point=in_zp)
    act, act_t, act_scale = x_float, x, in_scale

    def conv_layer(name, w_float, b_float, opts_type, opts, code, out_fn, channel_axis, **geom):
        nonlocal act, act_t, act_scale
        wq, ws = quantize_weights_symmetric(w_float, axis=channel_axis)
        ws = np.asarray(ws, np.float32)
        bias = np.round(b_float / (np.float32(act_scale) * ws.astype(np.float64))).astype(np.int32)
        w_deq = wq.astype(np.float32) * np.expand_dims(ws, tuple(a for a in range(4) if a != channel_axis))
        y = out_fn(_float_conv(act, w_deq, bias * np.float32(act_scale) * ws, **geom))
        scale, zp = choose_quantization_params(float(y.min()), float(y.max()))
        w_t = mb.tensor(f"{name}/weights", wq.shape, np.int8, scale=ws, zero_point=0,
                        quantized_dimension=channel_axis, data=wq)
        b_t = mb.tensor(f"{name}/bias", bias.shape, np.int32, scale=np.float32(act_scale) * ws.astype(np.float64),
                        zero_point=0, data=bias)
        y_t = mb.tensor(name, (1, *y.shape[1:]), np.int8, scale=scale, zero_point=zp)
        mb.operator(code, [act_t, w_t, b_t], [y_t], opts_type, opts, version=3 if channel_axis == 3 else 1)
        act, act_t, act_scale = y, y_t, scale

    def options(cls, stride, dilation, padding, activation):
        o = cls()
        o.padding = _PADDING_CODES[padding]
        o.strideH, o.strideW = stride
        o.dilationHFactor, o.dilationWFactor = dilation
        o.fusedActivationFunction = _activation(activation)
        return o

    relu6 = lambda v: np.clip(v, 0, 6)  # noqa: E731
    relu = lambda v: np.maximum(v, 0)   # noqa: E731
    conv_layer("conv1", rng.normal(0, 0.25, (16, 3, 3, 8)), rng.normal(0, 0.2, 16),
               schema.BuiltinOptions.Conv2DOptions,
               options(schema.Conv2DOptionsT, (2, 2), (1, 1), "SAME", "RELU6"), schema.BuiltinOperator.CONV_2D,
               relu6, 0, stride=(2, 2), dilation=(1, 1), padding="SAME")
    dw_opts = options(schema.DepthwiseConv2DOptionsT, (1, 1), (2, 2), "SAME", "RELU")
    dw_opts.depthMultiplier = 2
    conv_layer("depthwise", rng.normal(0, 0.4, (1, 3, 3, 32)), rng.normal(0, 0.2, 32),
               schema.BuiltinOptions.DepthwiseConv2DOptions, dw_opts, schema.BuiltinOperator.DEPTHWISE_CONV_2D,
               relu, 3, stride=(1, 1), dilation=(2, 2), padding="SAME", depthwise=True, m=2)
    conv_layer("pointwise", rng.normal(0, 0.2, (24, 1, 1, 32)), rng.normal(0, 0.2, 24),
               schema.BuiltinOptions.Conv2DOptions,
               options(schema.Conv2DOptionsT, (1, 1), (1, 1), "VALID", "NONE"), schema.BuiltinOperator.CONV_2D,
               lambda v: v, 0, stride=(1, 1), dilation=(1, 1), padding="VALID")

    # RESHAPE to [1, 1536], then FULLY_CONNECTED with one weight scale for the tensor.
    flat_shape = np.array([1, 8 * 8 * 24], np.int32)
    s_t = mb.tensor("flatten/shape", (2,), np.int32, data=flat_shape)
    flat = mb.tensor("flatten", (1, 1536), np.int8, scale=act_scale,
                     zero_point=mb.tensors[act_t].quantization.zeroPoint[0])
    mb.operator(schema.BuiltinOperator.RESHAPE, [act_t, s_t], [flat])
    flat_float = act.reshape(calibration, -1)
    w_float = rng.normal(0, 0.05, (10, 1536))
    wq, ws = quantize_weights_symmetric(w_float)
    ws = float(np.float32(ws))
    bias = np.round(rng.normal(0, 0.5, 10) / (float(np.float32(act_scale)) * ws)).astype(np.int32)
    logits = flat_float @ (wq.astype(np.float32) * ws).T + bias * np.float32(act_scale) * ws
    fc_scale, fc_zp = choose_quantization_params(float(logits.min()), float(logits.max()))
    w_t = mb.tensor("fc/weights", wq.shape, np.int8, scale=ws, zero_point=0, data=wq)
    b_t = mb.tensor("fc/bias", (10,), np.int32, scale=np.float32(act_scale) * ws, zero_point=0, data=bias)
    fc = mb.tensor("fc", (1, 10), np.int8, scale=fc_scale, zero_point=fc_zp)
    fc_opts = schema.FullyConnectedOptionsT()
    fc_opts.fusedActivationFunction = _activation("NONE")
    mb.operator(schema.BuiltinOperator.FULLY_CONNECTED, [flat, w_t, b_t], [fc],
                schema.BuiltinOptions.FullyConnectedOptions, fc_opts)
    prob = mb.tensor("probabilities", (1, 10), np.int8, scale=1 / 256, zero_point=-128)
    mb.operator(schema.BuiltinOperator.LOGISTIC, [fc], [prob], version=2)
    return mb.finish([x], [prob], description="int8-systolic generated CNN")
