"""The memory engine's top: its register page and C header are current and agree, and on Verilator the engine runs
lists through its registers alone (int8_systolic/sim/tb_engine_top.py: IDs, BAD_ACCESS, BARRIER and DONE IRQs, the
performance counters against the monitor and the step count, a refused command's ERROR and ERROR_INDEX)."""

import pathlib
import shutil
import subprocess

import pytest

from int8_systolic.hw import engine_registers
from int8_systolic.hw.engine_top import EngineTop
from int8_systolic.hw.export import AxiPorts
from int8_systolic.sim.runner import run_component

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_register_page_is_current():
    assert (ROOT / "docs" / "engine_registers.md").read_text() == engine_registers.markdown(), \
        "docs/engine_registers.md is stale: run python -m int8_systolic.hw.engine_registers"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_c_header_has_every_register_and_field(tmp_path):
    header = tmp_path / "regs.h"
    header.write_text(engine_registers.c_header())
    checks = []
    for r in engine_registers.ENGINE_REGISTERS:
        checks.append(f'  if (I8E_{r.name} != {r.offset}u) return 1;')
        for f in r.fields:
            checks.append(f'  if (I8E_{r.name}_{f.name}_MASK != {f.mask}u) return 1;')
    src = tmp_path / "t.c"
    src.write_text('#include "regs.h"\nint main(void) {\n' + "\n".join(checks) + "\n  return 0;\n}\n")
    subprocess.run(["cc", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(src)], check=True, cwd=tmp_path)
    subprocess.run([str(tmp_path / "t")], check=True)


@pytest.mark.sim
@pytest.mark.slow
def test_lists_through_the_registers():
    top = EngineTop(4, 4, data_width=64, in_depth=4096, w_depth=4096, out_depth=4096, max_col_tiles=16)
    results = run_component("verilator", AxiPorts(top), "int8_systolic_engine_top", "int8_systolic.sim.tb_engine_top",
                            tag="engine_top", extra_env={"TB_SEED": "3", "TB_ROWS": "4", "TB_COLS": "4"})
    assert [r["test"] for r in results] == ["registers", "list_with_barrier", "refused"], \
        "the testbench failed: see the simulator log above"
    assert all(r["violations"] == 0 for r in results)
