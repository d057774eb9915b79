"""Hostile and careless models: each class of fault, made by editing a bundled model's flatbuffer, is refused when
the interpreter is built (Prepare), with a ModelError naming the operator or tensor, and `int8-systolic run-model`
turns it into one line and exit status 2 before anything is built.

Each case also records what TFLite-Micro does with the same bytes, measured in a subprocess (it aborts the
process on some): where TFLM refuses (or aborts), the test shows we refuse too; where TFLM runs the model anyway
(computing from a stride of 0, an unknown padding, a bias of the wrong length, operators out of order...), we
refuse it regardless, and the case says ``tflm="ran"``. docs/refusals.md lists every rule.

The fuzz tests apply seeded truncations, bit flips and structural edits to every bundled model and check that
nothing but :class:`ModelError` ever leaves the interpreter, at construction or at invoke.
"""

import itertools
import random

import flatbuffers
import numpy as np
import pytest

from int8_systolic.golden.tflite.builder import ModelBuilder, TensorSpec, op_options, schema, single_op_model
from int8_systolic.golden.tflite.cnn import generated_cnn
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_model
from int8_systolic.golden.tflite.model import ModelError
from int8_systolic.golden.tflite.rules import MAX_TENSOR_BYTES, MAX_TOTAL_BYTES, PREPARE_RULES, RULES
from int8_systolic.golden.tflite.runtimes import run_tflm, tflm_verdict
from int8_systolic.golden.tflite.wakeword import wakeword_models

RESNET = mlperf_model("image_classification").read_bytes()     # op 0 CONV_2D (weights [16,3,3,3]), ADD, pools, FC
DS_CNN = mlperf_model("keyword_spotting").read_bytes()         # QUANTIZE, then CONV_2D / DEPTHWISE_CONV_2D pairs
WAKEWORD = next(p for p in wakeword_models() if p.stem == "okay_nabu").read_bytes()   # CALL_ONCE, variables
_OPS = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}


def _load(raw):
    return schema.ModelT.InitFromPackedBuf(raw, 0)


def _pack(m):
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _opname(m, op):
    oc = m.operatorCodes[op.opcodeIndex]
    return _OPS.get(max(oc.builtinCode, oc.deprecatedBuiltinCode))


def _first(m, name, si=0):
    """(index, operator) of the first ``name`` operator of subgraph ``si``."""
    return next((i, op) for i, op in enumerate(m.subgraphs[si].operators) if _opname(m, op) == name)


def _edit(raw, change):
    m = _load(raw)
    change(m)
    return _pack(m)


def _sg(m):
    return m.subgraphs[0]


def _conv(m, name="CONV_2D"):
    return _first(m, name)[1]


def _weights(m, name="CONV_2D"):
    return _sg(m).tensors[_conv(m, name).inputs[1]]


def _set(obj, **fields):
    for k, v in fields.items():
        setattr(obj, k, v)


def _out_of_order(m):
    ops = _sg(m).operators
    ops[0], ops[1] = ops[1], ops[0]


def _cycle(m):
    ops = _sg(m).operators
    ops[0].inputs = [ops[2].outputs[0], *ops[0].inputs[1:]]


def _unwritten_output(m):
    sg = _sg(m)
    t = schema.TensorT()
    _set(t, name="dangling", shape=[1, 10], type=schema.TensorType.INT8, buffer=0)
    sg.tensors.append(t)
    sg.outputs = [len(sg.tensors) - 1]


def _bias_length(m):
    b = _sg(m).tensors[_conv(m).inputs[2]]
    b.shape = [b.shape[0] + 1]
    m.buffers[b.buffer].data = np.zeros(4 * b.shape[0], np.uint8)
    b.quantization.scale = [*b.quantization.scale, b.quantization.scale[-1]]
    b.quantization.zeroPoint = [*b.quantization.zeroPoint, 0]


def _foreign_options(m):
    conv = _conv(m)
    pool = schema.Pool2DOptionsT()
    _set(pool, padding=0, strideW=1, strideH=1, filterWidth=1, filterHeight=1)
    conv.builtinOptions, conv.builtinOptionsType = pool, schema.BuiltinOptions.Pool2DOptions


