"""Run a whole int8 ``.tflite`` model in the golden model, op by op, like TFLite-Micro.

Every operator is dispatched through :data:`golden.reference_ops.OP_TABLE`: at
construction each op's Prepare runs once (as TFLM's ``AllocateTensors``), so a model the
golden model cannot run is refused before any inference, with the operator, tensor and
reason named. The MAC layers (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D) are not
computed here but handed out as :class:`MacLayer` requests, so the same interpreter drives
the golden model (:meth:`Interpreter.invoke`) and the RTL (``sim.tb_model``):
:meth:`Interpreter.steps` is a generator that yields each request and receives the int8
result. The resource-variable ops of streaming models (VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE, CALL_ONCE) are handled here.

After an invoke, :attr:`Interpreter.tensors` holds every tensor of subgraph 0 (as TFLM's
``kPreserveAllTensors`` does), so each layer can be compared with TFLM's.
"""

import dataclasses
import functools

import numpy as np

from int8_systolic.golden._checks import rounding_param
from int8_systolic.golden.reference_ops import OP_TABLE, OpContext, mac_plan
from int8_systolic.golden.reference_ops._fast import by_uint8
from int8_systolic.golden.reference_ops.conv import eval_mac

from .model import ModelError, load_model
from .rules import check_model

__all__ = ["SUPPORTED_OPS", "Interpreter", "MacLayer", "compare_with_tflm", "golden_mac"]

MAC_OPS = tuple(name for name, op in OP_TABLE.items() if op.mac)
VARIABLE_OPS = ("VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE")
SUPPORTED_OPS = tuple(sorted((*OP_TABLE, *VARIABLE_OPS)))


@dataclasses.dataclass
class MacLayer:
    """One MAC layer with its kernel-level integer parameters (what the RTL consumes).

    ``kind`` is the op name; ``input`` int8 (NHWC, or [batch, K] for FULLY_CONNECTED);
    ``weights`` int8 (OHWI, [1, KH, KW, C*m] or [N, K]); ``bias`` int32 or None; ``params``
    the dict of :func:`golden.ops.conv_params` (input_offset, output_multiplier,
    output_shift, output_offset, quantized_activation_min/max, rounding); ``geometry``
    stride/dilation/padding (and depth_multiplier) for the convolutions.
    """

    op_index: int
    kind: str
    input: np.ndarray
    weights: np.ndarray
    bias: np.ndarray | None
    params: dict
    geometry: dict
    output_shape: tuple
    plan: dict | None = None   # the precomputed fast path (golden.reference_ops.mac_plan)

    @property
    def macs(self):
        out = int(np.prod(self.output_shape))
        if self.kind == "FULLY_CONNECTED":
            return out * self.weights.shape[1]
        if self.kind == "CONV_2D":
            return out * int(np.prod(self.weights.shape[1:]))
        return out * self.weights.shape[1] * self.weights.shape[2]

    def golden(self, return_stages=False):
        """The golden model's result for this layer."""
        p = {"kind": self.kind, "params": self.params, "geometry": self.geometry, "k": self.input.shape[-1],
             "output_shape": self.output_shape, "plan": self.plan}
        out = eval_mac(p, [self.input, self.weights, self.bias], return_stages=return_stages)
        return out if return_stages else out[0]


def golden_mac(layer):
    return layer.golden()


def _dry_value(t, rng):
    """A value of tensor ``t``'s shape and type for Prepare's dry run: random activations, zero integers."""
    if t.dtype is None:
        return None
    if t.type in ("INT8", "UINT8", "INT16"):
        info = np.iinfo(t.dtype)
        return rng.integers(info.min, info.max, t.shape, endpoint=True).astype(t.dtype)
    if t.type == "FLOAT32":
        return rng.standard_normal(t.shape).astype(np.float32)
    return np.zeros(t.shape, t.dtype)


def _golden_mac_step(params, inputs):
    return eval_mac(params, inputs)


def _mac_plan_step(step, inputs):
    return [step(inputs[0])]


def _table_step(table, inputs):
    return [table[inputs[0].view(np.uint8)]]


