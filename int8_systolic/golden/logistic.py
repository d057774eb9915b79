"""int8 LOGISTIC, bit-exact with TFLite-Micro's reference kernel.

TFLM computes int8 sigmoid without tables or floats at run time:

* ``Prepare`` (tensorflow/lite/micro/kernels/logistic_common.cc): the input is rescaled
  to Q4.27 (``kInputIntegerBits = 4``) by a multiplier from ``frexp(input_scale * 2**27)``,
  rounded with ``TfLiteRound`` and *no* 2**31 fix-up, and ``input_range_radius`` =
  ``floor(15 * 2**27 / 2**input_left_shift)`` (``CalculateInputRadius``) bounds the
  inputs that are not saturated;
* ``reference_integer_ops::Logistic`` (integer_ops/logistic.h): inputs at or beyond the
  radius saturate to -128/127; the others go through ``MultiplyByQuantizedMultiplier``
  into Q4.27, gemmlowp's fixed-point ``logistic`` (fixedpoint/fixedpoint.h: exp on
  negative values by a Taylor step and a barrel shifter, 1/(1+x) by Newton-Raphson), a
  rounding shift to Q0.8 and the output zero point -128.

The gemmlowp helpers are in :mod:`golden.gemmlowp`.
"""

import math

import numpy as np

from ._checks import INT32_MIN, finite_real, int_array, zero_point_param
from .fixedpoint import multiply_by_quantized_multiplier, rounding_divide_by_pot
from .gemmlowp import logistic

__all__ = ["logistic", "logistic_int8", "logistic_int8_params", "q4_input_params"]

INPUT_INTEGER_BITS = 4  # TFLM's kInputIntegerBits for int8


def logistic_int8_params(input_scale, input_zero_point, output_scale, output_zero_point):
    """TFLM ``CalculateArithmeticOpDataLogistic`` for int8: (input_multiplier, input_left_shift, input_range_radius).

    The output must be quantized with zero point -128 (TFLM checks this) and scale 1/256
    (the kernel assumes it: it writes ``round(sigmoid * 256) - 128``).
    """
    input_scale = finite_real("input_scale", input_scale)
    if not input_scale > 0:
        raise ValueError(f"input_scale must be > 0, got {input_scale}")
    zero_point_param("input_zero_point", input_zero_point)
    if int(output_zero_point) != -128:
        raise ValueError(f"LOGISTIC int8 output_zero_point must be -128 (TFLM requires it), got {output_zero_point}")
    if float(np.float32(output_scale)) != 1.0 / 256:
        raise ValueError(f"LOGISTIC int8 output_scale must be 1/256 (the kernel's fixed output format), "
                         f"got {output_scale}")
    return q4_input_params(input_scale)


def q4_input_params(input_scale):
    """The input side of TFLM's int8 LOGISTIC and TANH Prepare (logistic_common.cc, tanh.cc share it).

    Returns ``(input_multiplier, input_left_shift, input_range_radius)``: the multiplier from
    ``frexp(input_scale * 2**27)`` rounded with ``TfLiteRound`` and no 2**31 fix-up, and the radius
    ``CalculateInputRadius(4, shift)`` beyond which the output saturates.
    """
    real = float(np.float32(input_scale)) * float(1 << (31 - INPUT_INTEGER_BITS))
    q, left_shift = math.frexp(real)
    if left_shift < 0 or left_shift > 30:
        raise ValueError(f"input scale {float(np.float32(input_scale))!r} is outside what TFLM's int8 kernel handles "
                         f"(input_left_shift {left_shift} not in [0, 30])")
    scaled = q * (1 << 31)
    multiplier = math.floor(abs(scaled) + 0.5)   # TfLiteRound: half away from zero, q > 0
    if multiplier == 1 << 31:
        multiplier = INT32_MIN  # static_cast<int32_t>(2^31) on x86; TFLM has no fix-up here
    max_input_rescaled = 1.0 * ((1 << INPUT_INTEGER_BITS) - 1) * (1 << (31 - INPUT_INTEGER_BITS)) / (1 << left_shift)
    return multiplier, left_shift, math.floor(max_input_rescaled)


def logistic_int8(x, input_zero_point, input_multiplier, input_left_shift, input_range_radius):
    """``reference_integer_ops::Logistic`` for int8 (output zero point -128, scale 1/256)."""
    x = int_array("input", x, np.int8).astype(np.int64)
    inp = x - int(input_zero_point)
    in_q4 = multiply_by_quantized_multiplier(inp, input_multiplier, input_left_shift)
    out_q0 = logistic(in_q4, INPUT_INTEGER_BITS)
    out_q23 = rounding_divide_by_pot(out_q0, 31 - 8).astype(np.int64)
    out = np.clip(out_q23 - 128, -128, 127)
    out = np.where(inp <= -input_range_radius, -128, np.where(inp >= input_range_radius, 127, out))
    return out.astype(np.int8)