def _huge(m):
    _sg(m).tensors[_conv(m).outputs[0]].shape = [1, 1 << 16, 1 << 16, 16]


def _writes_its_input(m):
    op = _sg(m).operators[1]
    op.outputs = [*op.outputs, op.inputs[0]]


def _output_shape(m):
    t = _sg(m).tensors[_sg(m).operators[1].outputs[0]]    # ADD's output
    t.shape = [t.shape[0], t.shape[1] + 1, *t.shape[2:]]


def _activation_scale(m, value):
    _sg(m).tensors[_conv(m).outputs[0]].quantization.scale = [value]


def _unknown_opcode(m):
    oc = m.operatorCodes[_conv(m).opcodeIndex]
    oc.builtinCode, oc.deprecatedBuiltinCode = 250, 127


def _read_variable_arity(m):
    _first(m, "READ_VARIABLE", 0)[1].outputs = []


def _call_once_target(m):
    _set(_first(m, "CALL_ONCE")[1].builtinOptions, initSubgraphIndex=9)


# (id, model, edit, the error (regex, after "m.tflite: "), what TFLM does with it: "ran", "refused" or "aborted")
CASES = [
    ("weights per axis on another dimension", RESNET,
     lambda m: _set(_weights(m).quantization, quantizedDimension=1),
     r"subgraph 0, tensor \d+ \('.*'\): has 16 scales on dimension 1 of \[16, 3, 3, 3\], which has 3 entries "
     r"\[rule quantization\]", "refused"),
    ("weights per axis beyond the rank", RESNET, lambda m: _set(_weights(m).quantization, quantizedDimension=5),
     r"tensor \d+ \('.*'\): is quantized per axis on dimension 5, but its shape \[16, 3, 3, 3\] has 4 dimensions "
     r"\[rule quantization\]", "refused"),
    ("depthwise weights on dim 0", DS_CNN, lambda m: _set(_weights(m, "DEPTHWISE_CONV_2D").quantization,
                                                          quantizedDimension=0),
     r"tensor \d+ \('.*'\): has 64 scales on dimension 0 of \[1, 3, 3, 64\], which has 1 entries", "refused"),
    ("stride 0", RESNET, lambda m: _set(_conv(m).builtinOptions, strideH=0),
     r"operator 0 \(CONV_2D\): stride option strideH is 0; it must be an integer >= 1", "ran"),
    ("dilation 0", RESNET, lambda m: _set(_conv(m).builtinOptions, dilationWFactor=0),
     r"operator 0 \(CONV_2D\): dilation option dilationWFactor is 0", "ran"),
    ("unknown padding", RESNET, lambda m: _set(_conv(m).builtinOptions, padding=7),
     r"operator 0 \(CONV_2D\): padding code 7 is neither SAME \(0\) nor VALID \(1\)", "ran"),
    ("pool filter 0", RESNET, lambda m: _set(_first(m, "AVERAGE_POOL_2D")[1].builtinOptions, filterWidth=0),
     r"operator \d+ \(AVERAGE_POOL_2D\): filter option filterWidth is 0", "ran"),
    ("missing builtin options", RESNET, lambda m: _set(_conv(m), builtinOptions=None, builtinOptionsType=0),
     r"operator 0 \(CONV_2D\): has no builtin options \(Conv2DOptions\).*\[rule builtin-options\]", "ran"),
    ("foreign builtin options", RESNET, _foreign_options,
     r"operator 0 \(CONV_2D\): carries Pool2DOptions, but CONV_2D's builtin options are Conv2DOptions", "ran"),
    ("operators out of order", RESNET, _out_of_order,
     r"operator 0 \(CONV_2D\): reads tensor \d+ \('.*'\) before any operator writes it \(operator 1 writes it "
     r"later: the operators are out of order or form a cycle\) \[rule operator-order\]", "ran"),
    ("a cycle", RESNET, _cycle,
     r"operator 0 \(CONV_2D\): reads tensor \d+ \('.*'\) before any operator writes it \(operator 2 writes it "
     r"later", "ran"),
    ("init subgraph out of range", WAKEWORD, _call_once_target,
     r"operator 0 \(CALL_ONCE\): init subgraph index 9 must name another of the model's 2 subgraphs "
     r"\[rule subgraph-index\]", "refused"),
    ("variable op without its output", WAKEWORD, _read_variable_arity,
     r"operator \d+ \(READ_VARIABLE\): has 1 inputs and 0 outputs; READ_VARIABLE takes 1 and 1 "
     r"\[rule variable-ops\]", "aborted"),
    ("graph output nothing writes", RESNET, _unwritten_output,
     r"subgraph 0: graph output tensor \d+ \('.*'\) is written by no operator \[rule graph-outputs\]", "ran"),
    ("an operator writes its own input", RESNET, _writes_its_input,
     r"operator 1 \(CONV_2D\): writes tensor \d+ \('.*'\), which operator 0 already writes "
     r"\[rule single-writer\]", "refused"),
    ("bias length", RESNET, _bias_length,
     r"operator 0 \(CONV_2D\): bias '.*' has shape \[17\]; it needs one int32 per output channel \[16\] "
     r"\[rule bias-length\]", "ran"),
    ("declared output shape", RESNET, _output_shape,
     r"operator 1 \(CONV_2D\): computes output 0 as \[1, 32, 32, 16\], but tensor '.*' is declared "
     r"\[1, 33, 32, 16\]", "ran"),
    ("enormous tensor", RESNET, _huge,
     rf"tensor \d+ \('.*'\): is INT8\[1, 65536, 65536, 16\], 68719476736 bytes; the golden model's cap is "
     rf"{MAX_TENSOR_BYTES >> 20} MiB per tensor \[rule tensor-size\]", "aborted"),
    ("activation scale 0", RESNET, lambda m: _activation_scale(m, 0.0),
     r"tensor \d+ \('.*'\): has scale 0.0; a quantized tensor's scales must be positive and finite", "refused"),
    ("activation scale NaN", RESNET, lambda m: _activation_scale(m, float("nan")),
     r"tensor \d+ \('.*'\): has scale nan; a quantized tensor's scales must be positive and finite", "refused"),
    ("zero point outside int8", RESNET,
     lambda m: _set(_sg(m).tensors[_conv(m).outputs[0]].quantization, zeroPoint=[300]),
     r"tensor \d+ \('.*'\): has zero point 300, outside \[-128, 127\] for INT8", "ran"),
    ("unknown builtin opcode", RESNET, _unknown_opcode,
     r"operator 0 \(unknown builtin 250\): unsupported op", "refused"),
    ("opcode index out of range", RESNET, lambda m: _set(_conv(m), opcodeIndex=99),
     r"subgraph 0, operator 0: opcode index 99 out of range", "refused"),
    ("tensor index out of range", RESNET, lambda m: _set(_conv(m), inputs=[9999, *_conv(m).inputs[1:]]),
     r"subgraph 0, operator 0 \(CONV_2D\): tensor index 9999 out of range", "refused"),
]


