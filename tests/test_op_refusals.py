"""Models the golden interpreter must refuse, each with one clause of the spec or one TFLM limit broken.

Every model is refused when the interpreter is built (Prepare), before any inference, with a
ModelError naming the file, the operator and the reason. Where TFLM itself reports an error
for the model (rather than aborting the process or computing from out-of-bounds memory), the
test checks that TFLM refuses it too.
"""

import numpy as np
import pytest

from int8_systolic.golden.tflite.builder import TensorSpec, op_options, single_op_model
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.golden.tflite.model import ModelError
from int8_systolic.golden.tflite.runtimes import run_tflm

I8 = np.int8


def q(shape, s=0.1, zp=0, dtype=I8, data=None):
    return TensorSpec(shape, dtype, s, zp, data=data)


def const(values, dtype=np.int32):
    values = np.asarray(values, dtype)
    return TensorSpec(values.shape, dtype, data=values)


# (id, op, inputs, outputs, options, expected message (regex), TFLM refuses it too)
CASES = [
    ("softmax output", "SOFTMAX", [q((1, 4))], [q((1, 4), 0.1, 0)], op_options("Softmax", beta=1.0),
     r"the spec fixes SOFTMAX's int8 output at \(scale 0.00390625, zero point -128\)", True),
    ("logistic output", "LOGISTIC", [q((4,))], [q((4,), 1 / 256, 0)], None,
     r"fixes LOGISTIC's int8 output at \(scale 0.00390625, zero point -128\)", True),
    ("tanh output", "TANH", [q((4,))], [q((4,), 1 / 256, -128)], None,
     r"fixes TANH's int8 output at \(scale 0.0078125, zero point 0\)", False),
    ("l2norm output", "L2_NORMALIZATION", [q((1, 4))], [q((1, 4), 1 / 256, 0)], op_options("L2Norm"),
     r"fixes L2_NORMALIZATION's int8 output at \(scale 0.0078125, zero point 0\)", False),
    ("log_softmax output", "LOG_SOFTMAX", [q((1, 4))], [q((1, 4), 1 / 16, 0)], op_options("LogSoftmax"),
     r"fixes LOG_SOFTMAX's int8 output at \(scale 0.0625, zero point 127\)", True),
    ("concat mixed quantization", "CONCATENATION", [q((1, 2)), q((1, 2), 0.2)], [q((1, 4))],
     op_options("Concatenation", axis=1), r"input 1 'input1' is quantized .* same scale/zero_point", False),
    ("pad output quantization", "PAD", [q((2,)), const([[1, 1]])], [q((4,), 0.1, 3)], None,
     r"output 0 'output0' is quantized .* same scale/zero_point", False),
    ("reshape output quantization", "RESHAPE", [q((2, 2)), const([4])], [q((4,), 0.2)], None,
     r"same scale/zero_point", False),
    ("maximum mixed quantization", "MAXIMUM", [q((4,)), q((4,), 0.1, 5)], [q((4,))], None,
     r"MAXIMUM's inputs and output to have the same scale/zero_point \(TFLM compares raw values\)", False),
    ("average pool output quantization", "AVERAGE_POOL_2D", [q((1, 2, 2, 1))], [q((1, 1, 1, 1), 0.5)],
     op_options("Pool2D", padding=1, strideH=1, strideW=1, filterHeight=2, filterWidth=2),
     r"AVERAGE_POOL_2D's input and output to have the same scale/zero_point", False),
    ("resize output quantization", "RESIZE_BILINEAR", [q((1, 2, 2, 1)), const([4, 4])], [q((1, 4, 4, 1), 0.3)],
     op_options("ResizeBilinear"), r"same scale/zero_point", False),
    ("comparison scale >= 1", "LESS", [q((4,), 1.5), q((4,), 0.1)], [TensorSpec((4,), np.bool_)], None,
     r"input 0 'input0' has scale 1.5: .*needs scale < 1 \(TFLM aborts\)", None),
    ("arg_max int64", "ARG_MAX", [q((2, 3)), const([1])], [TensorSpec((2,), np.int64)],
     op_options("ArgMax", outputType=4), r"output 0 'output0' is INT64; ARG_MAX supports INT32", True),
    ("shape int64", "SHAPE", [q((2, 3))], [TensorSpec((2,), np.int64)], op_options("Shape", outType=4),
     r"SHAPE supports INT32", True),
    ("transpose 6-D", "TRANSPOSE", [q((1, 1, 1, 1, 1, 2)), const([5, 4, 3, 2, 1, 0])], [q((2, 1, 1, 1, 1, 1))],
     None, r"TFLM's TRANSPOSE takes 1 to 5 dimensions, got 6", True),
    ("strided slice 5-D", "STRIDED_SLICE", [q((1, 1, 1, 1, 2)), const([0] * 5), const([1] * 5), const([1] * 5)],
     [q((1, 1, 1, 1, 1))], op_options("StridedSlice"), r"STRIDED_SLICE takes up to 4 dimensions, got 5", True),
    ("strided slice ellipsis", "STRIDED_SLICE", [q((2, 2)), const([0, 0]), const([1, 1]), const([1, 1])],
     [q((1, 1))], op_options("StridedSlice", ellipsisMask=1), r"ellipsis_mask, new_axis_mask and offset", False),
    ("pad int64 paddings", "PAD", [q((2,)), const([[1, 1]], np.int64)], [q((4,))], None,
     r"paddings '.*' is INT64; PAD supports INT32", False),
    ("fused tanh on add", "ADD", [q((4,)), q((4,))], [q((4,))], op_options("Add", fusedActivationFunction=4),
     r"fused activation TANH is not supported by TFLM's int8 ADD", False),
    ("resize align and half pixel", "RESIZE_BILINEAR", [q((1, 2, 2, 1)), const([4, 4])], [q((1, 4, 4, 1))],
     op_options("ResizeBilinear", alignCorners=True, halfPixelCenters=True),
     r"align_corners and half_pixel_centers cannot both be set", True),
    ("activation per axis", "RELU", [TensorSpec((1, 2), I8, [0.1, 0.2], [0, 0], quantized_dimension=1)],
     [q((1, 2))], None, r"input 0 'input0' is quantized per axis \(2 scales\); the spec requires activations "
                        r"per tensor", False),
    ("add output scale too small", "ADD", [q((4,), 1.0), q((4,), 1.0)], [q((4,), 1e-7)], None,
     r"output_scale 1.0000000116860974e-07 is too small for ADD: 2\*max\(input scales\) / \(2\*\*20 \* "
     r"output_scale\) = 19.0734861\d* must be < 1 \(TFLite aborts on this\)", None),
    ("hard swish output too fine", "HARD_SWISH", [q((4,), 0.5)], [q((4,), 1e-4)], None,
     r"output multiplier's exponent <= 0", True),
]


