"""`make sim`'s driver without a simulator: the shard split, the merge's completeness check, the job pool."""

import json

import pytest

from int8_systolic.sim import regress


def test_shards_are_disjoint_deterministic_and_cover_every_job():
    jobs = regress.all_jobs()
    tags = [j.tag for j in jobs]
    # one job per configuration; the models of each block in one job (one simulation, one Verilator build)
    configs = len(regress.CONFIGS) + len(regress.AXI_CONFIGS) + len(regress.ENGINE_CONFIGS)
    assert len(set(tags)) == len(tags) == configs + 4     # the model jobs, and the engine top's
    models = [j for j in jobs if j.models]
    assert [list(j.models) for j in models] == [regress.MODELS, regress.AXI_MODELS, regress.ENGINE_MODELS]
    for n in (1, 2, 3, 5):
        parts = [[j.tag for j in regress.shard(jobs, i, n)] for i in range(1, n + 1)]
        assert sorted(t for p in parts for t in p) == sorted(tags)
        assert parts == [[j.tag for j in regress.shard(list(reversed(jobs)), i, n)] for i in range(1, n + 1)]
        costs = [sum(j.cost for j in regress.shard(jobs, i, n)) for i in range(1, n + 1)]
        assert max(costs) - min(costs) <= max(j.cost for j in jobs)   # round robin by cost: balanced


