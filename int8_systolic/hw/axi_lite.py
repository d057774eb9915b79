"""AXI4-Lite slave: turns the bus into one register access at a time for a register block.

Ports follow AMBA AXI4-Lite names with the prefix ``s_axil_`` (AWADDR, AWPROT, AWVALID,
AWREADY, WDATA, WSTRB, WVALID, WREADY, BRESP, BVALID, BREADY, ARADDR, ARPROT, ARVALID,
ARREADY, RDATA, RRESP, RVALID, RREADY), 32-bit data. The register side:

- a write: ``w_stb`` for one cycle with ``w_addr`` (word-aligned byte offset) and ``w_data``;
  the block answers in that cycle with ``w_err`` (SLVERR). A write whose WSTRB is not all ones
  is not passed on: it answers SLVERR with ``w_partial`` (registers take whole words). With
  ``write_latency`` 2 or more, ``w_pre`` comes the cycle before ``w_stb``, and ``w_addr`` and
  ``w_data`` are valid ``write_latency`` - 1 cycles before ``w_stb`` (they hold until the
  response is taken), so the block can decode the address into registers (a write strobe per
  register, and ``w_err``) rather than in front of its enables: with 3, in two stages.
- a read: ``r_stb`` for one cycle with ``r_addr``; the block gives ``r_data`` and ``r_err``
  ``read_latency`` cycles later.

Latency: the write response (BVALID) comes ``write_latency + 1`` cycles after the cycle both
AWVALID and WVALID are accepted, the read data (RVALID) ``read_latency + 2`` cycles after ARVALID
is accepted. One access of each kind is outstanding at a time; a write and a read may overlap.
Per AXI, BVALID and RVALID never wait on BREADY/RREADY, and are held with their payloads until
taken.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipeline import delayed

__all__ = ["AxiLiteSlave", "axi_lite_members"]

OKAY, SLVERR = 0b00, 0b10


def axi_lite_members(addr_width, prefix="s_axil_"):
    """The slave's AXI4-Lite ports (as signature members, flat so they keep the AMBA names)."""
    return {
        f"{prefix}awaddr": In(addr_width), f"{prefix}awprot": In(3), f"{prefix}awvalid": In(1),
        f"{prefix}awready": Out(1),
        f"{prefix}wdata": In(32), f"{prefix}wstrb": In(4), f"{prefix}wvalid": In(1), f"{prefix}wready": Out(1),
        f"{prefix}bresp": Out(2), f"{prefix}bvalid": Out(1), f"{prefix}bready": In(1),
        f"{prefix}araddr": In(addr_width), f"{prefix}arprot": In(3), f"{prefix}arvalid": In(1),
        f"{prefix}arready": Out(1),
        f"{prefix}rdata": Out(32), f"{prefix}rresp": Out(2), f"{prefix}rvalid": Out(1), f"{prefix}rready": In(1),
    }


class AxiLiteSlave(wiring.Component):
    """AXI4-Lite to a register strobe interface (see the module docstring)."""

    def __init__(self, addr_width=12, read_latency=1, write_latency=1):
        if write_latency not in (1, 2, 3):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"write_latency must be 1, 2 or 3, got {write_latency!r}")
        self.addr_width, self.read_latency, self.write_latency = addr_width, read_latency, write_latency
        super().__init__({
            **axi_lite_members(addr_width),
            "w_pre": Out(1),
            "w_stb": Out(1), "w_addr": Out(addr_width), "w_data": Out(32), "w_err": In(1), "w_partial": Out(1),
            "r_stb": Out(1), "r_addr": Out(addr_width), "r_data": In(32), "r_err": In(1),
        })

    def p(self, name):
        return getattr(self, f"s_axil_{name}")

    def elaborate(self, platform):
        m = Module()
        p = self.p
        # Write: take AW and W together (AXI lets a slave wait for both before its READYs), when
        # no response is pending; the access goes out the next cycle, its response the one after.
        w_busy = Signal()
        take_w = Signal()
        m.d.comb += [take_w.eq(p("awvalid") & p("wvalid") & ~w_busy),
                     p("awready").eq(take_w), p("wready").eq(take_w)]
        w_addr = Signal(self.addr_width, reset_less=True)
        w_data = Signal(32, reset_less=True)
        w_full = Signal()
        w_go = Signal()
        # (the address and data registers follow the ports while no write is pending, so their
        # enable is a flip-flop, not the ports' VALIDs: they hold what the taking cycle saw)
        with m.If(~w_busy):
            m.d.sync += [w_addr.eq(p("awaddr")), w_data.eq(p("wdata")), w_full.eq(p("wstrb") == 0b1111)]
        with m.If(take_w):
            m.d.sync += w_busy.eq(1)
        m.d.sync += w_go.eq(take_w)
        if self.write_latency >= 2:
            pre = delayed(m, w_go, self.write_latency - 2, "w_go_p")
            m.d.comb += self.w_pre.eq(pre & w_full)
            w_go = delayed(m, w_go, self.write_latency - 1, "w_go_d")
        m.d.comb += [self.w_stb.eq(w_go & w_full), self.w_partial.eq(w_go & ~w_full),
                     self.w_addr.eq(w_addr), self.w_data.eq(w_data)]
        with m.If(w_go):
            m.d.sync += [p("bvalid").eq(1), p("bresp").eq(Mux(~w_full | self.w_err, SLVERR, OKAY))]
        with m.If(p("bvalid") & p("bready")):
            m.d.sync += [p("bvalid").eq(0), w_busy.eq(0)]

        # Read: AR taken when no read is pending; the access goes out the next cycle, the block's
        # data comes read_latency cycles after, and RVALID with it registered.
        r_busy = Signal()
        take_r = Signal()
        m.d.comb += [take_r.eq(p("arvalid") & ~r_busy), p("arready").eq(take_r)]
        r_addr = Signal(self.addr_width, reset_less=True)
        r_go = Signal()
        with m.If(~r_busy):  # (as for writes)
            m.d.sync += r_addr.eq(p("araddr"))
        with m.If(take_r):
            m.d.sync += r_busy.eq(1)
        m.d.sync += r_go.eq(take_r)
        r_back = delayed(m, r_go, self.read_latency, "r_back")
        m.d.comb += [self.r_stb.eq(r_go), self.r_addr.eq(r_addr)]
        with m.If(r_back):
            m.d.sync += [p("rvalid").eq(1), p("rdata").eq(self.r_data), p("rresp").eq(Mux(self.r_err, SLVERR, OKAY))]
        with m.If(p("rvalid") & p("rready")):
            m.d.sync += [p("rvalid").eq(0), r_busy.eq(0)]
        return m

