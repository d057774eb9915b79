"""Run a design under test on a conformance pack: what matches, what does not, and which arithmetic it is.

    result = run("build/conformance/pack", dut)

``dut`` is any callable taking a :class:`DutCase` (op, inputs, constants, integer params,
options, tensor quantization, the model file) and returning the case's outputs (one
array or a list, in the model's output order). The harness compares every element with the
pack's expected outputs (``expect``: ``double``, TFLite's reference, or another variant for
the MAC ops), and for each MAC case records which requantization variants the outputs
equal. :class:`Result` holds per-case outcomes; :mod:`.report` renders them.
"""

import dataclasses
import json
import pathlib
import time

import numpy as np

from ..variants import VARIANTS
from .pack import FORMAT, FORMAT_VERSION, PackError, golden_case

__all__ = ["CaseResult", "DutCase", "Pack", "Result", "load_pack", "run", "select"]


@dataclasses.dataclass
class DutCase:
    """What a design under test receives for one case (not the expected outputs)."""

    id: str
    op: str
    tags: list
    description: str
    inputs: list            # runtime inputs of the model, in order (numpy arrays)
    constants: dict         # operator input index -> constant array (weights, bias, ...)
    params: dict            # the integer parameters of the op's Prepare (see the pack's README)
    options: dict           # the operator's builtin options
    tensors: dict           # "inputs", "constants", "outputs": name, type, shape, scale, zero_point records
    model_path: pathlib.Path


@dataclasses.dataclass
class PackCase:
    record: dict
    root: pathlib.Path

    @property
    def id(self):
        return self.record["id"]

    @property
    def op(self):
        return self.record["op"]

    def _load(self, entry):
        return np.load(self.root / entry["file"], allow_pickle=False)

    def dut_case(self):
        r = self.record
        return DutCase(r["id"], r["op"], list(r["tags"]), r["description"], [self._load(e) for e in r["inputs"]],
                       {e["operator_input"]: self._load(e) for e in r["constants"]}, r["params"], r["options"],
                       {k: r[k] for k in ("inputs", "constants", "outputs")}, self.root / r["model"])

    def expected(self, variant="double"):
        """Expected outputs; for a MAC case and another variant, output 0 replaced by that variant's."""
        outs = [self._load(e) for e in self.record["outputs"]]
        if variant != "double" and "variants" in self.record:
            outs[0] = np.load(self.root / self.record["variants"][variant], allow_pickle=False)
        return outs

    def variant_outputs(self):
        return {v: np.load(self.root / f, allow_pickle=False) for v, f in self.record.get("variants", {}).items()}


@dataclasses.dataclass
class Pack:
    root: pathlib.Path
    manifest: dict

    @property
    def cases(self):
        return [PackCase(r, self.root) for r in self.manifest["cases"]]


def load_pack(path):
    """A pack written by :func:`golden.conformance.pack.write_pack` (its directory or manifest.json)."""
    path = pathlib.Path(path)
    root = path.parent if path.name == "manifest.json" else path
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except FileNotFoundError:
        raise PackError(f"{root}: no manifest.json (write a pack with `make conformance`)") from None
    except json.JSONDecodeError as exc:
        raise PackError(f"{root / 'manifest.json'}: not valid JSON ({exc})") from None
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise PackError(f"{root}: format {manifest.get('format')!r} version {manifest.get('format_version')!r}; "
                        f"this harness reads {FORMAT!r} version {FORMAT_VERSION}")
    return Pack(root, manifest)


@dataclasses.dataclass
class CaseResult:
    id: str
    op: str
    tags: list
    description: str
    status: str                      # "match", "mismatch" or "error"
    detail: str = ""                 # the first mismatching element (with golden stages), or the error
    elements: int = 0
    wrong_elements: int = 0
    variants: list | None = None     # MAC cases: the variants whose output 0 the DUT's equals


@dataclasses.dataclass
class Result:
    dut: str
    expect: str
    pack: dict                       # the pack's format, version, generator
    cases: list
    seconds: float

    @property
    def passed(self):
        return all(c.status == "match" for c in self.cases)

    def by(self, key):
        """{op or tag: [cases, matched]}."""
        out = {}
        for c in self.cases:
            for k in ([c.op] if key == "op" else c.tags):
                row = out.setdefault(k, [0, 0])
                row[0] += 1
                row[1] += c.status == "match"
        return dict(sorted(out.items()))

    def variant_table(self):
        """{op: {variant: matched discriminator cases}, "_n": {op: discriminator cases}} over MAC cases."""
        table, n = {}, {}
        for c in self.cases:
            if c.variants is None or "discriminator" not in c.tags:
                continue
            n[c.op] = n.get(c.op, 0) + 1
            row = table.setdefault(c.op, dict.fromkeys(VARIANTS, 0))
            for v in c.variants:
                row[v] += 1
        return table, n

    def matching_variants(self):
        """{op: the variants the DUT matched on every discriminator case of that op} (the verdict per op)."""
        table, n = self.variant_table()
        return {op: [v for v in VARIANTS if table[op][v] == n[op]] for op in sorted(n)}

    def verdict(self):
        """The variants matched on every discriminator case of every op (empty: none, or mixed per op)."""
        per_op = self.matching_variants()
        return [v for v in VARIANTS if per_op and all(v in vs for vs in per_op.values())]

    def to_json(self):
        table, n = self.variant_table()
        return {"dut": self.dut, "expect": self.expect, "pack": self.pack, "passed": self.passed,
                "seconds": round(self.seconds, 2), "by_op": self.by("op"), "by_tag": self.by("tag"),
                "variants": {"discriminator_cases": n, "matched": table, "per_op": self.matching_variants(),
                             "verdict": self.verdict()},
                "cases": [dataclasses.asdict(c) for c in self.cases]}


