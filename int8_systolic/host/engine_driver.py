"""A register-level driver of the memory engine's top (:mod:`hw.engine_top`), over cocotbext-axi's AXI4-Lite master.

What a host does, in order (docs/engine.md): :meth:`EngineDriver.configure` sets the windows and
the list's address and enables the IRQ causes; :meth:`EngineDriver.go` starts (or resumes) the
list; :meth:`EngineDriver.wait` waits for ``irq`` and returns the causes (and clears them):
"done", "barrier" or "error" with ERROR's bits and ERROR_INDEX. Register names and fields come
from :mod:`hw.engine_registers`, as the C header's do.
"""

import logging

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from ..hw.engine_registers import reg
from .axi_driver import RegisterError

__all__ = ["EngineDriver", "RegisterError", "pack_fields"]


def pack_fields(name, **fields):
    """Register ``name``'s word with its fields set (names as in the map: upper case)."""
    return sum((int(v) & ((1 << reg(name).field(f).width) - 1)) << reg(name).field(f).lsb for f, v in fields.items())


class EngineDriver:
    def __init__(self, dut):
        self.dut = dut
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.aclk, dut.aresetn,
                                  reset_active_level=False)
        for bus in (self.axil.write_if, self.axil.read_if):
            bus.log.setLevel(logging.WARNING)

    async def write(self, name, value):
        resp = await self.axil.write(reg(name).offset, int(value & 0xFFFFFFFF).to_bytes(4, "little"))
        if resp.resp != AxiResp.OKAY:
            raise RegisterError(f"write of 0x{value & 0xFFFFFFFF:08X} to {name} answered {resp.resp!r}")

    async def write_offset(self, offset, value):
        return (await self.axil.write(offset, int(value).to_bytes(4, "little"))).resp

    async def read(self, name):
        resp = await self.axil.read(reg(name).offset, 4)
        if resp.resp != AxiResp.OKAY:
            raise RegisterError(f"read of {name} answered {resp.resp!r}")
        return int.from_bytes(resp.data, "little")

    async def field(self, name, fname):
        f = reg(name).field(fname)
        return (await self.read(name) >> f.lsb) & ((1 << f.width) - 1)

    async def configure(self, *, ro, rw, list_addr):
        """The windows ((base, limit) each, limit exclusive), the list's address, every IRQ cause enabled."""
        await self.write("RO_BASE", ro[0])
        await self.write("RO_LAST", ro[1] - 1)
        await self.write("RW_BASE", rw[0])
        await self.write("RW_LAST", rw[1] - 1)
        await self.write("LIST_ADDR", list_addr)
        await self.write("IRQ_ENABLE", pack_fields("IRQ_ENABLE", DONE=1, BARRIER=1, ERROR=1))

    async def go(self):
        await self.write("CONTROL", pack_fields("CONTROL", GO=1))

    async def wait(self, max_cycles=10_000_000):
        """Wait for ``irq``; returns ("done" | "barrier" | "error", ERROR, ERROR_INDEX) and clears the causes."""
        for _ in range(max_cycles):
            await RisingEdge(self.dut.aclk)
            if int(self.dut.irq.value):
                break
        else:
            raise AssertionError(f"no IRQ in {max_cycles} cycles")
        irq = await self.read("IRQ")
        error = await self.read("ERROR")
        index = await self.field("ERROR_INDEX", "INDEX")
        if error:
            await self.write("ERROR", error)
        await self.write("IRQ", irq)
        kind = "error" if error else "done" if irq & reg("IRQ").field("DONE").mask else "barrier"
        return kind, error, index
