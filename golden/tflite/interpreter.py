"""Run a whole int8 ``.tflite`` model in the golden model, op by op, like TFLite-Micro.

The MAC layers (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D) are not computed here but
handed out as :class:`MacLayer` requests, so the same interpreter drives the golden model
(:meth:`Interpreter.invoke`) and the RTL (``sim.model_runner``): :meth:`Interpreter.steps`
is a generator that yields each request and receives the int8 result. Every other op runs
in numpy, bit-exact with TFLM's reference kernels: RESHAPE, STRIDED_SLICE, CONCATENATION,
SPLIT_V, LOGISTIC, QUANTIZE (int8/uint8 requantization), and the resource-variable ops of
streaming models (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE).

After an invoke, :attr:`Interpreter.tensors` holds every tensor of subgraph 0 (as TFLM's
``kPreserveAllTensors`` does), so each layer can be compared with TFLM's.
"""

import dataclasses

import numpy as np

from golden import kernels, ops
from golden.fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier

from ..logistic import logistic_int8, logistic_int8_params
from .builder import schema
from .model import ModelError, load_model

__all__ = ["Interpreter", "MacLayer", "compare_with_tflm", "golden_mac"]

MAC_OPS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")
_PADDING = {schema.Padding.SAME: "SAME", schema.Padding.VALID: "VALID"}
_ACTIVATION = {schema.ActivationFunctionType.NONE: "NONE", schema.ActivationFunctionType.RELU: "RELU",
               schema.ActivationFunctionType.RELU6: "RELU6",
               schema.ActivationFunctionType.RELU_N1_TO_1: "RELU_N1_TO_1"}


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
        if self.kind == "FULLY_CONNECTED":
            out = kernels.fully_connected_kernel(self.input, self.weights, self.bias, return_stages=return_stages,
                                                 **self.params)
        elif self.kind == "CONV_2D":
            out = kernels.conv_2d_kernel(self.input, self.weights, self.bias, return_stages=return_stages,
                                         **self.geometry, **self.params)
        else:
            out = kernels.depthwise_conv_2d_kernel(self.input, self.weights, self.bias,
                                                   return_stages=return_stages, **self.geometry, **self.params)
        return out if return_stages else out.reshape(self.output_shape)


def golden_mac(layer):
    return layer.golden()