I8 = np.int8
CONV_OPTIONS = {"padding": 0, "strideH": 1, "strideW": 1, "dilationHFactor": 1, "dilationWFactor": 1}


def _q(shape, s=0.1, zp=0, dtype=I8, data=None, axis=0):
    return TensorSpec(shape, dtype, s, zp, data=data, quantized_dimension=axis)


def _w(shape, scales, axis=0):
    return _q(shape, list(scales), [0] * len(scales), data=np.ones(shape, I8), axis=axis)


def _b(n, scale=0.001):
    return TensorSpec((n,), np.int32, [scale] * n, [0] * n, data=np.zeros(n, np.int32))


def _conv_model(x, w, b, out, op="CONV_2D", **options):
    name = "Conv2D" if op == "CONV_2D" else "DepthwiseConv2D"
    return single_op_model(op, [x, w, b], out, op_options(name, **{**CONV_OPTIONS, **options}))


def _many_big_tensors(m):
    # six RELUs in a chain of 60 MiB tensors: each under the per-tensor cap, all together over the total
    mb = ModelBuilder()
    shape = (1, 60 << 20)
    ts = [mb.tensor(f"t{i}", shape, I8, scale=0.1, zero_point=0) for i in range(7)]
    for a, b in itertools.pairwise(ts):
        mb.operator(schema.BuiltinOperator.RELU, [a], [b])
    return mb.finish([ts[0]], [ts[-1]])


