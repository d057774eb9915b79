"""Write single-op int8 ``.tflite`` models with flatbuffers and TFLite's schema (no TensorFlow).

The schema module is the one ``ai-edge-litert`` ships (``ai_edge_litert.schema_py_generated``);
its object API (``ModelT``, ``TensorT``...) packs straight into a flatbuffer. The models
carry exactly the quantization the golden model takes (float32 scales, int zero points,
per-axis weight scales), so a runtime and the golden model see the same numbers.
"""

import numpy as np

from int8_systolic.golden._checks import ACTIVATIONS, choice

try:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema
except ImportError as exc:  # pragma: no cover - only without the dev extra
    raise ImportError("golden.tflite needs the dev extra (flatbuffers, ai-edge-litert): "
                      "run `make install`") from exc

__all__ = [
    "ModelBuilder",
    "TensorSpec",
    "add_model",
    "conv_2d_model",
    "depthwise_conv_2d_model",
    "fully_connected_model",
    "op_options",
    "pool_2d_model",
    "schema",
    "single_op_model",
]

_ACTIVATION_CODES = {
    "NONE": schema.ActivationFunctionType.NONE,
    "RELU": schema.ActivationFunctionType.RELU,
    "RELU6": schema.ActivationFunctionType.RELU6,
    "RELU_N1_TO_1": schema.ActivationFunctionType.RELU_N1_TO_1,
}
_PADDING_CODES = {"SAME": schema.Padding.SAME, "VALID": schema.Padding.VALID}
_TENSOR_TYPES = {np.dtype(np.int8): schema.TensorType.INT8, np.dtype(np.int32): schema.TensorType.INT32,
                 np.dtype(np.uint8): schema.TensorType.UINT8, np.dtype(np.float32): schema.TensorType.FLOAT32,
                 np.dtype(np.int64): schema.TensorType.INT64, np.dtype(np.bool_): schema.TensorType.BOOL}


def _activation(activation):
    return _ACTIVATION_CODES[choice("activation", activation, ACTIVATIONS)]


class ModelBuilder:
    """Accumulates tensors, buffers and operators of one subgraph, then packs a model.

    >>> mb = ModelBuilder()
    >>> x = mb.tensor("x", (1, 4), np.int8, scale=0.5, zero_point=0)
    """

    def __init__(self):
        self.buffers = [schema.BufferT()]  # buffer 0: the empty sentinel
        self.tensors = []
        self.operators = []
        self.opcodes = []

    def tensor(self, name, shape, dtype, *, scale=None, zero_point=None, quantized_dimension=0, data=None):
        """Add a tensor; ``data`` (a constant) gets its own buffer. Returns the tensor index."""
        t = schema.TensorT()
        t.name = name
        t.shape = [int(d) for d in shape]
        t.type = _TENSOR_TYPES[np.dtype(dtype)]
        t.buffer = 0
        if data is not None:
            buf = schema.BufferT()
            buf.data = np.frombuffer(np.ascontiguousarray(data, dtype=dtype).tobytes(), dtype=np.uint8)
            self.buffers.append(buf)
            t.buffer = len(self.buffers) - 1
        if scale is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(np.asarray(scale, dtype=np.float32))]
            zps = np.atleast_1d(np.asarray(zero_point if zero_point is not None else 0, dtype=np.int64))
            q.zeroPoint = [int(z) for z in np.broadcast_to(zps, (len(q.scale),))]
            q.quantizedDimension = quantized_dimension
            t.quantization = q
        self.tensors.append(t)
        return len(self.tensors) - 1

    def operator(self, builtin_code, inputs, outputs, options_type=0, options=None, version=1):
        """Add an operator with builtin options; ``-1`` in ``inputs`` marks an omitted optional input."""
        key = (builtin_code, version)
        if key not in self.opcodes:
            self.opcodes.append(key)
        op = schema.OperatorT()
        op.opcodeIndex = self.opcodes.index(key)
        op.inputs = list(inputs)
        op.outputs = list(outputs)
        op.builtinOptionsType = options_type
        op.builtinOptions = options
        self.operators.append(op)

    def finish(self, inputs, outputs, description="int8-systolic golden cross-check"):
        """Pack into ``.tflite`` bytes (file identifier TFL3, schema version 3)."""
        sg = schema.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.operators
        sg.inputs, sg.outputs = list(inputs), list(outputs)
        sg.name = "main"
        model = schema.ModelT()
        model.version = 3
        model.description = description
        model.subgraphs = [sg]
        model.buffers = self.buffers
        codes = []
        for code, version in self.opcodes:
            oc = schema.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES)
            oc.version = version
            codes.append(oc)
        model.operatorCodes = codes
        fb = flatbuffers.Builder(1024)
        fb.Finish(model.Pack(fb), file_identifier=b"TFL3")
        return bytes(fb.Output())


