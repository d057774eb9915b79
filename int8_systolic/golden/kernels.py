"""Kernel-level API: TFLite's int8 kernels with their integer parameters.

These take exactly what TFLite's ``reference_integer_ops`` take after ``Prepare``
(``input_offset = -input_zero_point``, ``output_multiplier``/``output_shift`` per tensor
or per channel, ``output_offset = output_zero_point``, ``quantized_activation_min/max``)
and are the form the RTL consumes. GEMM-like ops are computed through
:mod:`golden.staged`; ``return_stages=True`` returns the :class:`~golden.staged.StagedResult`
with every intermediate instead of only the int8 output.

Sources: tensorflow/lite/kernels/internal/reference/integer_ops/{fully_connected,conv,
depthwise_conv,add,pooling}.h.
"""

import numpy as np

from . import staged
from ._checks import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    PADDINGS,
    bias_param,
    choice,
    int_array,
    int_or_array_param,
    int_param,
    pair_param,
    rounding_param,
)
from .fixedpoint import wrap_int32

__all__ = [
    "add_kernel",
    "average_pool_2d_kernel",
    "conv_2d_kernel",
    "depthwise_conv_2d_kernel",
    "fully_connected_kernel",
    "max_pool_2d_kernel",
    "requantized_depthwise_gemm",
    "requantized_gemm",
]

WEIGHT_MIN, WEIGHT_MAX = -127, 127


def _activations(name, x, ndim):
    return int_array(name, x, np.int8, ndim=ndim)


def _weights(x, ndim):
    return int_array("weights", x, np.int8, ndim=ndim, lo=WEIGHT_MIN, hi=WEIGHT_MAX)


def _act_range(act_min, act_max):
    act_min = int_param("quantized_activation_min", act_min, INT8_MIN, INT8_MAX)
    act_max = int_param("quantized_activation_max", act_max, INT8_MIN, INT8_MAX)
    if act_min > act_max:
        raise ValueError(f"quantized_activation_min ({act_min}) must be <= quantized_activation_max ({act_max})")
    return act_min, act_max


def _requant_params(n, input_offset, output_multiplier, output_shift, output_offset, act_min, act_max,
                    rounding):
    rounding = rounding_param(rounding)
    input_offset = int_param("input_offset", input_offset, -INT8_MAX, -INT8_MIN)
    lo_m = 0 if rounding == "single" else INT32_MIN
    mult = int_or_array_param("output_multiplier", output_multiplier, lo_m, INT32_MAX, n)
    shift = int_or_array_param("output_shift", output_shift, -31, 30, n)
    output_offset = int_param("output_offset", output_offset, INT8_MIN, INT8_MAX)
    act_min, act_max = _act_range(act_min, act_max)
    return input_offset, mult, shift, output_offset, act_min, act_max, rounding


def requantized_gemm(lhs, rhs, bias, *, input_offset, output_multiplier, output_shift, output_offset,
                     quantized_activation_min=INT8_MIN, quantized_activation_max=INT8_MAX,
                     rounding="double", return_stages=False):
    """The array's job: int8 ``lhs`` [M, K] times int8 ``rhs`` [K, N], requantized per column.

    ``out[m, n] = clamp(MBQM(sum_k lhs*rhs + bias[n] + input_offset*sum_k rhs[k, n],
    M[n], shift[n]) + output_offset)``. ``lhs`` holds raw activations (any int8),
    ``rhs`` symmetric weights in [-127, 127].
    """
    lhs = _activations("lhs", lhs, 2)
    rhs = _weights(rhs, 2)
    if lhs.shape[1] != rhs.shape[0]:
        raise ValueError(f"lhs is [M, K] = {list(lhs.shape)} but rhs is [K, N] = {list(rhs.shape)}: K differs")
    return _gemm(lhs, rhs, bias, input_offset, output_multiplier, output_shift, output_offset,
                 quantized_activation_min, quantized_activation_max, rounding, return_stages)


