"""The conformance kit: the pack is what TFLM computes and describes itself; the harness finds wrong DUTs
and names the arithmetic of right ones (golden with each variant, LiteRT's three modes, our RTL in both
rounding builds).

A small pack (two random cases per op plus every directed and discriminator case of the ops
below) is written once per module; every test reads it from disk as a user would.
"""

import json
import os

import numpy as np
import pytest

from int8_systolic.golden import variants
from int8_systolic.golden.conformance import harness, pack, report
from int8_systolic.golden.conformance.__main__ import main
from int8_systolic.golden.conformance.duts import GoldenDut, LiteRTDut, RecordedDut, resolve
from int8_systolic.golden.conformance.harness import load_pack, run
from int8_systolic.golden.conformance.pack import PackError, write_pack
from int8_systolic.golden.tflite.runtimes import run_litert_reference, run_tflm

pytestmark = pytest.mark.tflm

OPS = ["ADD", "ARG_MAX", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "QUANTIZE", "SOFTMAX", "SPACE_TO_BATCH_ND",
       "TRANSPOSE"]
MAC = ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"]
SEED = int(os.environ.get("SEED", "1"))


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("conformance") / "pack"
    write_pack(out, per_op=2, seed=SEED, ops=OPS, progress=False)
    return out


def test_the_pack_describes_itself_and_holds_what_the_reference_runtime_computes(pack_dir):
    m = json.loads((pack_dir / "manifest.json").read_text())
    assert (m["format"], m["format_version"]) == (pack.FORMAT, pack.FORMAT_VERSION)
    assert m["generator"]["tflite-micro"]
    assert m["variants"] == list(variants.VARIANTS)
    assert sorted(m["counts"]) == sorted(OPS)
    assert sum(m["counts"].values()) == len(m["cases"])
    assert "manifest.json" in (pack_dir / "README.md").read_text()
    for rec in m["cases"]:
        for entry in rec["inputs"] + rec["constants"] + rec["outputs"]:
            a = np.load(pack_dir / entry["file"], allow_pickle=False)
            assert list(a.shape) == entry["shape"], (rec["id"], entry)
        # The files alone, run again in the reference runtime, give the expected outputs.
        model = (pack_dir / rec["model"]).read_bytes()
        inputs = [np.load(pack_dir / e["file"]) for e in rec["inputs"]]
        expected = [np.load(pack_dir / e["file"]) for e in rec["outputs"]]
        theirs = run_tflm(model, inputs, num_outputs=len(expected)) if rec["checked_against"] == "tflite-micro" \
            else run_litert_reference(model, inputs)
        for want, got in zip(expected, theirs, strict=True):
            np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want, err_msg=rec["id"])
        if rec["op"] in MAC:
            p = rec["params"]
            channels = expected[0].shape[-1]
            assert len(p["output_multiplier"]) == channels
            assert len(p["output_shift"]) == channels
            assert {"input_offset", "output_offset", "quantized_activation_min", "quantized_activation_max"} <= set(p)
            assert sorted(rec["variants"]) == sorted(variants.VARIANTS)
            np.testing.assert_array_equal(np.load(pack_dir / rec["variants"]["double"]), expected[0])
    tags = m["tag_counts"]
    for tag in ("random", "directed", "discriminator", "zero-point-extreme", "every-int8-input",
                "multiplier-below-2^-20", "multiplier-above-1", "accumulator-near-int32-limit", "tie-first-rounding",
                "tie-second-rounding", "fused-activation", "output-offset-wraps"):
        assert tags.get(tag, 0) > 0, tag
    for op in MAC:
        assert sum("discriminator" in r["tags"] for r in m["cases"] if r["op"] == op) >= 4, op


def test_the_pack_is_refused_when_golden_and_the_runtime_disagree(tmp_path, monkeypatch):
    real = pack.golden_case

    def off_by_one(model, inputs, name="case"):
        interp, outputs, stages, var = real(model, inputs, name)
        if name == "ADD/0001":
            outputs = [np.where(outputs[0] == 127, 126, outputs[0] + 1).astype(np.int8)]
        return interp, outputs, stages, var

    monkeypatch.setattr(pack, "golden_case", off_by_one)
    with pytest.raises(PackError, match=r"ADD/0001 .* output 0: golden and tflite-micro differ"):
        write_pack(tmp_path / "pack", per_op=2, ops=["ADD"], progress=False)
    assert not (tmp_path / "pack").exists()