def _bias_tensor(mb, bias, scales):
    if bias is None:
        return -1
    bias = np.asarray(bias, dtype=np.int32)
    return mb.tensor("bias", bias.shape, np.int32, scale=scales, zero_point=0, data=bias)


def fully_connected_model(weights, bias, *, batch, input_scale, input_zero_point, weight_scale, output_scale,
                          output_zero_point, activation="NONE"):
    """FULLY_CONNECTED [batch, K] x [N, K]; scalar weight_scale = per tensor, else per channel."""
    n, k = weights.shape
    mb = ModelBuilder()
    ws = np.asarray(weight_scale, dtype=np.float32)
    x = mb.tensor("input", (batch, k), np.int8, scale=input_scale, zero_point=input_zero_point)
    w = mb.tensor("weights", (n, k), np.int8, scale=ws, zero_point=0, quantized_dimension=0, data=weights)
    b = _bias_tensor(mb, bias, np.float32(input_scale) * ws.astype(np.float64))
    y = mb.tensor("output", (batch, n), np.int8, scale=output_scale, zero_point=output_zero_point)
    opts = schema.FullyConnectedOptionsT()
    opts.fusedActivationFunction = _activation(activation)
    mb.operator(schema.BuiltinOperator.FULLY_CONNECTED, [x, w, b], [y],
                schema.BuiltinOptions.FullyConnectedOptions, opts)
    return mb.finish([x], [y])


def _conv_like_model(weights, bias, channel_axis, *, input_shape, output_shape, input_scale, input_zero_point,
                     weight_scale, output_scale, output_zero_point):
    """Builder with input, per-channel weights (along ``channel_axis``), bias and output tensors."""
    cout = weights.shape[channel_axis]
    ws = np.broadcast_to(np.asarray(weight_scale, dtype=np.float32), (cout,))
    mb = ModelBuilder()
    x = mb.tensor("input", input_shape, np.int8, scale=input_scale, zero_point=input_zero_point)
    w = mb.tensor("weights", weights.shape, np.int8, scale=ws, zero_point=0, quantized_dimension=channel_axis,
                  data=weights)
    b = _bias_tensor(mb, bias, np.float32(input_scale) * ws.astype(np.float64))
    y = mb.tensor("output", output_shape, np.int8, scale=output_scale, zero_point=output_zero_point)
    return mb, [x, w, b], [y]


def _spatial_options(opts, stride, dilation, padding, activation):
    opts.padding = _PADDING_CODES[padding]
    opts.strideH, opts.strideW = stride
    opts.dilationHFactor, opts.dilationWFactor = dilation
    opts.fusedActivationFunction = _activation(activation)
    return opts


def conv_2d_model(weights, bias, *, stride=(1, 1), dilation=(1, 1), padding="SAME", activation="NONE", **quant):
    """CONV_2D, NHWC input, OHWI weights quantized per output channel (axis 0).

    ``quant``: input_shape, output_shape, input_scale, input_zero_point, weight_scale,
    output_scale, output_zero_point.
    """
    mb, inputs, outputs = _conv_like_model(weights, bias, 0, **quant)
    opts = _spatial_options(schema.Conv2DOptionsT(), stride, dilation, padding, activation)
    mb.operator(schema.BuiltinOperator.CONV_2D, inputs, outputs, schema.BuiltinOptions.Conv2DOptions, opts)
    return mb.finish(inputs[:1], outputs)


def depthwise_conv_2d_model(weights, bias, *, stride=(1, 1), dilation=(1, 1), padding="SAME", depth_multiplier=1,
                            activation="NONE", **quant):
    """DEPTHWISE_CONV_2D, weights [1, KH, KW, C*m] quantized per output channel (axis 3)."""
    mb, inputs, outputs = _conv_like_model(weights, bias, 3, **quant)
    opts = _spatial_options(schema.DepthwiseConv2DOptionsT(), stride, dilation, padding, activation)
    opts.depthMultiplier = depth_multiplier
    mb.operator(schema.BuiltinOperator.DEPTHWISE_CONV_2D, inputs, outputs,
                schema.BuiltinOptions.DepthwiseConv2DOptions, opts, version=3)
    return mb.finish(inputs[:1], outputs)