def requantized_depthwise_gemm(lhs, rhs, bias, *, input_offset, output_multiplier, output_shift, output_offset,
                               quantized_activation_min=INT8_MIN, quantized_activation_max=INT8_MAX,
                               rounding="double", return_stages=False):
    """The array's depthwise mode: int8 ``lhs`` [M, K, N] (an activation per output channel) and int8
    ``rhs`` [K, N], requantized per column.

    ``out[m, n] = clamp(MBQM(sum_k lhs[m, k, n]*rhs[k, n] + bias[n] + input_offset*sum_k rhs[k, n],
    M[n], shift[n]) + output_offset)``: a depthwise convolution's patches ``lhs[pixel, tap, channel]``
    against its taps, one channel per column (int32 wrap-around, as a chain of int32 additions).
    """
    lhs = _activations("lhs", lhs, 3)
    rhs = _weights(rhs, 2)
    if lhs.shape[1:] != rhs.shape:
        raise ValueError(f"lhs is [M, K, N] = {list(lhs.shape)} but rhs is [K, N] = {list(rhs.shape)}: "
                         f"K or N differs")
    raw = wrap_int32(np.einsum("mkn,kn->mn", lhs.astype(np.int64), rhs.astype(np.int64)))
    return _requantized(raw, rhs.sum(axis=0, dtype=np.int64), bias, input_offset, output_multiplier, output_shift,
                        output_offset, quantized_activation_min, quantized_activation_max, rounding, return_stages)


def _requantized(raw, weight_sums, bias, input_offset, output_multiplier, output_shift, output_offset, act_min,
                 act_max, rounding, return_stages):
    """Raw accumulators (output channels on the last axis) through the checked bias fold and requantization."""
    n = len(weight_sums)
    bias = bias_param(bias, n)
    input_offset, mult, shift, output_offset, act_min, act_max, rounding = _requant_params(
        n, input_offset, output_multiplier, output_shift, output_offset, act_min, act_max, rounding)
    folded = staged.fold_bias(bias, weight_sums, input_offset)
    result = staged.requantize_stages(raw, folded, mult, shift, output_offset, act_min, act_max, rounding)
    return result if return_stages else result.output


def _gemm(lhs, rhs, bias, input_offset, output_multiplier, output_shift, output_offset, act_min, act_max,
          rounding, return_stages):
    """:func:`requantized_gemm` once ``lhs``/``rhs`` are validated int8 arrays (callers scan them once)."""
    raw, weight_sums = staged.accumulate_with_sums(lhs, rhs)
    return _requantized(raw, weight_sums, bias, input_offset, output_multiplier, output_shift, output_offset,
                        act_min, act_max, rounding, return_stages)


def fully_connected_kernel(input, weights, bias, *, input_offset, output_multiplier, output_shift,
                           output_offset, quantized_activation_min=INT8_MIN,
                           quantized_activation_max=INT8_MAX, rounding="double", return_stages=False):
    """TFLite int8 FULLY_CONNECTED (``FullyConnected`` / ``FullyConnectedPerChannel``).

    ``input`` [batch, K] int8, ``weights`` [N, K] int8 in [-127, 127], ``bias`` int32
    [N] or None. ``output_multiplier``/``output_shift`` scalar (per tensor) or [N].
    Returns int8 [batch, N].
    """
    input = _activations("input", input, 2)
    weights = _weights(weights, 2)
    if input.shape[1] != weights.shape[1]:
        raise ValueError(f"input is [batch, K] = {list(input.shape)} but weights are [N, K] = "
                         f"{list(weights.shape)}: K differs")
    return _gemm(input, weights.T, bias, input_offset, output_multiplier, output_shift, output_offset,
                 quantized_activation_min, quantized_activation_max, rounding, return_stages)


def _conv_geometry(stride, dilation, padding):
    return pair_param("stride", stride), pair_param("dilation", dilation), choice("padding", padding, PADDINGS)