@pytest.mark.parametrize("variant", variants.VARIANTS)
def test_golden_with_each_variant_is_named_by_the_report(pack_dir, variant):
    result = run(pack_dir, GoldenDut(variant), expect=variant, progress=False)
    assert result.passed, report.markdown(result)
    assert result.verdict() == [variant]
    table, n = result.variant_table()
    assert sorted(n) == sorted(MAC)
    assert all(table[op][variant] == n[op] for op in MAC)


def test_a_wrong_dut_is_reported_with_the_first_element_and_its_golden_stages(pack_dir):
    golden = GoldenDut()

    def one_lsb_off(case):
        out = golden(case)
        if case.op == "FULLY_CONNECTED":
            out[0] = out[0].copy()
            flat = out[0].reshape(-1)
            flat[-1] = flat[-1] - 1 if flat[-1] > -128 else flat[-1] + 1
        return out

    result = run(pack_dir, one_lsb_off, progress=False, name="one LSB off")
    assert not result.passed
    bad = [c for c in result.cases if c.status != "match"]
    fc = [c for c in result.cases if c.op == "FULLY_CONNECTED"]
    assert bad == [c for c in fc if c.status == "mismatch"]
    assert len(bad) == len(fc)
    assert all(c.wrong_elements == 1 and "golden stages" in c.detail and "'acc'" in c.detail for c in bad)
    assert result.by("op")["FULLY_CONNECTED"] == [len(fc), 0]
    assert result.by("op")["ADD"][0] == result.by("op")["ADD"][1]
    assert result.verdict() == []
    assert result.matching_variants()["FULLY_CONNECTED"] == []
    md = report.markdown(result)
    assert "**FAIL**" in md
    assert f"`{bad[0].id}`" in md
    assert "no one variant" in md


def test_a_dut_that_raises_is_an_error_not_a_crash(pack_dir):
    def refuses_softmax(case):
        if case.op == "SOFTMAX":
            raise NotImplementedError("no SOFTMAX unit")
        return GoldenDut()(case)

    result = run(pack_dir, refuses_softmax, ops=["SOFTMAX", "ADD"], progress=False)
    errors = [c for c in result.cases if c.status == "error"]
    assert errors
    assert all(c.op == "SOFTMAX" and c.detail == "NotImplementedError: no SOFTMAX unit" for c in errors)
    assert all(c.status == "match" for c in result.cases if c.op == "ADD")


def test_recorded_outputs_are_a_dut(pack_dir, tmp_path):
    loaded = load_pack(pack_dir)
    for pc in harness.select(loaded, ops=["TRANSPOSE"]):
        d = tmp_path / pc.id
        d.mkdir(parents=True)
        for j, y in enumerate(pc.expected()):
            np.save(d / f"output{j}.npy", y)
    assert run(loaded, RecordedDut(tmp_path), ops=["TRANSPOSE"], progress=False).passed
    missing = run(loaded, RecordedDut(tmp_path), ops=["ADD"], progress=False)
    assert all(c.status == "error" and "no recorded output for ADD/" in c.detail for c in missing.cases)


def test_command_line_exit_status_and_reports(pack_dir, tmp_path, capsys):
    assert main(["run", str(pack_dir), "--dut", "golden", "--report-dir", str(tmp_path / "ok")]) == 0
    assert "Verdict: the DUT's requantization is `double`" in capsys.readouterr().out
    for name in ("report.md", "report.html", "report.json"):
        assert (tmp_path / "ok" / name).stat().st_size > 0
    assert main(["run", str(pack_dir), "--dut", "golden:single", "--tags", "discriminator",
                 "--report-dir", str(tmp_path / "single")]) == 1
    data = json.loads((tmp_path / "single" / "report.json").read_text())
    assert data["variants"]["verdict"] == ["single"]
    assert not data["passed"]
    assert main(["run", str(tmp_path), "--dut", "golden"]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    assert main(["run", str(pack_dir), "--dut", "nonsense"]) == 2
    assert "unknown DUT 'nonsense'" in capsys.readouterr().err
    assert main(["run", str(pack_dir), "--dut", "golden", "--tags", "no-such-tag"]) == 2
    assert "no cases with tags no-such-tag" in capsys.readouterr().err


def test_a_pack_of_another_format_version_is_refused(pack_dir, tmp_path):
    m = json.loads((pack_dir / "manifest.json").read_text())
    m["format_version"] = 99
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackError, match="version 99; this harness reads"):
        load_pack(tmp_path)
    with pytest.raises(ValueError, match="golden variant must be one of"):
        resolve("golden:nearest")


