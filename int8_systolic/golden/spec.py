"""The TFLite int8 quantization spec's op table, written once as data.

The checker (:mod:`golden.check`) and the interpreter's Prepare side (:mod:`golden.reference_ops`)
read their facts from here, and ``docs/spec-table.md`` is generated from it
(``python -m int8_systolic.golden.spec``; tests/test_check.py checks the page is current).

The spec (TensorFlow Lite's "8-bit quantization specification") gives, for each op, each int8 tensor's
range and granularity, a few fixed output quantizations and a "same scale and zero point" restriction.
Common to every op: activations are int8 in [-128, 127] with one scale and zero point per tensor (zero
point in [-128, 127]); weights are int8 in [-127, 127] with zero point 0; a bias is int32 with zero
point 0 and scale ``input_scale * weight_scale`` (per output channel where the weights are per axis).
"""

import pathlib
from dataclasses import dataclass

from int8_systolic.cli_support import ArgumentParser, command

__all__ = ["FIXED_OUTPUT", "MAC_OPS", "NO_INT8_OUTPUT", "OPS", "SAME_QUANTIZATION", "SPEC_OPS", "TWO_INPUTS", "OpSpec",
           "TensorSpec", "markdown"]

INT8 = "int8 [-128, 127]"
WEIGHT = "int8 [-127, 127]"
INT32 = "int32 [int32_min, int32_max]"


@dataclass(frozen=True)
class TensorSpec:
    role: str            # "input 0", "weights", "bias", "output 0", "inputs ..."
    range: str           # data type and value range
    granularity: str     # "per tensor", "per axis (dim 0)"
    restriction: str = ""


@dataclass(frozen=True)
class OpSpec:
    name: str
    tensors: tuple
    # the (scale, zero point) the spec fixes for the int8 output, or None
    fixed_output: tuple | None = None
    # "input and outputs must all have same scale/zero_point"
    same_quantization: bool = False
    # (MAC ops) the weights' channel axis, None for per-tensor weights
    weight_axis: int | None = None

    @property
    def mac(self):
        return any(t.role == "weights" for t in self.tensors)


def _act(role):
    return TensorSpec(role, INT8, "per tensor")


def _unary(name, **kw):
    return OpSpec(name, (_act("input 0"), _act("output 0")), **kw)


def _same(name):
    return _unary(name, same_quantization=True)


def _binary(name):
    return OpSpec(name, (_act("input 0"), _act("input 1"), _act("output 0")))


def _compare(name):  # a bool output: only the inputs are int8
    return OpSpec(name, (_act("input 0"), _act("input 1")))


def _mac(name, axis):
    granularity = "per tensor" if axis is None else f"per axis (dim {axis})"
    return OpSpec(name, (
        _act("input 0"),
        TensorSpec("weights", WEIGHT, granularity, "zero point 0"),
        TensorSpec("bias", INT32, granularity, "scale = input 0 scale * weight scale (per channel), zero point 0"),
        _act("output 0")), weight_axis=axis)


def _fixed(name, numerator, denominator, zero_point):
    restriction = f"scale {numerator}/{denominator}, zero point {zero_point}"
    return OpSpec(name, (_act("input 0"), TensorSpec("output 0", INT8, "per tensor", restriction)),
                  fixed_output=(numerator / denominator, zero_point))


