"""TRANSPOSE (spec: same scale/zero point in and out): TFLM micro/kernels/transpose_common.cc, 1-D to 5-D."""

import numpy as np

from ._base import Op, int32_data

__all__ = ["OPS"]


def prepare(ctx):
    t = ctx.tensor(0)
    if t.type == "INT8":
        ctx.same_quantization([0], clause="the spec requires TRANSPOSE's input and output to have the same "
                                          "scale/zero_point (TFLM copies raw values)")
    perm = int32_data(ctx, 1, "the permutation")
    if perm is None:
        ctx.fail("the permutation must be a constant")
    rank = len(t.shape)
    if not 1 <= rank <= 5:
        ctx.fail(f"TFLM's TRANSPOSE takes 1 to 5 dimensions, got {rank}")
    perm = [ctx.axis(a, rank, "permutation entry") for a in perm]
    if sorted(perm) != list(range(rank)):
        ctx.fail(f"permutation {perm} is not a permutation of the {rank} axes")
    return {"perm": tuple(perm)}


OPS = {"TRANSPOSE": Op(prepare, lambda p, inputs: [np.ascontiguousarray(np.transpose(inputs[0], p["perm"]))])}
