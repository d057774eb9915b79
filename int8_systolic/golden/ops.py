"""Scale-level API: float scales and zero points in, int8 out.

Integer parameters are derived exactly as TFLite-Micro's ``Prepare`` functions derive
them, then the kernel-level functions in :mod:`golden.kernels` run:

* CONV_2D, DEPTHWISE_CONV_2D and per-channel FULLY_CONNECTED
  (``PopulateConvolutionQuantizationParams``, ``CalculateOpDataFullyConnected``): for
  each channel ``effective = double(input_scale) * double(weight_scale[c]) /
  double(output_scale)``; a scalar weight scale is broadcast to every channel.
* Per-tensor FULLY_CONNECTED (``GetQuantizedConvolutionMultipler``): the product
  ``input_scale * weight_scale`` is formed in **float32** and only then widened:
  ``effective = double(float32(input_scale * weight_scale)) / double(output_scale)``.
  This differs from the per-channel formula in the last bits of the multiplier, and
  TFLM really computes it this way.
* ADD (``CalculateOpDataAdd``): left_shift 20, input multipliers
  ``s_i / (2 max(s1, s2))`` and output multiplier ``2 max(s1, s2) / (2**20 s_out)``,
  each through ``QuantizeMultiplierSmallerThanOneExp``.
* Activation bounds (``CalculateActivationRangeQuantized``): float32 ``roundf``.

All scales are rounded to float32 first, as a .tflite file stores them.
"""

import numpy as np

from . import kernels
from ._checks import (
    ACTIVATIONS,
    choice,
    int_param,
    rounding_param,
    scale_param,
    zero_point_param,
)
from .fixedpoint import quantize_multiplier, quantize_multiplier_smaller_than_one_exp
from .quantization import activation_range

__all__ = [
    "add",
    "add_params",
    "average_pool_2d",
    "conv_2d",
    "conv_params",
    "depthwise_conv_2d",
    "fully_connected",
    "fully_connected_params",
    "max_pool_2d",
]


def _weight_zero_point(weight_zero_point):
    zp = np.asarray(weight_zero_point)
    if not np.issubdtype(zp.dtype, np.integer) or np.any(zp != 0):
        raise ValueError(f"weight_zero_point must be 0 (TFLite int8 weights are symmetric), got {weight_zero_point!r}")


def _weights_shape(weights, ndim):
    """The weights' shape, to size the per-channel parameters; the kernel validates the values once."""
    shape = np.shape(weights)
    if len(shape) != ndim:
        raise ValueError(f"weights must have {ndim} dimensions, got shape {shape}")
    return shape


def _multipliers(effective, rounding, what):
    mult, shift = quantize_multiplier(effective, rounding)
    if np.any(np.asarray(shift) > 30):
        raise ValueError(f"{what} effective scale {np.max(effective)!r} is >= 2**30: MultiplyByQuantizedMultiplier "
                         f"cannot shift left by more than 30")
    return mult, shift


def conv_params(*, input_scale, input_zero_point, weight_scale, output_scale, output_zero_point, channels,
                activation="NONE", rounding="double", per_tensor_fully_connected=False, weight_zero_point=0):
    """Kernel-level parameters of a CONV_2D/DEPTHWISE/FULLY_CONNECTED layer, as TFLM derives them.

    Returns a dict with ``input_offset``, ``output_multiplier`` and ``output_shift``
    (int arrays of length ``channels``, or ints for a per-tensor fully connected
    layer), ``output_offset``, ``quantized_activation_min``/``max`` and ``rounding``.
    """
    rounding = rounding_param(rounding)
    channels = int_param("channels", channels, 1, 2**31 - 1)
    _weight_zero_point(weight_zero_point)
    in_s = scale_param("input_scale", input_scale)
    out_s = scale_param("output_scale", output_scale)
    w_s = scale_param("weight_scale", weight_scale, channels)
    zp_in = zero_point_param("input_zero_point", input_zero_point)
    zp_out = zero_point_param("output_zero_point", output_zero_point)
    if per_tensor_fully_connected:
        effective = np.float64(np.float32(in_s * w_s)) / np.float64(out_s)
    else:
        effective = np.float64(in_s) * np.broadcast_to(w_s, (channels,)).astype(np.float64) / np.float64(out_s)
    mult, shift = _multipliers(effective, rounding, "the layer's")
    act_min, act_max = activation_range(choice("activation", activation, ACTIVATIONS), out_s, zp_out)
    return {"input_offset": -zp_in, "output_multiplier": mult, "output_shift": shift, "output_offset": zp_out,
            "quantized_activation_min": act_min, "quantized_activation_max": act_max, "rounding": rounding}


