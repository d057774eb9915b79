"""Run a design under test on a conformance pack: what matches, what does not, and which arithmetic it is.

    result = run("build/conformance/pack", dut)

``dut`` is any callable taking a :class:`DutCase` (op, inputs, constants, integer params,
options, tensor quantization, the model file) and returning the case's outputs (one
array or a list, in the model's output order; integer outputs in any integer type, float
outputs as floats). A DUT that raises, or returns None, a scalar or an array of the wrong
kind, gets that case reported as an error; the run goes on. The pack is checked before any
case runs (manifest structure, format version, every file's SHA-256), so a damaged pack is
a :class:`~.pack.PackError` naming the file, never a DUT's mismatch. The harness compares
every element with the pack's expected outputs (``expect``: ``double``, TFLite's reference,
or another variant for the MAC ops), and for each MAC case records which requantization
variants the outputs equal. :class:`Result` holds per-case outcomes; :mod:`.report` renders them.
"""

import dataclasses
import functools
import json
import pathlib
import time

import numpy as np

from ..variants import VARIANTS
from .pack import FORMAT, FORMAT_VERSION, PackError, golden_case, sha256

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
    # arrays already read (and checked against the manifest) by file: load_pack reads each once, run reuses it
    _arrays: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def id(self):
        return self.record["id"]

    @property
    def op(self):
        return self.record["op"]

    def _load(self, entry, rel=None):
        rel = entry["file"] if rel is None else rel
        if rel not in self._arrays:
            array = _load_npy(self.root, rel, entry)
            array.flags.writeable = False    # shared by every use of the case: a DUT cannot change the pack
            self._arrays[rel] = array
        return self._arrays[rel]

    def dut_case(self):
        r = self.record
        return DutCase(r["id"], r["op"], list(r["tags"]), r["description"], [self._load(e) for e in r["inputs"]],
                       {e["operator_input"]: self._load(e) for e in r["constants"]}, r["params"], r["options"],
                       {k: r[k] for k in ("inputs", "constants", "outputs")}, self.root / r["model"])

    def expected(self, variant="double"):
        """Expected outputs; for a MAC case and another variant, output 0 replaced by that variant's."""
        outs = [self._load(e) for e in self.record["outputs"]]
        if variant != "double" and "variants" in self.record:
            if variant not in self.record["variants"]:
                raise PackError(f"{self.root / 'manifest.json'}: case {self.id!r} has no {variant!r} variant output")
            outs[0] = self._load(self.record["outputs"][0], self.record["variants"][variant])
        return outs

    def variant_outputs(self):
        out0 = self.record["outputs"][0]
        return {v: self._load(out0, f) for v, f in self.record.get("variants", {}).items()}


@dataclasses.dataclass
class Pack:
    root: pathlib.Path
    manifest: dict

    @functools.cached_property
    def cases(self):
        return [PackCase(r, self.root) for r in self.manifest["cases"]]


_DTYPES = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
           "FLOAT32": np.float32, "BOOL": np.bool_}
_CASE_KEYS = ("id", "op", "tags", "description", "model", "inputs", "constants", "outputs", "params", "options")
_REWRITE = "write it again with `int8-systolic conformance make` (or `make conformance`)"


def _load_npy(root, rel, entry):
    """An array of the pack, checked to be the type and shape its manifest entry says."""
    path = root / rel
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise PackError(f"{path}: not a readable .npy file ({' '.join(str(exc).split())})") from None
    if not isinstance(a, np.ndarray):
        raise PackError(f"{path}: holds an archive, not one array")
    dtype = _DTYPES.get(entry.get("type"))
    if (dtype is not None and a.dtype != dtype) or list(a.shape) != list(entry.get("shape", a.shape)):
        raise PackError(f"{path}: holds {a.dtype}{list(a.shape)}, but the manifest says {entry.get('type')}"
                        f"{entry.get('shape')}")
    return a


def _check_manifest(root, manifest):
    where = root / "manifest.json"
    if not isinstance(manifest, dict):
        raise PackError(f"{where}: not a pack manifest (a JSON object is expected)")
    if manifest.get("format") != FORMAT:
        raise PackError(f"{where}: format {manifest.get('format')!r}, not an {FORMAT!r} pack")
    version = manifest.get("format_version")
    if isinstance(version, int) and version < FORMAT_VERSION:
        raise PackError(f"{root}: a pack of format version {version}, written by an older int8-systolic (this "
                        f"harness reads version {FORMAT_VERSION}, whose manifest has a checksum of every file); "
                        f"{_REWRITE}")
    if version != FORMAT_VERSION:
        raise PackError(f"{root}: format {FORMAT!r} version {version!r}; this harness reads {FORMAT!r} version "
                        f"{FORMAT_VERSION}")
    for key, kind in (("cases", list), ("checksums", dict), ("counts", dict)):
        if not isinstance(manifest.get(key), kind):
            raise PackError(f"{where}: the key {key!r} is missing or not a {kind.__name__}")
    if not manifest["cases"]:
        raise PackError(f"{where}: the pack has no cases")
    for rel, digest in manifest["checksums"].items():
        if not _inside(rel) or not isinstance(digest, str):
            raise PackError(f"{where}: checksum entry {rel!r}: a path inside the pack and a SHA-256 hex string are "
                            f"expected")
    for i, case in enumerate(manifest["cases"]):
        if not isinstance(case, dict):
            raise PackError(f"{where}: case {i} is not a JSON object")
        missing = [k for k in _CASE_KEYS if k not in case]
        if missing:
            raise PackError(f"{where}: case {case.get('id', i)!r} lacks {', '.join(repr(k) for k in missing)}")
        what = f"{where}: case {case['id']!r}"
        for key, kind in (("id", str), ("op", str), ("description", str), ("model", str), ("tags", list),
                          ("params", dict), ("options", dict), ("variants", dict)):
            if key in case and not isinstance(case[key], kind):
                raise PackError(f"{what}: {key!r} must be a {kind.__name__}, got {type(case[key]).__name__}")
        if "variants" in case and sorted(case["variants"]) != sorted(VARIANTS):
            raise PackError(f"{what}: 'variants' must give {', '.join(VARIANTS)}, got {', '.join(case['variants'])}")
        files = [case["model"], *case.get("variants", {}).values()]
        for key in ("inputs", "constants", "outputs"):
            if not isinstance(case[key], list) or not all(isinstance(e, dict) and isinstance(e.get("file"), str)
                                                          for e in case[key]):
                raise PackError(f"{what}: {key!r} must be a list of entries with a 'file'")
            files += [e["file"] for e in case[key]]
        if not case["outputs"]:
            raise PackError(f"{what}: no expected outputs")
        for rel in files:
            if not isinstance(rel, str) or rel not in manifest["checksums"]:
                raise PackError(f"{what}: {rel} has no checksum in the manifest")