@pytest.mark.parametrize("text", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_bad_shard_is_refused(text):
    with pytest.raises(ValueError, match="SHARD must be i/n"):
        regress.parse_shard(text)


def _row(tag, failures=0, tests=2):
    return {"job": tag, "config": tag, "simulator": "x", "tests": tests, "expected_tests": 2, "compared": 10,
            "failures": failures, "seconds": 1.0, "error": None}


def test_merge_finds_missing_and_duplicate_jobs(tmp_path):
    selected = ["a", "b", "c"]
    for i, runs in ((1, ["a", "c"]), (2, ["b"])):
        (tmp_path / f"summary-{i}of2.json").write_text(json.dumps(
            {"shard": [i, 2], "selected": selected, "runs": [_row(t) for t in runs]}))
    rows, problems = regress.merge([tmp_path / "summary-1of2.json", tmp_path / "summary-2of2.json"])
    assert sorted(r["job"] for r in rows) == selected
    assert problems == []
    rows, problems = regress.merge([tmp_path / "summary-1of2.json"])
    assert problems == ["shards present: [1] of 2", "jobs missing: b"]
    rows, problems = regress.merge([tmp_path / "summary-1of2.json"] * 2)
    assert "jobs run twice: a, c" in problems


def test_the_pool_runs_every_job_reports_failures_and_writes_the_summary(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(regress, "SIM_DIR", tmp_path)
    ran = []

    def fake_spawn(job, args, seed, waves):
        ran.append(job.tag)
        # (no coverage files here: the rows say so, as the AXI top's do)
        return {**_row(job.tag, failures=1 if job.tag == "icarus_2x3_single" else 0), "coverage": False}

    monkeypatch.setattr(regress, "_spawn", fake_spawn)
    assert regress.main(["--only", "2x3", "--jobs", "3"]) == 1
    assert sorted(ran) == sorted(j.tag for j in regress.all_jobs() if "2x3" in j.tag)
    out = capsys.readouterr().out
    assert "icarus_2x3_single                  FAIL" in out
    assert "with 3 jobs at a time" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs"] == 3
    assert [r["job"] for r in summary["runs"]] == [
        t for t in (j.tag for j in regress.all_jobs()) if "2x3" in t]
    second = [j.tag for j in regress.shard([j for j in regress.all_jobs() if "2x3" in j.tag], 2, 2)]
    assert regress.main(["--only", "2x3", "--shard", "2/2", "--jobs", "1"]) == int("icarus_2x3_single" in second)
    assert (tmp_path / "shards" / "summary-2of2.json").exists()


def _coverage_file(stem, labels):
    """A job's coverage file as the testbench writes it, with ``labels`` {(group, point): bins} hit."""
    from cocotb_coverage.coverage import coverage_db

    from int8_systolic.sim import coverage

    for item in coverage_db.values():      # a fresh database: zero every bin of the process-wide one
        if hasattr(item, "_hits"):
            for b in item._hits:
                item._hits[b] = 0
            item._coverage = 0
    for (group, point), bins in labels.items():
        coverage.sample(group, point, bins)
    coverage.export(stem)


def test_coverage_is_merged_and_a_full_run_fails_on_a_bin_never_hit(monkeypatch, tmp_path, capsys):
    from int8_systolic.sim import coverage

    monkeypatch.setattr(regress, "SIM_DIR", tmp_path)
    every = {(g, p): bins for g, pts in coverage.MODEL.items() for p, bins in pts.items()}
    jobs = [j.tag for j in regress.all_jobs() if "2x3" in j.tag and not j.axi]
    # the first job hits everything but one shift, the others nothing but that shift: merged, all hit
    split = {jobs[0]: {k: [b for b in v if b != 7] for k, v in every.items()},
             jobs[1]: {("requantizer", "shift"): [7]}}

    def fake_spawn(job, args, seed, waves):
        if job.axi:  # (the AXI top's testbench samples no coverage, and its row says so)
            return {**_row(job.tag), "coverage": False}
        _coverage_file(tmp_path / "coverage" / job.tag, split.get(job.tag, {}))
        return _row(job.tag)

    monkeypatch.setattr(regress, "_spawn", fake_spawn)
    assert regress.main(["--only", "2x3", "--jobs", "1"]) == 0      # --only: bins not required, all hit anyway
    assert coverage.unhit(tmp_path / "coverage.yml") == []
    out = capsys.readouterr().out
    assert "functional coverage, 4 runs merged" in out
    assert "(100.0%)" in out
    # without the job that hits shift 7, the merge misses that bin and a merge of shards fails on it
    del split[jobs[1]]
    for i in (1, 2):
        assert regress.main(["--only", "2x3", "--shard", f"{i}/2", "--jobs", "1"]) == 0   # a shard never fails on bins
    shards = sorted(str(p) for p in (tmp_path / "shards").glob("summary-*.json"))
    assert regress.main(["--merge", *shards]) == 1
    err = capsys.readouterr().err
    assert "1 coverage bins never hit: requantizer.shift=7" in err
    assert coverage.unhit(tmp_path / "coverage.yml") == [("requantizer", "shift", 7)]


def test_coverage_classifier_finds_each_requantizer_corner():
    """The classifier the coverage model samples with, on hand-computed elements."""
    from int8_systolic.sim.coverage import classify

    i32min, i32max = -(2**31), 2**31 - 1
    # double: SRDHM(2**31 - 1, 2**30) = 2**30 (a product just below 2**61, rounded up), an exact tie at >> 31
    assert classify([i32max], 2**30, -31, 0, -128, 127, "double")["double_rdbpot_tie"] == {"pos>>31"}
    assert classify([-6], 2**30, -1, 0, -128, 127, "double")["double_rdbpot_tie"] == {"neg>>1"}   # -3 / 2
    assert classify([-4], 2**30, -1, 0, -128, 127, "double")["double_rdbpot_tie"] == set()        # -2 / 2
    assert classify([i32min], i32min, 0, 0, -128, 127, "double")["double_srdhm"] == {"saturates"}
    assert classify([2**30], 2**30, 2, 0, -128, 127, "double")["double_pre_shift"] == {"wraps"}
    assert classify([2**29 - 1], 2**30, 1, 0, -128, 127, "double")["double_pre_shift"] == set()
    # single: (acc * m + 2**(30 - s)) >> (31 - s): 3 * 2**30 / 2**32 = 0.75, 2 * 2**30 / 2**32 = 0.5 (a tie)
    assert classify([2], 2**30, -1, 0, -128, 127, "single")["single_tie"] == {"pos@-1"}
    assert classify([3], 2**30, -1, 0, -128, 127, "single")["single_tie"] == set()
    assert classify([i32max], i32max, 30, 0, -128, 127, "single")["single_result"] == {"wraps"}
    hits = classify([i32max], i32max, 0, 127, -10, 10, "double")
    assert hits["output_offset"] == {"wraps"}
    assert hits["clamp"] == {"low"}
    # (a normalized mantissa with a large right shift is both in [2^30, 2^31) and below 2^-20 as a real)
    assert classify([0, 1 << 20], [0, 2**30], [0, -25], 0, -128, 127, "double")["multiplier"] == {
        "zero", "below 2^-20", "[2^30, 2^31)"}
    assert classify([5], 2**30, -19, 0, -128, 127, "double")["multiplier"] == {"[2^30, 2^31)"}
