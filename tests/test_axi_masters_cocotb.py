"""The engine's AXI4 masters on Icarus and Verilator: cocotb copies through a reader and a writer against the
latency memory with random stalls, under the AXI4 protocol monitor (int8_systolic/sim/tb_axi_masters.py)."""

import pytest

from int8_systolic.sim.axi_copy import AxiCopy
from int8_systolic.sim.runner import run_component

pytestmark = pytest.mark.sim


@pytest.mark.parametrize(("simulator", "data_width", "latency"), [("icarus", 64, 20), ("verilator", 32, 30),
                                                                  ("verilator", 128, 5)])
def test_copies_are_exact_and_keep_the_protocol(simulator, data_width, latency):
    results = run_component(simulator, AxiCopy(data_width), "axi_copy", "int8_systolic.sim.tb_axi_masters",
                            tag=f"axi_copy_{data_width}", extra_env={"TB_SEED": "1", "TB_LATENCY": str(latency)})
    assert [r["test"] for r in results] == ["copies"], "the testbench failed: see the simulator log above"
    (r,) = results
    assert r["violations"] == 0
    assert r["data_bytes"] == data_width // 8
    assert r["reads"] >= r["copies"]
