"""The accelerator top: systolic array + per-channel tables + requantizer lanes, on streams.

Programming model (what a host does, in order; :mod:`sim.host` implements it):

1. Set the per-layer inputs: ``k_steps`` (K >= 1), ``n_tiles`` (column tiles,
   ceil(N / cols)), ``output_offset`` (output zero point), ``act_min``/``act_max`` and
   ``bypass``. They must stay stable while a layer runs, from at least three cycles before its
   first step (the accelerator keeps values derived from them in registers, some made from
   a registered copy: ``n_tiles`` reaches the column-tile wrap flag through three, so with
   two, a K = 1 layer after one with more column tiles moved its tile index past the wrap) to
   its last result.
2. Write the per-channel table through ``cfg``: for output channel n, ``lane = n % cols``,
   ``addr = n // cols``, the folded bias ``bias - z_a * sum_k w[k][n]``, and the
   ``multiplier``/``shift`` from QuantizeMultiplier. Always ready; one write per cycle, landing
   in the table three cycles after its transfer.
3. Stream the tiles, row tile outer, column tile inner (``for mt: for nt: for k``): each
   step is one transfer on ``act`` (``a[mt*rows + i][k]`` for i < rows, zero-padded) and
   one on ``wts`` (``w[k][nt*cols + j]`` for j < cols, zero-padded); the two are consumed
   together.
4. Read ``res``: per tile, ``rows`` transfers of ``cols`` int32 lanes (row i of the tile),
   each the int8 result sign-extended (or the int32 accumulator with ``bypass``).

Throughput: one step per cycle while both inputs are valid and ``res`` is ready; tiles
of fewer than ``max(rows, cols)`` steps are padded with idle cycles. Latency: a tile's
last result row leaves :attr:`Accelerator.latency` cycles after its last step, so a GEMM
at full rate takes :meth:`Accelerator.cycles` cycles (tested in Amaranth's simulator).

Flow control without a global stall: the array and the requantizer lanes never stop (idle
cycles travel through them as invalid steps); finished rows go into an output FIFO of
:attr:`Accelerator.fifo_depth` rows that feeds ``res``. A tile's first step is accepted only
when the FIFO has room for all rows of the tiles in flight plus this one's (a credit
counter, which sees rows read from ``res`` through registers and counts a few cycles late, so
it leaves room for the tiles admitted meanwhile), so backpressure on
``res`` fills the FIFO and then holds ``act``/``wts`` off; nothing is lost, duplicated or
reordered. The depth is chosen so that credits never throttle a full-rate stream, and a tile
less would (docs/hardware.md states the rule at the ports; tests/test_accelerator_credit.py
checks it in every cycle). The FIFO is one per lane, in lockstep: rows in a memory (block
RAM on ECP5) moved by credit into a 16-row queue that ``res`` reads (:class:`_OutputFIFO`), so
``res.ready`` reaches only the queues.
"""

import operator
from functools import reduce

from amaranth import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .multiplier import DSP_KINDS
from .pipeline import Line, delay_lines, delayed
from .requantizer import Requantizer

__all__ = ["Accelerator", "ChannelEntry", "config_layout"]

ChannelEntry = data.StructLayout({"bias": signed(32), "multiplier": signed(32), "shift": signed(6)})


def config_layout(cols, max_col_tiles):
    """Payload of the ``cfg`` stream: one per-channel table entry."""
    return data.StructLayout({"addr": range(max_col_tiles), "lane": range(max(cols, 2)), "entry": ChannelEntry})


