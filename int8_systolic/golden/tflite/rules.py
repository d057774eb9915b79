"""The static rules a model must pass before any operator's Prepare runs.

Each rule is a named check of the whole graph (what TFLite-Micro's ``AllocateTensors``
and its flatbuffer parser check, plus what they leave undefined), run once when the
:class:`~.interpreter.Interpreter` is built. A broken rule raises :class:`~.model.ModelError`
naming the file, the subgraph, the operator and tensor at fault, and the rule, e.g.::

    m.tflite: subgraph 0, operator 4 (ADD): reads tensor 7 ('conv1') before any operator
    writes it (operator 5 writes it later: the operators are out of order or form a cycle)
    [rule operator-order]

:data:`RULES` lists them in the order they run (cheap structural rules first, so a later
rule may rely on an earlier one); docs/refusals.md describes each and what TFLM does with
such a model. The per-operator rules (shapes, geometry, quantization clauses) are each op's
Prepare, in :mod:`golden.reference_ops`.
"""

import dataclasses
import math

import numpy as np

from .builder import schema
from .model import ModelError

__all__ = ["MAX_TENSOR_BYTES", "MAX_TOTAL_BYTES", "OPTIONS", "PREPARE_RULES", "RULES", "Rule", "check_model"]

# A documented cap, not the machine's memory: the largest tensor of the bundled models is 27 KB (VWW's
# 96x96x3 input), and the golden model holds every tensor of an inference at once.
MAX_TENSOR_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20

_OPTION_NAMES = {v: k for k, v in vars(schema.BuiltinOptions).items() if not k.startswith("_")}
_ITEMSIZE = {"INT8": 1, "UINT8": 1, "BOOL": 1, "INT16": 2, "FLOAT16": 2, "INT32": 4, "FLOAT32": 4, "INT64": 8,
             "FLOAT64": 8, "RESOURCE": 1, "STRING": 1}
_ZERO_POINT_RANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}

# op -> (its builtin options table, whether a model must carry it). "Required" where TFLM's parser would
# silently substitute zeros that are invalid or mean something else than the option's schema default
# (stride 0, a filter of 0x0, softmax beta 0, a PACK of 0 values...).
OPTIONS = {
    "ADD": ("AddOptions", False), "SUB": ("SubOptions", False), "MUL": ("MulOptions", False),
    "CONV_2D": ("Conv2DOptions", True), "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", True),
    "FULLY_CONNECTED": ("FullyConnectedOptions", False),
    "AVERAGE_POOL_2D": ("Pool2DOptions", True), "MAX_POOL_2D": ("Pool2DOptions", True),
    "SOFTMAX": ("SoftmaxOptions", True), "LOG_SOFTMAX": ("LogSoftmaxOptions", False),
    "L2_NORMALIZATION": ("L2NormOptions", False), "LEAKY_RELU": ("LeakyReluOptions", False),
    "HARD_SWISH": ("HardSwishOptions", False),
    "MEAN": ("ReducerOptions", False), "SUM": ("ReducerOptions", False), "ARG_MAX": ("ArgMaxOptions", True),
    "RESIZE_BILINEAR": ("ResizeBilinearOptions", False),
    "LESS": ("LessOptions", False), "LESS_EQUAL": ("LessEqualOptions", False),
    "GREATER": ("GreaterOptions", False), "GREATER_EQUAL": ("GreaterEqualOptions", False),
    "EQUAL": ("EqualOptions", False), "NOT_EQUAL": ("NotEqualOptions", False),
    "MAXIMUM": ("MaximumMinimumOptions", False), "MINIMUM": ("MaximumMinimumOptions", False),
    "QUANTIZE": ("QuantizeOptions", False), "DEQUANTIZE": ("DequantizeOptions", False),
    "RESHAPE": ("ReshapeOptions", False), "SQUEEZE": ("SqueezeOptions", False),
    "EXPAND_DIMS": ("ExpandDimsOptions", False), "SHAPE": ("ShapeOptions", True),
    "TRANSPOSE": ("TransposeOptions", False), "CONCATENATION": ("ConcatenationOptions", False),
    "PACK": ("PackOptions", True), "UNPACK": ("UnpackOptions", True), "SPLIT": ("SplitOptions", False),
    "SPLIT_V": ("SplitVOptions", False), "SLICE": ("SliceOptions", False),
    "STRIDED_SLICE": ("StridedSliceOptions", False), "PAD": ("PadOptions", False),
    "PADV2": ("PadV2Options", False), "GATHER": ("GatherOptions", False),
    "SPACE_TO_DEPTH": ("SpaceToDepthOptions", True), "SPACE_TO_BATCH_ND": ("SpaceToBatchNDOptions", False),
    "BATCH_TO_SPACE_ND": ("BatchToSpaceNDOptions", False),
    "VAR_HANDLE": ("VarHandleOptions", True), "READ_VARIABLE": ("ReadVariableOptions", False),
    "ASSIGN_VARIABLE": ("AssignVariableOptions", False), "CALL_ONCE": ("CallOnceOptions", True),
}


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    summary: str
    check: object   # check(model, fail) with fail(where, message)


