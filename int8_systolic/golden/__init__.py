"""Numpy golden model of TFLite's int8 quantized arithmetic, bit-exact with TFLite-Micro.

Layers, from the bottom up:

* :mod:`golden.fixedpoint` - QuantizeMultiplier, SaturatingRoundingDoublingHighMul,
  RoundingDivideByPOT, MultiplyByQuantizedMultiplier (double and single rounding).
* :mod:`golden.quantization` - choosing scales and zero points, quantize/dequantize,
  the moving-average range tracker, fused-activation bounds.
* :mod:`golden.staged` - the hardware's stages: accumulate, fold bias, requantize,
  add the output zero point, clamp; im2col.
* :mod:`golden.kernels` - the MAC and pooling kernels with their integer parameters (what the
  RTL consumes); the interpreter's CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and pools run
  them. ``add_kernel`` is a thin wrapper over ADD's one home, :mod:`golden.reference_ops.add_sub`.
* :mod:`golden.ops` - the scale-level API (float scales in, int8 out): thin wrappers that derive
  the integer parameters and call the kernels.
* :mod:`golden.reference` - line-for-line loop ports of TFLite's reference kernels,
  used by the tests to check everything above.
* :mod:`golden.gemmlowp` - gemmlowp's fixed-point exp, log, logistic, tanh, reciprocal and
  inverse square root, as the LOGISTIC/TANH/SOFTMAX/LOG_SOFTMAX/L2_NORMALIZATION kernels use them.
* :mod:`golden.reference_ops` - every int8 op of the spec's table (and the ops real models put
  around them), one module per family, each a Prepare (integer parameters from the scales, as
  TFLM derives them) and an Eval (the integer kernel); ``OP_TABLE`` dispatches them. Every op's
  integer arithmetic has one home: its module here, or the kernel in :mod:`golden.kernels` that
  the module calls.
* :mod:`golden.tflite` - reading and writing ``.tflite`` files and the whole-model
  interpreter (needs the dev extra).
"""

from .fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier,
    quantize_multiplier_smaller_than_one_exp,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from .kernels import (
    add_kernel,
    average_pool_2d_kernel,
    conv_2d_kernel,
    depthwise_conv_2d_kernel,
    fully_connected_kernel,
    max_pool_2d_kernel,
    requantized_depthwise_gemm,
    requantized_gemm,
)
from .ops import (
    add,
    add_params,
    average_pool_2d,
    conv_2d,
    conv_params,
    depthwise_conv_2d,
    fully_connected,
    fully_connected_params,
    max_pool_2d,
)
from .quantization import (
    MovingAverageMinMax,
    activation_range,
    choose_quantization_params,
    dequantize,
    fake_quant_nudge,
    quantize,
    quantize_weights_symmetric,
    symmetric_weight_params,
)
from .staged import StagedResult

__all__ = [
    "MovingAverageMinMax",
    "StagedResult",
    "activation_range",
    "add",
    "add_kernel",
    "add_params",
    "average_pool_2d",
    "average_pool_2d_kernel",
    "choose_quantization_params",
    "conv_2d",
    "conv_2d_kernel",
    "conv_params",
    "depthwise_conv_2d",
    "depthwise_conv_2d_kernel",
    "dequantize",
    "fake_quant_nudge",
    "fully_connected",
    "fully_connected_kernel",
    "fully_connected_params",
    "max_pool_2d",
    "max_pool_2d_kernel",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "quantize",
    "quantize_multiplier",
    "quantize_multiplier_smaller_than_one_exp",
    "quantize_weights_symmetric",
    "requantized_depthwise_gemm",
    "requantized_gemm",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "symmetric_weight_params",
    "wrap_int32",
]