def fully_connected_params(weights_shape, *, weight_scale, **kwargs):
    """:func:`conv_params` for FULLY_CONNECTED: per tensor for a scalar (or length-1) weight_scale."""
    n = weights_shape[0]
    ws = np.asarray(weight_scale)
    per_tensor = ws.ndim == 0 or ws.shape == (1,)
    if per_tensor:
        weight_scale = ws.reshape(()).item()
    return conv_params(weight_scale=weight_scale, channels=n, per_tensor_fully_connected=per_tensor, **kwargs)


def fully_connected(input, weights, bias, *, input_scale, input_zero_point, weight_scale, output_scale,
                    output_zero_point, activation="NONE", weight_zero_point=0, rounding="double",
                    return_stages=False):
    """TFLite int8 FULLY_CONNECTED: input [batch, K], weights [N, K], bias int32 [N] or None.

    ``weight_scale`` is a scalar (per tensor) or a length-N vector (per channel).
    Returns int8 [batch, N] (or the :class:`~golden.staged.StagedResult`).
    """
    params = fully_connected_params(_weights_shape(weights, 2), input_scale=input_scale,
                                    input_zero_point=input_zero_point,
                                    weight_scale=weight_scale, output_scale=output_scale,
                                    output_zero_point=output_zero_point, activation=activation,
                                    weight_zero_point=weight_zero_point, rounding=rounding)
    return kernels.fully_connected_kernel(input, weights, bias, return_stages=return_stages, **params)


def conv_2d(input, weights, bias, *, input_scale, input_zero_point, weight_scale, output_scale,
            output_zero_point, stride=(1, 1), dilation=(1, 1), padding="SAME", activation="NONE",
            weight_zero_point=0, rounding="double", return_stages=False):
    """TFLite int8 CONV_2D: NHWC input, OHWI weights, per-channel (or scalar) weight_scale."""
    params = conv_params(input_scale=input_scale, input_zero_point=input_zero_point, weight_scale=weight_scale,
                         output_scale=output_scale, output_zero_point=output_zero_point,
                         channels=_weights_shape(weights, 4)[0], activation=activation, rounding=rounding,
                         weight_zero_point=weight_zero_point)
    return kernels.conv_2d_kernel(input, weights, bias, stride=stride, dilation=dilation, padding=padding,
                                  return_stages=return_stages, **params)


def depthwise_conv_2d(input, weights, bias, *, input_scale, input_zero_point, weight_scale, output_scale,
                      output_zero_point, stride=(1, 1), dilation=(1, 1), padding="SAME", activation="NONE",
                      depth_multiplier=1, weight_zero_point=0, rounding="double", return_stages=False):
    """TFLite int8 DEPTHWISE_CONV_2D: weights [1, KH, KW, C*depth_multiplier], per-channel scales."""
    params = conv_params(input_scale=input_scale, input_zero_point=input_zero_point, weight_scale=weight_scale,
                         output_scale=output_scale, output_zero_point=output_zero_point,
                         channels=_weights_shape(weights, 4)[3], activation=activation, rounding=rounding,
                         weight_zero_point=weight_zero_point)
    return kernels.depthwise_conv_2d_kernel(input, weights, bias, stride=stride, dilation=dilation,
                                            padding=padding, depth_multiplier=depth_multiplier,
                                            return_stages=return_stages, **params)