def _tensor_label(t):
    return f"tensor {t.index} ('{t.name}')"


def _tensor_size(model, fail):
    total = 0
    for sg in model.subgraphs:
        for t in sg.tensors:
            where = f"{model.where(sg.index)}, {_tensor_label(t)}"
            if any(d < 0 for d in t.shape):
                fail(where, f"has shape {list(t.shape)}: dynamic (-1) or negative dimensions are not supported")
            size = _ITEMSIZE.get(t.type, 8) * math.prod(t.shape)
            if size > MAX_TENSOR_BYTES:
                fail(where, f"is {t.type}{list(t.shape)}, {size} bytes; the golden model's cap is "
                            f"{MAX_TENSOR_BYTES >> 20} MiB per tensor")
            total += size if t.data is None else 0
    if total > MAX_TOTAL_BYTES:
        fail(model.path, f"the model's non-constant tensors need {total} bytes; the golden model's cap is "
                         f"{MAX_TOTAL_BYTES >> 20} MiB")


def _quantization(model, fail):
    for sg in model.subgraphs:
        for t in sg.tensors:
            q = t.quantization
            if q is None or t.type not in ("INT8", "UINT8", "INT16", "INT32", "INT64"):
                continue
            where = f"{model.where(sg.index)}, {_tensor_label(t)}"
            if not (np.all(np.isfinite(q.scale)) and np.all(q.scale > 0)):
                bad = q.scale[~(np.isfinite(q.scale) & (q.scale > 0))][0]
                fail(where, f"has scale {float(bad)!r}; a quantized tensor's scales must be positive and finite")
            if q.scale.size > 1:
                if not 0 <= q.axis < len(t.shape):
                    fail(where, f"is quantized per axis on dimension {q.axis}, but its shape {list(t.shape)} has "
                                f"{len(t.shape)} dimensions")
                if q.scale.size != t.shape[q.axis]:
                    fail(where, f"has {q.scale.size} scales on dimension {q.axis} of {list(t.shape)}, which has "
                                f"{t.shape[q.axis]} entries")
            lo, hi = _ZERO_POINT_RANGE.get(t.type, (-2**31, 2**31 - 1))
            if np.any(q.zero_point < lo) or np.any(q.zero_point > hi):
                bad = q.zero_point[(q.zero_point < lo) | (q.zero_point > hi)][0]
                fail(where, f"has zero point {int(bad)}, outside [{lo}, {hi}] for {t.type}")


def _options(model, fail):
    for sg in model.subgraphs:
        for op in sg.operators:
            expected, required = OPTIONS.get(op.op, (None, False))
            got = _OPTION_NAMES.get(op.options_type, f"type {op.options_type}") if op.options is not None else None
            if got is not None and expected is not None and got != expected:
                fail(model.where(sg.index, op.index), f"carries {got}, but {op.op}'s builtin options are "
                                                        f"{expected}")
            if got is None and required:
                fail(model.where(sg.index, op.index), f"has no builtin options ({expected}); TFLM would read "
                                                        f"zeros (stride, filter size, beta...) in their place")


# resource-variable ops: (inputs, outputs) as TFLM's var_handle.cc, read_variable.cc, assign_variable.cc and
# call_once.cc require them
_VARIABLE_ARITY = {"VAR_HANDLE": (0, 1), "READ_VARIABLE": (1, 1), "ASSIGN_VARIABLE": (2, 0), "CALL_ONCE": (0, 0)}


def _variable_ops(model, fail):
    for sg in model.subgraphs:
        for op in sg.operators:
            arity = _VARIABLE_ARITY.get(op.op)
            if arity is None:
                continue
            where = model.where(sg.index, op.index)
            if (len(op.inputs), len(op.outputs)) != arity or -1 in op.inputs:
                fail(where, f"has {len(op.inputs)} inputs and {len(op.outputs)} outputs; {op.op} takes {arity[0]} "
                            f"and {arity[1]}")
            handles = op.outputs if op.op == "VAR_HANDLE" else op.inputs[:1] if op.op != "CALL_ONCE" else []
            for ti in handles:
                if sg.tensors[ti].type != "RESOURCE":
                    fail(where, f"{_tensor_label(sg.tensors[ti])} is {sg.tensors[ti].type}; a variable's handle "
                                f"is a RESOURCE tensor")
    # every value assigned to or read from one variable (its shared name) has one type and size
    seen = {}
    for sg in model.subgraphs:
        names = {op.outputs[0]: getattr(op.options, "sharedName", None) for op in sg.operators
                 if op.op == "VAR_HANDLE"}
        for op in sg.operators:
            if op.op not in ("READ_VARIABLE", "ASSIGN_VARIABLE") or op.inputs[0] not in names:
                continue
            t = sg.tensors[op.outputs[0] if op.op == "READ_VARIABLE" else op.inputs[1]]
            form = (t.type, math.prod(t.shape))
            name = names[op.inputs[0]]
            name = name.decode(errors="replace") if isinstance(name, bytes) else name
            first = seen.setdefault(name, (form, f"subgraph {sg.index}, operator {op.index} ({op.op})", t))
            if first[0] != form:
                fail(model.where(sg.index, op.index),
                     f"{'reads' if op.op == 'READ_VARIABLE' else 'assigns'} variable {name!r} as {_tensor_label(t)}, "
                     f"{t.type}{list(t.shape)}, but {first[1]} uses it as {first[2].type}{list(first[2].shape)}")