class Interpreter:
    """Interpreter for int8 models; ``model`` is a path, bytes, or a loaded :class:`~.model.Model`."""

    def __init__(self, model, name=None):
        self.model = model if hasattr(model, "subgraphs") else load_model(model, name)
        self.variables = {}       # shared_name -> int8 array
        self.tensors = {}         # subgraph-0 tensor index -> array, after the last invoke
        self._called_once = set()
        self.macs = []            # MacLayer requests of the last invoke, in order
        self._check_supported()

    def _check_supported(self):
        supported = {"RESHAPE", "STRIDED_SLICE", "CONCATENATION", "SPLIT_V", "LOGISTIC", "QUANTIZE",
                     "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", *MAC_OPS}
        for sg in self.model.subgraphs:
            for op in sg.operators:
                if op.op not in supported:
                    raise ModelError(f"{self.model.where(sg.index, op.index)}: unsupported op "
                                     f"(supported: {', '.join(sorted(supported))})")
                if op.op in MAC_OPS or op.op in ("LOGISTIC", "CONCATENATION", "SPLIT_V", "STRIDED_SLICE"):
                    data_in = sg.tensors[op.inputs[0]]
                    if data_in.type != "INT8":
                        raise ModelError(f"{self.model.where(sg.index, op.index)}: input tensor '{data_in.name}' is "
                                         f"{data_in.type}; only int8 models are supported (is this a float model?)")

    def invoke(self, inputs, mac=golden_mac):
        """Run subgraph 0 on ``inputs`` (list of arrays); MAC layers through ``mac(layer)``. Returns the outputs."""
        gen = self.steps(inputs)
        try:
            layer = next(gen)
            while True:
                layer = gen.send(mac(layer))
        except StopIteration as stop:
            return stop.value

    def steps(self, inputs):
        """Generator form of :meth:`invoke`: yields :class:`MacLayer`, expects the int8 result back."""
        sg = self.model.subgraphs[0]
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
        self.macs = []
        yield from self._run(0, values)
        self.tensors = values
        return [values[i] for i in sg.outputs]

    def _value(self, sg, values, ti):
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
            where = self.model.where(si, op.index)
            if op.op in MAC_OPS:
                layer = self._mac_layer(sg, op, values, where)
                out = yield layer
                out = np.asarray(out)
                if out.shape != layer.output_shape or out.dtype != np.int8:
                    raise ValueError(f"{where}: the MAC backend returned {out.dtype}{list(out.shape)}, expected "
                                     f"int8{list(layer.output_shape)}")
                self.macs.append(layer)
                values[op.outputs[0]] = out
            elif op.op == "CALL_ONCE":
                target = op.options.initSubgraphIndex
                if target not in self._called_once:
                    self._called_once.add(target)
                    yield from self._run(target, {})
            elif op.op == "VAR_HANDLE":
                values[op.outputs[0]] = op.options.sharedName
            elif op.op == "ASSIGN_VARIABLE":
                handle = self._value(sg, values, op.inputs[0])
                self.variables[handle] = np.array(self._value(sg, values, op.inputs[1]))
            elif op.op == "READ_VARIABLE":
                handle = self._value(sg, values, op.inputs[0])
                if handle not in self.variables:
                    raise ModelError(f"{where}: variable {handle!r} is read before it is assigned")
                out_t = sg.tensors[op.outputs[0]]
                values[op.outputs[0]] = np.array(self.variables[handle]).reshape(out_t.shape)
            else:
                x = self._value(sg, values, op.inputs[0])
                outputs = getattr(self, f"_op_{op.op.lower()}")(sg, op, values, x, where)
                for ti, out in zip(op.outputs, outputs, strict=True):
                    out_t = sg.tensors[ti]
                    if tuple(out.shape) != out_t.shape:
                        raise ModelError(f"{where}: computed output shape {list(out.shape)} but tensor "
                                         f"'{out_t.name}' is {list(out_t.shape)}")
                    values[ti] = out

    # --- MAC layers -------------------------------------------------------------------

    def _mac_layer(self, sg, op, values, where):
        x = self._value(sg, values, op.inputs[0])
        w_t = sg.tensors[op.inputs[1]]
        b_t = sg.tensors[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] != -1 else None
        in_t, out_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        for t, what in ((in_t, "input"), (w_t, "weights"), (out_t, "output")):
            if t.type != "INT8" or t.quantization is None:
                raise ModelError(f"{where}: {what} tensor '{t.name}' must be quantized int8, got {t.describe()}")
        if w_t.data is None:
            raise ModelError(f"{where}: weights tensor '{w_t.name}' is not a constant")
        if b_t is not None and (b_t.type != "INT32" or b_t.data is None):
            raise ModelError(f"{where}: bias tensor '{b_t.name}' must be a constant int32, got {b_t.describe()}")
        if np.any(w_t.quantization.zero_point != 0):
            raise ModelError(f"{where}: weights '{w_t.name}' have non-zero zero points (TFLite int8 weights are "
                             f"symmetric)")
        opts = op.options
        activation = _ACTIVATION.get(getattr(opts, "fusedActivationFunction", 0))
        if activation is None:
            raise ModelError(f"{where}: unsupported fused activation {opts.fusedActivationFunction}")
        quant = {"input_scale": float(in_t.quantization.scale[0]),
                 "input_zero_point": int(in_t.quantization.zero_point[0]),
                 "output_scale": float(out_t.quantization.scale[0]),
                 "output_zero_point": int(out_t.quantization.zero_point[0]), "activation": activation}
        w = w_t.data
        bias = None if b_t is None else b_t.data
        try:
            if op.op == "FULLY_CONNECTED":
                if getattr(opts, "weightsFormat", 0) != 0:
                    raise ModelError(f"{where}: shuffled FULLY_CONNECTED weights are not supported")
                k = w.shape[1]
                if x.size % k:
                    raise ModelError(f"{where}: input of {x.size} elements does not split into rows of K = {k}")
                params = ops.fully_connected_params(w.shape, weight_scale=w_t.quantization.scale, **quant)
                return MacLayer(op.index, op.op, x.reshape(-1, k), w, bias, params, {}, out_t.shape)
            geometry = {"stride": (opts.strideH, opts.strideW),
                        "dilation": (opts.dilationHFactor, opts.dilationWFactor), "padding": _PADDING[opts.padding]}
            if op.op == "CONV_2D":
                params = ops.conv_params(weight_scale=w_t.quantization.scale, channels=w.shape[0], **quant)
            else:
                geometry["depth_multiplier"] = int(opts.depthMultiplier) or w.shape[3] // x.shape[3]
                params = ops.conv_params(weight_scale=w_t.quantization.scale, channels=w.shape[3], **quant)
        except ValueError as exc:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"{where}: {exc}") from exc
        return MacLayer(op.index, op.op, x, w, bias, params, geometry, out_t.shape)

    # --- data movement and element-wise ops ----------------------------------------------

    def _same_quantization(self, sg, op, tensors, where):
        qs = {(float(t.quantization.scale[0]), int(t.quantization.zero_point[0]))
              for t in (sg.tensors[i] for i in tensors) if t.quantization is not None}
        if len(qs) > 1:
            raise ModelError(f"{where}: inputs and outputs are quantized differently {sorted(qs)}; "
                             f"TFLM's int8 kernel requires them equal")

    def _op_reshape(self, sg, op, values, x, where):
        return [x.reshape(sg.tensors[op.outputs[0]].shape)]

    def _op_concatenation(self, sg, op, values, x, where):
        if op.options.fusedActivationFunction != 0:
            raise ModelError(f"{where}: fused activation on CONCATENATION is not supported")
        self._same_quantization(sg, op, op.inputs + op.outputs, where)
        parts = [self._value(sg, values, i) for i in op.inputs]
        return [np.concatenate(parts, axis=op.options.axis)]

    def _op_split_v(self, sg, op, values, x, where):
        sizes = [int(s) for s in self._value(sg, values, op.inputs[1]).reshape(-1)]
        axis = int(np.asarray(self._value(sg, values, op.inputs[2])).reshape(()))
        axis %= x.ndim
        if sizes.count(-1) > 1:
            raise ModelError(f"{where}: more than one -1 in size_splits {sizes}")
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[axis] - sum(s for s in sizes if s != -1)
        if sum(sizes) != x.shape[axis] or min(sizes) < 0:
            raise ModelError(f"{where}: size_splits {sizes} do not add up to dimension {axis} of size {x.shape[axis]}")
        return np.split(x, np.cumsum(sizes)[:-1], axis=axis)

    def _op_strided_slice(self, sg, op, values, x, where):
        o = op.options
        if o.ellipsisMask or o.newAxisMask or o.offset:
            raise ModelError(f"{where}: ellipsis_mask, new_axis_mask and offset are not supported")
        begin, end, strides = (self._value(sg, values, i).astype(np.int64).reshape(-1) for i in op.inputs[1:4])
        slices = []
        for axis, dim in enumerate(x.shape):
            stride = int(strides[axis])
            if stride == 0:
                raise ModelError(f"{where}: stride 0 on axis {axis}")
            start = _start_for_axis(o.beginMask, begin, stride, dim, axis)
            if o.shrinkAxisMask >> axis & 1:
                if stride < 0:
                    raise ModelError(f"{where}: shrink_axis_mask on axis {axis} with a negative stride is not "
                                     f"supported")
                stop = start + 1
            else:
                stop = _stop_for_axis(o.endMask, end, stride, dim, axis)
            slices.append(slice(start, None if stop < 0 else stop, stride))
        out = x[tuple(slices)]
        return [out.reshape(sg.tensors[op.outputs[0]].shape)]

    def _op_logistic(self, sg, op, values, x, where):
        in_t, out_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        try:
            params = logistic_int8_params(in_t.quantization.scale[0], int(in_t.quantization.zero_point[0]),
                                          out_t.quantization.scale[0], int(out_t.quantization.zero_point[0]))
        except ValueError as exc:
            raise ModelError(f"{where}: {exc}") from exc
        return [logistic_int8(x, int(in_t.quantization.zero_point[0]), *params)]

    def _op_quantize(self, sg, op, values, x, where):
        in_t, out_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        if in_t.type not in ("INT8", "UINT8") or out_t.type not in ("INT8", "UINT8"):
            raise ModelError(f"{where}: QUANTIZE {in_t.type} -> {out_t.type} is not supported (int8/uint8 only)")
        if in_t.type == "UINT8" and out_t.type == "UINT8":
            raise ModelError(f"{where}: QUANTIZE uint8 -> uint8 is not supported by TFLM")
        return [requantize(x, in_t.quantization.scale[0], int(in_t.quantization.zero_point[0]),
                           out_t.quantization.scale[0], int(out_t.quantization.zero_point[0]), out_t.dtype)]


