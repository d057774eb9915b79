"""Check a .tflite model against every clause of the TFLite int8 quantization spec's op table.

    int8-systolic check MODEL.tflite [--format text|markdown|json]

For every operator of the model and every tensor the spec's op table constrains, each clause
is reported PASS, FAIL or n/a, with the operator, tensor, clause and the offending value.
Clauses that TFLite-Micro does not enforce (it runs the model anyway, computing something
the spec does not define) are still reported, marked "TFLM tolerates". A summary per op
and per clause follows. Exit status: 0 when every clause holds, 1 when any fails, 2 when
the file cannot be read (the loader's message).

The clauses (the spec's op table, docs/spec-table.md):

==========================  ==============================================================
clause                      what is checked
==========================  ==============================================================
known operator              the opcode is a TFLite builtin (or a named CUSTOM op, n/a)
operands                    an op of the table has its input 0 and an output
data type                   activations int8, weights int8, bias int32
scale value                 every scale of an activation, weights or bias is positive and finite
weights present             a MAC op (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED) has weights
activation per tensor       an activation tensor carries one scale and one zero point
zero point range            activation zero points in [-128, 127]
weights value range         every weight in [-127, 127] (the constant buffer is scanned)
weights zero point          every weight zero point is 0
weights granularity         CONV_2D per axis on dim 0, DEPTHWISE_CONV_2D on dim 3,
                            FULLY_CONNECTED per tensor; one scale per output channel
bias zero point             every bias zero point is 0
bias scale                  bias scale = input_scale * weight_scale[c] per channel, up to
                            float32 rounding (relative 1e-6); a model that only meets TFLite's
                            runtime tolerance ``|in*w - bias| / out_scale <= 0.02`` fails it,
                            marked "TFLM tolerates"
bias granularity            per axis where the weights are, per tensor where they are not
fixed output                LOGISTIC and SOFTMAX (1/256, -128), TANH and L2_NORMALIZATION
                            (1/128, 0), LOG_SOFTMAX (16/256, 127)
same quantization           "input and outputs must all have same scale/zero_point"
==========================  ==============================================================

Ops outside the table (DEQUANTIZE, STRIDED_SLICE, the resource-variable ops...) and a
QUANTIZE between types (float32 or uint8 to int8 or back, at a model's edges; the table's
QUANTIZE is int8 requantization) are n/a.

Warnings (status WARN, exit status unchanged) name what the spec allows and TFLM runs but
another runtime refuses: a CONV_2D or DEPTHWISE_CONV_2D without a bias tensor (LiteRT's
CONV_2D refuses it and its optimized DEPTHWISE_CONV_2D crashes on it; docs/runtimes.md).
"""

import dataclasses
import json

import numpy as np

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.golden.spec import FIXED_OUTPUT, MAC_OPS, NO_INT8_OUTPUT, SAME_QUANTIZATION, SPEC_OPS, TWO_INPUTS
from int8_systolic.golden.tflite.model import load_model

__all__ = ["CLAUSES", "Finding", "check_model", "main"]

CLAUSES = ("known operator", "operands", "data type", "scale value", "weights present", "activation per tensor",
           "zero point range", "weights value range", "weights zero point", "weights granularity", "bias zero point",
           "bias scale", "bias granularity", "fixed output", "same quantization")

# TFLM checks these clauses (it refuses the model); a failure of any other clause it tolerates
TFLM_CHECKS_SAME = ("AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION")
TFLM_CHECKS_FIXED = ("LOGISTIC", "SOFTMAX", "LOG_SOFTMAX")
# TFLM picks these ops' kernel by one tensor's type and reads the others as that type, unchecked (measured)
TFLM_KERNEL_TYPE_FROM = {"ADD": "output 0", "SUB": "output 0", "MUL": "input 0"}
BIAS_TOLERANCE = 0.02   # TFLite's GetQuantizedConvolutionMultipler: |in*w - bias| / out_scale
# The spec's bias scale is the product itself; a float32 product rounds to within 2**-24 of it, so this
# relative bound allows a few float32 rounding steps and nothing a converter would do on purpose.
BIAS_SCALE_RTOL = 1e-6


@dataclasses.dataclass
class Finding:
    subgraph: int
    operator: int
    op: str
    role: str           # "input 0", "weights", "bias", "output 0", or "" for the operator as a whole
    tensor: str
    clause: str
    status: str         # "PASS", "FAIL", "WARN" or "n/a"
    detail: str = ""
    tflm_tolerates: bool = False

    def where(self):
        t = f", {self.role} '{self.tensor}'" if self.role else ""
        return f"subgraph {self.subgraph}, operator {self.operator} ({self.op}){t}"