@pytest.mark.parametrize(("op", "inputs", "outputs", "options", "message", "tflm_refuses"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_before_inference(op, inputs, outputs, options, message, tflm_refuses):
    model = single_op_model(op, inputs, outputs, options)
    with pytest.raises(ModelError, match=rf"bad\.tflite: subgraph 0, operator 0 \({op}\): .*{message}"):
        Interpreter(model, "bad.tflite")
    if tflm_refuses:
        feeds = [np.zeros(t.shape, t.dtype) for t in inputs if t.data is None]
        with pytest.raises(RuntimeError):
            run_tflm(model, feeds)


def test_mac_layer_clauses_refused():
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (2, 3)).astype(I8)
    fc = lambda w, wzp: single_op_model(  # noqa: E731
        "FULLY_CONNECTED", [q((1, 3)), TensorSpec(w.shape, I8, 0.01, wzp, data=w), None], [q((1, 2))],
        op_options("FullyConnected"))
    with pytest.raises(ModelError, match=r"weights 'input1' have non-zero zero points \(the spec requires symmetric"):
        Interpreter(fc(w, 3), "fc.tflite")
    w[0, 0] = -128
    with pytest.raises(ModelError, match=r"weights 'input1' hold -128; the spec's int8 weights are in \[-127, 127\]"):
        Interpreter(fc(w, 0), "fc.tflite")
