"""Write the conformance vector pack: single-op models, inputs, expected outputs and integer parameters.

``write_pack(out_dir)`` generates every case (:func:`generate`), computes its outputs with
the golden model, runs it in the reference runtime (TFLite-Micro; LiteRT's BUILTIN_REF for
SPACE_TO_BATCH_ND, whose int8 padding TFLM leaves uninitialised) and refuses to write a
case on which the two differ. The layout (documented for readers without our code in the
pack's own README.md, :data:`PACK_README`)::

    manifest.json                       format, versions, counts, one record per case
    README.md                           the format
    cases/<OP>/<nnnn>/model.tflite      the single-op model
                      input<i>.npy      the model's runtime inputs, in order
                      const<i>.npy      the operator's constant inputs (weights, bias, ...), by operator input index
                      expected<j>.npy   the expected outputs (golden = the reference runtime)
                      <variant>.npy     MAC ops: output 0 under each requantization variant

Tags are computed from each case (its zero points, its Prepare parameters, its golden
accumulators), not declared by the generator, so a tag says what the case exercises.
"""

import dataclasses
import hashlib
import importlib.metadata
import json
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

from ...paths import SOURCE
from .. import variants
from ..fixedpoint import saturating_rounding_doubling_high_mul, wrap_int32_in_int64
from ..reference_ops import OP_TABLE
from ..spec import SPEC_OPS
from ..tflite.interpreter import MAC_OPS, Interpreter
from ..tflite.runtimes import run_litert_reference, run_tflm
from . import mac_cases, op_cases

__all__ = ["FORMAT", "FORMAT_VERSION", "PackError", "generate", "sha256", "write_pack"]

FORMAT = "int8-systolic-conformance"
# 2: the manifest carries a SHA-256 of every file ("checksums"), so a damaged pack is told from a wrong DUT
FORMAT_VERSION = 2
MAC_GENERATORS = {"FULLY_CONNECTED": "fully_connected", "CONV_2D": "conv_2d", "DEPTHWISE_CONV_2D": "depthwise_conv_2d"}
# op_cases descriptions of the directed cases (the rest draw shapes, scales and zero points at random)
DIRECTED_DESCRIPTIONS = ("adversarial", "all 256 inputs", "equal reals, different scales", "largest sum", "depth 1000")


class PackError(RuntimeError):
    """A case the golden model and the reference runtime disagree on, or a pack that cannot be read."""


@dataclasses.dataclass
class GeneratedCase:
    op: str
    description: str
    origin: str          # "random", "directed" or "discriminator"
    model: bytes
    inputs: list
    runtime: str = "tflm"


def generate(per_op=10, seed=1, ops=None):
    """Every case of the pack, op by op (``ops``: a subset of the golden op table's names)."""
    ops = sorted(OP_TABLE) if ops is None else list(ops)
    unknown = [op for op in ops if op not in OP_TABLE]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; the pack covers {', '.join(sorted(OP_TABLE))}")
    directed = mac_cases.directed_cases()
    discriminators = mac_cases.discriminator_cases()
    for op in ops:
        if op in MAC_GENERATORS:
            name = MAC_GENERATORS[op]
            groups = (("random", mac_cases.random_cases(name, per_op, [seed, sorted(OP_TABLE).index(op)])),
                      ("directed", [c for c in directed if c.op == name]),
                      ("discriminator", [c for c in discriminators if c.op == name]))
            for origin, cases in groups:
                for c in cases:
                    model, inputs = mac_cases.to_tflite(c)
                    yield GeneratedCase(op, c.label, origin, model, inputs)
        else:
            rng = np.random.default_rng([seed, sorted(OP_TABLE).index(op)])
            for c in op_cases.cases(op, rng, per_op):
                origin = "directed" if c.tag in DIRECTED_DESCRIPTIONS else "random"
                yield GeneratedCase(op, c.tag, origin, c.model, c.inputs, c.runtime)