def add_model(*, shape1, shape2, out_shape, input1_scale, input1_zero_point, input2_scale, input2_zero_point,
              output_scale, output_zero_point, activation="NONE"):
    """ADD of two int8 inputs (broadcasting allowed)."""
    mb = ModelBuilder()
    a = mb.tensor("input1", shape1, np.int8, scale=input1_scale, zero_point=input1_zero_point)
    b = mb.tensor("input2", shape2, np.int8, scale=input2_scale, zero_point=input2_zero_point)
    y = mb.tensor("output", out_shape, np.int8, scale=output_scale, zero_point=output_zero_point)
    opts = schema.AddOptionsT()
    opts.fusedActivationFunction = _activation(activation)
    mb.operator(schema.BuiltinOperator.ADD, [a, b], [y], schema.BuiltinOptions.AddOptions, opts, version=2)
    return mb.finish([a, b], [y])


def pool_2d_model(kind, *, input_shape, output_shape, filter_size, stride, padding, scale, zero_point,
                  activation="NONE"):
    """AVERAGE_POOL_2D or MAX_POOL_2D (``kind`` "average" or "max"); input and output share quantization."""
    code = {"average": schema.BuiltinOperator.AVERAGE_POOL_2D, "max": schema.BuiltinOperator.MAX_POOL_2D}[kind]
    mb = ModelBuilder()
    x = mb.tensor("input", input_shape, np.int8, scale=scale, zero_point=zero_point)
    y = mb.tensor("output", output_shape, np.int8, scale=scale, zero_point=zero_point)
    opts = schema.Pool2DOptionsT()
    opts.padding = _PADDING_CODES[padding]
    opts.strideH, opts.strideW = stride
    opts.filterHeight, opts.filterWidth = filter_size
    opts.fusedActivationFunction = _activation(activation)
    mb.operator(code, [x], [y], schema.BuiltinOptions.Pool2DOptions, opts, version=2)
    return mb.finish([x], [y])


class TensorSpec:
    """One tensor of :func:`single_op_model`: shape, dtype, optional (scale, zero point) and constant data."""

    def __init__(self, shape, dtype=np.int8, scale=None, zero_point=None, data=None, quantized_dimension=0):
        self.shape, self.dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        self.scale, self.zero_point, self.data = scale, zero_point, data
        self.quantized_dimension = quantized_dimension

    def __repr__(self):
        q = "" if self.scale is None else f" q({self.scale}, {self.zero_point})"
        return f"{self.dtype.name}{list(self.shape)}{q}{' const' if self.data is not None else ''}"


def op_options(name, **fields):
    """(BuiltinOptions code, options object) for ``name`` ("Softmax" -> SoftmaxOptions) with ``fields`` set."""
    obj = getattr(schema, f"{name}OptionsT")()
    for key, value in fields.items():
        if not hasattr(obj, key):
            raise AttributeError(f"{name}Options has no field {key!r}")
        setattr(obj, key, value)
    return getattr(schema.BuiltinOptions, f"{name}Options"), obj


def single_op_model(op, inputs, outputs, options=None, version=1):
    """A model of one operator ``op`` (a BuiltinOperator name); ``inputs``/``outputs`` are TensorSpecs.

    Inputs without constant data become the model's inputs, in order; ``None`` in ``inputs``
    marks an omitted optional input. ``options`` is a pair from :func:`op_options`.
    """
    mb = ModelBuilder()
    ins = [-1 if t is None else mb.tensor(f"input{i}", t.shape, t.dtype, scale=t.scale, zero_point=t.zero_point,
                                           quantized_dimension=t.quantized_dimension, data=t.data)
           for i, t in enumerate(inputs)]
    outs = [mb.tensor(f"output{i}", t.shape, t.dtype, scale=t.scale, zero_point=t.zero_point)
            for i, t in enumerate(outputs)]
    options_type, options_obj = options if options is not None else (0, None)
    mb.operator(getattr(schema.BuiltinOperator, op), ins, outs, options_type, options_obj, version)
    graph_inputs = [i for i, t in zip(ins, inputs, strict=True) if t is not None and t.data is None]
    return mb.finish(graph_inputs, outs, description=f"int8-systolic single {op}")