# In the spec's order.
OPS = (
    _binary("ADD"),
    _same("AVERAGE_POOL_2D"),
    OpSpec("CONCATENATION", (_act("inputs ..."), _act("output 0")), same_quantization=True),
    _mac("CONV_2D", 0),
    _mac("DEPTHWISE_CONV_2D", 3),
    _mac("FULLY_CONNECTED", None),
    _fixed("L2_NORMALIZATION", 1, 128, 0),
    _fixed("LOGISTIC", 1, 256, -128),
    _same("MAX_POOL_2D"),
    _binary("MUL"),
    _same("RESHAPE"),
    _same("RESIZE_BILINEAR"),
    _fixed("SOFTMAX", 1, 256, -128),
    _same("SPACE_TO_DEPTH"),
    _fixed("TANH", 1, 128, 0),
    _same("PAD"),
    _same("GATHER"),
    _same("BATCH_TO_SPACE_ND"),
    _same("SPACE_TO_BATCH_ND"),
    _same("TRANSPOSE"),
    _unary("MEAN"),
    _binary("SUB"),
    _unary("SUM"),
    _same("SQUEEZE"),
    _fixed("LOG_SOFTMAX", 16, 256, 127),
    _same("MAXIMUM"),
    OpSpec("ARG_MAX", (_act("input 0"),)),
    _same("MINIMUM"),
    _compare("LESS"),
    _same("PADV2"),
    _compare("GREATER"),
    _compare("GREATER_EQUAL"),
    _compare("LESS_EQUAL"),
    _same("SLICE"),
    _compare("EQUAL"),
    _compare("NOT_EQUAL"),
    OpSpec("SHAPE", (_act("input 0"),)),
    _unary("QUANTIZE"),  # int8 to int8 requantization
)

SPEC_OPS = tuple(op.name for op in OPS)
# op -> the (scale, zero point) the spec fixes for its int8 output
FIXED_OUTPUT = {op.name: op.fixed_output for op in OPS if op.fixed_output}
# ops whose "input and outputs must all have same scale/zero_point"
SAME_QUANTIZATION = tuple(op.name for op in OPS if op.same_quantization)
# op -> its weights' channel axis (None: per tensor), for the MAC ops
MAC_OPS = {op.name: op.weight_axis for op in OPS if op.mac}
# ops with two int8 inputs, and ops without an int8 output (comparisons, ARG_MAX, SHAPE)
TWO_INPUTS = tuple(op.name for op in OPS if any(t.role == "input 1" for t in op.tensors))
NO_INT8_OUTPUT = tuple(op.name for op in OPS if not any(t.role.startswith("output") for t in op.tensors))


def markdown():
    """``docs/spec-table.md``: the op table, one row per tensor."""
    lines = [
        "# The int8 quantization spec's op table", "",
        "Generated from `int8_systolic/golden/spec.py` by `python -m int8_systolic.golden.spec`; do not edit by "
        "hand. The checker "
        "(`golden.check`, docs/conformance.md) enforces every clause below; the interpreter's Prepare "
        "side refuses what TFLite-Micro refuses.", "",
        "Common to every op: an int8 activation holds one scale and one zero point per tensor, the zero point "
        "in [-128, 127]. Weights are int8 in [-127, 127] with zero point 0. A bias is int32 with zero point 0 "
        "and scale input scale times weight scale, per output channel where the weights are per axis. With "
        "zero-point-0 weights, sum((q_a - z_a) q_w) = sum(q_a q_w) - z_a sum(q_w): the second term is constant "
        "per output channel and is folded into the bias ahead of time (arXiv:1712.05877, section 2.3).", "",
        f"{len(OPS)} ops.", "",
        "| op | tensor | type and range | granularity | tensor restriction | op restriction |",
        "|---|---|---|---|---|---|"]
    for op in OPS:
        op_rule = "input and outputs share one scale and zero point" if op.same_quantization else ""
        for i, t in enumerate(op.tensors):
            lines.append(f"| {op.name if i == 0 else ''} | {t.role} | {t.range} | {t.granularity} | "
                         f"{t.restriction} | {op_rule if i == 0 else ''} |")
    return "\n".join(lines) + "\n"


@command("python -m int8_systolic.golden.spec")
def main(argv=None):
    parser = ArgumentParser(description="Write docs/spec-table.md from int8_systolic/golden/spec.py")
    parser.add_argument("--markdown", default="docs/spec-table.md")
    args = parser.parse_args(argv)
    path = pathlib.Path(args.markdown)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown())
    print(path)


if __name__ == "__main__":
    raise SystemExit(main())
