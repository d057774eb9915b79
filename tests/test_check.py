"""golden.check, the spec restriction checker: every bundled model passes; one broken clause at a time fails."""

import json

import numpy as np
import pytest

from int8_systolic.golden.check import CLAUSES, check_model, main
from int8_systolic.golden.tflite.builder import TensorSpec, op_options, single_op_model
from int8_systolic.golden.tflite.cnn import generated_cnn
from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_model
from int8_systolic.golden.tflite.runtimes import run_litert_reference, tflm_verdict
from int8_systolic.golden.tflite.wakeword import wakeword_models

I8 = np.int8


def q(shape, s=0.1, zp=0, dtype=I8, data=None, axis=0):
    return TensorSpec(shape, dtype, s, zp, data=data, quantized_dimension=axis)


@pytest.mark.parametrize("path", [*(mlperf_model(n) for n in MODEL_NAMES), *wakeword_models()],
                         ids=lambda p: p.stem)
def test_bundled_models_pass_every_clause(path):
    _, findings = check_model(path)
    assert [f for f in findings if f.status == "FAIL"] == []
    assert {f.clause for f in findings if f.status == "PASS"} >= {"data type", "zero point range"}
    assert main([str(path)]) == 0


def test_generated_cnn_passes_every_clause():
    _, findings = check_model(generated_cnn(), "cnn")
    assert not [f for f in findings if f.status == "FAIL"]


W = np.arange(-60, 60, 5, dtype=I8).reshape(2, 3, 2, 2)   # OHWI weights for CONV_2D: 2 channels


def conv(weights=None, w_scale=(0.01, 0.02), w_zp=(0, 0), w_axis=0, bias=True, b_scale=None, b_zp=None,
         b_dtype=np.int32):
    w = W if weights is None else weights
    ins = [q((1, 4, 4, 2), 0.05, 1), TensorSpec(w.shape, I8, list(w_scale), list(w_zp), data=w,
                                                 quantized_dimension=w_axis)]
    if bias:
        bs = list(b_scale) if b_scale is not None else [0.05 * s for s in w_scale]
        bz = [0] * len(bs) if b_zp is None else list(b_zp)
        ins.append(TensorSpec((2,), b_dtype, bs, bz, data=np.array([10, -10], b_dtype)))
    return single_op_model("CONV_2D", ins, [q((1, 4, 4, 2), 0.3, -2)],
                           op_options("Conv2D", padding=0, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1))


def fc(w_scale=0.01, b_scale=None):
    w = np.arange(-30, 30, 5, dtype=I8).reshape(3, 4)
    ins = [q((1, 4), 0.05), TensorSpec(w.shape, I8, w_scale, 0, data=w),
           TensorSpec((3,), np.int32, 0.05 * np.asarray(w_scale) if b_scale is None else b_scale, 0,
                      data=np.array([1, 2, 3], np.int32))]
    return single_op_model("FULLY_CONNECTED", ins, [q((1, 3), 0.2)], op_options("FullyConnected"))


def unary(op, out, options=None):
    return single_op_model(op, [q((1, 4))], [out], options)


def unknown_opcode(code=250):
    """A RELU model whose opcode is rewritten to a builtin code TFLite does not define."""
    import flatbuffers

    from int8_systolic.golden.tflite.builder import schema
    m = schema.ModelT.InitFromPackedBuf(unary("RELU", q((1, 4))), 0)
    m.operatorCodes[0].builtinCode = code
    m.operatorCodes[0].deprecatedBuiltinCode = 127
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


WEIGHTS_128 = W.copy()
WEIGHTS_128[0, 0, 0, 0] = -128

