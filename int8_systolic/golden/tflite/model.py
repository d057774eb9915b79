"""Read ``.tflite`` files with flatbuffers and TFLite's schema into plain Python objects.

:func:`load_model` returns a :class:`Model`: subgraphs of :class:`Tensor` (name, numpy
dtype, shape, constant data, per-tensor or per-axis quantization) and :class:`Operator`
(op name, version, inputs, outputs, builtin options object from the schema). A file that
is not a TFLite flatbuffer, is truncated, or whose buffers or tensor indices do not fit
raises :class:`ModelError` naming the file and, where one is at fault, the subgraph,
operator or tensor.
"""

import dataclasses
import math
import pathlib

import numpy as np

from .builder import schema

__all__ = ["Model", "ModelError", "Operator", "Quantization", "Subgraph", "Tensor", "load_model"]

_OP_NAMES = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
_TYPE_NAMES = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
_DTYPES = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
           "FLOAT32": np.float32, "BOOL": np.bool_}


class ModelError(ValueError):
    """A .tflite file that cannot be read or run; the message names the file and the culprit."""


@dataclasses.dataclass
class Quantization:
    scale: np.ndarray          # float32, one per tensor or one per channel
    zero_point: np.ndarray     # int64, same length
    axis: int                  # quantized_dimension

    @property
    def per_tensor(self):
        return self.scale.size == 1


@dataclasses.dataclass
class Tensor:
    index: int
    name: str
    type: str                  # schema TensorType name: "INT8", "FLOAT32", "RESOURCE"...
    shape: tuple
    data: np.ndarray | None    # constant contents, already shaped
    quantization: Quantization | None
    is_variable: bool

    @property
    def dtype(self):
        return _DTYPES.get(self.type)

    def describe(self):
        q = ""
        if self.quantization is not None:
            q = f" scale {self.quantization.scale[0]:.6g}{'..' if not self.quantization.per_tensor else ''}" \
                f" zp {int(self.quantization.zero_point[0])}"
        return f"{self.type}{list(self.shape)}{q}"


@dataclasses.dataclass
class Operator:
    index: int
    op: str                    # BuiltinOperator name, e.g. "CONV_2D"
    version: int
    inputs: list               # tensor indices, -1 for an omitted optional input
    outputs: list
    options: object            # schema *OptionsT object or None
    options_type: int = 0      # schema BuiltinOptions code of ``options``


@dataclasses.dataclass
class Subgraph:
    index: int
    name: str
    tensors: list
    operators: list
    inputs: list
    outputs: list


@dataclasses.dataclass
class Model:
    path: str
    description: str
    subgraphs: list

    def where(self, subgraph, operator=None):
        """Location text for error messages."""
        text = f"{self.path}: subgraph {subgraph}"
        if operator is not None:
            op = self.subgraphs[subgraph].operators[operator]
            text += f", operator {operator} ({op.op})"
        return text


def _fail(path, reason):
    raise ModelError(f"{path}: {reason}")


