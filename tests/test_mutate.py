"""The mutant generator and the mutation report (`make mutate`), without running the tests on mutants."""

import collections
import json

import pytest

from int8_systolic.mutate import __main__ as mutate_main
from int8_systolic.mutate.operators import OPERATORS, mutants

ROOT = mutate_main.ROOT


@pytest.mark.parametrize("file", mutate_main.FILES + mutate_main.ENGINE_FILES)
def test_each_file_is_mutated_and_every_mutant_is_python(file):
    muts = mutants(ROOT / file, ROOT)
    ops = collections.Counter(m.operator for m in muts)
    assert ops, f"{file} yields no mutants"
    assert set(ops) <= set(OPERATORS)
    ids = [m.id for m in muts]
    assert len(ids) == len(set(ids))                 # ids are unique
    original = (ROOT / file).read_text()
    assert all(m.source != original for m in muts)   # every mutant changes the file
    assert all(m.id.startswith(f"{file}::") for m in muts)


def test_the_main_operators_all_apply_to_the_rtl():
    """Over the files `make mutate` covers (some, like the ECP5 primitive wrapper, have only constants)."""
    ops = {m.operator for file in mutate_main.FILES for m in mutants(ROOT / file, ROOT)}
    assert {"binop", "constant", "drop", "invert", "mux"} <= ops, ops


def test_mutants_leave_refusals_strings_and_docstrings_alone(tmp_path):
    src = tmp_path / "hw.py"
    src.write_text('''"""doc"""
from amaranth import Module, Mux, Signal


class Thing:
    def __init__(self, width):
        if width < 1:
            raise ValueError(f"width {width + 1}")

    def elaborate(self, platform):
        """Docstring 7."""
        m = Module()
        a, b = Signal(8, name="a"), Signal(8)
        m.d.sync += [a.eq(b + 1), b.eq(Mux(a[0:4] == 3, a, ~b))]
        assert platform is None or 2
        return m
''')
    muts = mutants(src, tmp_path)
    afters = {(m.operator, m.before, m.after) for m in muts}
    assert ("binop", "b + 1", "(b - 1)") in afters
    assert ("mux", "Mux(a[0:4] == 3, a, ~b)", "Mux(a[0:4] == 3, ~b, a)") in afters
    assert ("slice", "a[0:4]", "a[0:4 - 1]") in afters
    assert ("compare", "a[0:4] == 3", "(a[0:4] != 3)") in afters
    assert ("invert", "~b", "(b)") in afters
    assert ("drop", "m.d.sync += [a.eq(b + 1), b.eq(Mux(a[0:4] == 3, a, ~b))]", "pass") in afters
    assert ("drop", "[a.eq(b + 1), b.eq(Mux(a[0:4] == 3, a, ~b))]", "[b.eq(Mux(a[0:4] == 3, a, ~b))]") in afters
    # __init__ (refusals), the docstrings, the assert and the signal's width-free name are not mutated
    assert {m.line for m in muts} == {13, 14}
    assert ("constant", "8", "9") in afters          # a width is


def test_report_scores_listed_equivalents_and_flags_stale_entries(monkeypatch, tmp_path):
    monkeypatch.setattr(mutate_main, "OUT", tmp_path)
    muts = mutants(ROOT / "int8_systolic/hw/array.py", ROOT)[:6]
    records = {muts[0].id: {"status": "killed", "stage": "fast", "seconds": 1.0, "run": 0},
               muts[1].id: {"status": "killed", "stage": "full", "seconds": 1.0, "run": 1},
               muts[2].id: {"status": "equivalent", "stage": "netlist", "seconds": 1.0, "run": 1},
               muts[3].id: {"status": "survived", "stage": None, "seconds": 1.0, "run": 1},
               muts[4].id: {"status": "survived", "stage": None, "seconds": 1.0, "run": 1}}
    listed = {muts[4].id: "argued", "int8_systolic/hw/array.py::gone::constant::1 -> 2#0": "stale",
              "int8_systolic/hw/other.py::x": "elsewhere"}
    runs = [{"date": d, "commit": "abc", "files": ["int8_systolic/hw/array.py"], "mutants": 5, "jobs": 2,
             "wall_seconds": 60.0}
            for d in ("2026-11-23 10:00", "2026-11-24 10:00")]
    _, survivors, stale = mutate_main._report(muts, records, listed, ["int8_systolic/hw/array.py"], runs)
    assert [m.id for m, _ in survivors] == [muts[3].id]
    assert stale == ["int8_systolic/hw/array.py::gone::constant::1 -> 2#0"]
    doc = json.loads((tmp_path / "report.json").read_text())
    row = doc["table"]["int8_systolic/hw/array.py"]
    assert (row["generated"], row["not run"], row["killed"], row["equivalent (netlist)"], row["equivalent (listed)"],
            row["survived"]) == (6, 1, 2, 1, 1, 1)
    assert row["score"] == pytest.approx(100 * 2 / 3, abs=0.01)
    md = (tmp_path / "report.md").read_text()
    assert muts[3].id in md
    assert "2026-11-23 10:00" in md
    assert "2026-11-24 10:00" in md


