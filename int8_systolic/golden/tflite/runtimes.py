"""Run ``.tflite`` bytes in the real runtimes that compute TFLite's reference arithmetic.

* :func:`run_tflm`: TFLite-Micro's Python interpreter (package ``tflite-micro``), whose
  kernels are the reference kernels: the yardstick for every op.
* :func:`run_litert_reference`: LiteRT (``ai-edge-litert``) with
  ``OpResolverType.BUILTIN_REF``. Its CONV_2D and DEPTHWISE_CONV_2D are the reference
  kernels; its FULLY_CONNECTED rounds ``acc * scale`` in float64 instead, so only use
  it for conv and depthwise (see docs/runtimes.md).

Never compare against a default ``Interpreter()``: XNNPACK and ruy round ties differently.
"""

import numpy as np

__all__ = ["TflmModel", "run_litert_reference", "run_tflm", "tflm_arena_size", "tflm_verdict"]


def _contiguous(x):
    """``x`` as a C-contiguous array; unlike np.ascontiguousarray, a 0-d array stays 0-d."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")


def tflm_arena_size(model_bytes, inputs):
    """A tensor arena large enough for a single-op model: model + inputs, doubled, plus slack."""
    return 2 * (len(model_bytes) + sum(np.asarray(x).nbytes for x in inputs)) + 256 * 1024


def run_tflm(model_bytes, inputs, *, num_outputs=1):
    """Invoke ``model_bytes`` once in TFLite-Micro and return its first ``num_outputs`` outputs."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(model_bytes, arena_size=tflm_arena_size(model_bytes, inputs))
    for i, x in enumerate(inputs):
        interp.set_input(_contiguous(x), i)
    interp.invoke()
    return [np.array(interp.get_output(i)) for i in range(num_outputs)]


_VERDICT_SCRIPT = r"""
import sys
import numpy as np
from tflite_micro.python.tflite_micro import runtime
raw = sys.stdin.buffer.read()
try:
    interp = runtime.Interpreter.from_bytes(raw, arena_size=64 << 20)
except Exception as exc:
    print("refused", " ".join(str(exc).split())); sys.exit(0)
try:
    for i in range(256):
        try:
            d = interp.get_input_details(i)
        except Exception:
            break
        interp.set_input(np.zeros(d["shape"], d["dtype"]), i)
    interp.invoke()
except Exception as exc:
    print("refused", " ".join(str(exc).split())); sys.exit(0)
print("ran")
"""


def tflm_verdict(model_bytes, timeout=120):
    """What TFLite-Micro does with ``model_bytes`` (invoked once on zero inputs), in a subprocess since TFLM aborts
    the process on some malformed models: ``("ran", "")``, ``("refused", its message)`` (an exception from
    loading, allocating or invoking), or ``("aborted", the signal or exit status and its stderr's last line)``."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _VERDICT_SCRIPT], input=bytes(model_bytes), capture_output=True,
                          timeout=timeout)
    out = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode == 0 and out and out[-1].split(" ", 1)[0] in ("ran", "refused"):
        verdict, _, message = out[-1].partition(" ")
        return verdict, message
    tail = proc.stderr.decode(errors="replace").strip().splitlines()
    return "aborted", f"exit status {proc.returncode}: {tail[-1] if tail else ''}"


def run_litert_reference(model_bytes, inputs):
    """Invoke ``model_bytes`` once in LiteRT with the reference op resolver; returns the outputs."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(model_content=model_bytes,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    for detail, x in zip(interp.get_input_details(), inputs, strict=True):
        interp.set_tensor(detail["index"], _contiguous(x))
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]


class TflmModel:
    """A TFLM interpreter that keeps every tensor (``kPreserveAllTensors``) across streaming invokes."""

    def __init__(self, model_bytes, arena_size=4 << 20):
        from tflite_micro.python.tflite_micro import runtime

        self._interp = runtime.Interpreter.from_bytes(
            model_bytes, arena_size=arena_size, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)

    def invoke(self, inputs):
        for i, x in enumerate(inputs):
            self._interp.set_input(_contiguous(x), i)
        self._interp.invoke()

    def tensor(self, index, subgraph=0):
        """Contents of a tensor after the last invoke."""
        return np.array(self._interp.GetTensor(index, subgraph)["tensor_data"])