def conv_2d_kernel(input, weights, bias, *, input_offset, output_multiplier, output_shift, output_offset,
                   stride=(1, 1), dilation=(1, 1), padding="SAME", quantized_activation_min=INT8_MIN,
                   quantized_activation_max=INT8_MAX, rounding="double", return_stages=False):
    """TFLite int8 CONV_2D (``ConvPerChannel``): NHWC ``input``, OHWI ``weights``.

    Computed as im2col (padding = input zero point = ``-input_offset``) followed by
    :func:`requantized_gemm`. Returns int8 NHWC [B, OH, OW, O] (stages reshaped likewise).
    """
    input = _activations("input", input, 4)
    weights = _weights(weights, 4)
    stride, dilation, padding = _conv_geometry(stride, dilation, padding)
    cout, kh, kw, cin = weights.shape
    if input.shape[3] != cin:
        raise ValueError(f"input has {input.shape[3]} channels but OHWI weights {list(weights.shape)} expect "
                         f"{cin} (grouped convolution is not supported)")
    input_offset = int_param("input_offset", input_offset, -INT8_MAX, -INT8_MIN)
    cols = staged.im2col(input, (kh, kw), stride, dilation, padding, pad_value=-input_offset)
    b, oh, ow, t = cols.shape
    result = _gemm(cols.reshape(-1, t), weights.reshape(cout, t).T, bias, input_offset, output_multiplier,
                   output_shift, output_offset, quantized_activation_min, quantized_activation_max, rounding,
                   return_stages)
    return _reshape_result(result, (b, oh, ow, cout), return_stages)


def _reshape_result(result, shape, return_stages):
    if not return_stages:
        return result.reshape(shape)
    for name in ("raw_acc", "acc", "scaled", "offset", "output"):
        setattr(result, name, getattr(result, name).reshape(shape))
    return result


def depthwise_conv_2d_kernel(input, weights, bias, *, input_offset, output_multiplier, output_shift,
                             output_offset, stride=(1, 1), dilation=(1, 1), padding="SAME", depth_multiplier=1,
                             quantized_activation_min=INT8_MIN, quantized_activation_max=INT8_MAX,
                             rounding="double", return_stages=False):
    """TFLite int8 DEPTHWISE_CONV_2D (``DepthwiseConvPerChannel``): weights [1, KH, KW, C*depth_multiplier].

    Output channel ``oc = c * depth_multiplier + m`` reads input channel ``c``.
    """
    input = _activations("input", input, 4)
    weights = _weights(weights, 4)
    stride, dilation, padding = _conv_geometry(stride, dilation, padding)
    depth_multiplier = int_param("depth_multiplier", depth_multiplier, 1, INT32_MAX)
    one, _, _, cout = weights.shape
    cin = input.shape[3]
    if one != 1:
        raise ValueError(f"depthwise weights must be [1, KH, KW, C*depth_multiplier], got {list(weights.shape)}")
    if cout != cin * depth_multiplier:
        raise ValueError(f"depthwise weights have {cout} output channels but input channels ({cin}) x "
                         f"depth_multiplier ({depth_multiplier}) = {cin * depth_multiplier}")
    bias = bias_param(bias, cout)
    input_offset, mult, shift, output_offset, act_min, act_max, rounding = _requant_params(
        cout, input_offset, output_multiplier, output_shift, output_offset,
        quantized_activation_min, quantized_activation_max, rounding)
    raw = staged.depthwise_accumulate(input, weights, stride, dilation, padding, -input_offset, depth_multiplier)
    folded = staged.fold_bias(bias, weights.sum(axis=(0, 1, 2), dtype=np.int64), input_offset)
    result = staged.requantize_stages(raw, folded, mult, shift, output_offset, act_min, act_max, rounding)
    return result if return_stages else result.output