class Accelerator(wiring.Component):
    """``rows x cols`` int8 GEMM accelerator with TFLite requantization (see module docstring).

    Parameters: ``rows``, ``cols`` (>= 1), ``rounding`` ("double"/"single"),
    ``max_col_tiles`` (depth of the per-channel tables: N <= max_col_tiles * cols),
    ``ram`` ("distributed" or "block"): the ``ram_style`` attribute of the per-channel tables
    and the output FIFO, a synthesis hint only. "distributed" (LUT RAM) suits ECP5 and Xilinx,
    where an inferred block RAM's unregistered output (5.8 ns on ECP5) would cap Fmax near
    150 MHz; "block" suits iCE40, which has no LUT RAM.
    ``dsp`` ("generic" or "ecp5"): how the multipliers are built (:mod:`hw.multiplier`) and,
    with "ecp5", the per-channel tables too: ``DP16KD`` block RAMs with their output registers
    (whatever ``ram`` says; see :class:`_ChannelTable`). The two are cycle-for-cycle identical.
    """

    def __init__(self, rows=8, cols=8, rounding="double", max_col_tiles=64, ram="distributed", dsp="generic"):
        error = None
        if dsp not in DSP_KINDS:
            error = f"dsp must be one of {DSP_KINDS}, got {dsp!r}"
        elif ram not in ("distributed", "block"):
            error = f"ram must be 'distributed' or 'block', got {ram!r}"
        elif rounding not in ("double", "single"):
            error = f"rounding must be 'double' or 'single', got {rounding!r}"
        elif not isinstance(max_col_tiles, int) or max_col_tiles < 1:
            error = f"max_col_tiles must be an integer >= 1, got {max_col_tiles!r}"
        elif dsp == "ecp5" and max_col_tiles > _DP16KD_DEPTH:
            error = f"max_col_tiles must be <= {_DP16KD_DEPTH} with dsp='ecp5' (one DP16KD deep), got {max_col_tiles}"
        for name, v in (("rows", rows), ("cols", cols)):
            if not isinstance(v, int) or v < 1:
                error = f"{name} must be an integer >= 1, got {v!r}"
        if error:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(error)
        self._array = SystolicArray(rows, cols, dsp=dsp)
        self._lanes = [Requantizer(rounding, dsp=dsp) for _ in range(cols)]  # one per column, in lockstep
        self.rows, self.cols, self.rounding, self.max_col_tiles = rows, cols, rounding, max_col_tiles
        self.ram, self.dsp = ram, dsp
        if dsp == "ecp5" and self.fifo_depth > _DP16KD_DEPTH:
            for obj in (self, self._array, *self._lanes):
                obj._MustUse__silence = True
            raise ValueError(f"a {rows}x{cols} array needs an output FIFO of {self.fifo_depth} rows, more than "
                             f"one DP16KD ({_DP16KD_DEPTH}) holds with dsp='ecp5'")
        super().__init__({
            "act": In(stream.Signature(data.ArrayLayout(signed(8), rows))),
            "wts": In(stream.Signature(data.ArrayLayout(signed(8), cols))),
            "cfg": In(stream.Signature(config_layout(cols, max_col_tiles))),
            "res": Out(stream.Signature(data.ArrayLayout(signed(32), cols))),
            "k_steps": In(24),
            "n_tiles": In(range(max_col_tiles + 1)),
            "output_offset": In(signed(8)),
            "act_min": In(signed(8)),
            "act_max": In(signed(8)),
            "bypass": In(1),
        })

    @classmethod
    def model(cls, *args, **kwargs):
        """An instance used only for its properties (``latency``, ``cycles``, ``fifo_depth``), never
        elaborated: Amaranth would otherwise warn that the design was created and not used."""
        dut = cls(*args, **kwargs)
        for obj in (dut, dut._array, *dut._lanes):
            obj._MustUse__silence = True
        return dut

    @property
    def name(self):
        """Verilog module name encoding the configuration (``_ecp5`` when built on MULT18X18D primitives)."""
        suffix = "" if self.dsp == "generic" else f"_{self.dsp}"
        return f"int8_systolic_{self.rows}x{self.cols}_{self.rounding}{suffix}"

    @property
    def min_tile_steps(self):
        """Shortest tile (steps); shorter tiles are padded with idle cycles up to this. The array's
        own minimum, but at least 2: the sequencer computes a tile's successor index in the cycle
        after the tile's index changed, so two tiles' last steps never fall in consecutive cycles."""
        return max(2, self._array.min_tile_steps)

    # Cycles from an accepted step to the array, from a row read-out to a requantizer lane (table
    # lookup), from a lane's output to its FIFO (registers: the FIFOs' block RAMs sit in the
    # middle of the die on ECP5, see fpga.floorplan), and from a read on ``res`` to its credit.
    _INPUT_LATENCY, _LOOKUP_LATENCY, _TRANSIT_LATENCY = 1, 5, 2
    _CREDIT_RETURN = 2
    # Cycles by which `credit` lags the admits and reads it accounts for: the admit, `delta`,
    # `reserved`, then `credit` itself are registers, so in cycle t it reflects admits up to t - 4
    # (and reads, which take _CREDIT_RETURN registers where an admit takes one, up to t - 5).
    _CREDIT_LAG = 4

    @property
    def _row_latency(self):
        """Cycles from a tile's last step accepted to its row 0 being written into the output FIFO."""
        return (self._INPUT_LATENCY + self._array.latency + self._LOOKUP_LATENCY + self._lanes[0].latency
                + self._TRANSIT_LATENCY)

    @property
    def latency(self):
        """Cycles from a tile's last step accepted to its last result row transferred (``res`` ready).

        Input register, the array's read-out latency, ``rows - 1`` more cycles for the tile's
        later rows, five cycles of table lookup, the requantizer pipeline, two transit registers
        and the output FIFO (five cycles, see :class:`_OutputFIFO`).
        """
        return self._row_latency + self.rows - 1 + _OutputFIFO.LATENCY

    @property
    def fifo_depth(self):
        """Rows the output FIFO holds: the limit on the rows `credit` counts, plus the rows of the
        tiles it admits while its count lags (see :attr:`_credit_margin`)."""
        return self._credit_limit + self._credit_margin

    @property
    def _credit_limit(self):
        """The rows `credit` may count and still admit a tile: the most it counts at full rate (tiles
        of ``min_tile_steps`` back to back, ``res`` always ready), in whole tiles. Credits then never
        hold a full-rate stream off, and with a tile less they would.

        When a tile's first step comes in cycle t, `credit` counts the tiles admitted up to
        t - _CREDIT_LAG and the rows read up to t - (_CREDIT_RETURN + _CREDIT_LAG - 1); a tile's
        rows are read one per cycle, and all of them before the next tile's (``min_tile_steps``
        >= ``rows``)."""
        p, R = self.min_tile_steps, self.rows
        read_lag = self._CREDIT_RETURN + self._CREDIT_LAG - 1
        # cycles from a tile's first step to the read of its first row being counted
        to_read = p - 1 + self._row_latency + _OutputFIFO.LATENCY + read_lag
        # the tiles counted in full: admitted long enough ago to be counted, no read of theirs counted
        tiles = -(-to_read // p) - -(-self._CREDIT_LAG // p)
        # and the newest tile with reads counted, while some of its rows are not
        reads_counted = -(-to_read // p) * p - to_read + 1
        return (tiles + (reads_counted < R)) * R

    @property
    def _credit_margin(self):
        """Rows a tile may need beyond what `credit` has seen: its own and those of the tiles admitted
        in the _CREDIT_LAG - 1 cycles before it (tiles are at least ``min_tile_steps`` apart)."""
        return -(-self._CREDIT_LAG // self.min_tile_steps) * self.rows

    def cycles(self, m, k, n):
        """Cycles of a full-rate GEMM from the first step accepted to the last result transferred."""
        tiles = -(-m // self.rows) * -(-n // self.cols)
        return (tiles - 1) * max(k, self.min_tile_steps) + k + self.latency

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        m.submodules.array = array = self._array

        # Output FIFOs of result rows, one per lane (all in lockstep, each with its own state,
        # named dup_* and kept apart by fpga.synth), fed by the requantizer lanes (never stalled)
        # through _TRANSIT_LATENCY free-running registers, so a FIFO need not sit beside its lane.
        # A row written reaches ``res`` _OutputFIFO.LATENCY cycles later on an empty FIFO.
        lanes = self._lanes
        fifos = [_OutputFIFO(width=32, depth=self.fifo_depth, ram=self.ram, dsp=self.dsp) for _ in range(C)]
        for j, (lane, fifo) in enumerate(zip(lanes, fifos, strict=True)):
            m.submodules[f"fifo{j}"] = fifo
            t_valid, t_data = delay_lines(m, self._TRANSIT_LATENCY, [
                Line(lane.o.valid, f"dup_transit_valid{j}_"),
                Line(lane.o.payload, f"transit_data{j}_", shape=32, reset_less=True)])
            m.d.comb += [fifo.w_data.eq(t_data), fifo.w_en.eq(t_valid),
                         self.res.payload[j].eq(fifo.r_data), fifo.r_en.eq(self.res.ready)]
        m.d.comb += self.res.valid.eq(fifos[0].r_rdy)
        # The per-layer settings reach each lane through three registers (dup_*): one per group of
        # four lanes, then two per lane, the first near the group's, the second near the lane
        # (with one per lane, the route from it to the lane's 32-bit offset adder, which its sign
        # bit drives 25 bits of, was the 8x8's worst path in a placement, 3 ns). They are stable
        # from three cycles before a layer's first step, which reaches the lanes far later.
        settings = [self.output_offset, self.act_min, self.act_max, self.bypass]
        setting_names = ("output_offset", "act_min", "act_max", "bypass")
        n_groups = -(-C // 4)

        def copies(sources, suffix):
            regs = [Signal.like(src, name=f"dup_{name}_{suffix}", reset_less=True)
                    for src, name in zip(sources, setting_names, strict=True)]
            m.d.sync += [reg.eq(src) for reg, src in zip(regs, sources, strict=True)]
            return regs

        group_settings = [copies(settings, f"g{g}") for g in range(n_groups)]
        for j, lane in enumerate(lanes):
            m.submodules[f"requant{j}"] = lane
            local = copies(copies(group_settings[j // 4], f"{j}a"), f"{j}b")
            m.d.comb += [lane.output_offset.eq(local[0]), lane.act_min.eq(local[1]),
                         lane.act_max.eq(local[2]), lane.bypass.eq(local[3]), lane.o.ready.eq(1)]

        # Lookup (the array row waits five cycles alongside): a cycle to copy the row's
        # column-tile index into a register per lane (dup_row_tag*: the array's one register does
        # not drive every table's address registers across the die; it did, 4.9 ns, the 8x8's
        # worst path in a placement), a cycle to copy that into address registers of the lane's
        # table, a cycle to read it, a cycle to combine the banks (or, in DP16KD, the RAM's output
        # register), a register (see _ChannelTable). In LUT RAM each address register drives one bank of one table: a
        # register driving a whole 64-deep LUT-RAM table cost 9 ns of routing on 8x8, one
        # shared by every table 11 ns.
        lk_valid, lk_data = delay_lines(m, self._LOOKUP_LATENCY, [
            Line(array.row_valid, "lk_valid"), Line(array.row_data, "lk_data", reset_less=True)])

        m.d.comb += self.cfg.ready.eq(1)
        # The cfg transfer, first registered once per group of four lanes (dup_cfg0_*: the cfg
        # port drives two registers on 8x8, not eight lanes' copies across the die; it did, 4.7 ns,
        # the 8x8's worst path in a placement).
        groups = [Signal.like(self.cfg.payload, name=f"dup_cfg0_payload{g}", reset_less=True) for g in range(n_groups)]
        groups_valid = [Signal(name=f"dup_cfg0_valid{g}") for g in range(n_groups)]
        m.d.sync += [reg.eq(self.cfg.payload) for reg in groups]
        m.d.sync += [reg.eq(self.cfg.valid) for reg in groups_valid]
        for j, lane in enumerate(lanes):
            cfg, cfg_valid = groups[j // 4], groups_valid[j // 4]
            m.submodules[f"table{j}"] = table = _ChannelTable(self.max_col_tiles, self.ram, self.dsp)
            row_tag = Signal.like(array.row_tag, name=f"dup_row_tag{j}", reset_less=True)
            m.d.sync += row_tag.eq(array.row_tag)
            # Table writes land three cycles late: the group's copy, then two per-lane copies
            # (dup_*): the first near the group's, the second near the table (no route crosses the
            # die into a RAM's write enable: with one per-lane copy, that route was the
            # floorplanned 8x8's worst, 6.4 ns).
            w_en = Signal(table.banks, name=f"dup_cfg_en{j}")  # one enable per bank
            w_addr = Signal.like(table.w_addr, name=f"dup_cfg_addr{j}", reset_less=True)
            w_data = Signal(ChannelEntry, name=f"dup_cfg_data{j}", reset_less=True)
            mine = cfg_valid & (cfg.lane == j)
            m.d.sync += [w_en.eq(Cat(mine & table.in_bank(cfg.addr, b) for b in range(table.banks))),
                         w_addr.eq(cfg.addr), w_data.eq(cfg.entry)]
            w_en2 = Signal.like(w_en, name=f"dup_cfg2_en{j}")
            w_addr2 = Signal.like(w_addr, name=f"dup_cfg2_addr{j}", reset_less=True)
            w_data2 = Signal(ChannelEntry, name=f"dup_cfg2_data{j}", reset_less=True)
            m.d.sync += [w_en2.eq(w_en), w_addr2.eq(w_addr), w_data2.eq(w_data)]
            w_en, w_addr, w_data = w_en2, w_addr2, w_data2
            m.d.comb += [table.w_addr.eq(w_addr), table.w_data.eq(w_data), table.w_en.eq(w_en),
                         table.r_addr.eq(row_tag)]
            m.d.comb += [lane.i.valid.eq(lk_valid), lane.i.payload.acc.eq(lk_data[j]),
                         lane.i.payload.bias.eq(table.r_data.bias),
                         lane.i.payload.multiplier.eq(table.r_data.multiplier),
                         lane.i.payload.shift.eq(table.r_data.shift)]

        # Credits: rows reserved in the FIFO by accepted tiles and not yet read from ``res``.
        # `reserved` moves by `delta`, a register holding this cycle's change (+rows for a tile
        # admitted, -1 for a row read), so its update is one adder with no multiplexer, and
        # `credit` (room for one more tile) is a register holding one compare of `reserved`
        # with a constant. Both lag (see _CREDIT_LAG); the compare leaves room for the tiles
        # admitted meanwhile, and reads counted late only make it stricter.
        reserved = Signal(range(self.fifo_depth + 1))
        credit = Signal(init=1, name="dup_credit")

        # Sequencer: count k within a tile (down, with a register flagging zero for ``last``), tag
        # tiles with their column-tile index, pad short tiles, admit a tile only with credit.
        # Only what decides a step is exact in its cycle and enabled by it (`first`, the
        # zero flag, the padding, one register each); the 24-bit count and the tile index run a
        # cycle behind, on the step registered (see below), so the step (from the input
        # streams' valid bits) does not fan out to their enables.
        first = Signal(init=1, name="dup_first")
        # n_tiles - 1 in a register (n_tiles is stable while a layer runs): the wrap test is an
        # equality, not a carry chain after the increment.
        tiles_m1 = Signal.like(self.n_tiles, reset_less=True)
        m.d.sync += tiles_m1.eq(self.n_tiles - 1)
        # Likewise what the sequencer needs of k_steps, so no compare of the 24-bit input sits
        # in front of its enables: K - 2 (from a copy of k_steps in a register, so the subtraction
        # starts at a register beside it, not at the port), K == 1 .. 4 and, for
        # K < min_tile_steps, the padding. Those depend only on K's low `lo_bits` bits and on
        # whether the rest is zero: the first cycle copies the low bits and flags each group of
        # four higher bits zero (one LUT from the port each), the second makes each value from
        # these registers in a LUT or two. (As 24-bit compares of a copy of k_steps, carry chains,
        # they were the 8x8's worst path in three placements.)
        c = self.min_tile_steps
        lo_bits = max(3, (c - 1).bit_length())
        k_copy = Signal.like(self.k_steps, reset_less=True, name="k_steps_copy")
        k_lo = Signal(lo_bits, reset_less=True)
        # K < 2**lo_bits, one register (from the port; as flags per group of four bits, ANDed
        # with K's low bits after the register, the `K == n` flags took two LUT levels and were
        # the 8x8's worst path in two placements of ten)
        small = Signal(reset_less=True, name="k_small")
        m.d.sync += [k_copy.eq(self.k_steps), k_lo.eq(self.k_steps[:lo_bits]),
                     small.eq(self.k_steps[lo_bits:] == 0)]
        k_m2 = Signal.like(self.k_steps, reset_less=True)
        k_is = {n: Signal(name=f"k_is_{n}") for n in range(1, 5)}
        # (the padding after a tile of K < min_tile_steps is min_tile_steps - K idle cycles)
        k_short, pad_is_1, pad_is_2 = Signal(), Signal(), Signal()
        pad_m1 = Signal(range(c + 1), reset_less=True)
        m.d.sync += [k_m2.eq(k_copy - 2), k_short.eq(small & (k_lo < c)), pad_m1.eq(c - 1 - k_lo),
                     pad_is_1.eq(small & (k_lo == c - 1)), pad_is_2.eq(small & (k_lo == c - 2))]
        m.d.sync += [k_is[n].eq(small & (k_lo == n)) for n in k_is]
        remaining_zero = Signal()  # steps left in the tile after this one == 0, as a register
        # idle cycles left != 0, as a register (no compare in front of the enables)
        padding = Signal(name="dup_padding")
        pad = Signal(range(self.min_tile_steps + 1))
        pad_one = Signal()
        open_ = Signal()
        m.d.comb += open_.eq(~padding & (~first | credit))
        step, last = Signal(), Signal()
        m.d.comb += [
            step.eq(self.act.valid & self.wts.valid & open_),
            last.eq(Mux(first, k_is[1], remaining_zero)),
        ]
        # The step, its `first` and its `last`, a cycle later (dup_: the array's input flags
        # hold the same values, and a merged register would drive the array too).
        step_d, first_d, last_d = Signal(name="dup_step_d"), Signal(name="dup_first_d"), Signal(name="dup_last_d")
        m.d.sync += [step_d.eq(step), first_d.eq(first), last_d.eq(step & last)]
        # Steps left after the previous cycle's step, a cycle behind: remaining_d in cycle t is
        # the count after cycle t - 2, with flags for it being 1 or 2. The count after cycle
        # t - 1 then is remaining_d, K - 2 (a first step) or remaining_d - 1, and whether it
        # is 1 follows from the flags, without a compare of the count in the step's cycle.
        remaining_d = Signal.like(self.k_steps)
        rem_is_1, rem_is_2 = Signal(), Signal()
        with m.If(step_d):
            with m.If(first_d):
                m.d.sync += [remaining_d.eq(k_m2), rem_is_1.eq(k_is[3]), rem_is_2.eq(k_is[4])]
            with m.Else():
                m.d.sync += [remaining_d.eq(remaining_d - 1), rem_is_1.eq(rem_is_2), rem_is_2.eq(remaining_d == 3)]
        remaining_is_1 = Mux(step_d, Mux(first_d, k_is[3], rem_is_2), rem_is_1)
        # The tile index: `tile` moves to `tile_next` in the cycle after a tile's last step. The
        # array takes a tile's tag with its last step (see SystolicArray), which comes at least
        # min_tile_steps >= 2 cycles after the previous tile's, so `tile` is current by then.
        # `tile_next` is the successor of `tile` (wrapping at n_tiles) a cycle late: an
        # increment with a synchronous reset from the registered flag `wraps` (`tile` is the
        # last column tile), no compare or multiplexer in that cycle; it is current whenever
        # `tile` moves, for the same reason.
        # `wraps` comes from `left`, the column tiles after `tile` (n_tiles - 1 - tile), not from
        # a compare in the move's cycle: when `tile` moves, `wraps` takes a registered flag for
        # `left` being 1 (or, on a wrap, one for n_tiles being 1) and `left` takes `left_next`,
        # kept a cycle late like `tile_next`. In the cycles between moves (at least one) `wraps`
        # and that flag compare `left`, and `left` is recomputed from `tile`, so they see n_tiles
        # change between layers. (As a compare of `tile` or `tile_next` with n_tiles - 1 in the
        # move's cycle, the wrap flag was the 8x8's worst path in four placements of ten.)
        tile, tile_next = (Signal(range(self.max_col_tiles + 1), name=name) for name in ("tile", "tile_next"))
        left, left_next = (Signal(range(self.max_col_tiles + 1), name=name) for name in ("left", "left_next"))
        wraps, left_is_1, one_tile = Signal(), Signal(), Signal()
        m.d.sync += [one_tile.eq(tiles_m1 == 0), left_is_1.eq(left == 1)]
        # (`last_d` again for these, dup_: the tile index sits by the array's tag input, and one
        # register for both it and the padding logic was pulled between them, 3 ns from the
        # wrap flag's logic: the 8x8's worst path in a placement)
        last_t = Signal(name="dup_last_d_tile")
        m.d.sync += last_t.eq(step & last)
        with m.If(last_t):
            m.d.sync += [tile.eq(tile_next), left.eq(left_next), wraps.eq(Mux(wraps, one_tile, left_is_1))]
        with m.Else():
            m.d.sync += [left.eq(tiles_m1 - tile), wraps.eq(left == 0)]
        m.d.sync += [tile_next.eq(Mux(wraps, 0, tile + 1)), left_next.eq(Mux(wraps, tiles_m1, left - 1))]
        # Input register: the step enters the array one cycle after it is accepted (only the flags reset).
        a_in = Signal.like(array.a, reset_less=True)
        w_in = Signal.like(array.w, reset_less=True)
        tag_in = Signal.like(array.tag, reset_less=True)
        m.d.comb += [array.a.eq(a_in), array.w.eq(w_in), array.tag.eq(tag_in)]
        m.d.sync += [array.flags.valid.eq(step), array.flags.last.eq(last),
                     tag_in.eq(tile), a_in.eq(self.act.payload), w_in.eq(self.wts.payload)]

        with m.If(step):
            m.d.sync += [first.eq(last), remaining_zero.eq(Mux(first, k_is[2], remaining_is_1))]
            with m.If(last & k_short):
                m.d.sync += padding.eq(1)
        with m.Elif(padding):
            m.d.sync += padding.eq(Mux(last_d, ~pad_is_1, ~pad_one))
        # The idle cycles left after this one, a cycle behind too: loaded a cycle after the
        # short tile's last step, then counted down to zero by itself (no step, no `padding`
        # in its logic), with a register flagging 1 for `padding` above.
        with m.If(last_d & k_short):
            m.d.sync += [pad.eq(pad_m1), pad_one.eq(pad_is_2)]
        with m.Elif(pad != 0):
            m.d.sync += [pad.eq(pad - 1), pad_one.eq(pad == 2)]

        # The ready outputs from copies of `first`, `padding` and `credit` (dup_, as are those: Yosys
        # would merge each pair), so that no LUT is shared between them and the step's enables.
        first_r, padding_r, credit_r = (Signal(init=v, name=f"dup_{n}_r") for n, v in
                                        (("first", 1), ("padding", 0), ("credit", 1)))
        with m.If(step):
            m.d.sync += first_r.eq(last)
            with m.If(last & k_short):
                m.d.sync += padding_r.eq(1)
        with m.Elif(padding_r):
            m.d.sync += padding_r.eq(Mux(last_d, ~pad_is_1, ~pad_one))
        open_r = ~padding_r & (~first_r | credit_r)
        m.d.comb += [self.act.ready.eq(self.wts.valid & open_r), self.wts.ready.eq(self.act.valid & open_r)]
        # A tile admitted (its first step), registered: the credit counter below reads only
        # registers (from `step` and `first` directly, the route into `delta` crossed the die: the
        # 8x8's worst path in a placement, 3.3 ns of 6.5).
        admit = Signal(name="dup_admit_d")
        m.d.sync += admit.eq(step & first)
        # A row read from ``res`` frees its credit _CREDIT_RETURN cycles later, through registers:
        # ``res.ready`` reaches the FIFOs' queues and these, not the sequencer's logic.
        read = delayed(m, self.res.valid & self.res.ready, self._CREDIT_RETURN, "read_d")
        delta = Signal(range(-1, R + 1))
        # (each bit of the change a function of `admit` and `read`: a multiplexer of constants,
        # one LUT; as a subtraction it was a carry chain after the step logic)
        m.d.sync += [delta.eq(Mux(admit, Mux(read, R - 1, R), Mux(read, -1, 0))),
                     reserved.eq(reserved + delta),
                     credit.eq(reserved <= self._credit_limit),
                     credit_r.eq(reserved <= self._credit_limit)]
        return m



# Entries in one ECP5 LUT-RAM cell: the bank size of the tables and FIFOs in distributed RAM.
_BANK_BITS = 4
_BANK = 1 << _BANK_BITS


def _nonempty(m, add, remove, limit, name):
    """A register that is 1 exactly when a count, 0 after reset and moved by ``add - remove``
    each cycle (1-bit signals), is not zero; the count stays within 0..``limit``.

    The count itself runs a cycle behind (``<name>_d``, moved by the change registered), so no
    multiplexer of ``add``/``remove`` follows its adder; whether the count is 1, which the flag
    needs when the count goes down, follows from the registered change and flags for the
    delayed count being 0, 1 or 2 (registers too)."""
    count_d = Signal(range(limit + 1), name=f"{name}_d")
    change = Signal(range(-1, 2), name=f"{name}_change")
    m.d.sync += [change.eq(add - remove), count_d.eq(count_d + change)]
    is0, is1, is2 = (Signal(init=n == 0, name=f"{name}_is{n}") for n in range(3))
    with m.If(change == 1):
        m.d.sync += [is0.eq(0), is1.eq(is0), is2.eq(is1)]
    with m.Elif(change == -1):
        m.d.sync += [is0.eq(is1), is1.eq(is2), is2.eq(count_d == 3)]
    count_is_1 = Mux(change == 1, is0, Mux(change == -1, is2, is1))
    nonempty = Signal(name=f"{name}_nonempty")
    with m.If(add & ~remove):
        m.d.sync += nonempty.eq(1)
    with m.Elif(remove & ~add):
        m.d.sync += nonempty.eq(~count_is_1)
    return nonempty


class _RowFIFO(wiring.Component):
    """Synchronous first-word-fall-through FIFO, like :class:`SyncFIFO` (a write into an empty
    queue is at ``r_data`` with ``r_rdy`` the next cycle; holds ``depth`` entries), but with the
    storage memory's attributes under our control (``ram_style``) and its count kept by
    :func:`_nonempty`; a write must not come when it is full (its user, :class:`_OutputFIFO`,
    counts what it sends). ``r_rdy`` is a register; ``r_data`` is read combinationally from the
    memory at a register's address, so a read (``r_en``) moves only the read pointer and the
    count's flags, not a data register (as a data register's enable, ``res.ready`` reached 32
    flip-flops per lane through a LUT, and that net was the 8x8's worst path in two placements).
    ``depth`` is a power of two; at 16 the memory is one ECP5 LUT-RAM cell deep."""

    def __init__(self, *, width, depth, attrs):
        assert depth & (depth - 1) == 0, depth
        self.width, self.depth, self._attrs = width, depth, attrs
        super().__init__({"w_data": In(width), "w_en": In(1), "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        # wrap at depth; dup_: several FIFOs run in lockstep and must keep their own copies
        produce = Signal(range(self.depth), name="dup_produce")
        consume = Signal(range(self.depth), name="dup_consume")
        # entries != 0, as a register (no compare in front of the read enables, and the read does
        # not reach the count's adder)
        do_read = Signal()
        nonempty = _nonempty(m, self.w_en, do_read, self.depth, "dup_level")
        m.d.comb += [self.r_rdy.eq(nonempty), do_read.eq(nonempty & self.r_en)]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(do_read):
            m.d.sync += consume.eq(consume + 1)

        m.submodules.storage = storage = Memory(shape=self.width, depth=self.depth, init=[], attrs=self._attrs)
        wp, rp = storage.write_port(), storage.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_en), rp.addr.eq(consume),
                     self.r_data.eq(rp.data)]
        return m


class _OutputFIFO(wiring.Component):
    """One lane's output FIFO: ``depth`` rows in a memory read in two cycles, then a
    :class:`_RowFIFO` of ``QUEUE`` rows (LUT RAM) that holds what has been read and feeds ``res``.

    Rows move from the memory to the queue by credit: a row is *issued* (read from the memory)
    when the memory holds one and fewer than ``QUEUE`` issued rows are still unread at
    ``r_data`` as the issuing side sees it (a read there comes back to it through ``_RETURN``
    registers), so ``r_en`` (``res.ready``) reaches only the queue's read side, not the memory,
    and the queue may sit away from the memory (rows go to it through ``_HOPS`` registers). A
    row's credit is out for 1 + 2 + ``_HOPS`` + 1 + ``_RETURN`` = 7 cycles at full rate, and is
    counted 2 cycles late, fewer than ``QUEUE`` - 2. The memory reads every cycle and never
    stalls; a valid bit travels with an issued row's two-cycle read. With ``dsp="ecp5"`` the
    memory is two ``DP16KD`` block RAMs (1024 x 18, with their output registers as the second
    read cycle), otherwise an inferred memory (``ram_style`` = ``ram``) with a synchronous read
    port and a register.

    Same interface as :class:`_RowFIFO`: a row written (``w_en``) in cycle c is at ``r_data``
    with ``r_rdy`` in cycle c + ``LATENCY`` when the FIFO is empty; a write must not come when
    ``depth`` rows are in the FIFO (the accelerator's credits ensure it)."""

    _HOPS, _RETURN = 1, 2
    LATENCY = 1 + 2 + _HOPS + 1   # issue, memory read, hops to the queue, queue
    QUEUE = _BANK

    def __init__(self, *, width, depth, ram, dsp):
        self.width, self.depth, self.ram, self.dsp = width, depth, ram, dsp
        self.mem_depth = 1 << (depth - 1).bit_length()  # a power of two: the pointers wrap by themselves
        if dsp == "ecp5":
            assert self.mem_depth <= _DP16KD_DEPTH, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        M, Q = self.mem_depth, self.QUEUE
        m.submodules.queue = queue = _RowFIFO(width=self.width, depth=Q, attrs={"ram_style": self.ram})
        # (dup_: the lanes' FIFOs run in lockstep; Yosys would merge their identical registers)
        produce = Signal(range(M), name="dup_produce")
        consume = Signal(range(M), name="dup_consume")
        room = Signal(init=1, name="dup_room")  # fewer than Q rows issued and not read: a register
        issue, read = Signal(), Signal()
        # rows in the memory (written, not issued) != 0, as a register
        nonempty = _nonempty(m, self.w_en, issue, M, "dup_level")
        m.d.comb += [issue.eq(nonempty & room), read.eq(self.r_en & queue.r_rdy)]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(issue):
            m.d.sync += consume.eq(consume + 1)
        # The credit comes back through _RETURN registers (so the queue may sit away from the memory).
        # The issued rows are counted the same way, a cycle behind, and `room` a cycle after the
        # count: in cycle t it has seen the issues up to t - 3, so it leaves room for three.
        read = delayed(m, read, self._RETURN, "dup_read_d")
        issued_d = Signal(range(Q + 1), name="dup_issued_d")
        issued_change = Signal(range(-1, 2), name="dup_issued_change")
        m.d.sync += [issued_change.eq(issue - read), issued_d.eq(issued_d + issued_change),
                     room.eq(issued_d <= Q - 3)]

        # The memory: written at `produce`, read every cycle at `consume`; the row read arrives
        # two cycles after its issue, with the issue's valid bit delayed alongside.
        out = Signal(self.width)
        if self.dsp == "ecp5":
            w_data = Cat(self.w_data, Const(0, 36 - self.width))
            r_data = Signal(36)
            m.d.comb += out.eq(r_data[:self.width])
            for k in range(2):
                m.submodules[f"bram{k}"] = _dp16kd(produce, w_data[18 * k:18 * k + 18], self.w_en,
                                                   consume, r_data[18 * k:18 * k + 18])
        else:
            m.submodules.storage = storage = Memory(shape=self.width, depth=M, init=[],
                                                    attrs={"ram_style": self.ram})
            wp, rp = storage.write_port(), storage.read_port()
            m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_en), rp.addr.eq(consume)]
            out_reg = Signal(self.width, reset_less=True)
            m.d.sync += out_reg.eq(rp.data)
            m.d.comb += out.eq(out_reg)
        arrived = Signal(name="dup_arrived")
        reading = Signal(name="dup_reading")
        m.d.sync += [reading.eq(issue), arrived.eq(reading)]
        arrived, out = delay_lines(m, self._HOPS, [Line(arrived, "dup_hop_valid"),
                                                   Line(out, "hop_data", reset_less=True)])
        m.d.comb += [queue.w_data.eq(out), queue.w_en.eq(arrived),
                     self.r_data.eq(queue.r_data), self.r_rdy.eq(queue.r_rdy), queue.r_en.eq(self.r_en)]
        return m


# ECP5 block RAM tables (dsp="ecp5"): 1024 x 18 DP16KDs, as many as a table entry needs.
_DP16KD_DEPTH = 1024
_DP16KD_COUNT = -(-ChannelEntry.size // 18)


def _dp16kd(w_addr, w_data, w_en, r_addr, r_data):
    """One ECP5 ``DP16KD`` in 1024 x 18 mode: port A writes ``w_data`` at ``w_addr`` when
    ``w_en``; port B reads ``r_addr`` into ``r_data`` two clock edges later (the read, then the
    output register). Port wiring as Yosys' own DP16KD mapping (``brams_map_16kd.v``) for 18-bit
    ports: the word address on AD[13:4], AD[1:0] the byte enables of a write, AD[3:2] zero."""
    zero, one = Const(0, 1), Const(1, 1)
    ports = {"i_CLKA": ClockSignal("sync"), "i_CLKB": ClockSignal("sync"),
             "i_WEA": w_en, "i_WEB": zero, "i_CEA": one, "i_CEB": one, "i_OCEA": one, "i_OCEB": one,
             "i_RSTA": zero, "i_RSTB": zero}
    for port in "AB":
        ports.update({f"i_CS{port}{n}": zero for n in range(3)})
    for n, bit in enumerate((one, one, zero, zero)):
        ports[f"i_ADA{n}"] = bit
        ports[f"i_ADB{n}"] = zero
    for n in range(10):
        ports[f"i_ADA{n + 4}"] = w_addr[n] if n < len(w_addr) else zero
        ports[f"i_ADB{n + 4}"] = r_addr[n] if n < len(r_addr) else zero
    ports.update({f"i_DIA{n}": w_data[n] for n in range(18)})
    ports.update({f"i_DIB{n}": zero for n in range(18)})
    ports.update({f"o_DOB{n}": r_data[n] for n in range(18)})
    return Instance(
        "DP16KD",
        p_DATA_WIDTH_A=18, p_DATA_WIDTH_B=18, p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG",
        p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000", p_CSDECODE_B="0b000",
        p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
        **ports)


class _ChannelTable(wiring.Component):
    """One lane's per-channel table, read in four cycles: ``r_data`` is the entry at the
    ``r_addr`` of four cycles earlier (the fourth a register that only copies); a write lands
    the cycle after ``w_en``, which has one bit per bank (the writer decodes the bank,
    :meth:`in_bank`, before its register, so no decoder sits between that register and the
    LUT-RAM cells' write enables).

    With ``ram="distributed"`` the table is split into banks of 16 entries (one ECP5 LUT-RAM
    cell deep), each with its own copy of the read address (dup_*, kept apart by fpga.synth);
    cycle 1 registers the address copies, cycle 2 reads every bank into a register that is zero
    unless the entry is in that bank, cycle 3 ORs the banks' registers.
    With ``ram="block"`` it is one memory and the third cycle is a plain register. With
    ``dsp="ecp5"`` it is four ``DP16KD`` block RAMs (1024 x 18 each, written on port A, read on
    port B) whose output registers are the third cycle; a table write and a read of the same
    entry must not fall in one cycle (the host writes the tables before a layer's steps).
    (In LUT RAM the 8x8's tables were 576 of its 896 LUT-RAM cells, and their address nets the
    worst routes once the bank selects were gone: 6.6-7.2 ns.)"""

    def __init__(self, depth, ram, dsp="generic"):
        self.depth, self.ram, self.dsp = depth, ram, dsp
        self.banks = -(-depth // _BANK) if ram == "distributed" and dsp != "ecp5" else 1
        super().__init__({"w_addr": In(range(depth)), "w_data": In(ChannelEntry), "w_en": In(self.banks),
                          "r_addr": In(range(depth)), "r_data": Out(ChannelEntry)})

    def in_bank(self, addr, bank):
        """Whether table address ``addr`` is in ``bank``."""
        return (addr >> _BANK_BITS) == bank if self.banks > 1 else 1

    def elaborate(self, platform):
        m = Module()
        # The lookup's last cycle, a register that only copies: the lane's first stage computes
        # from the entry's fields, and the RAM (or the banks' OR) stays out of that cycle.
        r_data = Signal(ChannelEntry, reset_less=True)
        r_data_out = Signal(ChannelEntry, name="r_data_out", reset_less=True)
        m.d.sync += r_data_out.eq(r_data)
        m.d.comb += self.r_data.eq(r_data_out)
        if self.dsp == "ecp5":
            # Cycle 1 the fabric address register, cycle 2 the block RAM's read, cycle 3 its
            # output register (REGMODE OUTREG: Yosys never enables it, and without it nextpnr
            # times the DP16KD's clock-to-out at 5.8 ns). Four 1024 x 18 RAMs side by side.
            # (one address register per RAM, dup_: with one for all four, the route from it to the
            # farthest RAM was the 8x8's worst path in a placement, 4.6 ns)
            w_data = Cat(self.w_data.as_value(), Const(0, 18 * _DP16KD_COUNT - ChannelEntry.size))
            r_data_bits = Signal(18 * _DP16KD_COUNT)
            m.d.comb += r_data.eq(r_data_bits[:ChannelEntry.size])
            for k in range(_DP16KD_COUNT):
                addr = Signal(range(self.depth), name=f"dup_addr{k}", reset_less=True)
                m.d.sync += addr.eq(self.r_addr)
                m.submodules[f"bram{k}"] = _dp16kd(self.w_addr, w_data[18 * k:18 * k + 18], self.w_en[0],
                                                   addr, r_data_bits[18 * k:18 * k + 18])
            return m
        if self.banks == 1:
            mem = Memory(shape=ChannelEntry, depth=self.depth, init=[], attrs={"ram_style": self.ram})
            m.submodules.bank0 = mem
            wp, rp = mem.write_port(), mem.read_port()
            addr = Signal(range(self.depth), name="dup_addr0", reset_less=True)
            m.d.sync += [addr.eq(self.r_addr), r_data.eq(rp.data)]
            m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), wp.en.eq(self.w_en[0]),
                         rp.addr.eq(addr)]
            return m
        # Each bank's read register holds zero unless the entry is in that bank (its synchronous
        # reset, from a register beside it), so the third cycle is an OR of the banks: no bank
        # select fans out to every bit of the entry (as a multiplexer's select it was the
        # worst path of the 8x8 with three of five seeds, 6.3-6.7 ns).
        reads = []
        for b in range(self.banks):
            depth = min(_BANK, self.depth - b * _BANK)
            mem = Memory(shape=ChannelEntry, depth=depth, init=[], attrs={"ram_style": self.ram})
            m.submodules[f"bank{b}"] = mem
            wp, rp = mem.write_port(), mem.read_port(domain="comb")
            # (dup_: every lane's table has the same addresses and misses, Yosys would merge them)
            addr = Signal(range(depth), name=f"dup_addr{b}", reset_less=True)
            miss = Signal(name=f"dup_miss{b}", reset_less=True)
            m.d.sync += [addr.eq(self.r_addr), miss.eq(~self.in_bank(self.r_addr, b))]
            m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), rp.addr.eq(addr),
                         wp.en.eq(self.w_en[b])]
            read = Signal(ChannelEntry.size, name=f"read{b}", reset_less=True)
            m.d.sync += read.eq(Mux(miss, 0, rp.data.as_value()))
            reads.append(read)
        m.d.sync += r_data.eq(reduce(operator.or_, reads))
        return m