class _Checker:
    def __init__(self, model, si, op):
        self.model, self.si, self.op = model, si, op
        self.tensors = model.subgraphs[si].tensors
        self.findings = []

    def add(self, role, t, clause, ok, detail="", tolerated=False):
        self.findings.append(Finding(self.si, self.op.index, self.op.op, role, t.name if t is not None else "", clause,
                                     "PASS" if ok else "FAIL", "" if ok else detail, tolerated and not ok))

    def tensor(self, i):
        return None if i == -1 else self.tensors[i]

    def activation(self, role, t):
        decider = TFLM_KERNEL_TYPE_FROM.get(self.op.op)
        self.add(role, t, "data type", t.type == "INT8", f"{t.type}, the spec requires int8",
                 tolerated=decider not in (None, role) and self.roles.get(decider) == "INT8")
        q = t.quantization
        if q is None:
            self.add(role, t, "activation per tensor", False, "no quantization parameters")
            return
        self.scale_value(role, t)
        self.add(role, t, "activation per tensor", q.scale.size == 1,
                 f"{q.scale.size} scales (quantized on axis {q.axis})", tolerated=True)
        bad = [int(z) for z in q.zero_point if not -128 <= z <= 127]
        self.add(role, t, "zero point range", not bad, f"zero point {bad[0] if bad else ''} outside [-128, 127]",
                 tolerated=True)

    def scale_value(self, role, t, tolerated=False):
        scale = t.quantization.scale
        bad = scale[~(np.isfinite(scale) & (scale > 0))]
        self.add(role, t, "scale value", bad.size == 0,
                 f"scale {float(bad[0]) if bad.size else ''!r}; a scale must be positive and finite", tolerated)

    def run(self):
        op, name = self.op, self.op.op
        if name.startswith("unknown builtin"):
            self.findings.append(Finding(self.si, op.index, name, "", "", "known operator", "FAIL",
                                         f"{name} is not a TFLite builtin operator"))
            return self.findings
        inputs = [self.tensor(i) for i in op.inputs]
        outputs = [self.tensors[i] for i in op.outputs]     # the loader refuses an output index of -1
        if name in SPEC_OPS and (not inputs or inputs[0] is None or not outputs):
            self.findings.append(Finding(self.si, op.index, name, "", "", "operands", "FAIL",
                                         f"{name} has {len(inputs)} inputs (input 0 "
                                         f"{'omitted' if inputs else 'absent'}) and {len(outputs)} outputs"))
            return self.findings
        edge = name == "QUANTIZE" and {inputs[0].type, outputs[0].type} != {"INT8"}
        if name not in SPEC_OPS or edge:
            why = ("a QUANTIZE between types (the table's QUANTIZE is int8 requantization)" if edge
                   else "not in the spec's op table")
            self.findings.append(Finding(self.si, op.index, name, "", "", "(all)", "n/a", why))
            return self.findings
        self.roles = {f"input {i}": t.type for i, t in enumerate(inputs) if t is not None}
        self.roles.update({f"output {i}": t.type for i, t in enumerate(outputs)})
        act_inputs = [0, 1] if name in TWO_INPUTS else list(range(len(inputs))) if name == "CONCATENATION" else [0]
        for i in act_inputs:
            if i < len(inputs) and inputs[i] is not None:
                self.activation(f"input {i}", inputs[i])
        if name not in NO_INT8_OUTPUT:
            self.activation("output 0", outputs[0])
        if name in MAC_OPS:
            self.mac(inputs, outputs[0])
        if name in FIXED_OUTPUT:
            self.fixed_output(outputs[0])
        if name in SAME_QUANTIZATION:
            self.same_quantization(inputs, outputs, act_inputs)
        return self.findings

    def mac(self, inputs, out):
        name = self.op.op
        w = inputs[1] if len(inputs) > 1 else None
        b = inputs[2] if len(inputs) > 2 else None
        if w is None:
            self.findings.append(Finding(self.si, self.op.index, name, "", "", "weights present", "FAIL",
                                         f"{name} has no weights tensor (input 1)"))
            return
        self.add("weights", w, "data type", w.type == "INT8", f"{w.type}, the spec requires int8 weights")
        if w.data is not None and w.type == "INT8":
            low = int(w.data.min()) if w.data.size else 0
            self.add("weights", w, "weights value range", low >= -127, f"holds {low} (the spec's range is [-127, 127])",
                     tolerated=True)
        q = w.quantization
        if q is None:
            self.add("weights", w, "weights granularity", False, "no quantization parameters")
            return
        # TFLM aborts on an activation's impossible scale, but folds the weights' and bias's into multipliers
        # without a check, except where it compares the bias scale with the product (per-tensor FULLY_CONNECTED)
        self.scale_value("weights", w, tolerated=not self._bias_scale_checked(w, b))
        nonzero = [int(z) for z in q.zero_point if z != 0]
        self.add("weights", w, "weights zero point", not nonzero,
                 f"zero point {nonzero[0] if nonzero else ''} (TFLM's int8 kernels ignore it)", tolerated=True)
        axis = MAC_OPS[name]
        channels = w.shape[axis] if axis is not None and len(w.shape) > axis else (w.shape[0] if w.shape else 1)
        if axis is None:
            ok = q.scale.size == 1
            detail = f"{q.scale.size} scales; the spec quantizes FULLY_CONNECTED weights per tensor"
        else:
            ok = (q.scale.size == channels and q.axis == axis) or (q.scale.size == 1 and channels == 1)
            detail = (f"{q.scale.size} scale(s) on axis {q.axis}; the spec quantizes {name} weights per axis on "
                      f"dim {axis}, one scale for each of the {channels} channels")
        count_ok = q.scale.size in (1, channels)
        # TFLM's DEPTHWISE_CONV_2D checks the quantized dimension; CONV_2D and FULLY_CONNECTED only the count
        checks_axis = name == "DEPTHWISE_CONV_2D" and q.scale.size > 1
        self.add("weights", w, "weights granularity", ok, detail, tolerated=count_ok and not checks_axis)
        if b is not None:
            self.bias(inputs[0], w, b, out, axis, channels)
        elif name != "FULLY_CONNECTED":
            self.findings.append(Finding(self.si, self.op.index, name, "", "", "bias present", "WARN",
                                         f"{name} without a bias tensor: TFLM runs it, but LiteRT's CONV_2D refuses "
                                         f"it and its optimized DEPTHWISE_CONV_2D crashes on it"))

    def _bias_scale_checked(self, w, b):
        return self.op.op == "FULLY_CONNECTED" and b is not None and w.quantization.scale.size == 1

    def bias(self, x, w, b, out, axis, channels):
        # TFLM's int8 kernels also take an int64 bias (their int16 path's type) and read it as such
        self.add("bias", b, "data type", b.type == "INT32", f"{b.type}, the spec requires int32 bias",
                 tolerated=b.type == "INT64")
        q = b.quantization
        if q is None or x.quantization is None or out.quantization is None:
            self.add("bias", b, "bias scale", False, "no quantization parameters")
            return
        self.scale_value("bias", b, tolerated=not self._bias_scale_checked(w, b))
        nonzero = [int(z) for z in q.zero_point if z != 0]
        self.add("bias", b, "bias zero point", not nonzero, f"zero point {nonzero[0] if nonzero else ''}",
                 tolerated=True)
        per_axis_weights = w.quantization.scale.size > 1
        self.add("bias", b, "bias granularity", (q.scale.size > 1) == per_axis_weights or channels == 1,
                 f"{q.scale.size} scale(s) for weights with {w.quantization.scale.size}", tolerated=True)
        w_scale = np.broadcast_to(w.quantization.scale.astype(np.float64), (channels,)) \
            if w.quantization.scale.size in (1, channels) else None
        b_scale = np.broadcast_to(q.scale.astype(np.float64), (channels,)) if q.scale.size in (1, channels) else None
        if w_scale is None or b_scale is None:
            self.add("bias", b, "bias scale", False, f"{q.scale.size} bias scales for {channels} channels")
            return
        product = float(x.quantization.scale[0]) * w_scale
        with np.errstate(all="ignore"):
            relative = np.abs(product - b_scale) / product
            runtime = np.abs(product - b_scale) / float(out.quantization.scale[0])
        relative = np.where(np.isfinite(relative), relative, np.inf)
        c = int(np.argmax(relative))
        # TFLM checks its looser runtime tolerance, and for per-tensor FULLY_CONNECTED only
        checked = self.op.op == "FULLY_CONNECTED" and not per_axis_weights
        self.add("bias", b, "bias scale", float(relative[c]) <= BIAS_SCALE_RTOL,
                 f"channel {c}: bias scale {b_scale[c]:.8g}, input_scale * weight_scale = {product[c]:.8g} "
                 f"(relative difference {relative[c]:.3g} > {BIAS_SCALE_RTOL}; |difference| / output scale = "
                 f"{runtime[c]:.3g}, TFLite's runtime bound is {BIAS_TOLERANCE})",
                 tolerated=not checked or bool(np.all(runtime <= BIAS_TOLERANCE)))

    def fixed_output(self, out):
        scale, zp = FIXED_OUTPUT[self.op.op]
        q = out.quantization
        got = (float(q.scale[0]), int(q.zero_point[0])) if q is not None else None
        ok = got is not None and got[0] == float(np.float32(scale)) and got[1] == zp
        self.add("output 0", out, "fixed output", ok,
                 f"quantized {got}; the spec fixes {self.op.op}'s output at ({scale:.8g}, {zp})",
                 tolerated=self.op.op not in TFLM_CHECKS_FIXED)

    def same_quantization(self, inputs, outputs, act_inputs):
        tensors = [(f"input {i}", inputs[i]) for i in act_inputs if i < len(inputs) and inputs[i] is not None]
        if self.op.op in ("MAXIMUM", "MINIMUM") and len(inputs) > 1:
            tensors.append(("input 1", inputs[1]))
        tensors += [(f"output {i}", t) for i, t in enumerate(outputs)]
        tensors = [(r, t) for r, t in tensors if t.quantization is not None and t.type == "INT8"]
        if len(tensors) < 2:
            return
        ref_role, ref = tensors[0]
        ref_q = (float(ref.quantization.scale[0]), int(ref.quantization.zero_point[0]))
        for role, t in tensors[1:]:
            q = (float(t.quantization.scale[0]), int(t.quantization.zero_point[0]))
            self.add(role, t, "same quantization", q == ref_q,
                     f"(scale {q[0]:.8g}, zero point {q[1]}) but {ref_role} '{ref.name}' has "
                     f"(scale {ref_q[0]:.8g}, zero point {ref_q[1]})", tolerated=self.op.op not in TFLM_CHECKS_SAME)


