"""TFLite's int8 ops, one op or family per module, each a Prepare and an Eval (see :mod:`._base`).

:data:`OP_TABLE` maps a builtin op name to its :class:`~._base.Op`; the interpreter
(:mod:`golden.tflite.interpreter`) dispatches through it. Every op of the spec's int8 table
is here, plus the ops real int8 models put around them:

========================  ==============================================================
module                    ops
========================  ==============================================================
:mod:`.conv`              CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (the MAC layers)
:mod:`.add_sub`           ADD, SUB
:mod:`.mul`               MUL
:mod:`.pooling`           AVERAGE_POOL_2D, MAX_POOL_2D
:mod:`.activations`       LOGISTIC, TANH, RELU, RELU6, LEAKY_RELU, PRELU, HARD_SWISH
:mod:`.softmax`           SOFTMAX, LOG_SOFTMAX
:mod:`.l2norm`            L2_NORMALIZATION
:mod:`.reduce`            MEAN, SUM, ARG_MAX
:mod:`.resize_bilinear`   RESIZE_BILINEAR
:mod:`.comparisons`       LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL
:mod:`.maximum_minimum`   MAXIMUM, MINIMUM
:mod:`.quantize`          QUANTIZE (float32 -> int8, int8/uint8 requantization), DEQUANTIZE
:mod:`.reshape`           RESHAPE, SQUEEZE, EXPAND_DIMS, SHAPE
:mod:`.transpose`         TRANSPOSE
:mod:`.concat_split`      CONCATENATION, PACK, UNPACK, SPLIT, SPLIT_V
:mod:`.slice`             SLICE, STRIDED_SLICE
:mod:`.pad`               PAD, PADV2
:mod:`.gather`            GATHER
:mod:`.space_depth`       SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND
========================  ==============================================================
"""

from . import (
    activations,
    add_sub,
    comparisons,
    concat_split,
    conv,
    gather,
    l2norm,
    maximum_minimum,
    mul,
    pad,
    pooling,
    quantize,
    reduce,
    reshape,
    resize_bilinear,
    slice,
    softmax,
    space_depth,
    transpose,
)
from ._base import Op, OpContext

__all__ = ["OP_FAMILIES", "OP_TABLE", "Op", "OpContext"]

_MODULES = (conv, add_sub, mul, pooling, activations, softmax, l2norm, reduce, resize_bilinear, comparisons,
            maximum_minimum, quantize, reshape, transpose, concat_split, slice, pad, gather, space_depth)

OP_TABLE = {name: op for module in _MODULES for name, op in module.OPS.items()}
# op name -> family (module) name, for reports
OP_FAMILIES = {name: module.__name__.rsplit(".", 1)[1] for module in _MODULES for name in module.OPS}