def test_the_store_keeps_results_across_runs_until_the_file_changes(monkeypatch, tmp_path):
    """A run replaces the results it retests and keeps the rest; a changed source drops its file's."""
    (tmp_path / "hw").mkdir()
    src = tmp_path / "hw" / "a.py"
    src.write_text("x = 1\n")
    monkeypatch.setattr(mutate_main, "ROOT", tmp_path)
    monkeypatch.setattr(mutate_main, "STORE", tmp_path / "results.json")
    Mut = collections.namedtuple("Mut", "file")
    by_id = {"m1": Mut("hw/a.py"), "m2": Mut("hw/a.py")}
    run = {"date": "d", "commit": "c", "files": ["hw/a.py"], "mutants": 2, "jobs": 1, "wall_seconds": 1.0}
    store, _ = mutate_main._load_store(["hw/a.py"])
    first = mutate_main._open_run(store, run)
    mutate_main._save_store(store, {"m1": {"status": "survived"}, "m2": {"status": "killed"}}, by_id, first)
    store, _ = mutate_main._load_store(["hw/a.py"])
    second = mutate_main._open_run(store, run)
    mutate_main._save_store(store, {"m1": {"status": "killed"}}, by_id, second)
    store, kept = mutate_main._load_store(["hw/a.py"])
    assert kept["hw/a.py"] == {"m1": {"status": "killed", "run": 1}, "m2": {"status": "killed", "run": 0}}
    assert len(store["runs"]) == 2
    src.write_text("x = 2\n")
    assert mutate_main._load_store(["hw/a.py"])[1] == {"hw/a.py": {}}


def test_the_equivalence_list_reads_groups_and_refuses_an_entry_without_its_argument(tmp_path):
    good = tmp_path / "eq.toml"
    good.write_text('[[equivalent]]\nid = "a"\nreason = "r1"\n\n[[equivalent]]\nids = ["b", "c"]\nreason = "r2"\n')
    assert mutate_main._equivalents(good) == {"a": "r1", "b": "r2", "c": "r2"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[[equivalent]]\nid = "a"\n')
    with pytest.raises(ValueError, match="needs an id"):
        mutate_main._equivalents(bad)
    assert isinstance(mutate_main._equivalents(), dict)          # the checked-in list parses


def test_the_stages_name_tests_that_exist():
    """Every test a stage names is collected by pytest (a renamed test would silently drop out)."""
    import subprocess
    import sys

    names = {t for f in mutate_main.FILES + mutate_main.ENGINE_FILES for stage in mutate_main.stage_tests(f)
             for t in stage}
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *sorted(names)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tests/test_cocotb.py::test_rtl[icarus-2-2-double-ecp5]" in out.stdout
    assert "tests/test_engine_cocotb.py::test_engine_layers_errors_and_reset[icarus-4-4-64-20-2-generic]" in out.stdout


def test_a_sample_draws_a_fixed_number_per_file_the_same_each_time():
    files = mutate_main.ENGINE_FILES[:3]
    every = [m for f in files for m in mutants(mutate_main.ROOT / f, mutate_main.ROOT)]
    drawn = mutate_main._sample(every, 4, seed=1)
    assert [m.id for m in drawn] == [m.id for m in mutate_main._sample(every, 4, seed=1)]
    assert [m.id for m in drawn] != [m.id for m in mutate_main._sample(every, 4, seed=2)]
    assert collections.Counter(m.file for m in drawn) == dict.fromkeys(files, 4)
    assert [m for m in every if m in drawn] == drawn          # (in the files' order)
    assert mutate_main._sample(every[:2], 4, seed=1) == every[:2]


def test_the_wilson_interval():
    # (45 of 50 by hand: centre (0.9 + 3.8416 / 100) / (1 + 3.8416 / 50) = 0.87146, half-width
    # 1.96 * sqrt(0.09 / 50 + 3.8416 / 10000) / 1.076832 = 0.08507)
    lo, hi = mutate_main._wilson(45, 50)
    assert abs(lo - 78.64) < 0.01
    assert abs(hi - 95.65) < 0.01
    assert mutate_main._wilson(50, 50)[1] == 100.0