def _writes(target):
    def edit(m):
        sg = _sg(m)
        sg.operators[0].outputs = [sg.inputs[0] if target == "input" else _conv(m).inputs[1]]
    return edit


def _handle_not_resource(m):
    _, op = _first(m, "READ_VARIABLE", 0)
    op.inputs = [_sg(m).inputs[0]]


def _assign_other_size(m):
    """An ASSIGN_VARIABLE of a tensor of another size than its variable's reads."""
    sg = _sg(m)
    _, op = _first(m, "ASSIGN_VARIABLE", 0)
    op.inputs = [op.inputs[0], sg.inputs[0]]


# Prepare's rules and the remaining static ones, on single-op models or edits (id, model, error, TFLM)
PREPARE_CASES = [
    ("conv weights on the wrong axis, right count", _conv_model(
        _q((1, 4, 4, 4)), _w((4, 3, 3, 4), [0.01] * 4, axis=3), _b(4), [_q((1, 4, 4, 4))]),
     r"operator 0 \(CONV_2D\): weights 'input1' \[4, 3, 3, 4\] are quantized per axis on dimension 3 with 4 scales; "
     r"CONV_2D needs one scale per output channel on dimension 0 \(4\) \[rule weights-axis\]", "ran"),
    ("grouped convolution", _conv_model(_q((1, 4, 4, 4)), _w((2, 3, 3, 2), [0.01] * 2), _b(2), [_q((1, 4, 4, 2))]),
     r"operator 0 \(CONV_2D\): weights 'input1' \[2, 3, 3, 2\] \(OHWI\) take 2 input channels, but input "
     r"'input0' has 4 \(grouped convolution is not supported\) \[rule mac-operands\]", "ran"),
    ("depthwise multiplier", _conv_model(_q((1, 4, 4, 4)), _w((1, 3, 3, 6), [0.01] * 6, axis=3), _b(6),
                                         [_q((1, 4, 4, 6))], op="DEPTHWISE_CONV_2D", depthMultiplier=2),
     r"operator 0 \(DEPTHWISE_CONV_2D\): weights 'input1' \[1, 3, 3, 6\] must be \[1, KH, KW, C \* "
     r"depth_multiplier\] with C = 4 input channels and depth_multiplier 2 \[rule mac-operands\]", "ran"),
    ("filter larger than the input", _conv_model(_q((1, 3, 3, 2)), _w((2, 5, 5, 2), [0.01] * 2), _b(2),
                                                 [_q((1, 1, 1, 2))], padding=1),
     r"operator 0 \(CONV_2D\): the 5x5 filter \(dilation 1x1\) does not fit in the 3x3 input with VALID "
     r"padding \[rule geometry\]", "ran"),
    ("fully connected output shape", single_op_model(
        "FULLY_CONNECTED", [_q((2, 4)), _q((3, 4), 0.01, data=np.ones((3, 4), I8)), _b(3)], [_q((2, 4))],
        op_options("FullyConnected")),
     r"operator 0 \(FULLY_CONNECTED\): computes 2 rows of 3 outputs, but tensor 'output0' is declared \[2, 4\] "
     r"\[rule output-shape\]", "ran"),
    ("a MAC layer with two outputs", _conv_model(_q((1, 4, 4, 2)), _w((2, 3, 3, 2), [0.01] * 2), _b(2),
                                                 [_q((1, 4, 4, 2)), _q((1, 4, 4, 2))]),
     r"operator 0 \(CONV_2D\): has 2 outputs; CONV_2D has 1 \[rule output-shape\]", "refused"),
    ("an element-wise op with two outputs", single_op_model("RELU", [_q((4,))], [_q((4,)), _q((4,))]),
     r"operator 0 \(RELU\): computes 1 outputs but the operator has 2 \[rule output-shape\]", "ran"),
    ("quantized_bias_type", _conv_model(_q((1, 4, 4, 2)), _w((2, 3, 3, 2), [0.01] * 2), _b(2), [_q((1, 4, 4, 2))],
                                        quantizedBiasType=9),
     r"operator 0 \(CONV_2D\): option quantized_bias_type is 9; an int8 layer's bias is INT32 \(2\), or the "
     r"option is unset \(0\) \[rule builtin-options\]", "ran"),
    ("a dynamic dimension", _edit(RESNET, lambda m: _set(_sg(m).tensors[_conv(m).outputs[0]], shape=[1, -1, 32, 16])),
     r"tensor \d+ \('.*'\): has shape \[1, -1, 32, 16\]: dynamic \(-1\) or negative dimensions are not "
     r"supported \[rule tensor-size\]", "refused"),
    ("tensors over the total cap", _many_big_tensors(None),
     rf"the model's non-constant tensors need {7 * (60 << 20)} bytes; the golden model's cap is "
     rf"{MAX_TOTAL_BYTES >> 20} MiB \[rule tensor-size\]", "refused"),
    ("an operator writes a constant", _edit(RESNET, _writes("constant")),
     r"operator 0 \(CONV_2D\): writes tensor \d+ \('.*'\), which is a constant \[rule single-writer\]", "ran"),
    ("an operator writes a graph input", _edit(RESNET, _writes("input")),
     r"operator 0 \(CONV_2D\): writes tensor \d+ \('.*'\), which is an input of the subgraph "
     r"\[rule single-writer\]", "ran"),
    ("a variable handle that is not a resource", _edit(WAKEWORD, _handle_not_resource),
     r"operator \d+ \(READ_VARIABLE\): tensor \d+ \('.*'\) is INT8; a variable's handle is a RESOURCE tensor "
     r"\[rule variable-ops\]", "ran"),
    ("a variable assigned another size", _edit(WAKEWORD, _assign_other_size),
     r"operator \d+ \(ASSIGN_VARIABLE\): assigns variable '.*' as tensor \d+ \('.*'\), INT8\[.*\], but "
     r"subgraph \d+, operator \d+ \(.*\) uses it as INT8\[.*\] \[rule variable-ops\]", "ran"),
    ("an operator output of -1", _edit(RESNET, lambda m: _set(_conv(m), outputs=[-1])),
     r"operator 0 \(CONV_2D\): output tensor index -1 \(only an optional input may be omitted\)", "refused"),
]