def _subgraph_index(model, fail):
    n = len(model.subgraphs)
    for sg in model.subgraphs:
        for op in sg.operators:
            if op.op == "CALL_ONCE" and op.options is not None:
                target = op.options.initSubgraphIndex
                if not 0 <= target < n or target == sg.index:
                    fail(model.where(sg.index, op.index),
                         f"init subgraph index {target} must name another of the model's {n} subgraphs")


def _writers(model, fail):
    for sg in model.subgraphs:
        writer = {}
        graph_inputs = set(sg.inputs)
        for op in sg.operators:
            for ti in op.outputs:
                t = sg.tensors[ti]
                where = model.where(sg.index, op.index)
                if ti in writer:
                    fail(where, f"writes {_tensor_label(t)}, which operator {writer[ti]} already writes")
                if t.data is not None:
                    fail(where, f"writes {_tensor_label(t)}, which is a constant")
                if ti in graph_inputs:
                    fail(where, f"writes {_tensor_label(t)}, which is an input of the subgraph")
                writer[ti] = op.index


def _operator_order(model, fail):
    for sg in model.subgraphs:
        written_by = {ti: op.index for op in sg.operators for ti in op.outputs}
        ready = set(sg.inputs) | {t.index for t in sg.tensors if t.data is not None or t.is_variable}
        for op in sg.operators:
            for ti in op.inputs:
                if ti == -1 or ti in ready:
                    continue
                t = sg.tensors[ti]
                later = written_by.get(ti)
                why = (f"operator {later} writes it later: the operators are out of order or form a cycle"
                       if later is not None else "nothing writes it, and it is neither a constant nor a graph input")
                fail(model.where(sg.index, op.index), f"reads {_tensor_label(t)} before any operator writes it "
                                                        f"({why})")
            ready.update(op.outputs)


def _graph_outputs(model, fail):
    for sg in model.subgraphs:
        written = {ti for op in sg.operators for ti in op.outputs} | set(sg.inputs) | \
            {t.index for t in sg.tensors if t.data is not None or t.is_variable}
        for ti in sg.outputs:
            if ti not in written:
                fail(model.where(sg.index), f"graph output {_tensor_label(sg.tensors[ti])} is written by no "
                                              f"operator")


RULES = (
    Rule("tensor-size", "every tensor's shape is static and non-negative, and its bytes within the documented caps",
         _tensor_size),
    Rule("quantization", "every quantized integer tensor has positive finite scales, zero points its type can "
                         "hold, and a per-axis dimension inside its shape with one scale per entry", _quantization),
    Rule("builtin-options", "an operator's builtin options are its op's table; ops whose missing options TFLM "
                            "would read as invalid zeros must carry them", _options),
    Rule("subgraph-index", "CALL_ONCE names another subgraph of the model", _subgraph_index),
    Rule("variable-ops", "VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE and CALL_ONCE have their operands, handles "
                         "being RESOURCE tensors, and every value read from or assigned to one variable has one type "
                         "and size", _variable_ops),
    Rule("single-writer", "no tensor is written by two operators, and no operator writes a constant or a graph "
                          "input", _writers),
    Rule("operator-order", "every tensor an operator reads is a constant, a graph input, a variable, or the output "
                           "of an earlier operator (no use before definition, no cycle)", _operator_order),
    Rule("graph-outputs", "every graph output is written by an operator (or is a graph input, a constant or a "
                          "variable)", _graph_outputs),
)


# The rules each operator's Prepare checks (golden.reference_ops), named in their messages the same way.
PREPARE_RULES = {
    "geometry": "strides, dilations and pool filters are integers >= 1, the padding is SAME or VALID, and the "
                "(dilated) filter or window fits the input",
    "mac-operands": "a MAC layer's input channels match its weights (CONV_2D: no groups; DEPTHWISE_CONV_2D: C x "
                    "depth_multiplier; FULLY_CONNECTED: the input splits into rows of K)",
    "weights-axis": "per-channel weights are quantized on the op's channel dimension (CONV_2D 0, DEPTHWISE_CONV_2D 3, "
                    "FULLY_CONNECTED 0) with one scale per output channel",
    "bias-length": "a MAC layer's bias holds one int32 per output channel",
    "output-shape": "every output's declared shape (and the number of outputs) is what the op computes from its "
                    "inputs: computed directly for the MAC layers and pools, by a dry run of Eval for the rest",
}


def check_model(model):
    """Run every rule of :data:`RULES` on ``model``; raises :class:`ModelError` at the first broken one."""
    for rule in RULES:
        def fail(where, message, rule=rule):
            raise ModelError(f"{where}: {message} [rule {rule.name}]")
        rule.check(model, fail)