class Interpreter:
    """Interpreter for int8 models; ``model`` is a path, bytes, or a loaded :class:`~.model.Model`.

    Construction runs every operator's Prepare and raises :class:`~.model.ModelError` for
    anything the golden model (or TFLM) cannot run. ``rounding`` selects the MAC layers'
    requantization: ``double`` (TFLite's reference, the default) or ``single``
    (``TFLITE_SINGLE_ROUNDING`` builds, the accelerator's other build); every other op
    computes the reference arithmetic.
    """

    def __init__(self, model, name=None, *, rounding="double"):
        self.model = model if hasattr(model, "subgraphs") else load_model(model, name)
        self.rounding = rounding_param(rounding)
        self.variables = {}       # shared_name -> array
        self.tensors = {}         # subgraph-0 tensor index -> array, after the last invoke
        self.live = {}            # subgraph-0 tensor index -> array, as computed so far by steps()
        self._called_once = set()
        self.macs = []            # MacLayer requests of the last invoke, in order
        self.params = {}          # (subgraph, operator) -> the params of the op's Prepare
        self._tables = {}         # (subgraph, operator) -> eval of a unary int8 op over all 256 inputs
        check_model(self.model)
        self._prepare()
        self._program = self._compile(self.model.subgraphs[0])

    def _prepare(self):
        for sg in self.model.subgraphs:
            # Prepare's dry run: each operator's Eval on the values its predecessors compute from seeded random
            # inputs, so an output declared with a shape the op does not compute is refused here, with the op
            # named. Shape tensors computed in the graph (SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE) carry their
            # real values; random rather than constant activations keep clear of the few inputs on which TFLM
            # itself aborts (a SOFTMAX row of >= 512 equal values).
            rng = np.random.default_rng(0)
            values = {}
            # integer (non-activation) tensors whose values come from a graph input: unknown until invoke, so an op
            # that reads one (a RESHAPE to a shape the caller passes) has no dry run
            unknown = {ti for ti in sg.inputs if sg.tensors[ti].type in ("INT32", "INT64", "BOOL")}
            for op in sg.operators:
                where = self.model.where(sg.index, op.index)
                if op.op in VARIABLE_OPS:
                    for ti in op.outputs:
                        values[ti] = _dry_value(sg.tensors[ti], rng)
                    continue
                kernel = OP_TABLE.get(op.op)
                if kernel is None:
                    raise ModelError(f"{where}: unsupported op (supported: {', '.join(SUPPORTED_OPS)})")
                ctx = OpContext(op.op, op.index, op.options,
                                [None if i == -1 else sg.tensors[i] for i in op.inputs],
                                [sg.tensors[i] for i in op.outputs], where, ModelError, self.rounding)
                try:
                    params = self.params[sg.index, op.index] = kernel.prepare(ctx)
                except ModelError:
                    raise
                except ValueError as exc:   # a golden helper's argument check (a NaN alpha...): the op named
                    raise ModelError(f"{where}: {exc}") from exc
                if kernel.mac:   # its Prepare checked the output shape
                    values[op.outputs[0]] = _dry_value(sg.tensors[op.outputs[0]], rng)
                    continue
                if unknown.intersection(op.inputs):
                    unknown.update(op.outputs)
                    values.update((ti, _dry_value(sg.tensors[ti], rng)) for ti in op.outputs)
                    continue
                inputs = [None if i == -1 else sg.tensors[i].data if sg.tensors[i].data is not None
                          else values[i] if i in values else _dry_value(sg.tensors[i], rng) for i in op.inputs]
                try:
                    outputs = kernel.eval(params, inputs)
                except ModelError:
                    raise
                except ValueError as exc:
                    raise ModelError(f"{where}: {exc}") from exc
                self._check_outputs(sg, op, outputs, where, rule=True)
                values.update(zip(op.outputs, outputs, strict=True))
                if kernel.unary and ctx.inputs[0].type == "INT8":
                    # An element-wise op of one int8 value is its table: Eval on all 256 inputs, once.
                    # (indexed by the input's uint8 view: one gather per Eval)
                    self._tables[sg.index, op.index] = by_uint8(
                        kernel.eval(params, [np.arange(-128, 128, dtype=np.int8)])[0])

    def _check_outputs(self, sg, op, outputs, where, rule=False):
        tag = " [rule output-shape]" if rule else ""
        if len(outputs) != len(op.outputs):
            raise ModelError(f"{where}: computes {len(outputs)} outputs but the operator has {len(op.outputs)}{tag}")
        for ti, out in zip(op.outputs, outputs, strict=True):
            t = sg.tensors[ti]
            if out.shape != t.shape or (t.dtype is not None and out.dtype != t.dtype):
                raise ModelError(f"{where}: computes {out.dtype}{list(out.shape)} but tensor '{t.name}' is declared "
                                 f"{t.type}{list(t.shape)}{tag}")

    def _compile(self, sg):
        """Subgraph 0 as a flat list of (function, input indices, output indices, output shapes and dtypes), for
        :meth:`invoke` with the golden MAC backend: every op bound to its params once, no generator round trip.
        None when the subgraph uses resource variables (those run through :meth:`steps`)."""
        if any(op.op in VARIABLE_OPS for op in sg.operators):
            return None
        program = []
        for op in sg.operators:
            params = self.params[sg.index, op.index]
            if op.op in MAC_OPS and params["plan"] is not None:
                fn = functools.partial(_mac_plan_step, mac_plan.compile_step(
                    params["plan"], params["output_shape"], params.get("k") if op.op == "FULLY_CONNECTED" else None))
            elif op.op in MAC_OPS:
                fn = functools.partial(_golden_mac_step, params)
            elif (sg.index, op.index) in self._tables:
                fn = functools.partial(_table_step, self._tables[sg.index, op.index])
            else:
                fn = functools.partial(OP_TABLE[op.op].eval, params)
            expected = [(sg.tensors[i].shape, sg.tensors[i].dtype) for i in op.outputs]
            program.append((fn, tuple(op.inputs), tuple(op.outputs), expected, op.index))
        # every tensor's slot, constants filled in; the extra last slot is None, which index -1 (an omitted
        # optional input) reads
        slots = [t.data for t in sg.tensors] + [None]
        return program, slots

    def invoke(self, inputs, mac=golden_mac):
        """Run subgraph 0 on ``inputs`` (list of arrays); MAC layers through ``mac(layer)``. Returns the outputs.

        With the golden MAC backend (the default) this runs the compiled program of :meth:`_compile`; any other
        ``mac`` goes through :meth:`steps` and fills :attr:`macs`.
        """
        if mac is golden_mac and self._program is not None:
            return self._invoke_compiled(inputs)
        gen = self.steps(inputs)
        try:
            layer = next(gen)
            while True:
                layer = gen.send(mac(layer))
        except StopIteration as stop:
            return stop.value

    def _invoke_compiled(self, inputs):
        sg = self.model.subgraphs[0]
        program, slots = self._program
        values = slots.copy()
        for ti, x in self._check_inputs(sg, inputs).items():
            values[ti] = x
        for fn, ins, outs, expected, index in program:
            try:
                results = fn([values[i] for i in ins])
            except ModelError:
                raise
            except ValueError as exc:
                raise ModelError(f"{self.model.where(0, index)}: {exc}") from exc
            for ti, out, (shape, dtype) in zip(outs, results, expected, strict=True):
                if out.shape != shape or (dtype is not None and out.dtype != dtype):
                    raise ModelError(f"{self.model.where(0, index)}: computed {out.dtype}{list(out.shape)} but "
                                     f"tensor '{sg.tensors[ti].name}' is {sg.tensors[ti].type}{list(shape)}")
                values[ti] = out
        self.macs = []
        self.tensors = dict(enumerate(values[:-1]))
        return [values[i] for i in sg.outputs]

    def _check_inputs(self, sg, inputs):
        if len(inputs) != len(sg.inputs):
            raise ValueError(f"{self.model.path}: the model takes {len(sg.inputs)} inputs, got {len(inputs)}")
        values = {}
        for ti, x in zip(sg.inputs, inputs, strict=True):
            t = sg.tensors[ti]
            x = np.asarray(x)
            if x.dtype != t.dtype or x.shape != t.shape:
                raise ValueError(f"{self.model.path}: input '{t.name}' must be {t.type}{list(t.shape)}, "
                                 f"got {x.dtype}{list(x.shape)}")
            values[ti] = x
        return values

    def steps(self, inputs):
        """Generator form of :meth:`invoke`: yields :class:`MacLayer`, expects the int8 result back."""
        sg = self.model.subgraphs[0]
        values = self._check_inputs(sg, inputs)
        self.macs = []
        self.live = values      # subgraph 0's tensors computed so far (a MAC backend may read them)
        yield from self._run(0, values)
        self.tensors = values
        return [self._value(sg, values, i) for i in sg.outputs]   # (a constant may be a graph output)

    def _value(self, sg, values, ti):
        if ti == -1:
            return None
        t = sg.tensors[ti]
        if t.data is not None:
            return t.data
        if ti not in values:
            raise ModelError(f"{self.model.path}: subgraph {sg.index}: tensor {ti} ('{t.name}') is read before "
                             f"it is written")
        return values[ti]

    def _run(self, si, values):
        sg = self.model.subgraphs[si]
        for op in sg.operators:
            if op.op in VARIABLE_OPS:
                yield from self._variable_op(sg, op, values, self.model.where(si, op.index))
                continue
            params = self.params[si, op.index]
            inputs = [self._value(sg, values, i) for i in op.inputs]
            if op.op in MAC_OPS:
                x = inputs[0]
                if op.op == "FULLY_CONNECTED":
                    x = x.reshape(-1, params["k"])
                layer = MacLayer(op.index, op.op, x, inputs[1], inputs[2] if len(inputs) > 2 else None,
                                 params["params"], params["geometry"], params["output_shape"], params["plan"])
                out = np.asarray((yield layer))
                if out.shape != layer.output_shape or out.dtype != np.int8:
                    raise ValueError(f"{self.model.where(si, op.index)}: the MAC backend returned "
                                     f"{out.dtype}{list(out.shape)}, expected int8{list(layer.output_shape)}")
                self.macs.append(layer)
                outputs = [out]
            elif (si, op.index) in self._tables:
                outputs = [self._tables[si, op.index][inputs[0].view(np.uint8)]]
            else:
                try:
                    outputs = OP_TABLE[op.op].eval(params, inputs)
                except ModelError:
                    raise
                except ValueError as exc:
                    raise ModelError(f"{self.model.where(si, op.index)}: {exc}") from exc
            self._check_outputs(sg, op, outputs, self.model.where(si, op.index))
            values.update(zip(op.outputs, outputs, strict=True))

    def _variable_op(self, sg, op, values, where):
        """The resource-variable ops of streaming models (TFLM's var_handle.cc, read/assign_variable.cc)."""
        if op.op == "CALL_ONCE":
            target = op.options.initSubgraphIndex
            if target not in self._called_once:
                self._called_once.add(target)
                yield from self._run(target, {})
        elif op.op == "VAR_HANDLE":
            values[op.outputs[0]] = op.options.sharedName
        elif op.op == "ASSIGN_VARIABLE":
            handle = self._value(sg, values, op.inputs[0])
            self.variables[handle] = np.array(self._value(sg, values, op.inputs[1]))
        else:  # READ_VARIABLE
            handle = self._value(sg, values, op.inputs[0])
            if handle not in self.variables:
                raise ModelError(f"{where}: variable {handle!r} is read before it is assigned")
            out_t = sg.tensors[op.outputs[0]]
            value = self.variables[handle]
            if value.size != int(np.prod(out_t.shape)) or (out_t.dtype is not None and value.dtype != out_t.dtype):
                raise ModelError(f"{where}: variable {handle!r} holds {value.dtype}{list(value.shape)}, but output "
                                 f"'{out_t.name}' is {out_t.type}{list(out_t.shape)}")
            values[op.outputs[0]] = np.array(value).reshape(out_t.shape)


def compare_with_tflm(interpreter, tflm):
    """Compare every operator output of subgraph 0 after an invoke of both; resource handles skipped.

    ``tflm`` is a :class:`golden.tflite.runtimes.TflmModel` invoked on the same inputs.
    Returns ``(tensors compared, elements compared, differences)``, each difference a text
    naming the operator and tensor, the number of differing elements and the first one.
    """
    sg = interpreter.model.subgraphs[0]
    tensors = elements = 0
    differences = []
    for op in sg.operators:
        for ti in op.outputs:
            t = sg.tensors[ti]
            if t.type == "RESOURCE":
                continue
            got, want = interpreter.tensors[ti], tflm.tensor(ti).reshape(t.shape)
            tensors += 1
            elements += got.size
            bad = np.flatnonzero(got.ravel() != want.ravel())
            if bad.size:
                differences.append(f"operator {op.index} ({op.op}) output '{t.name}' differs from TFLM in {bad.size} "
                                   f"elements; first at flat index {bad[0]}: ours {got.ravel()[bad[0]]}, TFLM "
                                   f"{want.ravel()[bad[0]]}")
    return tensors, elements, differences