@pytest.mark.parametrize(("model", "message"), [(c[1], c[2]) for c in PREPARE_CASES],
                         ids=[c[0] for c in PREPARE_CASES])
def test_prepare_rules_refuse_with_the_rule_named(model, message):
    with pytest.raises(ModelError, match=rf"^m\.tflite: (subgraph \d+, |subgraph \d+: )?{message}"):
        Interpreter(model, "m.tflite")


@pytest.mark.tflm
@pytest.mark.parametrize(("model", "tflm"), [(c[1], c[3]) for c in PREPARE_CASES],
                         ids=[c[0] for c in PREPARE_CASES])
def test_what_tflm_does_with_the_prepare_cases(model, tflm):
    verdict, message = tflm_verdict(model)
    assert verdict == tflm, message


def _reshape_to_scalar():
    return single_op_model("RESHAPE", [_q((1, 1)), TensorSpec((0,), np.int32, data=np.zeros(0, np.int32))],
                           [_q(())], op_options("Reshape"))


def _reshape_by_input():
    return single_op_model("RESHAPE", [_q((2, 3)), TensorSpec((2,), np.int32)], [_q((3, 2))], op_options("Reshape"))


def _constant_output():
    mb = ModelBuilder()
    x, y = mb.tensor("x", (4,), I8, scale=0.1, zero_point=0), mb.tensor("y", (4,), I8, scale=0.1, zero_point=0)
    c = mb.tensor("c", (2,), I8, scale=0.1, zero_point=0, data=np.array([1, 2], I8))
    mb.operator(schema.BuiltinOperator.RELU, [x], [y])
    return mb.finish([x], [y, c])