def requantize(x, input_scale, input_zero_point, output_scale, output_zero_point, out_dtype):
    """TFLM QUANTIZE between int8/uint8 tensors (``reference_ops::Requantize``).

    ``effective_scale = double(input_scale) / double(output_scale)`` through
    QuantizeMultiplier, then ``MultiplyByQuantizedMultiplier(x - zp_in) + zp_out``, clamped
    to the output type. (TFLM's fast path for a pure 128 offset gives the same values.)
    """
    multiplier, shift = quantize_multiplier(np.float64(np.float32(input_scale)) / np.float64(np.float32(output_scale)))
    info = np.iinfo(out_dtype)
    scaled = multiply_by_quantized_multiplier(np.asarray(x, np.int64) - input_zero_point, int(multiplier), int(shift))
    return np.clip(scaled.astype(np.int64) + output_zero_point, info.min, info.max).astype(out_dtype)


def _clamp_index(index, stride, dim):
    return min(max(index, 0), dim) if stride > 0 else min(max(index, -1), dim - 1)


def _start_for_axis(begin_mask, begin, stride, dim, axis):
    """TFLite strided_slice_logic ``StartForAxis``."""
    if begin_mask >> axis & 1:
        return 0 if stride > 0 else dim - 1
    start = int(begin[axis])
    if start < 0:
        start += dim
    return _clamp_index(start, stride, dim)


def _stop_for_axis(end_mask, end, stride, dim, axis):
    """TFLite strided_slice_logic ``StopForAxis`` (without shrink, handled by the caller)."""
    if end_mask >> axis & 1:
        return dim if stride > 0 else -1
    stop = int(end[axis])
    if stop < 0:
        stop += dim
    return _clamp_index(stop, stride, dim)


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