def check_model(source, name=None):
    """All findings for a model (a path or bytes); raises ModelError if it cannot be read."""
    model = load_model(source, name)
    findings = []
    for sg in model.subgraphs:
        for op in sg.operators:
            findings += _Checker(model, sg.index, op).run()
    return model, findings


def _summary(findings):
    per_clause = {c: [0, 0] for c in CLAUSES}
    per_op = {}
    for f in findings:
        if f.status == "WARN":
            continue
        if f.status == "n/a":
            per_op.setdefault(f.op, [0, 0, 0])[2] += 1
            continue
        idx = 0 if f.status == "PASS" else 1
        per_clause[f.clause][idx] += 1
        per_op.setdefault(f.op, [0, 0, 0])[idx] += 1
    return per_clause, per_op


def render(model, findings, fmt):
    failures = [f for f in findings if f.status == "FAIL"]
    per_clause, per_op = _summary(findings)
    if fmt == "json":
        return json.dumps({"model": model.path, "passed": not failures,
                           "warnings": sum(f.status == "WARN" for f in findings),
                           "findings": [dataclasses.asdict(f) for f in findings],
                           "per_clause": {c: {"pass": p, "fail": f} for c, (p, f) in per_clause.items()},
                           "per_op": {o: {"pass": p, "fail": f, "not_applicable": n}
                                      for o, (p, f, n) in sorted(per_op.items())}}, indent=2)
    md = fmt == "markdown"
    lines = [f"# Spec check of {model.path}" if md else f"spec check of {model.path}", ""]
    verdict = "every clause holds" if not failures else f"{len(failures)} clause(s) FAIL"
    lines += [f"**{verdict}**" if md else verdict, ""]
    if failures:
        lines += ["| where | clause | problem |", "|---|---|---|"] if md else ["failures:"]
        for f in failures:
            note = " (TFLM tolerates)" if f.tflm_tolerates else ""
            lines.append(f"| {f.where()} | {f.clause}{note} | {f.detail} |" if md
                         else f"  FAIL {f.where()}: {f.clause}{note}: {f.detail}")
        lines.append("")
    warnings = [f for f in findings if f.status == "WARN"]
    if warnings:
        lines += ["| where | warning |", "|---|---|"] if md else ["warnings:"]
        lines += [f"| {f.where()} | {f.detail} |" if md else f"  WARN {f.where()}: {f.detail}" for f in warnings]
        lines.append("")
    lines += ["| clause | pass | fail |", "|---|---:|---:|"] if md else [f"{'clause':<24} {'pass':>6} {'fail':>6}"]
    for c, (p, f) in per_clause.items():
        lines.append(f"| {c} | {p} | {f} |" if md else f"{c:<24} {p:>6} {f:>6}")
    lines.append("")
    lines += ["| op | pass | fail | n/a |", "|---|---:|---:|---:|"] if md else \
        [f"{'op':<24} {'pass':>6} {'fail':>6} {'n/a':>6}"]
    for o, (p, f, n) in sorted(per_op.items()):
        lines.append(f"| {o} | {p} | {f} | {n} |" if md else f"{o:<24} {p:>6} {f:>6} {n:>6}")
    return "\n".join(lines)


@command()
def main(argv=None, prog="int8-systolic check"):
    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .tflite file")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    args = parser.parse_args(argv)
    model, findings = check_model(args.model)
    print(render(model, findings, args.format))
    return 1 if any(f.status == "FAIL" for f in findings) else 0


if __name__ == "__main__":
    raise SystemExit(main())