def _jsonable(value):
    """Prepare's parameters as JSON values; None for what has no JSON form (precomputed plans)."""
    if isinstance(value, dict):
        out = {str(k): _jsonable(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, type):
        return np.dtype(value).name
    return None


def integer_params(interp):
    """The operator's Prepare parameters (what a hardware unit consumes), JSON-ready.

    For a MAC op: input_offset, output_multiplier, output_shift (per channel), output_offset,
    quantized_activation_min/max, rounding, plus the geometry. Tables Prepare builds for the
    golden model's speed (rescaled_tables, exp tables, the MAC plan) are left out: they are
    derived from the other parameters.
    """
    p = interp.params[0, 0]
    skip = {"plan", "rescaled_table", "rescaled_tables", "exp_table"}
    if "params" in p and "kind" in p:     # a MAC op: flatten the kernel parameters and the geometry
        out = {**p["params"], **p["geometry"]}
        channels = p["output_shape"][-1]       # one multiplier and shift per output channel, even per tensor
        for key in ("output_multiplier", "output_shift"):
            out[key] = np.broadcast_to(np.asarray(out[key], np.int64), (channels,))
        if "k" in p:
            out["k"] = p["k"]
        return _jsonable(out)
    return _jsonable({k: v for k, v in p.items() if k not in skip})


def _tensor_record(t):
    q = t.quantization
    return {"name": t.name, "type": t.type, "shape": list(t.shape),
            "scale": None if q is None else [float(s) for s in q.scale],
            "zero_point": None if q is None else [int(z) for z in q.zero_point],
            "quantized_dimension": None if q is None else int(q.axis)}


def _options(op):
    if op.options is None:
        return {}
    out = {}
    for k, v in vars(op.options).items():
        j = _jsonable(v)
        if j is not None:
            out[k] = j
    return out


def _tags(gc, interp, stages, variant_outputs):
    sg = interp.model.subgraphs[0]
    op = sg.operators[0]
    tags = [gc.origin]
    int8 = [sg.tensors[i] for i in (*op.inputs, *op.outputs)
            if i != -1 and sg.tensors[i].type == "INT8" and sg.tensors[i].quantization is not None]
    if any(int(z) in (-128, 127) for t in int8 for z in t.quantization.zero_point):
        tags.append("zero-point-extreme")
    if any(x.dtype == np.int8 and x.size == 256 and np.unique(x).size == 256 for x in gc.inputs):
        tags.append("every-int8-input")
    p = interp.params[0, 0]
    shifts = np.concatenate([np.ravel(v) for k, v in {**p, **p.get("params", {})}.items()
                             if k.startswith("output_shift") and np.ndim(v) <= 1 and np.size(v)] or [np.zeros(0)])
    if shifts.size and shifts.min() <= -20:
        tags.append("multiplier-below-2^-20")
    if shifts.size and shifts.max() > 0:
        tags.append("multiplier-above-1")
    if stages is not None:
        acc = np.asarray(stages.acc, np.int64)
        if acc.size and np.abs(acc).max() >= 2**30:
            tags.append("accumulator-near-int32-limit")
        if np.any(stages.offset != stages.scaled.astype(np.int64) + int(p["params"]["output_offset"])):
            tags.append("output-offset-wraps")
        tags += _tie_tags(acc, p["params"])
        lo, hi = p["params"]["quantized_activation_min"], p["params"]["quantized_activation_max"]
        if (lo, hi) != (-128, 127):
            tags.append("fused-activation")
    return tags


def _tie_tags(acc, params):
    """Which of the reference requantization's two roundings land on an exact .5 tie somewhere in the case."""
    if params["rounding"] != "double":
        return []
    mult = np.broadcast_to(np.asarray(params["output_multiplier"], np.int64), acc.shape[-1:])
    shift = np.broadcast_to(np.asarray(params["output_shift"], np.int64), acc.shape[-1:])
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    x = wrap_int32_in_int64(acc << left)
    prod = x * mult                                                  # < 2**62: exact in int64
    tags = ["tie-first-rounding"] if np.any((prod & (2**31 - 1)) == 2**30) else []
    high = saturating_rounding_doubling_high_mul(x, mult).astype(np.int64)
    half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), -1)
    if np.any((high & ((np.int64(1) << right) - 1)) == half):
        tags.append("tie-second-rounding")
    return tags


def _variant_outputs(interp, layer, stages):
    sg = interp.model.subgraphs[0]
    op = sg.operators[0]
    x_t, w_t, out_t = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]], sg.tensors[op.outputs[0]]
    p = layer.params
    return {v: variants.mac_output(layer.kind, stages.acc, v, input_scale=float(x_t.quantization.scale[0]),
                                   weight_scale=w_t.quantization.scale, output_scale=float(out_t.quantization.scale[0]),
                                   output_offset=p["output_offset"], act_min=p["quantized_activation_min"],
                                   act_max=p["quantized_activation_max"]).reshape(layer.output_shape)
            for v in variants.VARIANTS}