# (id, model, the clause that must fail, whether TFLM tolerates that failure)
BROKEN = [
    ("unknown opcode", unknown_opcode(), "known operator", False),
    ("add without inputs", single_op_model("ADD", [], [q((4,))]), "operands", False),
    ("activation scale 0", single_op_model("ADD", [q((4,), s=0.0), q((4,))], [q((4,))]), "scale value", False),
    ("output scale NaN", single_op_model("ADD", [q((4,)), q((4,))], [q((4,), s=float("nan"))]), "scale value",
     False),
    ("output scale inf", single_op_model("ADD", [q((4,)), q((4,))], [q((4,), s=float("inf"))]), "scale value",
     False),
    ("negative weight scale", conv(w_scale=(-0.01, 0.02), bias=False), "scale value", True),
    ("zero weight scale", conv(w_scale=(0.0, 0.02), bias=False), "scale value", True),
    ("fully connected without weights", single_op_model("FULLY_CONNECTED", [q((1, 4))], [q((1, 3))],
                                                         op_options("FullyConnected")), "weights present", False),
    ("uint8 activation", single_op_model("ADD", [q((4,), dtype=np.uint8), q((4,))], [q((4,))]), "data type", True),
    ("uint8 output", single_op_model("ADD", [q((4,)), q((4,))], [q((4,), dtype=np.uint8)]), "data type", False),
    ("uint8 conv input", single_op_model("CONV_2D", [q((1, 4, 4, 2), dtype=np.uint8), TensorSpec(
        W.shape, I8, [0.01, 0.02], [0, 0], data=W)], [q((1, 4, 4, 2))], op_options(
        "Conv2D", padding=0, strideH=1, strideW=1, dilationHFactor=1, dilationWFactor=1)), "data type", False),
    ("activation per axis", single_op_model("ADD", [TensorSpec((1, 2), I8, [0.1, 0.2], [0, 0], quantized_dimension=1),
                                                    q((1, 2))], [q((1, 2))]), "activation per tensor", True),
    ("zero point 200", single_op_model("ADD", [q((4,), zp=200), q((4,))], [q((4,))]), "zero point range", True),
    ("weight -128", conv(weights=WEIGHTS_128), "weights value range", True),
    ("weight zero point", conv(w_zp=(0, 3)), "weights zero point", True),
    ("conv weights per tensor", conv(w_scale=(0.01,), w_zp=(0,)), "weights granularity", True),
    ("conv weights on the wrong axis", conv(w_axis=3), "weights granularity", True),
    ("fc weights per channel", fc(w_scale=[0.01, 0.02, 0.03]), "weights granularity", True),
    ("depthwise scales on dim 0", single_op_model(
        "DEPTHWISE_CONV_2D", [q((1, 4, 4, 2)), TensorSpec((1, 3, 3, 2), I8, [0.01, 0.02], [0, 0],
                                                          data=np.ones((1, 3, 3, 2), I8), quantized_dimension=0)],
        [q((1, 4, 4, 2))], op_options("DepthwiseConv2D", padding=0, strideH=1, strideW=1, dilationHFactor=1,
                                      dilationWFactor=1, depthMultiplier=1)), "weights granularity", False),
    ("int64 bias", conv(b_dtype=np.int64), "data type", True),
    ("bias zero point", conv(b_zp=(0, 4)), "bias zero point", True),
    ("conv bias scale", conv(b_scale=(0.0005, 0.05)), "bias scale", True),
    ("fc bias scale", fc(b_scale=0.01), "bias scale", False),
    ("fc bias scale within TFLite's runtime tolerance only", fc(b_scale=0.05 * 0.01 * 1.001), "bias scale", True),
    ("bias per tensor with per-axis weights", conv(w_scale=(0.01, 0.01), b_scale=(0.0005,)), "bias granularity",
     True),
    ("softmax output", unary("SOFTMAX", q((1, 4), 0.1, 0), op_options("Softmax", beta=1.0)), "fixed output", False),
    ("logistic output", unary("LOGISTIC", q((1, 4), 1 / 256, 0)), "fixed output", False),
    ("tanh output", unary("TANH", q((1, 4), 1 / 256, -128)), "fixed output", True),
    ("l2norm output", unary("L2_NORMALIZATION", q((1, 4), 1 / 256, 0), op_options("L2Norm")), "fixed output", True),
    ("log_softmax output", unary("LOG_SOFTMAX", q((1, 4), 1 / 16, 0), op_options("LogSoftmax")), "fixed output",
     False),
    ("concat quantization", single_op_model("CONCATENATION", [q((1, 2)), q((1, 2), 0.2)], [q((1, 4))],
                                            op_options("Concatenation", axis=1)), "same quantization", False),
    ("max pool quantization", single_op_model(
        "MAX_POOL_2D", [q((1, 2, 2, 1))], [q((1, 1, 1, 1), 0.1, 3)],
        op_options("Pool2D", padding=1, strideH=1, strideW=1, filterHeight=2, filterWidth=2)), "same quantization",
     False),
    ("reshape quantization", single_op_model("RESHAPE", [q((2, 2)), TensorSpec((1,), np.int32, data=np.array(
        [4], np.int32))], [q((4,), 0.2)]), "same quantization", True),
    ("maximum quantization", single_op_model("MAXIMUM", [q((4,)), q((4,), 0.1, 5)], [q((4,))]), "same quantization",
     True),
]


