"""ADD and SUB, int8 (spec: inputs and output int8 per tensor, any scales).

TFLM ``CalculateOpDataAdd`` / ``CalculateOpDataSub`` (micro/kernels/add_common.cc,
sub_common.cc) and reference ``AddElementwise``/``BroadcastAdd6DSlow``,
``BroadcastQuantSubSlow`` (kernels/internal/reference/add.h, sub.h). Both inputs are offset,
shifted left by 20, scaled by ``s_i / (2 max(s1, s2))`` with
MultiplyByQuantizedMultiplierSmallerThanOneExp, summed (or subtracted), scaled by
``2 max(s1, s2) / (2**20 s_out)``, offset and clamped to the fused activation's range.
ADD derives the multipliers in double; TFLM's SUB forms the ratios in float32 first, so
the two differ in the last bits of the multipliers, and we follow each.

This module is the one home of their integer arithmetic (:func:`arithmetic`);
:func:`golden.kernels.add_kernel` and :func:`golden.ops.add` are thin wrappers over it.
"""

import numpy as np

from .. import ops
from ..fixedpoint import multiply_by_quantized_multiplier_smaller_than_one_exp, quantize_multiplier, wrap_int32
from ._base import ACTIVATION_NAMES, Op
from ._fast import by_uint8, mbqm
from .broadcast import check_broadcast

__all__ = ["OPS", "arithmetic"]

LEFT_SHIFT = 20


def _smaller_than_one(ctx, real, what):
    if not 0.0 < real < 1.0:
        ctx.fail(f"{what} {real!r} must be in (0, 1) (QuantizeMultiplierSmallerThanOneExp; TFLM aborts): "
                 f"the output scale is too small for the input scales")
    return quantize_multiplier(real)


def prepare(ctx):
    (q1, q2), (s_out, zp_out) = ctx.int8_in_out(2)
    (s1, zp1), (s2, zp2) = q1, q2
    check_broadcast(ctx, max_rank=6)
    act_min, act_max = ctx.fused_activation(s_out, zp_out)   # refuses what TFLM's int8 kernels do not fuse
    if ctx.op == "ADD":
        try:
            p = ops.add_params(input1_scale=s1, input1_zero_point=zp1, input2_scale=s2, input2_zero_point=zp2,
                               output_scale=s_out, output_zero_point=zp_out,
                               activation=ACTIVATION_NAMES[ctx.option("fusedActivationFunction", 0)])
        except ValueError as exc:
            ctx.fail(str(exc))
        del p["rounding"]
    else:  # TFLM's SUB: the ratios in float32, then widened
        twice_max = np.float32(2) * max(s1, s2)
        m1, sh1 = _smaller_than_one(ctx, float(np.float64(s1 / twice_max)), "input 0's multiplier")
        m2, sh2 = _smaller_than_one(ctx, float(np.float64(s2 / twice_max)), "input 1's multiplier")
        mo, sho = _smaller_than_one(ctx, float(np.float64(twice_max / (np.float32(1 << LEFT_SHIFT) * s_out))),
                                    "the output multiplier")
        p = {"input1_offset": -zp1, "input2_offset": -zp2, "left_shift": LEFT_SHIFT,
             "input1_multiplier": m1, "input1_shift": sh1, "input2_multiplier": m2, "input2_shift": sh2,
             "output_multiplier": mo, "output_shift": sho, "output_offset": zp_out,
             "quantized_activation_min": act_min, "quantized_activation_max": act_max}
    p["rescaled_tables"] = _rescaled_tables(p)
    return p


_ALL_INT8 = np.arange(-128, 128, dtype=np.int64)


def _rescaled_tables(p, rounding="double"):
    """Each input's rescaled value ``MBQMSmallerThanOneExp((q + offset) << left_shift, M_i, shift_i)`` for all
    256 q, indexed by the inputs' uint8 view (exact, no wrap for int8's left shift of 20: |q + offset| <= 255,
    so the shifted value stays below 2**28)."""
    return [by_uint8(multiply_by_quantized_multiplier_smaller_than_one_exp(
        wrap_int32((_ALL_INT8 + p[f"input{i}_offset"]) << p["left_shift"]), p[f"input{i}_multiplier"],
        p[f"input{i}_shift"], rounding).astype(np.int64)) for i in (1, 2)]


def _finish(raw, p, rounding=None):
    """The sum of the rescaled inputs to the output: rescaled, offset, clamped (int32 wrap-around as in C++)."""
    if rounding is None:  # Prepare's parameters: the double-rounding fast path, no wrap possible (|raw| < 2**29)
        out = mbqm(raw, p["output_multiplier"], p["output_shift"])
    else:
        out = multiply_by_quantized_multiplier_smaller_than_one_exp(
            wrap_int32(raw), p["output_multiplier"], p["output_shift"], rounding).astype(np.int64)
    out = np.asarray(wrap_int32(out + p["output_offset"]), np.int64)   # an array even for scalar (shape []) operands
    np.maximum(out, p["quantized_activation_min"], out=out)
    return [np.minimum(out, p["quantized_activation_max"], out=out).astype(np.int8)]


def eval_add(p, inputs):
    """``AddElementwise``/``BroadcastAdd6DSlow``: the two rescaled inputs summed (each |value| < 2**28: no wrap)."""
    t1, t2 = p["rescaled_tables"]
    return _finish(t1[inputs[0].view(np.uint8)] + t2[inputs[1].view(np.uint8)], p)


def eval_sub(p, inputs):
    """``BroadcastQuantSubSlow``: as ADD with the second rescaled input subtracted."""
    t1, t2 = p["rescaled_tables"]
    return _finish(t1[inputs[0].view(np.uint8)] - t2[inputs[1].view(np.uint8)], p)


def arithmetic(input1, input2, p, *, subtract=False, rounding="double"):
    """ADD's (or SUB's) integer arithmetic on int8 arrays (numpy broadcasting) from its integer parameters.

    ``p`` holds ``input{1,2}_offset``, ``left_shift``, ``input{1,2}_multiplier``, ``input{1,2}_shift``,
    ``output_multiplier``, ``output_shift``, ``output_offset`` and ``quantized_activation_min/max``, already
    validated; ``rounding`` is ``"double"`` (TFLite's reference) or ``"single"``. Returns int8.
    """
    t1, t2 = _rescaled_tables(p, rounding)
    a, b = t1[np.asarray(input1).view(np.uint8)], t2[np.asarray(input2).view(np.uint8)]
    return _finish(wrap_int32(a - b if subtract else a + b), p, rounding)[0]


OPS = {"ADD": Op(prepare, eval_add), "SUB": Op(prepare, eval_sub)}
