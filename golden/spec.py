"""Facts of the TFLite int8 quantization spec's op table (shared/SPEC-TABLE.md) that code checks.

Used by the interpreter's Prepare side (:mod:`golden.reference_ops`) and the model checker
(:mod:`golden.check`), so both enforce one table.
"""

__all__ = ["FIXED_OUTPUT", "SAME_QUANTIZATION", "SPEC_OPS"]

SPEC_OPS = ("ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
            "L2_NORMALIZATION", "LOGISTIC", "MAX_POOL_2D", "MUL", "RESHAPE", "RESIZE_BILINEAR", "SOFTMAX",
            "SPACE_TO_DEPTH", "TANH", "PAD", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN",
            "SUB", "SUM", "SQUEEZE", "LOG_SOFTMAX", "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "PADV2", "GREATER",
            "GREATER_EQUAL", "LESS_EQUAL", "SLICE", "EQUAL", "NOT_EQUAL", "SHAPE", "QUANTIZE")
# op -> the (scale, zero point) the spec fixes for its int8 output
FIXED_OUTPUT = {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0),
                "L2_NORMALIZATION": (1 / 128, 0), "LOG_SOFTMAX": (16 / 256, 127)}
# ops whose "input and outputs must all have same scale/zero_point"
SAME_QUANTIZATION = ("AVERAGE_POOL_2D", "CONCATENATION", "MAX_POOL_2D", "RESHAPE", "RESIZE_BILINEAR", "SPACE_TO_DEPTH",
                     "PAD", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "SQUEEZE", "MAXIMUM",
                     "MINIMUM", "PADV2", "SLICE")