def _inside(rel):
    """A manifest path stays inside the pack: relative, no '..'."""
    path = pathlib.PurePosixPath(rel) if isinstance(rel, str) else None
    return path is not None and not path.is_absolute() and ".." not in path.parts and str(path) not in ("", ".")


def _verify_checksums(root, checksums):
    for rel, digest in checksums.items():
        path = root / rel
        if not path.is_file():
            raise PackError(f"{path}: missing from the pack; {_REWRITE}")
        if sha256(path) != digest:
            raise PackError(f"{path}: damaged (its SHA-256 differs from the manifest's), so the pack's expected "
                            f"values cannot be trusted; {_REWRITE}")


def load_pack(path):
    """A pack written by :func:`golden.conformance.pack.write_pack` (its directory or manifest.json), checked
    whole before use: its manifest's structure and format version, and every file against its SHA-256.
    Raises :class:`~.pack.PackError` naming the file at fault."""
    path = pathlib.Path(path)
    root = path.parent if path.name == "manifest.json" else path
    if root.exists() and not root.is_dir():
        raise PackError(f"{root}: not a directory (a pack is a directory holding manifest.json)")
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except FileNotFoundError:
        raise PackError(f"{root}: no manifest.json (write a pack with `make conformance`)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PackError(f"{root / 'manifest.json'}: not valid JSON ({exc})") from None
    except OSError as exc:
        raise PackError(f"{root / 'manifest.json'}: cannot be read ({exc.strerror})") from None
    _check_manifest(root, manifest)
    _verify_checksums(root, manifest["checksums"])
    pack = Pack(root, manifest)
    for pc in pack.cases:   # every array readable, of its manifest type and shape, before any DUT runs
        pc.dut_case()
        pc.expected()
        pc.variant_outputs()
    return pack


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


def _outputs(got, want):
    """(the DUT's outputs as a list of arrays, None) or (None, why they cannot be compared)."""
    if got is None:
        return None, "the DUT returned None"
    if isinstance(got, np.ndarray):
        got = [got]
    elif isinstance(got, (list, tuple)):
        got = list(got)
    else:
        return None, f"the DUT returned a {type(got).__name__}, not an array or a list of {len(want)} arrays"
    arrays = []
    for j, g in enumerate(got):
        if g is None or isinstance(g, (str, bytes, dict)):
            return None, f"output {j}: the DUT returned {type(g).__name__}, not an array"
        try:
            g = np.asarray(g)
        except (ValueError, TypeError) as exc:   # a ragged nested list...
            return None, f"output {j}: the DUT returned something that is not an array ({exc})"
        if g.dtype == object:
            return None, f"output {j}: the DUT returned an array of Python objects, not numbers"
        w = want[j] if j < len(want) else None
        kinds = {"i": "iu", "u": "iu", "f": "f", "b": "b"}
        if w is not None and g.dtype.kind not in kinds.get(w.dtype.kind, w.dtype.kind):
            return None, f"output {j}: the DUT returned dtype {g.dtype}; the case's output is {w.dtype}"
        arrays.append(g)
    return arrays, None


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
    if not cases:
        raise ValueError(f"no case of {pack.root} has op {' or '.join(ops or ['(any)'])} and tag "
                         f"{' or '.join(tags or ['(any)'])}")
    results, t0 = [], time.monotonic()
    for i, pc in enumerate(cases):
        r = pc.record
        case, want = pc.dut_case(), pc.expected(expect)   # the pack's own faults raise PackError, before the DUT
        try:
            got = dut(case)
        except Exception as exc:  # any failure of the DUT is a reported result, not a crash
            results.append(CaseResult(pc.id, pc.op, r["tags"], r["description"], "error",
                                      f"{type(exc).__name__}: {exc}"))
            continue
        got, problem = _outputs(got, want)
        if problem:
            results.append(CaseResult(pc.id, pc.op, r["tags"], r["description"], "error", problem))
            continue
        status, detail, elements, wrong = _compare(pc, got, want, expect)
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
