"""The memory engine's top: the engine (:mod:`hw.engine`) behind an AXI4-Lite register block, with an IRQ.

Ports (AMBA names; one clock, ``sync``, with its synchronous reset: ``int8-systolic export --block
engine`` names them ``aclk`` and ``aresetn``, active low):

- ``s_axil_*``: AXI4-Lite slave, 32-bit data, 12-bit addresses, the register map of
  :mod:`hw.engine_registers` (docs/engine_registers.md);
- ``m_axi_*``: AXI4 master (reads and writes, ``data_width`` bits, 32-bit addresses, ID 0);
- ``irq``: high while IRQ & IRQ_ENABLE is not zero.

Reset the top only together with the AXI4 slave its master port is connected to (docs/engine.md,
Reset).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_lite import axi_lite_members
from .axi_reader import axi4_read_members
from .axi_writer import axi4_write_members
from .engine import ERRORS, Engine
from .engine_registers import ENGINE_REGISTERS, ID_MAGIC, VERSION
from .register_block import RegisterBlock

__all__ = ["EngineTop"]

ADDR_WIDTH = 12


class EngineTop(wiring.Component):
    """Parameters as :class:`hw.engine.Engine`."""

    def __init__(self, rows=8, cols=8, **kwargs):
        self.engine = Engine(rows, cols, **kwargs)
        self.rows, self.cols, self.data_width = rows, cols, self.engine.data_width
        self.rounding = kwargs.get("rounding", "double")
        super().__init__({
            **axi_lite_members(ADDR_WIDTH), **axi4_read_members(self.data_width),
            **axi4_write_members(self.data_width), "irq": Out(1),
        })

    @property
    def name(self):
        return f"int8_systolic_engine_{self.rows}x{self.cols}_{self.data_width}"

    def constants(self):
        e = self.engine
        return {
            "ID": ID_MAGIC, "VERSION": VERSION[0] << 16 | VERSION[1],
            "CONFIG": self.rows | self.cols << 8 | (self.data_width // 8) << 16 | (self.rounding == "single") << 24,
            "BUFFERS": e.in_depth // 1024 | (e.w_depth // 1024) << 10 | (e.out_depth // 1024) << 21,
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self.engine
        m.submodules.regs = regs = RegisterBlock(ENGINE_REGISTERS, addr_width=ADDR_WIDTH)
        for name, member in axi_lite_members(ADDR_WIDTH).items():
            port, inner = getattr(self, name), getattr(regs, name)
            m.d.comb += inner.eq(port) if member.flow == In else port.eq(inner)
        for name, member in {**axi4_read_members(self.data_width), **axi4_write_members(self.data_width)}.items():
            port, inner = getattr(self, name), getattr(engine, name)
            m.d.comb += port.eq(inner) if member.flow == Out else inner.eq(port)

        # control: GO, the list and the windows (each window's last byte inclusive: its limit is one past it)
        m.d.comb += [engine.go.eq(regs.control_stb & regs.w_data[0]), engine.list_addr.eq(regs.list_addr),
                     engine.ro_base.eq(regs.ro_base), engine.ro_limit.eq(regs.ro_last + 1),
                     engine.rw_base.eq(regs.rw_base), engine.rw_limit.eq(regs.rw_last + 1)]

        # a list's stop: its error bits go into ERROR once (ERROR is write-1-to-clear)
        busy_d = Signal()
        m.d.sync += busy_d.eq(engine.busy)
        stopped = Signal()
        m.d.comb += stopped.eq(busy_d & ~engine.busy)
        error_set = Signal(len(ERRORS) + 1)
        m.d.comb += error_set.eq(Cat(Mux(stopped, engine.error, 0), regs.bad_access))

        # byte counters: the masters' running totals less their values at the last CLEAR_COUNTERS
        clear = regs.control_stb & regs.w_data[1]
        read0, written0 = Signal(32), Signal(32)
        with m.If(clear):
            m.d.sync += [read0.eq(engine.bytes_read), written0.eq(engine.bytes_written)]
        error = regs.error.as_value()
        error_any = Signal()
        m.d.sync += error_any.eq(error != 0)
        # (each counter's increment a register, as in the AXI top: not in front of its carry chain)
        busy_q, step_q, wait_q, layer_q = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [busy_q.eq(engine.busy), step_q.eq(engine.step), wait_q.eq(engine.mem_wait),
                     layer_q.eq(engine.layer_done)]
        regs.bind(m, **self.constants(), STATUS=engine.busy, ERROR=error_set, ERROR_INDEX=engine.error_index,
                  IRQ=Cat(engine.done, engine.barrier, error_any), CYCLES=1, BUSY_CYCLES=busy_q, STEPS=step_q,
                  MEM_WAIT_CYCLES=wait_q, BYTES_READ=(engine.bytes_read - read0)[:32],
                  BYTES_WRITTEN=(engine.bytes_written - written0)[:32], LAYERS_DONE=layer_q)
        irq = Signal()
        m.d.sync += irq.eq((regs.irq.as_value() & regs.irq_enable.as_value()) != 0)
        m.d.comb += self.irq.eq(irq)
        return m
