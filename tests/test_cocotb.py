"""cocotb RTL tests on both simulators (a small subset; `make sim` runs the full regression)."""

import pytest

from sim.runner import run_tb

pytestmark = pytest.mark.sim

CONFIGS = [  # (simulator, rows, cols, rounding)
    ("icarus", 1, 1, "double"),
    ("icarus", 2, 3, "single"),
    ("verilator", 2, 3, "double"),
    ("verilator", 4, 4, "single"),
]


@pytest.mark.parametrize(("simulator", "rows", "cols", "rounding"), CONFIGS)
def test_rtl(simulator, rows, cols, rounding, seed, record_property):
    results = run_tb(simulator, rows, cols, rounding, seed=seed, problems=3, max_dim=12)
    assert {r["test"] for r in results} == {"random_gemms", "reset_mid_stream"}
    compared = sum(r["compared"] for r in results)
    failures = sum(r["failures"] for r in results)
    record_property("rtl", {"config": f"{rows}x{cols} {rounding}", "simulator": simulator, "tests": len(results),
                            "compared": compared, "failures": failures})
    assert failures == 0
    assert compared > 0
