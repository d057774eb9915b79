"""Shared pytest configuration: reproducible seeds and the cross-check summary table."""

import os

import pytest

SEED = int(os.environ.get("SEED", "1"))


@pytest.fixture
def seed():
    """Base seed for random tests; set SEED=... to reproduce or vary a run."""
    return SEED


def pytest_report_header(config):
    return f"random seed: SEED={SEED}"


def _rtl_coverage(terminalreporter):
    """Merge the functional coverage of this session's RTL runs and print its figure."""
    stems = []
    for key in ("passed", "failed"):
        for rep in terminalreporter.stats.get(key, []):
            stems += [v for name, v in getattr(rep, "user_properties", ()) if name == "rtl_coverage"]
    if not stems:
        return
    import pathlib

    from int8_systolic.paths import build_root
    from int8_systolic.sim import coverage

    stems = [pathlib.Path(s) for s in stems if pathlib.Path(s).with_suffix(".yml").exists()]
    if not stems:
        return
    yml = coverage.merge(stems, build_root() / "sim" / "test-coverage")
    hit, total = coverage.totals(yml)
    tr = terminalreporter
    tr.section("RTL functional coverage of this run (make sim merges every configuration)")
    for line in coverage.table(yml):
        tr.write_line(line)
    tr.write_line(f"{hit} of {total} bins hit ({100 * hit / total:.1f}%) by {len(stems)} RTL runs: {yml}")


def pytest_terminal_summary(terminalreporter):
    """Print how many cases and elements each cross-check compared and matched, and the RTL coverage."""
    _rtl_coverage(terminalreporter)
    rows = []
    for key in ("passed", "failed"):
        for rep in terminalreporter.stats.get(key, []):
            for name, value in getattr(rep, "user_properties", ()):
                if name == "crosscheck":
                    rows.append(value)
    if not rows:
        return
    totals = {}
    for r in rows:
        t = totals.setdefault((r["against"], r["op"]), [0, 0, 0])
        t[0] += r["cases"]
        t[1] += r["matched"]
        t[2] += r["elements"]
    tr = terminalreporter
    tr.section("golden model vs real runtimes (bit-exact comparisons)")
    tr.write_line(f"{'runtime':<22} {'op':<36} {'cases':>6} {'matched':>8} {'elements':>10}")
    for (against, op), (n, m, e) in sorted(totals.items()):
        tr.write_line(f"{against:<22} {op:<36} {n:>6} {m:>8} {e:>10}")
    n_all = sum(t[0] for t in totals.values())
    m_all = sum(t[1] for t in totals.values())
    tr.write_line(f"{'total':<59} {n_all:>6} {m_all:>8} {sum(t[2] for t in totals.values()):>10}")
