"""The memory engine on Icarus and Verilator: random CONV_2D and FULLY_CONNECTED layers run from a command list
against cocotbext-axi's memory with latency and stalls under the AXI4 protocol monitor, every output compared
with golden; every refusal stops its list and the next list is exact; reset mid-list is safe
(int8_systolic/sim/tb_engine.py)."""

import pytest

from int8_systolic.sim.regress import engine_for
from int8_systolic.sim.runner import run_component

pytestmark = pytest.mark.sim


# (`make sim` runs these as its engine jobs, sim.regress.ENGINE_CONFIGS; make test runs the Icarus one, about 15 s,
# beside the engine's Amaranth-simulator tests, tests/test_engine.py)
# (dsp="ecp5": the DP16KD buffers and tables and MULT18X18D multipliers, with sim/ecp5_models.py's models)
@pytest.mark.parametrize(("simulator", "rows", "cols", "data_width", "latency", "layers", "dsp"), [
    pytest.param("verilator", 8, 8, 64, 20, 6, "generic", marks=pytest.mark.slow),
    pytest.param("verilator", 8, 8, 32, 30, 4, "generic", marks=pytest.mark.slow),
    pytest.param("verilator", 8, 8, 128, 20, 4, "generic", marks=pytest.mark.slow),
    pytest.param("verilator", 8, 8, 64, 20, 4, "ecp5", marks=pytest.mark.slow),
    ("icarus", 4, 4, 64, 20, 2, "generic")])
def test_engine_layers_errors_and_reset(simulator, rows, cols, data_width, latency, layers, dsp):
    small = simulator == "icarus"      # (Icarus: small buffers and layers)
    results = run_component(simulator, engine_for(simulator, rows, cols, data_width, dsp), "int8_systolic_engine",
                            "int8_systolic.sim.tb_engine", tag=f"engine_{rows}x{cols}_{data_width}_{dsp}",
                            ecp5=dsp == "ecp5",
                            extra_env={"TB_SEED": str(data_width), "TB_LATENCY": str(latency),
                                       "TB_LAYERS": str(layers), "TB_COLS": str(cols), "TB_SMALL": str(int(small))})
    assert [r["test"] for r in results] == ["layers", "errors", "reset_mid_list"], \
        "the testbench failed: see the simulator log above"
    assert all(r["violations"] == 0 for r in results)
    assert results[0]["layers"] == layers
    assert len(results[1]["errors"]) == 7