@pytest.mark.parametrize(("model", "clause", "tolerated"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_one_broken_clause_fails_with_its_name(model, clause, tolerated, tmp_path, capsys):
    _, findings = check_model(model, "broken.tflite")
    failed = [f for f in findings if f.status == "FAIL"]
    assert {f.clause for f in failed} == {clause}, [(f.clause, f.detail) for f in failed]
    assert all(f.tflm_tolerates == tolerated for f in failed)
    path = tmp_path / "broken.tflite"
    path.write_bytes(model)
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL subgraph 0, operator 0 ({failed[0].op})" in out
    assert f": {clause}" in out


def test_impossible_bias_scale_fails_its_value_and_the_product():
    _, findings = check_model(conv(b_scale=(-0.0005, 0.001)), "broken.tflite")
    assert {(f.clause, f.role) for f in findings if f.status == "FAIL"} == {("scale value", "bias"),
                                                                           ("bias scale", "bias")}


@pytest.mark.tflm
@pytest.mark.parametrize(("model", "tolerated"), [(b[1], b[3]) for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_tflm_tolerates_is_what_tflm_does(model, tolerated):
    """ "TFLM tolerates" is measured: TFLM (in a subprocess: it aborts on some) runs exactly the models marked so."""
    verdict, message = tflm_verdict(model)
    assert (verdict == "ran") == tolerated, (verdict, message)


def test_every_clause_has_a_broken_model():
    assert {b[2] for b in BROKEN} == set(CLAUSES)
    assert len(BROKEN) >= 15


def test_conv_without_bias_warns_that_litert_refuses_it(tmp_path, capsys):
    model = conv(bias=False)
    _, findings = check_model(model, "nobias.tflite")
    assert not [f for f in findings if f.status == "FAIL"]
    assert [(f.clause, f.status) for f in findings if f.status == "WARN"] == [("bias present", "WARN")]
    path = tmp_path / "nobias.tflite"
    path.write_bytes(model)
    assert main([str(path)]) == 0
    assert "WARN subgraph 0, operator 0 (CONV_2D): CONV_2D without a bias tensor" in capsys.readouterr().out
    # the warning's two facts, measured: TFLM runs it, LiteRT refuses it
    assert tflm_verdict(model)[0] == "ran"
    with pytest.raises(RuntimeError):
        run_litert_reference(model, [np.zeros((1, 4, 4, 2), I8)])


def test_unreadable_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x18\x00\x00\x00TFL3" + b"\x00" * 5)
    assert main([str(bad)]) == 2
    assert "bad.tflite" in capsys.readouterr().err


def test_markdown_and_json_reports(tmp_path, capsys):
    path = tmp_path / "softmax.tflite"
    path.write_bytes(unary("SOFTMAX", q((1, 4), 0.1, 0), op_options("Softmax", beta=1.0)))
    assert main([str(path), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is False
    assert report["per_clause"]["fixed output"] == {"pass": 0, "fail": 1}
    assert main([str(path), "--format", "markdown"]) == 1
    assert "| subgraph 0, operator 0 (SOFTMAX), output 0 'output0' | fixed output |" in capsys.readouterr().out


def test_spec_table_page_is_current():
    from pathlib import Path

    from int8_systolic.golden import spec
    page = Path(__file__).resolve().parents[1] / "docs" / "spec-table.md"
    assert page.read_text() == spec.markdown(), "docs/spec-table.md is stale: run `python -m int8_systolic.golden.spec`"


def test_spec_table_facts():
    """The per-op facts the checker reads from the table, as the spec states them."""
    from int8_systolic.golden import spec
    assert spec.MAC_OPS == {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": None}
    assert set(spec.TWO_INPUTS) == {"ADD", "MUL", "SUB", "LESS", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "EQUAL",
                                    "NOT_EQUAL"}
    assert set(spec.NO_INT8_OUTPUT) == {"ARG_MAX", "SHAPE", "LESS", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "EQUAL",
                                        "NOT_EQUAL"}
    assert len(spec.OPS) == 38