@pytest.mark.litert
@pytest.mark.parametrize(("mode", "per_op"), [
    ("litert-ref", {"CONV_2D": ["double"], "DEPTHWISE_CONV_2D": ["double"], "FULLY_CONNECTED": ["float64"]}),
    ("litert-optimized", {key: ["upward"] for key in MAC}),
    ("litert-default", {key: ["xnnpack_fp32"] for key in MAC}),
])
def test_litert_modes_are_named_per_op(pack_dir, mode, per_op):
    result = run(pack_dir, LiteRTDut(mode), tags=["discriminator"], progress=False)
    assert result.matching_variants() == dict(sorted(per_op.items())), report.markdown(result)


@pytest.mark.sim
@pytest.mark.parametrize("rounding", ["double", "single"])
def test_the_rtl_passes_the_mac_cases_and_is_named_by_its_rounding(pack_dir, tmp_path, rounding):
    """`make conformance-rtl` on the small pack's random and discriminator MAC cases, both rounding builds."""
    from int8_systolic.sim.conformance_rtl import run_conformance_rtl

    result, tb = run_conformance_rtl(pack_dir, rounding=rounding, rows=4, cols=4, tags=["random", "discriminator"],
                                     out_dir=tmp_path)
    assert tb["cases"] == len(result.cases) > 0
    assert tb["failures"] == 0
    assert tb["compared"] > 0
    assert result.passed, report.markdown(result)
    assert result.verdict() == [rounding]
    assert (tmp_path / "report.html").exists()


# ---- a careless DUT or a damaged pack: an error of that case, or the pack refused with the file named ----

def _golden_then(change):
    """The golden DUT with its ADD outputs passed through ``change``."""
    golden = GoldenDut()

    def dut(case):
        out = golden(case)
        return change(out) if case.op == "ADD" else out
    return dut


@pytest.mark.parametrize(("change", "message"), [
    (lambda out: None, "the DUT returned None"),
    (lambda out: 3, "the DUT returned a int, not an array or a list of 1 arrays"),
    (lambda out: [np.asarray(out[0], np.float64)],
     "output 0: the DUT returned dtype float64; the case's output is int8"),
    (lambda out: [None], "output 0: the DUT returned NoneType, not an array"),
    (lambda out: "ADD", "the DUT returned a str"),
    (lambda out: [[[1, 2], [3]]], "output 0: the DUT returned something that is not an array"),
    (lambda out: [np.array([object(), object()])], "output 0: the DUT returned an array of Python objects"),
])
def test_a_dut_returning_the_wrong_kind_of_thing_is_an_error_of_that_case(pack_dir, change, message):
    result = run(pack_dir, _golden_then(change), ops=["ADD", "TRANSPOSE"], progress=False)
    adds = [c for c in result.cases if c.op == "ADD"]
    assert adds
    assert all(c.status == "error" and message in c.detail for c in adds), adds[0].detail
    assert all(c.status == "match" for c in result.cases if c.op == "TRANSPOSE")


def _copy(pack_dir, tmp_path):
    import shutil
    out = tmp_path / "pack"
    shutil.copytree(pack_dir, out)
    return out


def _first_expected(root):
    m = json.loads((root / "manifest.json").read_text())
    return m, m["cases"][0]["outputs"][0]["file"]


def _rewrite_checksum(root, m, rel):
    m["checksums"][rel] = pack.sha256(root / rel)
    (root / "manifest.json").write_text(json.dumps(m))


