"""cocotb: the memory engine's top (``hw.engine_top.EngineTop``: the engine behind its AXI4-Lite register block) driven
through its registers only (``host.engine_driver``), memory being ``LatencyAxiRam``, under the AXI4 protocol
monitor on its master port and the AXI4-Lite one on its register port.

- ``registers``: ID, VERSION, CONFIG and BUFFERS read their elaborated values; a write to an unmapped offset is
  answered SLVERR and sets ERROR.BAD_ACCESS, which write-1 clears.
- ``list_with_barrier``: a list of random layers with a BARRIER: IRQ.BARRIER, GO resumes, IRQ.DONE; every output
  equals golden; the counters: STEPS equals the layers' step count (row tiles x column tiles x K each),
  LAYERS_DONE the layers, BYTES_READ and BYTES_WRITTEN what the monitor saw; CLEAR_COUNTERS zeroes them.
- ``refused``: a bad command raises IRQ.ERROR with its ERROR bit and ERROR_INDEX, write-1 clears ERROR, and the
  next list is exact.

Environment: ``TB_SEED``, ``TB_LATENCY``, ``TB_ROWS``, ``TB_COLS``. One JSON line per test to ``TB_RESULTS``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiResp

from ..host.engine_driver import EngineDriver
from ..hw import commands
from ..hw.engine import ERRORS
from ..hw.engine_registers import ID_MAGIC, VERSION, reg
from .axi_memory import LatencyAxiRam
from .axi_monitor import AxiLiteMonitor, AxiMonitor
from .engine_stimulus import LIST, MEMORY, RO, RW, Image, Layer, check_memory, poke

SEED = int(os.environ.get("TB_SEED", "1"))
LATENCY = int(os.environ.get("TB_LATENCY", "20"))
ROWS = int(os.environ.get("TB_ROWS", "8"))
COLS = int(os.environ.get("TB_COLS", "8"))


async def setup(dut):
    cocotb.start_soon(Clock(dut.aclk, 10, unit="ns").start())
    nbytes = len(dut.m_axi_rdata) // 8
    ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.aclk, dut.aresetn, size=MEMORY, latency=LATENCY,
                        reset_active_level=False)
    monitor = AxiMonitor(dut, dut.aclk, data_bytes=nbytes, max_burst=16, read_window=[RO, RW], write_window=RW)
    monitor.lite = AxiLiteMonitor(dut, dut.aclk, reset=dut.aresetn)      # the register block's port
    drv = EngineDriver(dut)
    dut.aresetn.value = 0
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 2)
    await drv.configure(ro=RO, rw=RW, list_addr=LIST)
    return ram, monitor, drv


def write_result(result):
    with open(os.environ["TB_RESULTS"], "a") as f:
        f.write(json.dumps(result) + "\n")


def steps_of(layer):
    """The array steps of a layer: row tiles x column tiles x K."""
    return -(-layer.g.pixels // ROWS) * -(-layer.out_c // COLS) * layer.g.k


@cocotb.test()
async def registers(dut):
    _, monitor, drv = await setup(dut)
    nbytes = len(dut.m_axi_rdata) // 8
    assert await drv.read("ID") == ID_MAGIC
    assert await drv.read("VERSION") == VERSION[0] << 16 | VERSION[1]
    assert await drv.field("CONFIG", "ROWS") == ROWS
    assert await drv.field("CONFIG", "COLS") == COLS
    assert await drv.field("CONFIG", "BUS_BYTES") == nbytes
    assert await drv.field("BUFFERS", "INPUT_KIB") > 0
    assert await drv.write_offset(0x3FC, 1) == AxiResp.SLVERR
    bad = reg("ERROR").field("BAD_ACCESS").mask
    assert await drv.read("ERROR") == bad
    await drv.write("ERROR", bad)
    assert await drv.read("ERROR") == 0
    assert await drv.field("STATUS", "BUSY") == 0
    assert monitor.violations == []
    monitor.lite.check_idle()
    assert monitor.lite.violations == [], monitor.lite.violations[:5]
    assert (monitor.lite.reads, monitor.lite.writes) == (9, 8)     # every transfer above (configure: 6 writes)
    write_result({"test": "registers", "compared": 0, "violations": 0})


@cocotb.test()
async def list_with_barrier(dut):
    rng = random.Random(SEED)
    ram, monitor, drv = await setup(dut)
    image = Image(SEED, COLS)
    layers = [Layer(rng, SEED * 10 + i, fc=(i == 3)) for i in range(4)]
    for layer in layers[:2]:
        image.add(layer)
    image.raw(commands.pack(op="BARRIER"))
    for layer in layers[2:]:
        image.add(layer)
    image.finish()
    ram.write(0, bytes(image.mem))
    before = bytes(image.mem)
    await drv.write("CONTROL", 2)          # CLEAR_COUNTERS
    await drv.go()
    assert (await drv.wait())[0] == "barrier"
    await drv.go()
    assert (await drv.wait())[0] == "done"
    await ClockCycles(dut.aclk, LATENCY + 10)
    check_memory(bytearray(ram.read(0, MEMORY)), before, image.outputs)
    assert await drv.read("STEPS") == sum(steps_of(layer) for layer in layers)
    assert await drv.read("LAYERS_DONE") == len(layers)
    assert await drv.read("BYTES_READ") == monitor.read_bytes
    assert await drv.read("BYTES_WRITTEN") == monitor.written_bytes
    busy, cycles = await drv.read("BUSY_CYCLES"), await drv.read("CYCLES")
    assert 0 < busy < cycles
    await drv.write("CONTROL", 2)
    assert [await drv.read(n) for n in ("STEPS", "LAYERS_DONE", "BYTES_READ", "BYTES_WRITTEN")] == [0, 0, 0, 0]
    monitor.check_idle()
    monitor.lite.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    assert monitor.lite.violations == [], monitor.lite.violations[:5]
    write_result({"test": "list_with_barrier", "compared": sum(len(e) for _, e in image.outputs),
                  "steps": sum(steps_of(layer) for layer in layers), "busy_cycles": busy, "violations": 0})


@cocotb.test()
async def refused(dut):
    rng = random.Random(SEED + 1)
    ram, monitor, drv = await setup(dut)
    image = Image(SEED + 1, COLS)
    image.add(Layer(rng, 500))
    image.add(Layer(rng, 501))
    image.list[-1] = poke(image.list[-1], weights_addr=RW[0])     # outside the read-only window
    image.finish()
    image.add(Layer(rng, 502))
    image.finish(at=0x800)
    ram.write(0, bytes(image.mem))
    before = bytes(image.mem)
    await drv.go()
    kind, error, index = await drv.wait()
    assert (kind, error, index) == ("error", 1 << ERRORS["WINDOW"], 1), (kind, error, index)
    assert await drv.read("ERROR") == 0
    await drv.write("LIST_ADDR", 0x800)
    await drv.go()
    assert (await drv.wait())[0] == "done"
    await ClockCycles(dut.aclk, LATENCY + 10)
    check_memory(bytearray(ram.read(0, MEMORY)), before, [image.outputs[0], image.outputs[2]])
    monitor.check_idle()
    monitor.lite.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    assert monitor.lite.violations == [], monitor.lite.violations[:5]
    write_result({"test": "refused", "compared": len(image.outputs[0][1]) + len(image.outputs[2][1]),
                  "violations": 0})