# valid models at the edges of the rules: each loads and computes what TFLM computes
VALID = [
    ("scalar ADD", single_op_model("ADD", [_q(()), _q((), 0.2, 3)], [_q((), 0.3)]),
     [np.array(5, I8), np.array(-7, I8)]),
    ("RESHAPE to a scalar (a zero-element constant shape)", _reshape_to_scalar(), [np.array([[9]], I8)]),
    ("RESHAPE to a shape the caller passes", _reshape_by_input(), [np.arange(6, dtype=I8).reshape(2, 3),
                                                                   np.array([3, 2], np.int32)]),
    ("a constant graph output", _constant_output(), [np.array([-3, 0, 3, 100], I8)]),
]


@pytest.mark.tflm
@pytest.mark.parametrize(("model", "inputs"), [(c[1], c[2]) for c in VALID], ids=[c[0] for c in VALID])
def test_valid_edge_models_load_and_match_tflm(model, inputs):
    interp = Interpreter(model, "m.tflite")
    ours = interp.invoke(inputs)
    theirs = run_tflm(model, inputs, num_outputs=len(ours))
    # and through steps(), the path the RTL driver and the streaming models take
    stepped = interp.invoke(inputs, mac=lambda layer: layer.golden())
    for a, b, c in zip(ours, theirs, stepped, strict=True):
        np.testing.assert_array_equal(a, np.asarray(b).reshape(a.shape))
        np.testing.assert_array_equal(c, a)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("malformed")
    out = {}
    for case_id, raw, change, _, _ in CASES:
        path = d / f"{case_id.replace(' ', '_')}.tflite"
        path.write_bytes(_edit(raw, change))
        out[case_id] = path
    return out


@pytest.mark.parametrize(("case_id", "message"), [(c[0], c[3]) for c in CASES], ids=[c[0] for c in CASES])
def test_refused_at_load_with_the_operator_or_tensor_named(models, case_id, message, capsys):
    path = models[case_id]
    with pytest.raises(ModelError, match=rf"^m\.tflite: (subgraph \d+, )?{message}"):
        Interpreter(path.read_bytes(), "m.tflite")
    # run-model's promise: one line, exit status 2, before the simulator is built
    from int8_systolic.sim.run_model import main
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"int8-systolic run-model: error: {path}: ")


@pytest.mark.tflm
@pytest.mark.parametrize(("case_id", "tflm"), [(c[0], c[4]) for c in CASES], ids=[c[0] for c in CASES])
def test_what_tflm_does_with_it(models, case_id, tflm):
    """Where TFLM refuses (or aborts), we refuse too; where it runs the model anyway, we still refuse (above)."""
    verdict, message = tflm_verdict(models[case_id].read_bytes())
    assert verdict == tflm, message


def test_every_rule_has_a_case():
    names = {rule.name for rule in RULES} | set(PREPARE_RULES)
    messages = [c[3] for c in CASES] + [c[2] for c in PREPARE_CASES]
    covered = {name for message in messages for name in names if rf"\[rule {name}\]" in message}
    assert covered == names


def test_the_unedited_models_load():
    for raw in (RESNET, DS_CNN, WAKEWORD):
        Interpreter(raw, "m.tflite")


# ---- fuzz: nothing but ModelError leaves the interpreter ----

def _bundled():
    return [*(mlperf_model(n).read_bytes() for n in MODEL_NAMES), WAKEWORD, generated_cnn()]


