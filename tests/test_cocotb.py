"""cocotb RTL tests on both simulators (a small subset; `make sim` runs the full regression)."""

import pytest

from sim.runner import run_tb

pytestmark = pytest.mark.sim

CONFIGS = [  # (simulator, rows, cols, rounding, dsp)
    ("icarus", 1, 1, "double", "generic"),
    ("icarus", 2, 3, "single", "generic"),
    ("verilator", 2, 3, "double", "generic"),
    ("verilator", 4, 4, "single", "generic"),
    # The ECP5 build (MULT18X18D and DP16KD primitives, with sim/ecp5_models.py's models).
    ("icarus", 2, 2, "double", "ecp5"),
    ("verilator", 3, 2, "single", "ecp5"),
]


@pytest.mark.parametrize(("simulator", "rows", "cols", "rounding", "dsp"), CONFIGS)
def test_rtl(simulator, rows, cols, rounding, dsp, seed, record_property):
    results = run_tb(simulator, rows, cols, rounding, seed=seed, problems=3, max_dim=12, dsp=dsp)
    assert {r["test"] for r in results} == {"random_gemms", "reset_mid_stream"}
    compared = sum(r["compared"] for r in results)
    failures = sum(r["failures"] for r in results)
    record_property("rtl", {"config": f"{rows}x{cols} {rounding} {dsp}", "simulator": simulator, "tests": len(results),
                            "compared": compared, "failures": failures})
    assert failures == 0
    assert compared > 0
