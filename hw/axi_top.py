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

import operator
from functools import reduce

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .accelerator import Accelerator
from .axi_lite import AxiLiteSlave, axi_lite_members
from .gemm_scheduler import GemmScheduler
from .pipeline import KEEP_APART, Line, delay_lines, delayed
from .registers import ERROR_BITS, ID_MAGIC, REGISTERS, VERSION, reg
from .result_framer import ResultFramer

__all__ = ["AxiAccelerator"]

ADDR_WIDTH = 12
# The AXI-Lite slave's latencies (hw.axi_lite): BVALID comes WRITE_LATENCY + 1 cycles after AW and
# W are taken, RVALID READ_LATENCY + 2 cycles after AR.
WRITE_LATENCY, READ_LATENCY = 3, 7


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

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.sched = sched = GemmScheduler(max_col_tiles=self.max_col_tiles, k_width=len(core.k_steps),
                                                   min_tile_steps=core.min_tile_steps,
                                                   queue_depth=self.queue_depth, flight_depth=self.flight_depth)
        m.submodules.framer = framer = ResultFramer(self.rows, n_width=len(sched.counts.n_tiles),
                                                          depth=self.flight_depth, max_col_tiles=self.max_col_tiles)
        m.submodules.axil = axil = AxiLiteSlave(ADDR_WIDTH, read_latency=READ_LATENCY, write_latency=WRITE_LATENCY)
        for name, member in axi_lite_members(ADDR_WIDTH).items():
            port, inner = getattr(self, name), getattr(axil, name)
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
        # The running GEMM's settings, from the scheduler.
        m.d.comb += [getattr(core, f).eq(getattr(sched, f)) for f in
                     ("k_steps", "n_tiles", "table_base", "depthwise", "output_offset", "act_min", "act_max",
                      "bypass", "hold")]
        m.d.comb += [sched.admit.eq(core.admit), sched.tile_end.eq(core.tile_end)]

        # A step, with the streams' TLAST, through two registers: checked against whether it was its
        # GEMM's last (the scheduler's `final_step`, which comes with the core's tile_end, a cycle
        # after the step), itself registered (`final_step_d`: the check and the counters below
        # read flip-flops only, not the core's pulses).
        step_d, act_last_d, wts_last_d = delay_lines(m, 2, [
            Line(self.s_axis_act_tvalid & self.s_axis_act_tready, "step_d"),
            Line(self.s_axis_act_tlast, "act_last_d"), Line(self.s_axis_wts_tlast, "wts_last_d")])
        final_step = delayed(m, sched.final_step, 1, "final_step_d")

        # Registers.
        error = Signal(len(ERROR_BITS))
        set_error = Signal(len(ERROR_BITS))
        w1c = Signal(len(ERROR_BITS))

        # (one signal per cause, joined in one assignment: bits of one signal assigned by separate
        # processes become separate `always @*` blocks, which Icarus does not run at time 0)
        causes = {b.name: Signal(name=f"error_{b.name.lower()}") for b in ERROR_BITS}
        m.d.comb += set_error.eq(Cat(causes[b.name] for b in ERROR_BITS))

        def err(name):
            return causes[name]

        m.d.comb += [err("ACT_TLAST").eq(step_d & (act_last_d != final_step)),
                     err("WTS_TLAST").eq(step_d & (wts_last_d != final_step))]
        irq_done = Signal()
        irq_enable = Signal(2)
        staged = {name: Signal(32, name=f"staged_{name.lower()}") for name in
                  ("DESC_K", "DESC_N_TILES", "DESC_M_TILES", "DESC_TABLE_BASE", "DESC_OUTPUT", "DESC_MODE",
                   "TABLE_INDEX", "TABLE_BIAS", "TABLE_MULTIPLIER")}

        def field(name, fname):
            f = reg(name).field(fname)
            return staged[name][f.lsb:f.lsb + f.width]

        desc = sched.desc
        # a descriptor that passed its checks, a register (the scheduler queues it in the next
        # cycle, from the staging registers, which no write changes before then: writes reach the
        # registers at least five cycles apart)
        push = Signal()
        m.d.comb += sched.push.eq(push)
        # A register write strobe per writable register (dup_we_*, each a flip-flop), decoded in two
        # stages on the AXI-Lite slave's address register, valid from two cycles before the strobe:
        # each offset's compare in two halves (the address's low and high six bits, registers),
        # then their AND with w_pre (as one 12-bit compare in front of w_pre's AND, 6.0 ns routed);
        # and w_bad likewise for the offsets nothing takes.
        writable = [r for r in REGISTERS if r.access in ("rw", "wo", "w1c")]
        we = {r.name: Signal(attrs=KEEP_APART, name=f"dup_we_{r.name.lower()}") for r in writable}
        half = ADDR_WIDTH // 2

        def half_matches(addr, offsets, name, keep=False):
            """Each offset's compare with ``addr``'s low and high halves, from registers: one per distinct
            half (offsets that share a half share its register)."""
            mask = (1 << half) - 1
            halves = {"lo": [o & mask for o in offsets], "hi": [o >> half for o in offsets]}
            out = []
            for part, values in halves.items():
                distinct = sorted(set(values))
                reg_ = Signal(len(distinct), name=f"{name}_{part}", attrs=KEEP_APART if keep else None)
                bits = addr[:half] if part == "lo" else addr[half:]
                m.d.sync += reg_.eq(Cat(bits == v for v in distinct))
                out.append(Cat(reg_[distinct.index(v)] for v in values))
            return out

        w_lo, w_hi = half_matches(axil.w_addr, [r.offset for r in writable], "w_match")
        w_bad = Signal()
        m.d.sync += [sig.eq(axil.w_pre & w_lo[n] & w_hi[n]) for n, sig in enumerate(we.values())]
        m.d.sync += w_bad.eq(axil.w_pre & ~(w_lo & w_hi).any())
        m.d.comb += [axil.w_err.eq(w_bad), err("BAD_ACCESS").eq(w_bad | axil.w_partial)]

        k, n, mt, base = (field("DESC_K", "K"), field("DESC_N_TILES", "N_TILES"), field("DESC_M_TILES", "M_TILES"),
                          field("DESC_TABLE_BASE", "BASE"))
        out = {f: field("DESC_OUTPUT", f.upper()) for f in ("output_offset", "act_min", "act_max", "bypass")}
        # The staged descriptor's checks and the counts the scheduler queues, in register stages
        # from the staging registers: copies of the fields (dup_chk_*, near the checks); then the
        # counts - 1, `end` = base + n_tiles, act_max - act_min and each field's compares with 0
        # and 1 by groups of four bits; then the checks and the flags for counts of 1. They are
        # current when a DESC_PUSH write arrives: AXI4-Lite writes reach the registers at least
        # five cycles apart. (Each stage is one carry chain or about two LUT levels: an add and a
        # compare in one stage, or a 24-bit compare with 0 in front of the check's OR, were
        # routed worst paths, 7.7, 7.1 and 6.3 ns.)
        checked = {"k": k, "n": n, "mt": mt, "base": base, "act_min": out["act_min"], "act_max": out["act_max"]}
        chk = {name: Signal.like(v, attrs=KEEP_APART, name=f"dup_chk_{name}", reset_less=True)
               for name, v in checked.items()}
        m.d.sync += [chk[name].eq(v) for name, v in checked.items()]
        checks = {name: Signal(name=f"bad_{name.lower()}") for name in ("DESC_K", "DESC_TILES", "DESC_TABLE",
                                                                           "DESC_BOUNDS")}

        def nibbles_equal(value, const, name):
            """A register per four bits of ``value``: whether they equal ``const``'s."""
            flags = Signal(-(-len(value) // 4), name=name, reset_less=True)
            m.d.sync += flags.eq(Cat(value[i:i + 4] == (const >> i) & 0xF for i in range(0, len(value), 4)))
            return flags

        k0, n0, mt0 = (nibbles_equal(chk[f], 0, f"chk_{f}_is0") for f in ("k", "n", "mt"))
        n1, mt1 = (nibbles_equal(chk[f], 1, f"chk_{f}_is1") for f in ("n", "mt"))
        end = Signal(17, reset_less=True)
        bounds = Signal(signed(9), reset_less=True)
        counts = {"m_m1": Signal(24, reset_less=True), "n_m1": Signal(16, reset_less=True),
                  "m_one": Signal(reset_less=True), "n_one": Signal(reset_less=True)}
        m.d.sync += [end.eq(chk["base"] + chk["n"]),
                     bounds.eq(chk["act_max"].as_signed() - chk["act_min"].as_signed()),
                     counts["m_m1"].eq(chk["mt"] - 1), counts["n_m1"].eq(chk["n"] - 1)]
        m.d.sync += [checks["DESC_K"].eq(k0.all()), checks["DESC_TILES"].eq(n0.all() | mt0.all()),
                     checks["DESC_TABLE"].eq(end > self.max_col_tiles), checks["DESC_BOUNDS"].eq(bounds < 0),
                     counts["m_one"].eq(mt1.all()), counts["n_one"].eq(n1.all())]
        m.d.comb += [desc.k.eq(k), desc.n_tiles.eq(n), desc.base.eq(base), desc.end.eq(end),
                     *(getattr(desc, f).eq(v) for f, v in counts.items())]
        m.d.comb += [getattr(desc, f).eq(v) for f, v in out.items()]
        m.d.comb += desc.depthwise.eq(field("DESC_MODE", "DEPTHWISE"))
        # Whether the staged output stage is that of the descriptor last queued (the scheduler
        # launches the GEMMs of one output stage without draining): a register per field of the
        # compare, from copies of the staging registers and of the last queued stage, then their
        # AND, a register. Current three cycles after the staging registers change and two after a
        # push, so at a DESC_PUSH write (writes reach the registers at least five cycles apart).
        out_bits = Cat(*out.values())
        last_out = Signal(len(out_bits), name="last_queued_output")
        with m.If(push):
            m.d.sync += last_out.eq(out_bits)
        chk_out = Signal(len(out_bits), reset_less=True, attrs=KEEP_APART, name="dup_chk_output")
        m.d.sync += chk_out.eq(out_bits)
        out_eq = Signal(-(-len(out_bits) // 2), reset_less=True, name="chk_output_eq")
        m.d.sync += out_eq.eq(Cat(chk_out[i:i + 2] == last_out[i:i + 2] for i in range(0, len(out_bits), 2)))
        same_output = Signal(reset_less=True, name="chk_same_output")
        m.d.sync += same_output.eq(out_eq.all())
        m.d.comb += desc.same_output.eq(same_output)
        lane, row = field("TABLE_INDEX", "LANE"), field("TABLE_INDEX", "ROW")
        m.d.comb += sched.check_row.eq(row)

        # Performance counters.
        counter_names = ("CYCLES", "BUSY_CYCLES", "STEPS", "ACT_STARVED", "WTS_STARVED", "RES_STALLED", "GEMMS_DONE")
        counters = {name: Signal(32, name=f"count_{name.lower()}", reset_less=True) for name in counter_names}
        # CONTROL.CLEAR_COUNTERS written in the cycle before, or reset: a register per counter
        # (dup_clear_*, each beside its counter rather than one driving all seven; high in reset,
        # so it is the counter's only clear)
        clears = {name: Signal(init=1, attrs=KEEP_APART, name=f"dup_clear_{name.lower()}") for name in counter_names}
        busy_d, stalled_d, done_d = Signal(), Signal(), Signal()
        # (TVALID sampled with the steps, two registers deep)
        act_idle_d, wts_idle_d = delay_lines(m, 2, [Line(~self.s_axis_act_tvalid, "act_idle_d"),
                                                    Line(~self.s_axis_wts_tvalid, "wts_idle_d")])
        m.d.sync += [busy_d.eq(sched.busy),
                     stalled_d.eq(self.m_axis_res_tvalid & ~self.m_axis_res_tready), done_d.eq(framer.done)]
        # between a GEMM's first and last step: set by a step, cleared by the last (both seen a
        # cycle late, with the streams' TVALID sampled alongside)
        within = Signal()
        m.d.sync += within.eq((within | step_d) & ~final_step)
        starved = {name: Signal(attrs=KEEP_APART, name=f"dup_inc_{name.lower()}")
                   for name in ("ACT_STARVED", "WTS_STARVED")}
        m.d.sync += [starved["ACT_STARVED"].eq(within & act_idle_d), starved["WTS_STARVED"].eq(within & wts_idle_d)]
        # Each counter's increment is a flip-flop, its enable (as an operand of the add, it went
        # through the 32-bit carry chain: 6.5 ns routed)
        incs = {"CYCLES": 1, "BUSY_CYCLES": busy_d, "STEPS": step_d, **starved, "RES_STALLED": stalled_d,
                "GEMMS_DONE": done_d}
        for name, counter in counters.items():
            with m.If(clears[name]):
                m.d.sync += counter.eq(0)
            with m.Elif(incs[name]):
                m.d.sync += counter.eq(counter + 1)

        # Writes.
        commit = Signal()
        for name, sig in staged.items():
            with m.If(we[name]):
                m.d.sync += sig.eq(axil.w_data)
        m.d.comb += w1c.eq(Mux(we["ERROR"], axil.w_data[:len(error)], 0))
        with m.If(we["IRQ"] & axil.w_data[0]):
            m.d.sync += irq_done.eq(0)
        with m.If(we["IRQ_ENABLE"]):
            m.d.sync += irq_enable.eq(axil.w_data[:2])
        m.d.sync += [c.eq(we["CONTROL"] & axil.w_data[0]) for c in clears.values()]
        bad = {**checks, "QUEUE_FULL": sched.full}
        with m.If(we["DESC_PUSH"]):
            m.d.comb += [err(name).eq(cond) for name, cond in bad.items()]
        m.d.sync += push.eq(we["DESC_PUSH"] & ~Cat(*bad.values()).any())
        m.d.comb += commit.eq(we["TABLE_SHIFT"])
        # A table entry committed: refused out of range or into a queued or running GEMM's rows.
        # (a register made from TABLE_INDEX: current at the next commit, three cycles on at least)
        out_of_range = Signal()
        m.d.sync += out_of_range.eq((row >= self.max_col_tiles) | (lane >= self.cols))
        m.d.comb += [err("TABLE_RANGE").eq(commit & out_of_range),
                     err("TABLE_BUSY").eq(commit & ~out_of_range & sched.row_busy)]
        # (the entry reaches the core's cfg port through a register: the core's table ports are
        # across the die from here)
        cfg = core.cfg.payload
        m.d.sync += [core.cfg.valid.eq(commit & ~out_of_range & ~sched.row_busy),
                     cfg.addr.eq(row), cfg.lane.eq(lane),
                     cfg.entry.bias.eq(staged["TABLE_BIAS"]), cfg.entry.multiplier.eq(staged["TABLE_MULTIPLIER"]),
                     cfg.entry.shift.eq(axil.w_data[:6])]
        # (whether the lane is the last, a register: current at a commit, as above)
        lane_last = Signal()
        m.d.sync += lane_last.eq(lane >= self.cols - 1)
        with m.If(commit):  # the index moves on whether or not the entry was taken
            with m.If(lane_last):
                m.d.sync += [lane.eq(0), row.eq(row + 1)]
            with m.Else():
                m.d.sync += lane.eq(lane + 1)
        m.d.sync += error.eq((error & ~w1c) | set_error)
        with m.If(framer.done):
            m.d.sync += irq_done.eq(1)
        # (whether any ERROR bit is set, a register: as the OR of ten bits in front of `irq` it was
        # two LUT levels on a path that failed 200 MHz on the 8x8 AXI top at 8a431b2)
        irq, error_any = Signal(), Signal()
        m.d.sync += [error_any.eq(error != 0),
                     irq.eq((irq_done & irq_enable[0]) | (error_any & irq_enable[1]))]
        m.d.comb += self.irq.eq(irq)

        # Reads.
        fixed = {
            "ID": ID_MAGIC, "VERSION": VERSION[0] << 16 | VERSION[1],
            "CONFIG": self.rows | self.cols << 8 | (self.rounding == "single") << 16 | self.queue_depth << 24,
            "TABLE_DEPTH": self.max_col_tiles,
            "LATENCY": self.core.latency | self.core.min_tile_steps << 16,
        }
        status = Signal(32)  # (a register: the scheduler's flags are logic)
        for fname, value in (("BUSY", sched.busy), ("ACTIVE", sched.active), ("QUEUED", sched.queued),
                             ("IN_FLIGHT", sched.in_flight)):
            f = reg("STATUS").field(fname)
            m.d.sync += status[f.lsb:f.lsb + f.width].eq(value)
        live = {
            "STATUS": status,
            "ERROR": error, "IRQ": Cat(irq_done, error != 0), "IRQ_ENABLE": irq_enable,
            **staged, **counters,
        }
        # In seven register stages (the value seven cycles after r_stb): the address copied into a
        # register per group of four values and one for the error (dup_: each near its decoder,
        # not one index fanned out across the die); each offset's compare in two halves (the
        # address's low and high six bits); their AND, the one-hot selects; a copy of each select;
        # each value ANDed with its select into a register of its own (near the value); each
        # group's OR; then the OR of the groups (a read of a write-only register gives 0). The
        # address registers hold from one r_stb to the next, so the stages after them need no
        # enable. (As one 31-way
        # multiplexer, 8.6 ns of routing; with one shared index register 7.5 ns; decoded from the
        # AXI-Lite slave's address register 7.3 ns; with each group's AND-OR in one register,
        # from values across the die, 6.4 ns; each select decoded from the address in one cycle,
        # 6.0 ns.)
        readable = [r for r in REGISTERS if r.name in fixed or r.name in live]
        values = [Const(fixed[r.name], 32) if r.name in fixed else Value.cast(live[r.name]) for r in readable]
        groups = [list(range(k, min(k + 4, len(values)))) for k in range(0, len(values), 4)]
        addrs = [Signal(ADDR_WIDTH, attrs=KEEP_APART, name=f"dup_r_addr{k}", reset_less=True)
                 for k in range(len(groups) + 1)]
        with m.If(axil.r_stb):
            m.d.sync += [a.eq(axil.r_addr) for a in addrs]

        def matches(addr, offsets, name):
            """Registers: each offset's match with ``addr``, from its two halves' compares a stage before."""
            lo, hi = half_matches(addr, offsets, name, keep=True)
            both = Signal(len(offsets), name=f"{name}_sel", attrs=KEEP_APART)
            m.d.sync += both.eq(lo & hi)
            return both

        onehots = [matches(addrs[k], [readable[n].offset for n in g], f"dup_r_match{k}") for k, g in enumerate(groups)]
        mapped = matches(addrs[-1], [r.offset for r in REGISTERS], "dup_r_mapped")
        # (whether the offset is a register at all: the OR of the matches in two more stages)
        mapped_groups = Signal(-(-len(REGISTERS) // 4))
        m.d.sync += mapped_groups.eq(Cat(mapped[k:k + 4].any() for k in range(0, len(REGISTERS), 4)))
        r_err = Signal()
        m.d.sync += r_err.eq(~mapped_groups.any())
        # (each select copied into a register of its own, which may sit by its value's register:
        # from the match registers straight to the value registers was 4.4 ns of routing)
        # (inverted, `clear`: each value register's synchronous reset is then the flip-flop itself,
        # where a select needed a LUT in front of the reset input, and that LUT's route to the
        # value across the die was the 8x8 AXI top's worst path at 8a431b2 (seeds 1 and 2))
        clears = [Signal(init=1, attrs=KEEP_APART, name=f"dup_r_clear{n}") for n in range(len(values))]
        for k, g in enumerate(groups):
            m.d.sync += [clears[n].eq(~onehots[k][i]) for i, n in enumerate(g)]
        selected = [Signal(32, name=f"r_value{n}", reset_less=True) for n in range(len(values))]
        m.d.sync += [selected[n].eq(Mux(clears[n], 0, values[n])) for n in range(len(values))]
        group_regs = [Signal(32, name=f"r_group{k}", reset_less=True) for k in range(len(groups))]
        m.d.sync += [reg_.eq(reduce(operator.or_, (selected[n] for n in g))) for reg_, g in
                     zip(group_regs, groups, strict=True)]
        r_data = Signal(32, reset_less=True)
        m.d.sync += r_data.eq(reduce(operator.or_, group_regs))
        r_err_out = delayed(m, r_err, 2, "r_err_d")
        m.d.comb += [axil.r_data.eq(r_data), axil.r_err.eq(r_err_out)]
        return m
