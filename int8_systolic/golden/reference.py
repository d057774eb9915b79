"""Line-for-line Python ports of TFLite's int8 reference kernels.

Deliberately naive: plain Python integers, the same loop nests and statement order as
tensorflow/lite/kernels/internal/reference/integer_ops/*.h, and scalar re-statements of
gemmlowp's fixed-point helpers, independent of the vectorised code in
:mod:`golden.fixedpoint` and :mod:`golden.staged`. Every ``int32_t`` assignment that can
overflow wraps through :func:`_i32`. The tests assert that the staged, vectorised model
equals these ports; they are slow and meant for small shapes only.
"""

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _i32(x):
    """int32_t two's-complement wrap of a Python int."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def _trunc_div(a, b):
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def SaturatingRoundingDoublingHighMul(a, b):
    overflow = a == b and a == INT32_MIN
    ab_64 = a * b
    nudge = (1 << 30) if ab_64 >= 0 else (1 - (1 << 30))
    ab_x2_high32 = _i32(_trunc_div(ab_64 + nudge, 1 << 31))
    return INT32_MAX if overflow else ab_x2_high32


def RoundingDivideByPOT(x, exponent):
    assert 0 <= exponent <= 31
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def MultiplyByQuantizedMultiplier(x, quantized_multiplier, shift, rounding="double"):
    if rounding == "single":
        assert quantized_multiplier >= 0
        assert -31 <= shift <= 30
        total_shift = 31 - shift
        round_ = 1 << (total_shift - 1)
        result = x * quantized_multiplier + round_
        result = result >> total_shift
        return _i32(result)
    left_shift = shift if shift > 0 else 0
    right_shift = 0 if shift > 0 else -shift
    return RoundingDivideByPOT(
        SaturatingRoundingDoublingHighMul(_i32(x * (1 << left_shift)), quantized_multiplier), right_shift)


def MultiplyByQuantizedMultiplierSmallerThanOneExp(x, quantized_multiplier, left_shift, rounding="double"):
    if rounding == "single":
        return MultiplyByQuantizedMultiplier(x, quantized_multiplier, left_shift, "single")
    return RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, quantized_multiplier), -left_shift)


def _per_channel(value, channel):
    return value[channel] if isinstance(value, (list, tuple)) or hasattr(value, "__len__") else value


def fully_connected(input_data, filter_data, bias_data, *, input_offset, output_offset, output_multiplier,
                    output_shift, quantized_activation_min, quantized_activation_max, rounding="double"):
    """``FullyConnected`` (per tensor) and ``FullyConnectedPerChannel`` (multiplier/shift lists)."""
    batches = len(input_data)
    output_depth = len(filter_data)
    accum_depth = len(filter_data[0])
    filter_offset = 0
    output = [[0] * output_depth for _ in range(batches)]
    for b in range(batches):
        for out_c in range(output_depth):
            acc = 0
            for d in range(accum_depth):
                input_val = int(input_data[b][d])
                filter_val = int(filter_data[out_c][d])
                acc = _i32(acc + (filter_val + filter_offset) * (input_val + input_offset))
            if bias_data is not None:
                acc = _i32(acc + int(bias_data[out_c]))
            acc_scaled = MultiplyByQuantizedMultiplier(acc, int(_per_channel(output_multiplier, out_c)),
                                                       int(_per_channel(output_shift, out_c)), rounding)
            acc_scaled = _i32(acc_scaled + output_offset)
            acc_scaled = max(acc_scaled, quantized_activation_min)
            acc_scaled = min(acc_scaled, quantized_activation_max)
            output[b][out_c] = acc_scaled
    return output


def _padding(padding, stride, dilation, in_size, filter_size):
    effective = (filter_size - 1) * dilation + 1
    if padding == "SAME":
        out_size = (in_size + stride - 1) // stride
    else:
        out_size = (in_size + stride - effective) // stride
    total = max((out_size - 1) * stride + effective - in_size, 0)
    return out_size, total // 2


def conv_per_channel(input_data, filter_data, bias_data, *, input_offset, output_offset, output_multiplier,
                     output_shift, stride, dilation, padding, quantized_activation_min,
                     quantized_activation_max, rounding="double"):
    """``ConvPerChannel``: nested lists NHWC input, OHWI filter; returns NHWC nested lists."""
    batches, input_height, input_width, input_depth = (len(input_data), len(input_data[0]),
                                                       len(input_data[0][0]), len(input_data[0][0][0]))
    output_depth, filter_height, filter_width = len(filter_data), len(filter_data[0]), len(filter_data[0][0])
    stride_height, stride_width = stride
    dilation_height_factor, dilation_width_factor = dilation
    output_height, pad_height = _padding(padding, stride_height, dilation_height_factor, input_height,
                                         filter_height)
    output_width, pad_width = _padding(padding, stride_width, dilation_width_factor, input_width, filter_width)
    output = [[[[0] * output_depth for _ in range(output_width)] for _ in range(output_height)]
              for _ in range(batches)]
    for batch in range(batches):
        for out_y in range(output_height):
            in_y_origin = (out_y * stride_height) - pad_height
            for out_x in range(output_width):
                in_x_origin = (out_x * stride_width) - pad_width
                for out_channel in range(output_depth):
                    acc = 0
                    for filter_y in range(filter_height):
                        in_y = in_y_origin + dilation_height_factor * filter_y
                        for filter_x in range(filter_width):
                            in_x = in_x_origin + dilation_width_factor * filter_x
                            is_point_inside_image = 0 <= in_x < input_width and 0 <= in_y < input_height
                            if not is_point_inside_image:
                                continue
                            for in_channel in range(input_depth):
                                input_val = int(input_data[batch][in_y][in_x][in_channel])
                                filter_val = int(filter_data[out_channel][filter_y][filter_x][in_channel])
                                acc = _i32(acc + filter_val * (input_val + input_offset))
                    if bias_data is not None:
                        acc = _i32(acc + int(bias_data[out_channel]))
                    acc = MultiplyByQuantizedMultiplier(acc, int(_per_channel(output_multiplier, out_channel)),
                                                        int(_per_channel(output_shift, out_channel)), rounding)
                    acc = _i32(acc + output_offset)
                    acc = max(acc, quantized_activation_min)
                    acc = min(acc, quantized_activation_max)
                    output[batch][out_y][out_x][out_channel] = acc
    return output


def depthwise_conv_per_channel(input_data, filter_data, bias_data, *, input_offset, output_offset,
                               output_multiplier, output_shift, stride, dilation, padding, depth_multiplier,
                               quantized_activation_min, quantized_activation_max, rounding="double"):
    """``DepthwiseConvPerChannel``: filter [1][KH][KW][C*depth_multiplier]."""
    batches, input_height, input_width, input_depth = (len(input_data), len(input_data[0]),
                                                       len(input_data[0][0]), len(input_data[0][0][0]))
    filter_height, filter_width = len(filter_data[0]), len(filter_data[0][0])
    stride_height, stride_width = stride
    dilation_height_factor, dilation_width_factor = dilation
    output_height, pad_height = _padding(padding, stride_height, dilation_height_factor, input_height,
                                         filter_height)
    output_width, pad_width = _padding(padding, stride_width, dilation_width_factor, input_width, filter_width)
    output_depth = input_depth * depth_multiplier
    output = [[[[0] * output_depth for _ in range(output_width)] for _ in range(output_height)]
              for _ in range(batches)]
    for batch in range(batches):
        for out_y in range(output_height):
            for out_x in range(output_width):
                for in_channel in range(input_depth):
                    for m in range(depth_multiplier):
                        output_channel = m + in_channel * depth_multiplier
                        in_x_origin = (out_x * stride_width) - pad_width
                        in_y_origin = (out_y * stride_height) - pad_height
                        acc = 0
                        for filter_y in range(filter_height):
                            for filter_x in range(filter_width):
                                in_x = in_x_origin + dilation_width_factor * filter_x
                                in_y = in_y_origin + dilation_height_factor * filter_y
                                if 0 <= in_x < input_width and 0 <= in_y < input_height:
                                    input_val = int(input_data[batch][in_y][in_x][in_channel])
                                    filter_val = int(filter_data[0][filter_y][filter_x][output_channel])
                                    acc = _i32(acc + filter_val * (input_val + input_offset))
                        if bias_data is not None:
                            acc = _i32(acc + int(bias_data[output_channel]))
                        acc = MultiplyByQuantizedMultiplier(
                            acc, int(_per_channel(output_multiplier, output_channel)),
                            int(_per_channel(output_shift, output_channel)), rounding)
                        acc = _i32(acc + output_offset)
                        acc = max(acc, quantized_activation_min)
                        acc = min(acc, quantized_activation_max)
                        output[batch][out_y][out_x][output_channel] = acc
    return output


def add_elementwise(input1_data, input2_data, *, input1_offset, input2_offset, left_shift, input1_multiplier,
                    input1_shift, input2_multiplier, input2_shift, output_multiplier, output_shift,
                    output_offset, quantized_activation_min, quantized_activation_max, rounding="double"):
    """``AddElementwise`` over flat lists of equal length."""
    out = []
    mbqm = MultiplyByQuantizedMultiplierSmallerThanOneExp
    for x1, x2 in zip(input1_data, input2_data, strict=True):
        input1_val = input1_offset + int(x1)
        input2_val = input2_offset + int(x2)
        shifted_input1_val = _i32(input1_val * (1 << left_shift))
        shifted_input2_val = _i32(input2_val * (1 << left_shift))
        scaled_input1_val = mbqm(shifted_input1_val, input1_multiplier, input1_shift, rounding)
        scaled_input2_val = mbqm(shifted_input2_val, input2_multiplier, input2_shift, rounding)
        raw_sum = _i32(scaled_input1_val + scaled_input2_val)
        raw_output = _i32(mbqm(raw_sum, output_multiplier, output_shift, rounding) + output_offset)
        out.append(min(quantized_activation_max, max(quantized_activation_min, raw_output)))
    return out


def _pool(input_data, filter_size, stride, padding, quantized_activation_min, quantized_activation_max,
          reduce):
    batches, input_height, input_width, depth = (len(input_data), len(input_data[0]), len(input_data[0][0]),
                                                 len(input_data[0][0][0]))
    filter_height, filter_width = filter_size
    stride_height, stride_width = stride
    output_height, pad_height = _padding(padding, stride_height, 1, input_height, filter_height)
    output_width, pad_width = _padding(padding, stride_width, 1, input_width, filter_width)
    output = [[[[0] * depth for _ in range(output_width)] for _ in range(output_height)] for _ in range(batches)]
    for batch in range(batches):
        for out_y in range(output_height):
            for out_x in range(output_width):
                for channel in range(depth):
                    in_x_origin = (out_x * stride_width) - pad_width
                    in_y_origin = (out_y * stride_height) - pad_height
                    filter_x_start = max(0, -in_x_origin)
                    filter_x_end = min(filter_width, input_width - in_x_origin)
                    filter_y_start = max(0, -in_y_origin)
                    filter_y_end = min(filter_height, input_height - in_y_origin)
                    values = [int(input_data[batch][in_y_origin + fy][in_x_origin + fx][channel])
                              for fy in range(filter_y_start, filter_y_end)
                              for fx in range(filter_x_start, filter_x_end)]
                    acc = reduce(values)
                    acc = max(acc, quantized_activation_min)
                    acc = min(acc, quantized_activation_max)
                    output[batch][out_y][out_x][channel] = acc
    return output


def _average(values):
    acc = sum(values)
    filter_count = len(values)
    assert filter_count > 0
    if acc > 0:
        return _trunc_div(acc + filter_count // 2, filter_count)
    return _trunc_div(acc - filter_count // 2, filter_count)


def average_pool(input_data, *, filter_size, stride, padding, quantized_activation_min,
                 quantized_activation_max):
    """``AveragePool`` (int8)."""
    return _pool(input_data, filter_size, stride, padding, quantized_activation_min, quantized_activation_max,
                 _average)


def max_pool(input_data, *, filter_size, stride, padding, quantized_activation_min, quantized_activation_max):
    """``MaxPool`` (int8)."""
    return _pool(input_data, filter_size, stride, padding, quantized_activation_min, quantized_activation_max,
                 max)
