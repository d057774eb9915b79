"""A test harness for the engine's AXI4 masters in cocotb: an ``AxiReader`` feeding an ``AxiWriter``, one AXI4
master port between them (their channels do not overlap), so a read command and a write command copy a region of
memory. Not part of the IP: the engine wires the masters to its buffers instead."""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from int8_systolic.hw.axi_reader import AxiReader, axi4_read_members, command_layout
from int8_systolic.hw.axi_writer import AxiWriter, axi4_write_members

__all__ = ["AxiCopy"]


class AxiCopy(wiring.Component):
    def __init__(self, data_width=64, *, max_burst=16, max_outstanding=4):
        self.data_width, self.max_burst, self.max_outstanding = data_width, max_burst, max_outstanding
        super().__init__({
            "rd_cmd": In(stream.Signature(command_layout())), "wr_cmd": In(stream.Signature(command_layout())),
            "rd_base": In(32), "rd_limit": In(33), "wr_base": In(32), "wr_limit": In(33),
            "rd_error": Out(3), "wr_error": Out(3), "idle": Out(1), "bytes_read": Out(32), "bytes_written": Out(32),
            **axi4_read_members(data_width), **axi4_write_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        rd = m.submodules.reader = AxiReader(self.data_width, max_burst=self.max_burst,
                                             max_outstanding=self.max_outstanding)
        wr = m.submodules.writer = AxiWriter(self.data_width, max_burst=self.max_burst,
                                             max_outstanding=self.max_outstanding)
        wiring.connect(m, wiring.flipped(self.rd_cmd), rd.cmd)
        wiring.connect(m, wiring.flipped(self.wr_cmd), wr.cmd)
        m.d.comb += [
            wr.data.valid.eq(rd.data.valid), wr.data.payload.data.eq(rd.data.payload.data),
            wr.data.payload.strb.eq(-1), rd.data.ready.eq(wr.data.ready),
            rd.win_base.eq(self.rd_base), rd.win_limit.eq(self.rd_limit),
            wr.win_base.eq(self.wr_base), wr.win_limit.eq(self.wr_limit),
            self.rd_error.eq(rd.error), self.wr_error.eq(wr.error), self.idle.eq(rd.idle & wr.idle),
            self.bytes_read.eq(rd.bytes_read), self.bytes_written.eq(wr.bytes_written),
        ]
        for name in axi4_read_members(self.data_width):
            port, inner = getattr(self, name), getattr(rd, name)
            m.d.comb += (inner.eq(port) if self.signature.members[name].flow == wiring.In else port.eq(inner))
        for name in axi4_write_members(self.data_width):
            port, inner = getattr(self, name), getattr(wr, name)
            m.d.comb += (inner.eq(port) if self.signature.members[name].flow == wiring.In else port.eq(inner))
        return m
