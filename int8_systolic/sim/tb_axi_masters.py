"""cocotb: the engine's AXI4 masters (``sim.axi_copy.AxiCopy``: a reader feeding a writer) against
``LatencyAxiRam`` with random stalls on every channel, under the protocol monitor.

Random copies of random lengths between random places (some at 4 KB edges, some overlapping nothing): after
each, the destination holds the source's bytes and nothing else changed. Commands outside the windows raise
their error bits and move nothing, and the masters copy exactly afterwards. Writes one JSON line of figures
to ``TB_RESULTS``. Environment: ``TB_SEED``, ``TB_LATENCY``, ``TB_DATA_BYTES``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus

from .axi_memory import LatencyAxiRam
from .axi_monitor import AxiMonitor

MEMORY = 1 << 16
SEED = int(os.environ.get("TB_SEED", "1"))
LATENCY = int(os.environ.get("TB_LATENCY", "20"))


def pauses(rng, p):
    while True:
        yield rng.random() < p


async def setup(dut, rng):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    nbytes = len(dut.m_axi_rdata) // 8
    ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEMORY, latency=LATENCY)
    for ch in (ram.read_if.r_channel, ram.read_if.ar_channel, ram.write_if.aw_channel, ram.write_if.w_channel):
        ch.set_pause_generator(pauses(rng, 0.2))
    for name in ("rd_cmd__valid", "wr_cmd__valid"):
        getattr(dut, name).value = 0
    dut.rd_base.value, dut.rd_limit.value, dut.wr_base.value, dut.wr_limit.value = 0, MEMORY, 0, MEMORY
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    windows = {"read": (0, MEMORY), "write": (0, MEMORY)}
    monitor = AxiMonitor(dut, dut.clk, data_bytes=nbytes, max_burst=16, read_window=lambda: windows["read"],
                         write_window=lambda: windows["write"])
    return ram, monitor, windows, nbytes


async def send(dut, name, addr, length):
    """Offer one command on ``name`` (rd_cmd or wr_cmd) until it is taken."""
    await FallingEdge(dut.clk)
    getattr(dut, f"{name}__payload").value = addr | (length << 32)
    getattr(dut, f"{name}__valid").value = 1
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(getattr(dut, f"{name}__ready").value):
            break
    await FallingEdge(dut.clk)
    getattr(dut, f"{name}__valid").value = 0


async def idle(dut, cycles=20000):
    for _ in range(cycles):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.idle.value):   # (the writer is idle only once every B has come)
            await FallingEdge(dut.clk)
            return
    raise AssertionError("the masters never went idle")


async def errors_during(dut, coro):
    """Run ``coro``, collecting the rd_error and wr_error bits raised meanwhile."""
    seen = {"rd": 0, "wr": 0}

    async def watch():
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            seen["rd"] |= int(dut.rd_error.value)
            seen["wr"] |= int(dut.wr_error.value)

    task = cocotb.start_soon(watch())
    await coro
    await ClockCycles(dut.clk, 3)
    task.cancel()
    return seen


@cocotb.test()
async def copies(dut):
    rng = random.Random(SEED)
    ram, monitor, windows, nbytes = await setup(dut, rng)
    image = bytes(rng.randrange(256) for _ in range(MEMORY))
    ram.write(0, image)
    expect = bytearray(image)
    n_copies, moved = 0, 0
    for _ in range(12):
        length = nbytes * rng.choice([1, 3, 16, 17, 64, 130])
        src = nbytes * rng.randrange(MEMORY // 2 // nbytes - length // nbytes)
        dst = MEMORY // 2 + nbytes * rng.randrange(MEMORY // 2 // nbytes - length // nbytes)
        if rng.random() < 0.4:      # straddle a 4 KB edge
            dst = MEMORY // 2 + 4096 * rng.randrange(1, 7) - nbytes * rng.randrange(1, 5)
        cocotb.start_soon(send(dut, "wr_cmd", dst, length))
        await send(dut, "rd_cmd", src, length)
        await idle(dut)
        expect[dst:dst + length] = expect[src:src + length]
        n_copies, moved = n_copies + 1, moved + length
    assert ram.read(0, MEMORY) == bytes(expect), "memory differs after the copies"

    # commands outside the windows move nothing, raise their bits, and the next copy is exact
    windows["read"], windows["write"] = (0x1000, 0x8000), (0x8000, 0x9000)
    dut.rd_base.value, dut.rd_limit.value = 0x1000, 0x8000
    dut.wr_base.value, dut.wr_limit.value = 0x8000, 0x9000
    await ClockCycles(dut.clk, 2)
    seen = await errors_during(dut, send(dut, "rd_cmd", 0x0ff0, 32))
    assert seen["rd"] == 0b100, seen
    seen = await errors_during(dut, send(dut, "wr_cmd", 0x8ff0, 32))
    assert seen["wr"] == 0b100, seen
    cocotb.start_soon(send(dut, "wr_cmd", 0x8100, 64))
    await send(dut, "rd_cmd", 0x1200, 64)
    await idle(dut)
    expect[0x8100:0x8140] = expect[0x1200:0x1240]
    assert ram.read(0, MEMORY) == bytes(expect), "memory differs after the refused commands"
    await ClockCycles(dut.clk, LATENCY + 10)
    monitor.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    assert monitor.read_bytes == moved + 64
    assert monitor.written_bytes == moved + 64
    result = {"test": "copies", "copies": n_copies + 1, "bytes": moved + 64, "reads": monitor.reads,
              "writes": monitor.writes, "latency": LATENCY, "data_bytes": nbytes, "violations": 0}
    with open(os.environ["TB_RESULTS"], "a") as f:
        f.write(json.dumps(result) + "\n")