def add_kernel(input1, input2, *, input1_offset, input2_offset, left_shift, input1_multiplier, input1_shift,
               input2_multiplier, input2_shift, output_multiplier, output_shift, output_offset,
               quantized_activation_min=INT8_MIN, quantized_activation_max=INT8_MAX, rounding="double"):
    """TFLite int8 ADD (``AddElementwise`` / ``BroadcastAdd6DSlow``), numpy broadcasting.

    A thin wrapper that checks its parameters and calls :func:`golden.reference_ops.add_sub.arithmetic`,
    the one home of ADD's integer arithmetic.

    Each input is offset, shifted left by ``left_shift`` (20 for int8), rescaled with
    ``MultiplyByQuantizedMultiplierSmallerThanOneExp``, summed, rescaled to the output,
    offset and clamped. All int32 with wrap-around.
    """
    rounding = rounding_param(rounding)
    a = _activations("input1", input1, None)
    b = _activations("input2", input2, None)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"input1 shape {list(a.shape)} and input2 shape {list(b.shape)} do not broadcast") \
            from None
    o1 = int_param("input1_offset", input1_offset, -INT8_MAX, -INT8_MIN)
    o2 = int_param("input2_offset", input2_offset, -INT8_MAX, -INT8_MIN)
    ls = int_param("left_shift", left_shift, 0, 22)
    m1 = int_param("input1_multiplier", input1_multiplier, 0, INT32_MAX)
    m2 = int_param("input2_multiplier", input2_multiplier, 0, INT32_MAX)
    mo = int_param("output_multiplier", output_multiplier, 0, INT32_MAX)
    s1 = int_param("input1_shift", input1_shift, -31, 0)
    s2 = int_param("input2_shift", input2_shift, -31, 0)
    so = int_param("output_shift", output_shift, -31, 0)
    output_offset = int_param("output_offset", output_offset, INT8_MIN, INT8_MAX)
    act_min, act_max = _act_range(quantized_activation_min, quantized_activation_max)
    from .reference_ops.add_sub import arithmetic  # (the one home of ADD's arithmetic; imported late: it uses ops)
    params = {"input1_offset": o1, "input2_offset": o2, "left_shift": ls, "input1_multiplier": m1,
              "input1_shift": s1, "input2_multiplier": m2, "input2_shift": s2, "output_multiplier": mo,
              "output_shift": so, "output_offset": output_offset, "quantized_activation_min": act_min,
              "quantized_activation_max": act_max}
    return arithmetic(a, b, params, rounding=rounding)


def _pool_windows(input, filter_size, stride, padding, pad_value):
    """Windows [B, OH, OW, C, FH*FW] of the input plus a validity mask (True inside the image)."""
    input = _activations("input", input, 4)
    fh, fw = pair_param("filter_size", filter_size)
    stride = pair_param("stride", stride)
    padding = choice("padding", padding, PADDINGS)
    b, h, w, c = input.shape
    mask = np.ones((1, h, w, 1), dtype=np.int8)
    cols = staged.im2col(input.astype(np.int16), (fh, fw), stride, (1, 1), padding, pad_value=pad_value)
    valid = staged.im2col(mask, (fh, fw), stride, (1, 1), padding, pad_value=0)
    oh, ow = cols.shape[1:3]
    cols = cols.reshape(b, oh, ow, fh * fw, c).transpose(0, 1, 2, 4, 3)
    valid = valid.reshape(1, oh, ow, fh * fw, 1).transpose(0, 1, 2, 4, 3).astype(bool)
    return cols, valid


def average_pool_2d_kernel(input, *, filter_size, stride, padding="VALID", quantized_activation_min=INT8_MIN,
                           quantized_activation_max=INT8_MAX):
    """TFLite int8 AVERAGE_POOL_2D: mean of the in-image taps, rounded half away from zero.

    ``(acc + n/2) / n`` for a positive sum, ``(acc - n/2) / n`` otherwise, with C's
    truncating division; padded taps are excluded from both the sum and the count.
    """
    act_min, act_max = _act_range(quantized_activation_min, quantized_activation_max)
    cols, valid = _pool_windows(input, filter_size, stride, padding, pad_value=0)
    acc = cols.astype(np.int64).sum(axis=-1)
    count = valid.sum(axis=-1).astype(np.int64)
    num = np.where(acc > 0, acc + count // 2, acc - count // 2)
    quotient = np.where(num >= 0, num // count, -((-num) // count))
    return staged.clamp(quotient, act_min, act_max)


def max_pool_2d_kernel(input, *, filter_size, stride, padding="VALID", quantized_activation_min=INT8_MIN,
                       quantized_activation_max=INT8_MAX):
    """TFLite int8 MAX_POOL_2D: maximum of the in-image taps, clamped to the activation range."""
    act_min, act_max = _act_range(quantized_activation_min, quantized_activation_max)
    cols, _ = _pool_windows(input, filter_size, stride, padding, pad_value=INT8_MIN - 1)
    return staged.clamp(cols.max(axis=-1), act_min, act_max)