def load_model(source, name=None):
    """Read a model from a path or from bytes (``name`` labels the bytes in messages)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw, path = bytes(source), name or "<bytes>"
    else:
        path = str(source)
        try:
            raw = pathlib.Path(source).read_bytes()
        except OSError as exc:
            _fail(path, f"cannot read the file ({exc.strerror})")
    if len(raw) < 8:
        _fail(path, f"too short to be a TFLite model ({len(raw)} bytes)")
    if raw[4:8] != b"TFL3":
        _fail(path, f"not a TFLite flatbuffer (file identifier {raw[4:8]!r}, expected b'TFL3')")
    try:
        m = schema.ModelT.InitFromPackedBuf(raw, 0)
    except Exception as exc:  # flatbuffers raises whatever struct/index error the damage causes
        _fail(path, f"malformed or truncated flatbuffer ({type(exc).__name__}: {exc})")
    if not m.subgraphs:
        _fail(path, "the model has no subgraphs")
    buffers = m.buffers or []
    opcodes = m.operatorCodes or []
    subgraphs = []
    for si, sg in enumerate(m.subgraphs):
        tensors = [_tensor(path, si, ti, t, buffers, raw) for ti, t in enumerate(sg.tensors or [])]
        operators = []
        for oi, op in enumerate(sg.operators or []):
            where = f"subgraph {si}, operator {oi}"
            if not 0 <= op.opcodeIndex < len(opcodes):
                _fail(path, f"{where}: opcode index {op.opcodeIndex} out of range ({len(opcodes)} opcodes)")
            oc = opcodes[op.opcodeIndex]
            code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
            opname = _OP_NAMES.get(code, f"unknown builtin {code}")
            if code == schema.BuiltinOperator.CUSTOM:
                opname = f"CUSTOM({oc.customCode.decode(errors='replace') if oc.customCode else '?'})"
            ins = [int(i) for i in (op.inputs if op.inputs is not None else [])]
            outs = [int(i) for i in (op.outputs if op.outputs is not None else [])]
            for i in ins + outs:
                if i != -1 and not 0 <= i < len(tensors):
                    _fail(path, f"{where} ({opname}): tensor index {i} out of range ({len(tensors)} tensors)")
            if -1 in outs:   # -1 marks an omitted optional input; an output cannot be omitted
                _fail(path, f"{where} ({opname}): output tensor index -1 (only an optional input may be omitted)")
            operators.append(Operator(oi, opname, oc.version, ins, outs, op.builtinOptions, op.builtinOptionsType))
        ios = [int(i) for i in (sg.inputs if sg.inputs is not None else [])], \
              [int(i) for i in (sg.outputs if sg.outputs is not None else [])]
        for i in ios[0] + ios[1]:
            if not 0 <= i < len(tensors):
                _fail(path, f"subgraph {si}: input/output tensor index {i} out of range")
        name_ = sg.name.decode(errors="replace") if isinstance(sg.name, bytes) else (sg.name or "")
        subgraphs.append(Subgraph(si, name_, tensors, operators, *ios))
    desc = m.description.decode(errors="replace") if isinstance(m.description, bytes) else (m.description or "")
    return Model(path, desc, subgraphs)


def _tensor(path, si, ti, t, buffers, raw):
    type_name = _TYPE_NAMES.get(t.type, f"type {t.type}")
    name = t.name.decode(errors="replace") if isinstance(t.name, bytes) else (t.name or f"tensor{ti}")
    shape = tuple(int(d) for d in (t.shape if t.shape is not None else []))
    where = f"subgraph {si}, tensor {ti} ('{name}')"
    if not 0 <= t.buffer < max(len(buffers), 1):
        _fail(path, f"{where}: buffer index {t.buffer} out of range ({len(buffers)} buffers)")
    data = None
    buf = buffers[t.buffer] if buffers else None
    if buf is not None:
        if buf.data is not None and (len(buf.data) or math.prod(shape) == 0):
            # (a present but empty buffer of a zero-element tensor is a constant too: RESHAPE's shape int32[0])
            content = np.asarray(buf.data, dtype=np.uint8).tobytes()
        elif buf.offset > 1:  # large models keep buffers after the flatbuffer
            if buf.offset + buf.size > len(raw):
                _fail(path, f"{where}: buffer {t.buffer} at offset {buf.offset} + {buf.size} bytes runs past the "
                            f"end of the file ({len(raw)} bytes): truncated?")
            content = raw[buf.offset:buf.offset + buf.size]
        else:
            content = None
        if content is not None:
            dtype = _DTYPES.get(type_name)
            if dtype is None:
                _fail(path, f"{where}: constant data of unsupported type {type_name}")
            count = math.prod(shape)
            if len(content) != count * np.dtype(dtype).itemsize:
                _fail(path, f"{where}: buffer holds {len(content)} bytes but {type_name}{list(shape)} needs "
                            f"{count * np.dtype(dtype).itemsize}")
            data = np.frombuffer(content, dtype=dtype).reshape(shape)
    quant = None
    q = t.quantization
    if q is not None and q.scale is not None and len(q.scale):
        scale = np.asarray(q.scale, dtype=np.float32)
        zp = np.asarray(q.zeroPoint if q.zeroPoint is not None else np.zeros(len(scale)), dtype=np.int64)
        if zp.size != scale.size:
            _fail(path, f"{where}: {scale.size} scales but {zp.size} zero points")
        quant = Quantization(scale, zp, int(q.quantizedDimension))
    return Tensor(ti, name, type_name, shape, data, quant, bool(t.isVariable))
