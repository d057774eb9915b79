"""What every op module shares: the :class:`Op` table entry, the :class:`OpContext` its Prepare
reads, and the checks of the spec's quantization clauses.

An op is two functions, as in TFLite-Micro's kernels:

* ``prepare(ctx) -> params``: runs once per model, before any inference. It reads the
  tensors' types, shapes and quantization and the op's options from ``ctx``, refuses what
  TFLM would refuse (or what the spec forbids and the kernel depends on) with
  ``ctx.fail(...)``, and returns the op's integer parameters: the values of TFLM's
  ``OpData`` (multipliers, shifts, offsets, activation bounds), i.e. what a hardware unit's
  registers would hold. Params are plain dicts of Python ints and small arrays.
* ``eval(params, inputs) -> list of outputs``: the integer kernel on numpy arrays; ``inputs``
  holds every input of the operator (constants included, ``None`` for an omitted optional
  input).
"""

import dataclasses

import numpy as np

from .._checks import INT8_MAX, INT8_MIN
from ..quantization import activation_range
from ..spec import FIXED_OUTPUT

__all__ = ["ACTIVATION_NAMES", "Op", "OpContext"]

# schema ActivationFunctionType / Padding values, so the kernels need no flatbuffers import.
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
PADDING_NAMES = {0: "SAME", 1: "VALID"}


@dataclasses.dataclass(frozen=True)
class Op:
    """One row of the dispatch table: Prepare, Eval, and whether the op runs on the MAC array."""

    prepare: object
    eval: object
    mac: bool = False
    # element-wise on one int8 input and nothing else: the interpreter may tabulate eval over all 256 inputs
    unary: bool = False


