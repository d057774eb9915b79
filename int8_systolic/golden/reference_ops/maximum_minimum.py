"""MAXIMUM and MINIMUM on int8 (spec: inputs and output share scale and zero point).

TFLM micro/kernels/maximum_minimum.cc and reference ``MaximumMinimumBroadcastSlow`` compare
raw values: correct only when the tensors share one quantization, which the spec requires.
A model whose inputs or output differ is refused (TFLM would compute a raw max/min of
numbers on different scales).
"""

import numpy as np

from ._base import Op
from .broadcast import check_broadcast

__all__ = ["OPS"]


def prepare(ctx):
    for i in (0, 1):
        ctx.tensor(i, types=("INT8",))
    ctx.tensor(0, output=True, types=("INT8",))
    ctx.same_quantization([0, 1], clause=f"the spec requires {ctx.op}'s inputs and output to have the same "
                                         f"scale/zero_point (TFLM compares raw values)")
    check_broadcast(ctx, max_rank=5)
    return {}


OPS = {"MAXIMUM": Op(prepare, lambda p, inputs: [np.maximum(inputs[0], inputs[1])]),
       "MINIMUM": Op(prepare, lambda p, inputs: [np.minimum(inputs[0], inputs[1])])}