def _stages_text(pc, index):
    """Golden's intermediate values at one output element of a MAC case (or the inputs of an element-wise op)."""
    dc = pc.dut_case()
    model = dc.model_path.read_bytes()
    _, _, stages, _ = golden_case(model, dc.inputs, pc.id)
    if stages is not None:
        flat = int(np.ravel_multi_index(index, pc.expected()[0].shape))
        return f"golden stages {stages.at(np.unravel_index(flat, stages.output.shape))}"
    same = [x for x in dc.inputs if np.shape(x) == pc.expected()[0].shape]
    return f"inputs there {[x[index].item() for x in same]}" if same else ""


def _compare(pc, got, want, expect):
    """(status, detail, elements, wrong) for one case's outputs."""
    if len(got) != len(want):
        return "mismatch", f"the DUT returned {len(got)} outputs, the case has {len(want)}", 0, 0
    elements = wrong = 0
    detail = ""
    for j, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g)
        elements += w.size
        if g.shape != w.shape and g.size == w.size:
            g = g.reshape(w.shape)        # a flat or differently-shaped buffer of the right size is fine
        if g.shape != w.shape:
            return "mismatch", f"output {j}: the DUT returned shape {list(g.shape)}, expected {list(w.shape)}", \
                elements, w.size
        # compared by value: a DUT may return int8 in a wider integer type
        bad = np.argwhere(g.astype(np.float64) != w.astype(np.float64)) if w.dtype.kind == "f" else \
            np.argwhere(g.astype(np.int64) != w.astype(np.int64))
        if bad.size:
            wrong += len(bad)
            if not detail:
                idx = tuple(int(i) for i in bad[0])
                stages = _stages_text(pc, idx) if j == 0 else ""
                detail = (f"output {j}: {len(bad)} of {w.size} elements differ; first at {list(idx)}: DUT "
                          f"{g[idx].item()}, expected ({expect}) {w[idx].item()}" + (f"; {stages}" if stages else ""))
    return ("mismatch" if wrong else "match"), detail, elements, wrong


def select(pack, ops=None, tags=None):
    """The pack's cases of ``ops`` (all if None) that carry any of ``tags`` (all if None)."""
    cases = pack.cases
    for what, wanted, have in (("ops", ops, {c.op for c in cases}),
                                ("tags", tags, {t for c in cases for t in c.record["tags"]})):
        unknown = sorted(set(wanted or ()) - have)
        if unknown:
            raise ValueError(f"the pack has no cases with {what} {', '.join(unknown)} "
                             f"(it has {', '.join(sorted(have))})")
    return [c for c in cases if (ops is None or c.op in ops) and (tags is None or set(tags) & set(c.record["tags"]))]


def run(pack, dut, *, expect="double", ops=None, tags=None, name=None, progress=True):
    """Run ``dut`` on every case of ``pack`` (a path or :class:`Pack`) -> :class:`Result`.

    ``expect``: the variant whose outputs count as correct for the MAC ops (``double``, TFLite's
    reference, unless the design is meant to implement another); ``ops``, ``tags``: a subset
    of the cases (:func:`select`).
    A DUT that raises on a case gets that case reported as an error with the exception's text.
    """
    if expect not in VARIANTS:
        raise ValueError(f"expect must be one of {', '.join(VARIANTS)}, got {expect!r}")
    pack = pack if isinstance(pack, Pack) else load_pack(pack)
    cases = select(pack, ops, tags)
    results, t0 = [], time.monotonic()
    for i, pc in enumerate(cases):
        r = pc.record
        try:
            got = dut(pc.dut_case())
        except Exception as exc:  # any failure of the DUT is a reported result, not a crash
            results.append(CaseResult(pc.id, pc.op, r["tags"], r["description"], "error",
                                      f"{type(exc).__name__}: {exc}"))
            continue
        got = [got] if isinstance(got, np.ndarray) else list(got)
        status, detail, elements, wrong = _compare(pc, got, pc.expected(expect), expect)
        matched = None
        if "variants" in r and got:
            g0 = np.asarray(got[0])
            matched = [v for v, y in pc.variant_outputs().items()
                       if g0.size == y.size and np.array_equal(g0.reshape(y.shape).astype(np.int64), y)]
        results.append(CaseResult(pc.id, pc.op, r["tags"], r["description"], status, detail, elements, wrong,
                                  matched))
        if progress and (i + 1) % 100 == 0:
            bad = sum(c.status != "match" for c in results)
            print(f"[conformance] {i + 1}/{len(cases)} cases, {bad} not matching ({time.monotonic() - t0:.0f} s)",
                  flush=True)
    head = {k: pack.manifest.get(k) for k in ("format", "format_version", "generator", "settings")}
    return Result(name or getattr(dut, "name", None) or getattr(dut, "__name__", "dut"), expect, head, results,
                  time.monotonic() - t0)
