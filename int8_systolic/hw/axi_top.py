"""The AXI top: the accelerator core (:mod:`hw.accelerator`) as drop-in IP.

Ports (AMBA names; one clock, ``sync``, with its synchronous reset: :func:`hw.export.export_axi`
names them ``aclk`` and ``aresetn``, active low):

- ``s_axil_*``: AXI4-Lite slave, 32-bit data, 12-bit addresses, the register map of
  :mod:`hw.registers` (docs/registers.md);
- ``s_axis_act_*``: AXI4-Stream slave, TDATA ``rows * cols`` bytes: one step's activations (int8),
  row i's in byte i for a GEMM (the other bytes ignored), cell (i, j)'s in byte ``j * rows + i`` for
  a depthwise GEMM (DESC_MODE); TLAST on the last step of each GEMM;
- ``s_axis_wts_*``: AXI4-Stream slave, TDATA ``cols`` bytes: one step's weights, lane j in byte j;
  TLAST likewise. A step is one transfer on each; the two streams are taken together (TREADY of
  each waits for the other's TVALID, which AXI4-Stream allows a slave to do);
- ``m_axis_res_*``: AXI4-Stream master, TDATA ``cols`` x 32 bits: one result row, lane j in bits
  32j .. 32j+31 (the int8 result sign-extended, or the int32 accumulator with bypass); TLAST on
  the last row of each GEMM;
- ``irq``: high while IRQ & IRQ_ENABLE is not zero.

Programming model (:mod:`sim.axi_driver` implements it): write a GEMM's per-channel entries
through the table window (TABLE_INDEX, TABLE_BIAS, TABLE_MULTIPLIER, TABLE_SHIFT) at rows the
queued and running GEMMs do not use; write DESC_* and DESC_PUSH; stream its steps (row tile
outer, column tile inner, k innermost, as for the core); read its rows. Descriptors are checked
when pushed, queued, and launched one after another (:mod:`hw.gemm_scheduler`): GEMMs with the
same output stage follow each other without draining the pipeline.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .accelerator import Accelerator
from .axi_lite import axi_lite_members
from .descriptor_check import ERRORS as DESCRIPTOR_ERRORS
from .descriptor_check import DescriptorCheck
from .gemm_scheduler import GemmScheduler
from .pipeline import KEEP_APART, Line, delay_lines, delayed
from .register_block import RegisterBlock, register_layout
from .registers import ERROR_BITS, ID_MAGIC, REGISTERS, VERSION, reg
from .result_framer import ResultFramer
from .table_window import TableWindow

__all__ = ["AxiAccelerator"]

ADDR_WIDTH = 12
# The AXI-Lite slave's latencies (hw.register_block): BVALID comes WRITE_LATENCY + 1 cycles after AW
# and W are taken, RVALID READ_LATENCY + 2 cycles after AR.
WRITE_LATENCY, READ_LATENCY = RegisterBlock.WRITE_LATENCY, RegisterBlock.READ_LATENCY


class AxiAccelerator(wiring.Component):
    """The accelerator behind AXI4-Lite and AXI4-Stream (see the module docstring).

    Parameters as :class:`hw.accelerator.Accelerator`, and ``queue_depth`` (descriptors queued,
    >= 2) and ``flight_depth`` (GEMMs launched whose results are not all out, >= 2).
    """

    def __init__(self, rows=8, cols=8, rounding="double", max_col_tiles=64, ram="distributed", dsp="generic",
                 queue_depth=4, flight_depth=4):
        for name, v in (("queue_depth", queue_depth), ("flight_depth", flight_depth)):
            if not isinstance(v, int) or not 2 <= v <= 15:
                self._MustUse__silence = True  # a refused object is not an unused design
                raise ValueError(f"{name} must be an integer in 2..15, got {v!r}")
        self.core = Accelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, ram=ram, dsp=dsp)
        self.rows, self.cols, self.rounding, self.max_col_tiles = rows, cols, rounding, max_col_tiles
        self.queue_depth, self.flight_depth = queue_depth, flight_depth
        super().__init__({
            **axi_lite_members(ADDR_WIDTH),
            "s_axis_act_tdata": In(8 * rows * cols), "s_axis_act_tvalid": In(1), "s_axis_act_tready": Out(1),
            "s_axis_act_tlast": In(1),
            "s_axis_wts_tdata": In(8 * cols), "s_axis_wts_tvalid": In(1), "s_axis_wts_tready": Out(1),
            "s_axis_wts_tlast": In(1),
            "m_axis_res_tdata": Out(32 * cols), "m_axis_res_tvalid": Out(1), "m_axis_res_tready": In(1),
            "m_axis_res_tlast": Out(1),
            "irq": Out(1),
        })

    @property
    def name(self):
        return self.core.name.replace("int8_systolic_", "int8_systolic_axi_")

    def constants(self):
        """The ``const`` registers' values for this configuration."""
        return {
            "ID": ID_MAGIC, "VERSION": VERSION[0] << 16 | VERSION[1],
            "CONFIG": self.rows | self.cols << 8 | (self.rounding == "single") << 16 | self.queue_depth << 24,
            "TABLE_DEPTH": self.max_col_tiles,
            "LATENCY": self.core.latency | self.core.min_tile_steps << 16,
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.sched = sched = GemmScheduler(max_col_tiles=self.max_col_tiles,
                                                   min_tile_steps=core.min_tile_steps,
                                                   queue_depth=self.queue_depth, flight_depth=self.flight_depth)
        m.submodules.framer = framer = ResultFramer(self.rows, n_width=len(sched.counts.n_tiles),
                                                    depth=self.flight_depth, max_col_tiles=self.max_col_tiles)
        m.submodules.regs = regs = RegisterBlock(REGISTERS, addr_width=ADDR_WIDTH)
        m.submodules.check = check = DescriptorCheck(self.max_col_tiles)
        m.submodules.window = window = TableWindow(self.cols, self.max_col_tiles)
        for name, member in axi_lite_members(ADDR_WIDTH).items():
            port, inner = getattr(self, name), getattr(regs, name)
            m.d.comb += inner.eq(port) if member.flow == In else port.eq(inner)

        # Streams into the core and out of it, the result stream through the framer (TLAST).
        m.d.comb += [
            core.act.payload.as_value().eq(self.s_axis_act_tdata), core.act.valid.eq(self.s_axis_act_tvalid),
            self.s_axis_act_tready.eq(core.act.ready),
            core.wts.payload.as_value().eq(self.s_axis_wts_tdata), core.wts.valid.eq(self.s_axis_wts_tvalid),
            self.s_axis_wts_tready.eq(core.wts.ready),
            self.m_axis_res_tdata.eq(core.res.payload.as_value()),
            framer.res_valid.eq(core.res.valid), core.res.ready.eq(framer.res_ready),
            self.m_axis_res_tvalid.eq(framer.tvalid), framer.tready.eq(self.m_axis_res_tready),
            self.m_axis_res_tlast.eq(framer.tlast),
            framer.push.eq(sched.launched), framer.counts.eq(sched.counts),
            sched.done.eq(framer.done),
        ]
        # The running GEMM's settings and the tile handshake, between the scheduler and the core.
        wiring.connect(m, sched.gemm, core.gemm)

        # Descriptors: the staged DESC_* registers checked, then queued.
        m.d.comb += [check.staged.k.eq(regs.desc_k.k), check.staged.n_tiles.eq(regs.desc_n_tiles.n_tiles),
                     check.staged.m_tiles.eq(regs.desc_m_tiles.m_tiles),
                     check.staged.base.eq(regs.desc_table_base.base),
                     check.staged.output.eq(regs.desc_output), check.staged.depthwise.eq(regs.desc_mode.depthwise),
                     check.push_req.eq(regs.desc_push_stb), check.full.eq(sched.full),
                     sched.desc.eq(check.desc), sched.push.eq(check.push)]
        # Table entries: the TABLE_* registers into the core's per-channel tables.
        wiring.connect(m, window.cfg, core.cfg)
        m.d.comb += [window.index.eq(regs.table_index), window.bias.eq(regs.table_bias),
                     window.multiplier.eq(regs.table_multiplier), window.commit.eq(regs.table_shift_stb),
                     window.shift.eq(regs.w_data), window.row_busy.eq(sched.row_busy),
                     sched.check_row.eq(window.check_row),
                     regs.table_index_next.eq(window.index_next), regs.table_index_load.eq(window.index_load)]

        # Each step, with the streams' TLAST, through two registers: checked against whether it was
        # its GEMM's last (the scheduler's `final_step`, which comes with the core's tile_end, a
        # cycle after the step), itself registered, so the check and the counters read flip-flops.
        step_d, act_last_d, wts_last_d = delay_lines(m, 2, [
            Line(self.s_axis_act_tvalid & self.s_axis_act_tready, "step_d"),
            Line(self.s_axis_act_tlast, "act_last_d"), Line(self.s_axis_wts_tlast, "wts_last_d")])
        final_step = delayed(m, sched.final_step, 1, "final_step_d")

        # ERROR's causes, one signal each (bits of one signal assigned by separate processes become
        # separate `always @*` blocks, which Icarus does not run at time 0).
        causes = {b.name: Signal(name=f"error_{b.name.lower()}") for b in ERROR_BITS}
        m.d.comb += [causes["ACT_TLAST"].eq(step_d & (act_last_d != final_step)),
                     causes["WTS_TLAST"].eq(step_d & (wts_last_d != final_step)),
                     causes["BAD_ACCESS"].eq(regs.bad_access),
                     causes["TABLE_RANGE"].eq(window.errors.range), causes["TABLE_BUSY"].eq(window.errors.busy),
                     *(causes[name].eq(check.errors[name.lower()]) for name in DESCRIPTOR_ERRORS)]

        # What the performance counters count, each a register (as an operand of the counter's add
        # it would sit in front of the carry chain). Starvation counts between a GEMM's first and
        # last step, with the streams' TVALID sampled alongside the steps.
        act_idle_d, wts_idle_d = delay_lines(m, 2, [Line(~self.s_axis_act_tvalid, "act_idle_d"),
                                                    Line(~self.s_axis_wts_tvalid, "wts_idle_d")])
        busy_d, stalled_d, done_d = Signal(), Signal(), Signal()
        m.d.sync += [busy_d.eq(sched.busy),
                     stalled_d.eq(self.m_axis_res_tvalid & ~self.m_axis_res_tready), done_d.eq(framer.done)]
        within = Signal()
        m.d.sync += within.eq((within | step_d) & ~final_step)
        starved = {name: Signal(attrs=KEEP_APART, name=f"dup_inc_{name.lower()}")
                   for name in ("ACT_STARVED", "WTS_STARVED")}
        m.d.sync += [starved["ACT_STARVED"].eq(within & act_idle_d), starved["WTS_STARVED"].eq(within & wts_idle_d)]

        status = Signal(register_layout(reg("STATUS")))  # (a register: the scheduler's flags are logic)
        m.d.sync += [status.busy.eq(sched.busy), status.active.eq(sched.active), status.queued.eq(sched.queued),
                     status.in_flight.eq(sched.in_flight)]
        error = regs.error.as_value()
        regs.bind(m, **self.constants(), STATUS=status, ERROR=Cat(causes[b.name] for b in ERROR_BITS),
                  IRQ=Cat(framer.done, error != 0), CYCLES=1, BUSY_CYCLES=busy_d, STEPS=step_d, **starved,
                  RES_STALLED=stalled_d, GEMMS_DONE=done_d)

        # irq: IRQ & IRQ_ENABLE, from a register of whether any ERROR bit is set.
        irq, error_any = Signal(), Signal()
        m.d.sync += [error_any.eq(error != 0),
                     irq.eq((regs.irq.done & regs.irq_enable.done) | (error_any & regs.irq_enable.error))]
        m.d.comb += self.irq.eq(irq)
        return m