class OpContext:
    """An operator as Prepare sees it: tensors (metadata and constant data), options, location.

    ``inputs``/``outputs`` are :class:`golden.tflite.model.Tensor` objects (``None`` for an
    omitted optional input); ``error`` is the exception class raised by :meth:`fail`;
    ``rounding`` the MAC layers' requantization (``double`` or ``single``).
    """

    def __init__(self, op, index, options, inputs, outputs, where, error=ValueError, rounding="double"):
        self.op, self.index, self.options = op, index, options
        self.inputs, self.outputs, self.where, self.error = inputs, outputs, where, error
        self.rounding = rounding

    def fail(self, message):
        raise self.error(f"{self.where}: {message}")

    def option(self, name, default=None):
        return default if self.options is None else getattr(self.options, name, default)

    def tensor(self, i, *, output=False, types=None, what=None):
        """Input (or output) ``i``, checked to exist and to have one of ``types``."""
        tensors = self.outputs if output else self.inputs
        what = what or f"{'output' if output else 'input'} {i}"
        if i >= len(tensors) or tensors[i] is None:
            self.fail(f"{what} is missing ({len(tensors)} {'outputs' if output else 'inputs'})")
        t = tensors[i]
        if types is not None and t.type not in types:
            self.fail(f"{what} '{t.name}' is {t.type}; {self.op} supports {' or '.join(types)} here")
        return t

    def const(self, i, what=None):
        """The constant data of input ``i`` (its shape must be known before any inference)."""
        t = self.tensor(i, what=what)
        if t.data is None:
            self.fail(f"{what or f'input {i}'} '{t.name}' must be a constant tensor")
        return t.data

    def quant(self, t, what=None):
        """(float32 scale, int zero point) of a per-tensor quantized int8 tensor."""
        what = what or "tensor"
        q = t.quantization
        if q is None:
            self.fail(f"{what} '{t.name}' ({t.describe()}) has no quantization parameters; int8 tensors need a "
                      f"scale and a zero point")
        if q.scale.size != 1:
            self.fail(f"{what} '{t.name}' is quantized per axis ({q.scale.size} scales); the spec requires "
                      f"activations per tensor")
        scale, zp = np.float32(q.scale[0]), int(q.zero_point[0])
        if not (np.isfinite(scale) and scale > 0):
            self.fail(f"{what} '{t.name}' has scale {float(scale)!r}; scales must be positive and finite")
        lo, hi = (INT8_MIN, INT8_MAX) if t.type == "INT8" else (0, 255) if t.type == "UINT8" else (-2**31, 2**31 - 1)
        if not lo <= zp <= hi:
            self.fail(f"{what} '{t.name}' has zero point {zp}, outside [{lo}, {hi}]")
        return scale, zp

    def int8_in_out(self, n_inputs=1):
        """The first ``n_inputs`` inputs and output 0, each int8, with their (scale, zero point)."""
        ins = [self.tensor(i, types=("INT8",)) for i in range(n_inputs)]
        out = self.tensor(0, output=True, types=("INT8",))
        return ([self.quant(t, f"input {i}") for i, t in enumerate(ins)], self.quant(out, "output"))

    def same_quantization(self, tensor_indices=None, outputs=True, clause=None):
        """The spec's "Input and outputs must all have same scale/zero_point" (TFLM copies raw values)."""
        ins = [(f"input {i}", self.inputs[i]) for i in (tensor_indices if tensor_indices is not None
                                                        else range(len(self.inputs)))]
        outs = [(f"output {i}", t) for i, t in enumerate(self.outputs)] if outputs else []
        pairs = [(w, t) for w, t in ins + outs if t is not None and t.quantization is not None]
        if not pairs:
            return None
        ref_what, ref = pairs[0]
        ref_q = (float(ref.quantization.scale[0]), int(ref.quantization.zero_point[0]))
        for what, t in pairs[1:]:
            q = (float(t.quantization.scale[0]), int(t.quantization.zero_point[0]))
            if q != ref_q:
                self.fail(f"{what} '{t.name}' is quantized (scale {q[0]:.8g}, zero point {q[1]}) but {ref_what} "
                          f"'{ref.name}' (scale {ref_q[0]:.8g}, zero point {ref_q[1]}): "
                          f"{clause or 'the spec requires inputs and outputs to have the same scale/zero_point'}")
        return ref_q

    def fixed_output(self):
        """The spec's fixed output quantization of LOGISTIC, SOFTMAX, TANH, L2_NORMALIZATION, LOG_SOFTMAX."""
        scale, zero_point = FIXED_OUTPUT[self.op]
        out = self.tensor(0, output=True, types=("INT8",))
        s, zp = self.quant(out, "output")
        if float(s) != float(np.float32(scale)) or zp != zero_point:
            self.fail(f"output '{out.name}' is quantized (scale {float(s):.8g}, zero point {zp}); the spec fixes "
                      f"{self.op}'s int8 output at (scale {scale:.8g}, zero point {zero_point}) and TFLM's kernel "
                      f"writes that format")
        return s, zp

    def fused_activation(self, scale, zero_point, allowed=("NONE", "RELU", "RELU6", "RELU_N1_TO_1")):
        """(quantized_activation_min, quantized_activation_max) of the fused activation option."""
        code = self.option("fusedActivationFunction", 0)
        name = ACTIVATION_NAMES.get(code, f"code {code}")
        if name not in allowed:
            self.fail(f"fused activation {name} is not supported by TFLM's int8 {self.op} "
                      f"(supported: {', '.join(allowed)})")
        return activation_range(name, scale, zero_point)

    def padding(self):
        """The Padding option's name (SAME or VALID); an unknown code is refused."""
        code = self.option("padding", 0)
        if code not in PADDING_NAMES:
            self.fail(f"padding code {code!r} is neither SAME (0) nor VALID (1) [rule geometry]")
        return PADDING_NAMES[code]

    def pair(self, what, height, width):
        """A (height, width) pair of options, each an integer >= 1 (stride, dilation, filter size)."""
        pair = (self.option(height), self.option(width))
        for name, value in zip((height, width), pair, strict=True):
            if not isinstance(value, int) or value < 1:
                self.fail(f"{what} option {name} is {value!r}; it must be an integer >= 1 [rule geometry]")
        return pair

    def output_shape(self, shape, i=0):
        """Refuse an output tensor whose declared shape is not the one the op computes."""
        out = self.tensor(i, output=True)
        if tuple(out.shape) != tuple(shape):
            self.fail(f"computes output {i} as {list(shape)}, but tensor '{out.name}' is declared "
                      f"{list(out.shape)} [rule output-shape]")

    def output_count(self, n):
        if len(self.outputs) != n:
            self.fail(f"has {len(self.outputs)} outputs; {self.op} has {n} [rule output-shape]")

    def axis(self, axis, rank, what="axis"):
        """A possibly negative axis, normalised to [0, rank)."""
        axis = int(axis)
        if not -rank <= axis < rank:
            self.fail(f"{what} {axis} is out of range for a tensor of rank {rank}")
        return axis % rank


def int32_data(ctx, i, what):
    """A constant int32/int64 input as a flat int64 array (axis, shape, paddings...)."""
    t = ctx.tensor(i, types=("INT32", "INT64"), what=what)
    if t.data is None:
        return None
    return np.asarray(t.data, np.int64).reshape(-1)
