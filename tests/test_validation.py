"""Bad input gets a clear ValueError naming the parameter and the allowed range."""

import numpy as np
import pytest

from int8_systolic import golden

X = np.zeros((2, 4), np.int8)
W = np.ones((3, 4), np.int8)
B = np.zeros(3, np.int32)
FC = {"input_scale": 0.1, "input_zero_point": 0, "weight_scale": 0.01, "output_scale": 0.2,
      "output_zero_point": 0}
CONV_X = np.zeros((1, 5, 5, 2), np.int8)
CONV_W = np.ones((3, 3, 3, 2), np.int8)


def fc(x=X, w=W, b=B, **kw):
    return golden.fully_connected(x, w, b, **{**FC, **kw})


def conv(x=CONV_X, w=CONV_W, b=B, **kw):
    return golden.conv_2d(x, w, b, **{**FC, **kw})


@pytest.mark.parametrize(("call", "match"), [
    (lambda: fc(x=X.astype(np.float32)), r"input must be an integer array"),
    (lambda: fc(x=np.full((2, 4), 200)), r"input values must be in \[-128, 127\], found 200"),
    (lambda: fc(w=np.full((3, 4), -128)), r"weights values must be in \[-127, 127\], found -128"),
    (lambda: fc(input_zero_point=128), r"input_zero_point must be in \[-128, 127\], got 128"),
    (lambda: fc(output_zero_point=-129), r"output_zero_point must be in \[-128, 127\], got -129"),
    (lambda: fc(weight_zero_point=3), r"weight_zero_point must be 0"),
    (lambda: fc(input_scale=0.0), r"input_scale must be positive and finite"),
    (lambda: fc(output_scale=float("nan")), r"output_scale must be positive and finite"),
    (lambda: fc(weight_scale=-1.0), r"weight_scale must be positive"),
    (lambda: fc(input_scale=1e-50), r"input_scale must be positive and finite as a float32"),
    (lambda: fc(weight_scale=[0.1, 0.2]), r"weight_scale must be a scalar or shape \(3,\)"),
    (lambda: fc(b=B.astype(np.int64)), r"bias must be an int32 array"),
    (lambda: fc(b=np.zeros(4, np.int32)), r"bias must have shape \(3,\)"),
    (lambda: fc(w=np.ones((3, 5), np.int8)), r"K differs"),
    (lambda: fc(x=np.zeros(4, np.int8)), r"input must have 2 dimensions"),
    (lambda: fc(activation="TANH"), r"activation must be one of NONE, RELU, RELU6, RELU_N1_TO_1"),
    (lambda: fc(rounding="nearest"), r"rounding must be 'double'"),
    (lambda: fc(output_scale=1e-13), r"effective scale .* >= 2\*\*30"),
    (lambda: conv(padding="FULL"), r"padding must be one of SAME, VALID"),
    (lambda: conv(stride=(0, 1)), r"stride\[0\] must be in \[1, "),
    (lambda: conv(dilation=0), r"dilation\[0\] must be in \[1, "),
    (lambda: conv(x=np.zeros((1, 5, 5, 3), np.int8)), r"input has 3 channels"),
    (lambda: conv(padding="VALID", x=np.zeros((1, 2, 2, 2), np.int8)), r"does not fit"),
    (lambda: golden.depthwise_conv_2d(CONV_X, np.ones((1, 3, 3, 4), np.int8), np.zeros(4, np.int32),
                                      depth_multiplier=3, **FC), r"depth_multiplier \(3\)"),
    (lambda: golden.add(X, np.zeros((3, 3), np.int8), input1_scale=0.1, input1_zero_point=0, input2_scale=0.1,
                        input2_zero_point=0, output_scale=0.1, output_zero_point=0), r"do not broadcast"),
    (lambda: golden.add(X, X, input1_scale=1.0, input1_zero_point=0, input2_scale=1.0, input2_zero_point=0,
                        output_scale=1e-7, output_zero_point=0), r"output_scale .* too small for ADD"),
    (lambda: golden.max_pool_2d(CONV_X, filter_size=0, stride=1, padding="SAME", scale=0.1, zero_point=0),
     r"filter_size\[0\] must be in \[1, "),
    (lambda: golden.fully_connected_kernel(X, W, B, input_offset=0, output_multiplier=2**30, output_shift=31,
                                           output_offset=0), r"output_shift must be in \[-31, 30\], got 31"),
    (lambda: golden.fully_connected_kernel(X, W, B, input_offset=-128, output_multiplier=2**30, output_shift=0,
                                           output_offset=0), r"input_offset must be in \[-127, 128\]"),
    (lambda: golden.fully_connected_kernel(X, W, B, input_offset=0, output_multiplier=-1, output_shift=0,
                                           output_offset=0, rounding="single"),
     r"output_multiplier must be in \[0, 2147483647\], got -1"),
    (lambda: golden.fully_connected_kernel(X, W, B, input_offset=0, output_multiplier=2**30, output_shift=0,
                                           output_offset=0, quantized_activation_min=5,
                                           quantized_activation_max=4), r"must be <= quantized_activation_max"),
    (lambda: golden.quantize([1.0], 0.1, 300), r"zero_point must be in \[-128, 127\]"),
    (lambda: golden.choose_quantization_params(float("inf"), 1.0), r"rmin must be finite"),
    # the scale-level API's ranges: each argument outside the spec's range is refused, never computed with
    (lambda: golden.quantize([1.0], 0.1, 0, qmax=300),
     r"qmax \(of int8, above qmin\) must be in \[-127, 127\], got 300"),
    (lambda: golden.quantize([1.0], 0.1, 0, qmin=-200), r"qmin \(of int8\) must be in \[-128, 127\], got -200"),
    (lambda: golden.quantize([1.0], 0.1, 0, dtype=np.float32), r"dtype must be an integer numpy dtype"),
    (lambda: golden.quantize([float("nan")], 0.1, 0), r"real must be finite"),
    (lambda: golden.quantize([1.0], float("inf"), 0), r"scale must be positive and finite"),
    (lambda: golden.dequantize([1], 0.0, 0), r"scale must be positive and finite"),
    (lambda: golden.saturating_rounding_doubling_high_mul(2**40, 3),
     r"a values must be in \[-2147483648, 2147483647\]"),
    (lambda: golden.saturating_rounding_doubling_high_mul(3, 1.5), r"b must be an int32 value or array"),
    (lambda: golden.rounding_divide_by_pot(2**33, 1), r"x values must be in \[-2147483648, 2147483647\]"),
    (lambda: golden.rounding_divide_by_pot(5, 32), r"exponent must be in \[0, 31\], got 32"),
    (lambda: golden.rounding_divide_by_pot(5, 1.5), r"exponent must be an int32 value or array"),
    (lambda: golden.multiply_by_quantized_multiplier(2**33, 2**30, 0), r"x values must be in \[-2147483648"),
    (lambda: golden.multiply_by_quantized_multiplier(5, 2**31, 0), r"quantized_multiplier values must be in"),
    (lambda: golden.multiply_by_quantized_multiplier(5, 2**30, 31), r"shift values must be in \[-31, 30\]"),
    (lambda: golden.wrap_int32(1.5), r"x must be integers"),
    (lambda: golden.fake_quant_nudge(-1.0, 1.0, num_bits=0), r"num_bits must be in \[2, 16\], got 0"),
    (lambda: golden.fake_quant_nudge(-1.0, float("inf")), r"rmax must be finite"),
    (lambda: golden.fake_quant_nudge(-1.0, 1.0, narrow_range="yes"), r"narrow_range must be a bool"),
    (lambda: golden.choose_quantization_params(-1.0, 1.0, 5, 3), r"qmax must be in \[6, "),
    (lambda: golden.activation_range("RELU", 0.1, 0, qmin=5, qmax=5), r"qmax must be in \[6, "),
    (lambda: golden.quantize_multiplier(float("nan")), r"real_multiplier must be finite and >= 0"),
    (lambda: golden.conv_params(input_scale=0.1, input_zero_point=0, weight_scale=0.1, output_scale=0.1,
                                output_zero_point=0, channels=0), r"channels must be in \[1, "),
    (lambda: golden.MovingAverageMinMax(decay=float("nan")), r"decay must be finite"),
])
def test_bad_input_raises_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
