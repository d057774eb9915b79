"""cocotb RTL tests on both simulators (a small subset; `make sim` runs the full regression).

Each run's functional coverage (sim.coverage) is merged at the end of the session into
build/sim/test-coverage.{yml,xml}, and its figure printed (see conftest.py)."""

import pytest

from int8_systolic.sim.runner import build_dir, run_tb

pytestmark = pytest.mark.sim

CONFIGS = [  # (simulator, rows, cols, rounding, dsp); Icarus first: `make mutate` stops at the first failure
    ("icarus", 1, 1, "double", "generic"),
    ("icarus", 2, 3, "single", "generic"),
    # The ECP5 build (MULT18X18D and DP16KD primitives, with int8_systolic/sim/ecp5_models.py's models).
    ("icarus", 2, 2, "double", "ecp5"),
    ("verilator", 2, 3, "double", "generic"),
    ("verilator", 4, 4, "single", "generic"),
    ("verilator", 3, 2, "single", "ecp5"),
]


@pytest.mark.parametrize(("simulator", "rows", "cols", "rounding", "dsp"), CONFIGS)
def test_rtl(simulator, rows, cols, rounding, dsp, seed, record_property):
    # (the K = 132 105 GEMM, accumulators wrapping int32: ~15 s on Icarus 1x1, ~5 s on Verilator 2x3)
    long_k = (simulator, rows, cols, rounding) in (("icarus", 1, 1, "double"), ("verilator", 2, 3, "double"))
    results = run_tb(simulator, rows, cols, rounding, seed=seed, problems=3, max_dim=12, dsp=dsp, long_k=long_k)
    assert {r["test"] for r in results} == {"random_gemms", "depthwise_layers", "reset_mid_stream", "coverage_corners"}
    compared = sum(r["compared"] for r in results)
    failures = sum(r["failures"] for r in results)
    record_property("rtl", {"config": f"{rows}x{cols} {rounding} {dsp}", "simulator": simulator, "tests": len(results),
                            "compared": compared, "failures": failures})
    suffix = "" if dsp == "generic" else f"_{dsp}"
    record_property("rtl_coverage", str(build_dir(simulator, rows, cols, rounding, suffix) / "coverage"))
    assert failures == 0
    assert compared > 0