def golden_case(model, inputs, name="case"):
    """(interpreter, outputs, MAC stages or None, variant outputs or None) of a single-op model."""
    interp = Interpreter(model, name)
    op = interp.model.subgraphs[0].operators[0]
    if op.op not in MAC_OPS:
        return interp, interp.invoke(inputs), None, None
    gen = interp.steps(inputs)
    layer = next(gen)
    stages = layer.golden(return_stages=True)
    out = stages.output.reshape(layer.output_shape).astype(np.int8)
    try:
        gen.send(out)
    except StopIteration as stop:
        outputs = stop.value
    return interp, outputs, stages, _variant_outputs(interp, layer, stages)


def _versions():
    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    root = SOURCE
    try:
        commit = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except OSError:
        commit = None
    return {"int8-systolic": version("int8-systolic"), "git": commit, "numpy": version("numpy"),
            "tflite-micro": version("tflite_micro"), "ai-edge-litert": version("ai-edge-litert"),
            "python": sys.version.split()[0]}


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _save(path, array):
    # np.ascontiguousarray would make a 0-d array (a scalar output: ARG_MAX of a vector) 1-d
    array = np.asarray(array)
    np.save(path, array if array.flags.c_contiguous else array.copy(order="C"), allow_pickle=False)
    return path.name


def write_pack(out_dir, *, per_op=10, seed=1, ops=None, progress=True):
    """Generate, check against the reference runtime and write the pack; returns the manifest dict.

    Raises :class:`PackError` (naming the case and the first differing element) if golden
    and the reference runtime disagree on any case; nothing is left half-written then.
    """
    out = pathlib.Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "cases").mkdir(parents=True)
    records, counts, t0 = [], {}, time.monotonic()
    for gc in generate(per_op, seed, ops):
        n = counts.get(gc.op, 0)
        counts[gc.op] = n + 1
        case_id = f"{gc.op}/{n:04d}"
        interp, outputs, stages, variant_outputs = golden_case(gc.model, gc.inputs, case_id)
        if gc.runtime == "tflm":
            theirs, against = run_tflm(gc.model, gc.inputs, num_outputs=len(outputs)), "tflite-micro"
        else:
            theirs, against = run_litert_reference(gc.model, gc.inputs), "litert-builtin-ref"
        for j, (got, want) in enumerate(zip(outputs, theirs, strict=True)):
            want = np.asarray(want).reshape(got.shape)
            if got.dtype != want.dtype or not np.array_equal(got, want):
                bad = np.flatnonzero(got.ravel() != want.ravel())
                first = bad[0] if bad.size else "-"
                raise PackError(f"{case_id} ({gc.description}) output {j}: golden and {against} differ "
                                f"({bad.size} of {got.size} elements; first at flat index {first})")
        d = tmp / "cases" / case_id
        d.mkdir(parents=True)
        (d / "model.tflite").write_bytes(gc.model)
        sg = interp.model.subgraphs[0]
        op = sg.operators[0]
        rel = f"cases/{case_id}/"
        rec = {"id": case_id, "op": gc.op, "in_spec_table": gc.op in SPEC_OPS, "description": gc.description,
               "tags": _tags(gc, interp, stages, variant_outputs), "model": rel + "model.tflite",
               "checked_against": against, "options": _options(op), "params": integer_params(interp),
               "inputs": [], "constants": [], "outputs": []}
        for i, (ti, x) in enumerate(zip(sg.inputs, gc.inputs, strict=True)):
            rec["inputs"].append({"file": rel + _save(d / f"input{i}.npy", x), "operator_input": op.inputs.index(ti),
                                  **_tensor_record(sg.tensors[ti])})
        for k, ti in enumerate(op.inputs):
            if ti != -1 and sg.tensors[ti].data is not None:
                rec["constants"].append({"file": rel + _save(d / f"const{k}.npy", sg.tensors[ti].data),
                                         "operator_input": k, **_tensor_record(sg.tensors[ti])})
        for j, (ti, y) in enumerate(zip(sg.outputs, outputs, strict=True)):
            rec["outputs"].append({"file": rel + _save(d / f"expected{j}.npy", y), **_tensor_record(sg.tensors[ti])})
        if variant_outputs is not None:
            rec["variants"] = {v: rel + _save(d / f"{v}.npy", y) for v, y in variant_outputs.items()}
        records.append(rec)
        if progress and len(records) % 25 == 0:
            print(f"[conformance] {len(records)} cases written and checked against the reference runtime, "
                  f"now {gc.op} ({time.monotonic() - t0:.0f} s)", flush=True)
    if not records:
        raise PackError("no cases were generated (an empty --ops selection?)")
    (tmp / "README.md").write_text(PACK_README.format(version=FORMAT_VERSION, cases=len(records), ops=len(counts)))
    checksums = {f.relative_to(tmp).as_posix(): sha256(f) for f in sorted(tmp.rglob("*")) if f.is_file()}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "generator": _versions(),
                "settings": {"per_op": per_op, "seed": seed},
                "variants": list(variants.VARIANTS), "counts": counts,
                "tag_counts": _tag_counts(records), "checksums": checksums, "cases": records}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return manifest


