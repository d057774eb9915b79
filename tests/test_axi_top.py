"""The AXI top: register map generation, refusals, and its cocotb testbench (sim/tb_axi.py) on both simulators."""

import pathlib

import pytest

from int8_systolic.hw.axi_top import AxiAccelerator
from int8_systolic.hw.registers import REGISTERS, c_header, markdown
from int8_systolic.sim.runner import build_dir, run_tb

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = {"registers", "random_gemms", "directed", "counters", "mode_switch", "errors", "reset_mid_stream"}


def test_register_page_is_current():
    page = (ROOT / "docs" / "registers.md").read_text()
    assert page == markdown(), "docs/registers.md is stale: run `python -m int8_systolic.hw.registers`"


def test_c_header_has_every_register():
    header = c_header()
    for r in REGISTERS:
        assert f"#define I8S_{r.name} 0x{r.offset:03X}u" in header
        for f in r.fields:
            assert f"#define I8S_{r.name}_{f.name}_MASK 0x{f.mask:08X}u" in header


@pytest.mark.parametrize("depth", [1, 16, "2"])
def test_queue_depth_refused(depth):
    with pytest.raises(ValueError, match=r"queue_depth must be an integer in 2\.\.15"):
        AxiAccelerator(2, 2, max_col_tiles=4, queue_depth=depth)


@pytest.mark.sim
@pytest.mark.parametrize(("simulator", "rows", "cols", "rounding"), [
    ("icarus", 2, 3, "double"),
    # (2x8: tiles of at least 8 steps, longer than the gap between GEMMs, so a GEMM with a
    # shorter K after one with a longer K must wait longer: an 8x8 case at a 2x8's cost)
    ("verilator", 2, 8, "single"),
])
def test_axi_rtl(simulator, rows, cols, rounding, seed, record_property):
    results = run_tb(simulator, rows, cols, rounding, seed=seed, problems=6, max_dim=12, max_col_tiles=16,
                     module="int8_systolic.sim.tb_axi", block="axi", tag_suffix="_axi")
    # (its coverage, the mode switches through the queue, joins the core runs' in the session's table)
    record_property("rtl_coverage", str(build_dir(simulator, rows, cols, rounding, "_axi") / "coverage"))
    assert {r["test"] for r in results} == TESTS
    assert sum(r["failures"] for r in results) == 0
    assert sum(r["compared"] for r in results) > 0