def test_a_corrupted_expected_value_is_a_damaged_pack_not_a_wrong_dut(pack_dir, tmp_path, capsys):
    root = _copy(pack_dir, tmp_path)
    _, rel = _first_expected(root)
    data = bytearray((root / rel).read_bytes())
    data[-1] ^= 1                                      # one bit of one expected element
    (root / rel).write_bytes(bytes(data))
    with pytest.raises(PackError, match=rf"{rel}: damaged \(its SHA-256 differs from the manifest's\).*write it again"):
        load_pack(root)
    assert main(["run", str(root), "--dut", "golden"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert rel in err[0]
    assert "damaged" in err[0]


@pytest.mark.parametrize(("damage", "message"), [
    ("missing", r"{rel}: missing from the pack"),
    ("truncated", r"{rel}: not a readable \.npy file"),
    ("foreign", r"{rel}: holds int32\[.*\], but the manifest says INT8"),
    ("not npy", r"{rel}: not a readable \.npy file"),
])
def test_a_missing_truncated_or_foreign_npy_names_the_file(pack_dir, tmp_path, damage, message):
    root = _copy(pack_dir, tmp_path)
    m, rel = _first_expected(root)
    path = root / rel
    if damage == "missing":
        path.unlink()
    else:
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[:-3])
        elif damage == "foreign":
            np.save(path, np.load(path).astype(np.int32))
        else:
            path.write_bytes(b"a text file, not an array\n")
        _rewrite_checksum(root, m, rel)     # a consistent manifest: the file itself is at fault
    with pytest.raises(PackError, match=message.format(rel=rel)):
        run(root, GoldenDut(), progress=False)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m.pop("cases"), r"manifest.json: the key 'cases' is missing"),
    (lambda m: m.pop("checksums"), r"manifest.json: the key 'checksums' is missing"),
    (lambda m: m["cases"][0].pop("outputs"), r"manifest.json: case '.*' lacks 'outputs'"),
    (lambda m: m["cases"].clear(), r"manifest.json: the pack has no cases"),
    (lambda m: m.update(format_version=1), r"a pack of format version 1, written by an older int8-systolic .* write "
                                           r"it again with `int8-systolic conformance make`"),
    (lambda m: m.update(format="something-else"), r"format 'something-else', not an 'int8-systolic-conformance'"),
    (lambda m: m["checksums"].pop(m["cases"][0]["model"]), r"has no checksum in the manifest"),
    (lambda m: m["cases"][0].update(model=["a list"]), r"case '.*': 'model' must be a str, got list"),
    (lambda m: next(c for c in m["cases"] if "variants" in c).update(variants=["double"]),
     r"case '.*': 'variants' must be a dict, got list"),
    (lambda m: next(c for c in m["cases"] if "variants" in c)["variants"].pop("single"),
     r"case '.*': 'variants' must give double, single"),
    (lambda m: m["checksums"].update({"../outside.npy": "0" * 64}), r"checksum entry '../outside.npy': a path inside "
                                                                    r"the pack"),
    (lambda m: m["cases"][0]["outputs"].clear(), r"case '.*': no expected outputs"),
])
def test_a_malformed_manifest_is_refused_with_the_key_named(pack_dir, tmp_path, edit, message, capsys):
    root = _copy(pack_dir, tmp_path)
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PackError, match=message):
        load_pack(root)
    assert main(["run", str(root), "--dut", "golden"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_pack_path_that_is_not_a_directory_or_not_json(pack_dir, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["run", str(tmp_path / "file"), "--dut", "golden"]) == 2
    assert "file: not a directory" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text("{not json")
    assert main(["run", str(tmp_path), "--dut", "golden"]) == 2
    assert "manifest.json: not valid JSON" in capsys.readouterr().err


def test_a_selection_that_matches_nothing_is_an_error_not_a_pass(pack_dir, capsys):
    with pytest.raises(ValueError, match=r"no case of .* has op TRANSPOSE and tag discriminator"):
        run(pack_dir, GoldenDut(), ops=["TRANSPOSE"], tags=["discriminator"], progress=False)
    assert main(["run", str(pack_dir), "--dut", "golden", "--ops", "TRANSPOSE", "--tags", "discriminator"]) == 2
    assert "no case of" in capsys.readouterr().err
