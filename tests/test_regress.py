"""`make sim`'s driver without a simulator: the shard split, the merge's completeness check, the job pool."""

import json

import pytest

from sim import regress


def test_shards_are_disjoint_deterministic_and_cover_every_job():
    jobs = regress.all_jobs()
    tags = [j.tag for j in jobs]
    assert len(set(tags)) == len(tags) == len(regress.CONFIGS) + len(regress.MODELS)
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
        return _row(job.tag, failures=1 if job.tag == "icarus_2x3_single" else 0)

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