def _must_be_model_error(raw, what):
    try:
        interp = Interpreter(raw, "fuzz.tflite")
        sg = interp.model.subgraphs[0]
        interp.invoke([np.zeros(sg.tensors[i].shape, sg.tensors[i].dtype) for i in sg.inputs])
    except ModelError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("fuzz.tflite"), (what, message)
    assert "\n" not in message, what


@pytest.mark.parametrize("index", range(len(MODEL_NAMES) + 2))
def test_truncations_and_bit_flips(index):
    raw = _bundled()[index]
    rng = random.Random(index)
    for cut in sorted({0, 1, 7, 8, 16, *(rng.randrange(len(raw)) for _ in range(12))}):
        with pytest.raises(ModelError):
            Interpreter(raw[:cut], "fuzz.tflite")
    for k in range(30):
        flipped = bytearray(raw)
        for _ in range(rng.choice((1, 4, 16))):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        _must_be_model_error(bytes(flipped), f"bit flips {k}")


def _tensor_edits(m, r):
    sg = _sg(m)
    t = r.choice(sg.tensors)
    edit = r.randrange(6)
    if edit == 0 and t.shape is not None and len(t.shape):
        t.shape = [*t.shape[:-1], r.choice([0, 1, t.shape[-1] + 1, -1, 1 << 20])]
    elif edit == 1:
        t.type = r.choice([0, 1, 2, 3, 4, 6, 7, 9, 13])
    elif edit == 2 and t.quantization is not None and t.quantization.scale is not None:
        n = len(t.quantization.scale) + r.choice([0, 1])
        t.quantization.scale = [r.choice([0.0, -1.0, 0.5, float("inf")])] * n
        t.quantization.zeroPoint = [r.choice([0, 1000])] * n
        t.quantization.quantizedDimension = r.choice([0, 1, 3, 7])
    elif edit == 3:
        t.buffer = r.randrange(len(m.buffers) + 2)
    elif edit == 4:
        t.shape = list(t.shape if t.shape is not None else [])[:-1]
    else:
        t.isVariable = not t.isVariable


def _operator_edits(m, r):
    sg = _sg(m)
    op = r.choice(sg.operators)
    edit = r.randrange(7)
    if edit == 6:
        sg.outputs = [r.randrange(len(sg.tensors))]
    elif edit == 0:
        op.inputs = list(op.inputs)[:-1] if len(op.inputs) > 1 else [-1]
    elif edit == 1:
        op.inputs = [r.choice([-1, r.randrange(len(sg.tensors))]) if r.random() < .3 else i for i in op.inputs]
    elif edit == 2:
        op.outputs = [r.randrange(len(sg.tensors))]
    elif edit == 3 and op.builtinOptions is not None:
        fields = [k for k, v in vars(op.builtinOptions).items() if isinstance(v, (int, float))]
        if fields:
            setattr(op.builtinOptions, r.choice(fields), r.choice([0, -1, 3, 255, 1 << 30]))
    elif edit == 4:
        op.opcodeIndex = r.randrange(len(m.operatorCodes))
    else:
        i = r.randrange(len(sg.operators))
        sg.operators.insert(i, sg.operators.pop(r.randrange(len(sg.operators))))


@pytest.mark.parametrize("index", range(len(MODEL_NAMES) + 2))
@pytest.mark.parametrize("edits", [_tensor_edits, _operator_edits], ids=["tensors", "operators"])
def test_structural_edits(index, edits):
    raw = _bundled()[index]
    rng = random.Random(f"{index}{edits.__name__}")
    for k in range(25):
        m = _load(raw)
        for _ in range(rng.choice((1, 2, 3))):
            edits(m, rng)
        try:
            edited = _pack(m)
        except Exception:   # an edit flatbuffers itself cannot serialise (a bad enum in a union...): no model
            continue
        _must_be_model_error(edited, f"{edits.__name__} {k}")


def test_the_refusals_page_lists_every_rule():
    from int8_systolic.paths import SOURCE
    page = (SOURCE / "docs" / "refusals.md").read_text()
    for name in [rule.name for rule in RULES] + list(PREPARE_RULES):
        assert f"| `{name}` |" in page, name