def add_params(*, input1_scale, input1_zero_point, input2_scale, input2_zero_point, output_scale,
               output_zero_point, activation="NONE", rounding="double"):
    """Kernel-level ADD parameters, as TFLM's ``CalculateOpDataAdd`` (int8: left_shift 20)."""
    s1 = scale_param("input1_scale", input1_scale)
    s2 = scale_param("input2_scale", input2_scale)
    so = scale_param("output_scale", output_scale)
    left_shift = 20
    twice_max_input_scale = 2 * np.float64(max(s1, s2))
    real_input1_multiplier = np.float64(s1) / twice_max_input_scale
    real_input2_multiplier = np.float64(s2) / twice_max_input_scale
    real_output_multiplier = twice_max_input_scale / ((1 << left_shift) * np.float64(so))
    if not real_output_multiplier < 1.0:
        raise ValueError(f"output_scale {float(so)!r} is too small for ADD: 2*max(input scales) / (2**20 * "
                         f"output_scale) = {float(real_output_multiplier)!r} must be < 1 (TFLite aborts on this)")
    m1, sh1 = quantize_multiplier_smaller_than_one_exp(real_input1_multiplier)
    m2, sh2 = quantize_multiplier_smaller_than_one_exp(real_input2_multiplier)
    mo, sho = quantize_multiplier_smaller_than_one_exp(real_output_multiplier)
    zp_out = zero_point_param("output_zero_point", output_zero_point)
    act_min, act_max = activation_range(activation, so, zp_out)
    return {"input1_offset": -zero_point_param("input1_zero_point", input1_zero_point),
            "input2_offset": -zero_point_param("input2_zero_point", input2_zero_point),
            "left_shift": left_shift, "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2,
            "input2_shift": sh2, "output_multiplier": mo, "output_shift": sho, "output_offset": zp_out,
            "quantized_activation_min": act_min, "quantized_activation_max": act_max,
            "rounding": rounding_param(rounding)}


def add(input1, input2, *, input1_scale, input1_zero_point, input2_scale, input2_zero_point, output_scale,
        output_zero_point, activation="NONE", rounding="double"):
    """TFLite int8 ADD with numpy (= TFLite) broadcasting."""
    params = add_params(input1_scale=input1_scale, input1_zero_point=input1_zero_point,
                        input2_scale=input2_scale, input2_zero_point=input2_zero_point,
                        output_scale=output_scale, output_zero_point=output_zero_point,
                        activation=activation, rounding=rounding)
    return kernels.add_kernel(input1, input2, **params)


def _pool_range(scale, zero_point, activation):
    zp = zero_point_param("zero_point", zero_point)
    return activation_range(activation, scale_param("scale", scale), zp)


def average_pool_2d(input, *, filter_size, stride, padding, scale, zero_point, activation="NONE"):
    """TFLite int8 AVERAGE_POOL_2D (input and output share ``scale`` and ``zero_point``)."""
    act_min, act_max = _pool_range(scale, zero_point, activation)
    return kernels.average_pool_2d_kernel(input, filter_size=filter_size, stride=stride, padding=padding,
                                          quantized_activation_min=act_min, quantized_activation_max=act_max)


def max_pool_2d(input, *, filter_size, stride, padding, scale, zero_point, activation="NONE"):
    """TFLite int8 MAX_POOL_2D (input and output share ``scale`` and ``zero_point``)."""
    act_min, act_max = _pool_range(scale, zero_point, activation)
    return kernels.max_pool_2d_kernel(input, filter_size=filter_size, stride=stride, padding=padding,
                                      quantized_activation_min=act_min, quantized_activation_max=act_max)