def _tag_counts(records):
    counts = {}
    for r in records:
        for t in r["tags"]:
            counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items()))


PACK_README = """\
# int8 conformance vector pack (format version {version})

{cases} cases over {ops} TFLite int8 operators. Every expected output was computed by the
int8-systolic golden model and checked, while the pack was written, to be identical to the
reference runtime named in the case's `checked_against` (TFLite-Micro's reference kernels;
LiteRT's BUILTIN_REF resolver for SPACE_TO_BATCH_ND). Nothing here needs our code to read.

## Files
- `manifest.json`: `format`, `format_version`, `generator` (versions of the tools that wrote
  and checked it), `settings`, `variants`, `counts` (cases per op), `tag_counts`,
  `checksums` (the SHA-256 of every other file of the pack, by its path in the pack: check
  them before blaming a design for a wrong output), and `cases`, one record per case:
  - `id` (`OP/nnnn`, also its directory), `op`, `in_spec_table`, `description`, `tags`;
  - `model`: a single-operator `.tflite` file (TFLite flatbuffer schema);
  - `inputs`: the model's runtime inputs in order; `constants`: the operator's constant
    inputs (weights, bias, shapes, paddings...), each with `operator_input` (its position in
    the operator's input list); `outputs`: the expected outputs. Each entry gives `file`,
    `name`, `type`, `shape`, `scale`, `zero_point` (lists: one value, or one per channel
    along `quantized_dimension`);
  - `options`: the operator's builtin options (field names of the TFLite schema);
  - `params`: the integer parameters the operator's Prepare derives from the scales, the
    values a hardware unit consumes. MAC ops (FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D):
    `input_offset` (= -input zero point), `output_multiplier` and `output_shift` (one per
    output channel, TFLite's QuantizeMultiplier: the real multiplier is
    `output_multiplier * 2^(output_shift - 31)`), `output_offset`, `quantized_activation_min`
    and `_max`, `rounding`, and the geometry (stride, dilation, padding, depth_multiplier, k);
  - `variants` (MAC ops only): output 0 of the case under each requantization arithmetic
    that real runtimes implement (the manifest's `variants` list; `double` is TFLite's
    reference and equals `expected0.npy`). They differ only on exact rounding ties.
- `*.npy`: NumPy's array format (a short text header with dtype, shape and order, then the
  raw little-endian data), readable in C, MATLAB, Julia or any NumPy.

## Tags
`random`, `directed` or `discriminator` (how the case was made); computed from the data:
`zero-point-extreme` (a zero point of -128 or 127), `every-int8-input` (an input holds all 256
values), `multiplier-below-2^-20`, `multiplier-above-1` (an output shift <= -20, > 0),
`accumulator-near-int32-limit` (|accumulator| >= 2^30), `output-offset-wraps`,
`fused-activation` (clamp narrower than int8), `tie-first-rounding` / `tie-second-rounding`
(a MAC output where SaturatingRoundingDoublingHighMul / RoundingDivideByPOT rounds an
exact .5). `discriminator` cases put many requantized values on exact ties, inside the range
every runtime's arithmetic was measured on: the variants disagree on each of them, so they
tell which arithmetic a design implements.

## Using it
Feed each case's inputs (and constants and params, as your design needs them) to the design,
compare every output element with `expected<j>.npy`. `int8-systolic conformance run`
(int8-systolic) does that for any Python callable and reports which variant a design matches.
"""
