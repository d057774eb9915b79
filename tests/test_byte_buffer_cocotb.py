"""hw.byte_buffer.ByteBuffer as Verilog on Icarus and Verilator (int8_systolic/sim/tb_byte_buffer.py): the ECP5
build (DP16KD banks in each mode the engine uses: 2048 x 9 stacked four deep, 512 x 36 two wide with byte
enables, with the bank port) and the generic one, against a bytearray, cycle for cycle."""

import pytest

from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.sim.runner import run_component

pytestmark = pytest.mark.sim


@pytest.mark.parametrize(("simulator", "dsp", "width", "depth", "lanes", "bank_bytes"), [
    ("icarus", "ecp5", 16, 32768, 64, 8),       # the engine's input buffer: 8 banks of two 512 x 36 DP16KDs
    ("verilator", "ecp5", 8, 65536, 8, 1),      # its weight buffer: 8 banks of four 2048 x 9 DP16KDs stacked
    ("icarus", "ecp5", 8, 4096, 32, 4),         # 4-byte banks, one 512 x 36 each (128 rows)
    ("icarus", "generic", 16, 2048, 64, 8),
])
def test_reads_equal_a_bytearray(simulator, dsp, width, depth, lanes, bank_bytes):
    dut = ByteBuffer(width, depth, lanes=lanes, bank_bytes=bank_bytes, bank_port=bank_bytes > 1,
                     dsp=dsp)
    env = {"TB_SEED": "1", "TB_WIDTH": str(width), "TB_DEPTH": str(depth), "TB_LANES": str(lanes),
           "TB_BANK_BYTES": str(bank_bytes), "TB_ECP5": str(int(dsp == "ecp5")),
           "TB_CYCLES": "1000" if simulator == "icarus" else "3000"}
    results = run_component(simulator, dut, "byte_buffer", "int8_systolic.sim.tb_byte_buffer",
                            tag=f"byte_buffer_{dsp}_{width}_{depth}_{lanes}_{bank_bytes}", extra_env=env,
                            ecp5=dsp == "ecp5")
    assert [r["test"] for r in results] == ["buffer"], "the testbench failed: see the simulator log above"
    (r,) = results
    assert r["r"] > 300
    assert r["collided"] > 50
    assert r["g"] > 100 or bank_bytes == 1
