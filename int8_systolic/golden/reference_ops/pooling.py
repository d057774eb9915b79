"""AVERAGE_POOL_2D and MAX_POOL_2D, int8 (spec: input and output share scale and zero point).

TFLM micro/kernels/pooling_common.cc and reference integer_ops/pooling.h: padding by the
SAME/VALID rule, padded taps excluded; the average rounds half away from zero over the
in-image taps; the fused activation clamps. Kernels: :mod:`golden.kernels`.
"""

from ..kernels import average_pool_2d_kernel, max_pool_2d_kernel
from ..staged import compute_out_size
from ._base import Op

__all__ = ["OPS"]


def prepare(ctx):
    ((s, zp),), _ = ctx.int8_in_out(1)
    ctx.same_quantization([0], clause=f"the spec requires {ctx.op}'s input and output to have the same "
                                      f"scale/zero_point (TFLM pools raw values)")
    if len(ctx.inputs[0].shape) != 4:
        ctx.fail(f"input must be 4-D NHWC, got {list(ctx.inputs[0].shape)}")
    act_min, act_max = ctx.fused_activation(s, zp)
    ctx.output_count(1)
    filter_size = ctx.pair("filter", "filterHeight", "filterWidth")
    stride = ctx.pair("stride", "strideH", "strideW")
    padding = ctx.padding()
    b, h, w, c = ctx.inputs[0].shape
    oh, ow = (compute_out_size(padding, n, f, st) for n, f, st in zip((h, w), filter_size, stride, strict=True))
    if oh < 1 or ow < 1:
        ctx.fail(f"the {filter_size[0]}x{filter_size[1]} window does not fit in the {h}x{w} input with {padding} "
                 f"padding [rule geometry]")
    ctx.output_shape((b, oh, ow, c))
    return {"filter_size": filter_size, "stride": stride, "padding": padding,
            "quantized_activation_min": act_min, "quantized_activation_max": act_max}


OPS = {"AVERAGE_POOL_2D": Op(prepare, lambda p, inputs: [average_pool_2d_kernel(inputs[0], **p)]),
       "MAX_POOL_2D": Op(prepare, lambda p, inputs: [max_pool_2d_kernel(inputs[0], **p)])}
