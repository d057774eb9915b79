"""The accelerator top: systolic array + per-channel tables + requantizer lanes, on streams.

Programming model (what a host does, in order; :mod:`sim.host` implements it):

1. Set the per-layer inputs: ``k_steps`` (K >= 1), ``n_tiles`` (column tiles,
   ceil(N / cols)), ``depthwise`` (the mode, see 3), ``output_offset`` (output zero point), ``act_min``/``act_max`` and
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
   step is one transfer on ``act`` and one on ``wts`` (``w[k][nt*cols + j]`` for j < cols,
   zero-padded); the two are consumed together. ``act`` is ``rows * cols`` bytes: in the GEMM
   mode (``depthwise`` low) only elements 0 .. rows-1 count, ``a[mt*rows + i][k]`` (zero-padded),
   which every cell of row i multiplies; in the depthwise mode element ``j*rows + i`` is cell
   (i, j)'s own activation, ``a[mt*rows + i][k][nt*cols + j]`` for a GEMM whose A is [M, K, N]
   (``out[m][n] = sum_k a[m][k][n] * w[k][n]``: a depthwise convolution's patches, channel by
   channel). Only the inputs are read in the mode, so it may change from one GEMM to the next
   like ``k_steps``.
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
less would (docs/architecture.md states the rule at the ports; tests/test_accelerator_credit.py
checks it in every cycle). The FIFO is one per lane, in lockstep: rows in a memory (block
RAM on ECP5) moved by credit into a 16-row queue that ``res`` reads (:class:`OutputFIFO`), so
``res.ready`` reaches only the queues.
"""

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .channel_table import ChannelEntry, ChannelTable, RowStage, config_layout
from .credit import CreditCounter
from .ecp5_ram import DP16KD_DEPTH
from .gemm_control import gemm_control
from .multiplier import DSP_KINDS
from .output_fifo import OutputFIFO
from .pipeline import KEEP_APART, Line, delay_lines, ring_delayed
from .requantizer import Requantizer
from .sequencer import Sequencer

__all__ = ["Accelerator", "ChannelEntry", "config_layout"]


class Accelerator(wiring.Component):
    """``rows x cols`` int8 GEMM accelerator with TFLite requantization (see module docstring).

    Parameters: ``rows``, ``cols`` (>= 1), ``rounding`` ("double"/"single"),
    ``max_col_tiles`` (depth of the per-channel tables: N <= max_col_tiles * cols),
    ``ram`` ("distributed" or "block"): the ``ram_style`` attribute of the per-channel tables
    and the output FIFO, a synthesis hint only. "distributed" (LUT RAM) suits ECP5 and Xilinx,
    where an inferred block RAM's unregistered output would cap Fmax well below the target;
    "block" suits iCE40, which has no LUT RAM.
    ``dsp`` ("generic" or "ecp5"): how the multipliers are built (:mod:`hw.multiplier`) and,
    with "ecp5", the per-channel tables too: ``DP16KD`` block RAMs with their output registers
    (whatever ``ram`` says; see :class:`ChannelTable`). The two are cycle-for-cycle identical.
    ``ring_delays``: the long delay lines in LUT RAM (the array's, :class:`~hw.array.SystolicArray`; the lanes',
    :class:`~hw.requantizer.Requantizer`; the rows waiting for their table lookup), cycle-for-cycle identical too;
    for targets with LUT RAM.
    """

    def __init__(self, rows=8, cols=8, rounding="double", max_col_tiles=64, ram="distributed", dsp="generic",
                 row_stage=False, ring_delays=False):
        error = None
        if dsp not in DSP_KINDS:
            error = f"dsp must be one of {DSP_KINDS}, got {dsp!r}"
        elif ram not in ("distributed", "block"):
            error = f"ram must be 'distributed' or 'block', got {ram!r}"
        elif rounding not in ("double", "single"):
            error = f"rounding must be 'double' or 'single', got {rounding!r}"
        elif not isinstance(max_col_tiles, int) or max_col_tiles < 1:
            error = f"max_col_tiles must be an integer >= 1, got {max_col_tiles!r}"
        elif dsp == "ecp5" and max_col_tiles > DP16KD_DEPTH:
            error = f"max_col_tiles must be <= {DP16KD_DEPTH} with dsp='ecp5' (one DP16KD deep), got {max_col_tiles}"
        for name, v in (("rows", rows), ("cols", cols)):
            if not isinstance(v, int) or v < 1:
                error = f"{name} must be an integer >= 1, got {v!r}"
        if error:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(error)
        self._array = SystolicArray(rows, cols, dsp=dsp, ring_delays=ring_delays)
        # (one per column, in lockstep)
        self._lanes = [Requantizer(rounding, dsp=dsp, ring_delays=ring_delays) for _ in range(cols)]
        self.rows, self.cols, self.rounding, self.max_col_tiles = rows, cols, rounding, max_col_tiles
        self.ram, self.dsp, self.row_stage, self.ring_delays = ram, dsp, row_stage, ring_delays
        if dsp == "ecp5" and self.fifo_depth > DP16KD_DEPTH:
            for obj in (self, self._array, *self._lanes):
                obj._MustUse__silence = True
            raise ValueError(f"a {rows}x{cols} array needs an output FIFO of {self.fifo_depth} rows, more than "
                             f"one DP16KD ({DP16KD_DEPTH}) holds with dsp='ecp5'")
        super().__init__({
            "act": In(stream.Signature(data.ArrayLayout(signed(8), rows * cols))),
            "wts": In(stream.Signature(data.ArrayLayout(signed(8), cols))),
            "cfg": In(stream.Signature(config_layout(cols, max_col_tiles, row_stage))),
            "res": Out(stream.Signature(data.ArrayLayout(signed(32), cols))),
            "gemm": In(gemm_control(max_col_tiles)),
        })

    # the lanes read the output offset in their stage 20 (from their 19th register) and the bounds in stage 23
    _OFFSET_AT, _BOUNDS_AT = 19, 22
    _SETTING_COPIES = 3         # the registers from a setting to a lane (copies: the group's, then two)

    def _row_stage(self, m, array):
        """With ``row_stage``: each result row's output stage, from its table row (written with the ``cfg`` writes,
        read by the row's tag as the channel tables are), brought to each lane's settings so that it holds there
        exactly while the row's elements pass the stage that reads it. So a GEMM's output stage travels with its
        rows, and the next GEMM may be launched before the last one's rows are out."""
        mem = Memory(shape=RowStage, depth=self.max_col_tiles, init=[])
        m.submodules.row_stages = mem
        wp, rp = mem.write_port(), mem.read_port(domain="comb")
        # (the write a cycle late, the tables' three; the read as the lanes' entries come: the tag registered, read,
        # then registers up to the lookup's latency)
        w_en, w_addr = Signal(), Signal.like(self.cfg.payload.addr)
        w_data = Signal(RowStage)
        m.d.sync += [w_en.eq(self.cfg.valid), w_addr.eq(self.cfg.payload.addr), w_data.eq(self.cfg.payload.stage)]
        tag = Signal.like(array.row_tag, reset_less=True)
        m.d.sync += tag.eq(array.row_tag)
        m.d.comb += [wp.en.eq(w_en), wp.addr.eq(w_addr), wp.data.eq(w_data), rp.addr.eq(tag)]
        read = rp.data
        for n in range(self._LOOKUP_LATENCY - 1):
            nxt = Signal(RowStage, name=f"row_stage_lk{n}", reset_less=True)
            m.d.sync += nxt.eq(read)
            read = nxt
        # `read` is the row's stage in the cycle its elements enter the lanes
        offset = _delayed(m, read.output_offset, self._OFFSET_AT - self._SETTING_COPIES, "row_offset")
        bounds = [_delayed(m, read[f], self._BOUNDS_AT - self._SETTING_COPIES, f"row_{f}") for f in ("act_min",
                                                                                                       "act_max")]
        return [offset, *bounds]

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
    # (the credit counter's lags, hw.credit)
    _CREDIT_RETURN, _CREDIT_LAG = CreditCounter.RETURN, CreditCounter.LAG

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
        and the output FIFO (five cycles, see :class:`OutputFIFO`).
        """
        return self._row_latency + self.rows - 1 + OutputFIFO.LATENCY

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
        to_read = p - 1 + self._row_latency + OutputFIFO.LATENCY + read_lag
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
        # copies kept apart, KEEP_APART), fed by the requantizer lanes (never stalled)
        # through _TRANSIT_LATENCY free-running registers, so a FIFO need not sit beside its lane.
        # A row written reaches ``res`` OutputFIFO.LATENCY cycles later on an empty FIFO.
        lanes = self._lanes
        fifos = [OutputFIFO(width=32, depth=self.fifo_depth, ram=self.ram, dsp=self.dsp, r_rdy_copy=j == 0)
                 for j in range(C)]
        for j, (lane, fifo) in enumerate(zip(lanes, fifos, strict=True)):
            m.submodules[f"fifo{j}"] = fifo
            t_valid, t_data = delay_lines(m, self._TRANSIT_LATENCY, [
                Line(lane.o.valid, f"dup_transit_valid{j}_", keep=True),
                Line(lane.o.payload, f"transit_data{j}_", shape=32, reset_less=True)])
            m.d.comb += [fifo.w_data.eq(t_data), fifo.w_en.eq(t_valid),
                         self.res.payload[j].eq(fifo.r_data), fifo.r_en.eq(self.res.ready)]
        # (``res.valid`` from lane 0's flag copy: the stream's consumer and the credit counter AND
        # it with ``res.ready`` as the FIFOs do with theirs, and from one flag synthesis would make
        # those one LUT by FIFO 0, between TREADY and the AXI top's framer)
        m.d.comb += self.res.valid.eq(fifos[0].r_rdy_copy)
        # The per-layer settings reach each lane through three registers (copies): one per group of
        # four lanes, then two per lane, the first near the group's, the second near the lane's
        # 32-bit offset adder. They are stable from three cycles before a layer's first step,
        # which reaches the lanes far later.
        g = self.gemm.settings
        settings = [g.output_offset, g.act_min, g.act_max, g.bypass]
        if self.row_stage:
            settings[:3] = self._row_stage(m, array)
        setting_names = ("output_offset", "act_min", "act_max", "bypass")
        n_groups = -(-C // 4)

        def copies(sources, suffix):
            regs = [Signal.like(src, attrs=KEEP_APART, name=f"dup_{name}_{suffix}", reset_less=True)
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
        # column-tile index into a register per lane (so the array's one register does not drive
        # every table's address registers across the die), a cycle to copy that into address
        # registers of the lane's table (one per LUT-RAM bank), a cycle to read it, a cycle to
        # combine the banks (or, in DP16KD, the RAM's output register), a register (see ChannelTable).
        if self.ring_delays:
            # (the row's data in a ring a lane, beside the lane)
            lk_valid, = delay_lines(m, self._LOOKUP_LATENCY, [Line(array.row_valid, "lk_valid")])
            lk_data = [ring_delayed(m, [(array.row_data[j], self._LOOKUP_LATENCY)], f"lk_ring{j}_")[0]
                       for j in range(C)]
        else:
            lk_valid, lk_data = delay_lines(m, self._LOOKUP_LATENCY, [
                Line(array.row_valid, "lk_valid"), Line(array.row_data, "lk_data", reset_less=True)])

        m.d.comb += self.cfg.ready.eq(1)
        # The cfg transfer, first registered once per group of four lanes (copies: the cfg port
        # drives two registers on 8x8, not eight lanes' copies across the die).
        groups = [Signal.like(self.cfg.payload, attrs=KEEP_APART, name=f"dup_cfg0_payload{g}", reset_less=True)
                  for g in range(n_groups)]
        groups_valid = [Signal(attrs=KEEP_APART, name=f"dup_cfg0_valid{g}") for g in range(n_groups)]
        m.d.sync += [reg.eq(self.cfg.payload) for reg in groups]
        m.d.sync += [reg.eq(self.cfg.valid) for reg in groups_valid]
        for j, lane in enumerate(lanes):
            cfg, cfg_valid = groups[j // 4], groups_valid[j // 4]
            m.submodules[f"table{j}"] = table = ChannelTable(self.max_col_tiles, self.ram, self.dsp)
            # (the table's address bits only: the tag's other bits are never read)
            row_tag = Signal.like(table.r_addr, attrs=KEEP_APART, name=f"dup_row_tag{j}", reset_less=True)
            m.d.sync += row_tag.eq(array.row_tag)
            # Table writes land three cycles late: the group's copy, then two per-lane copies, the
            # first near the group's, the second near the table (no route crosses the die into a
            # RAM's write enable).
            w_en = Signal(table.banks, attrs=KEEP_APART, name=f"dup_cfg_en{j}")  # one enable per bank
            w_addr = Signal.like(table.w_addr, attrs=KEEP_APART, name=f"dup_cfg_addr{j}", reset_less=True)
            w_data = Signal(ChannelEntry, attrs=KEEP_APART, name=f"dup_cfg_data{j}", reset_less=True)
            mine = cfg_valid & (cfg.lane == j)
            m.d.sync += [w_en.eq(Cat(mine & table.in_bank(cfg.addr, b) for b in range(table.banks))),
                         w_addr.eq(cfg.addr), w_data.eq(cfg.entry)]
            w_en2 = Signal.like(w_en, attrs=KEEP_APART, name=f"dup_cfg2_en{j}")
            w_addr2 = Signal.like(w_addr, attrs=KEEP_APART, name=f"dup_cfg2_addr{j}", reset_less=True)
            w_data2 = Signal(ChannelEntry, attrs=KEEP_APART, name=f"dup_cfg2_data{j}", reset_less=True)
            m.d.sync += [w_en2.eq(w_en), w_addr2.eq(w_addr), w_data2.eq(w_data)]
            w_en, w_addr, w_data = w_en2, w_addr2, w_data2
            m.d.comb += [table.w_addr.eq(w_addr), table.w_data.eq(w_data), table.w_en.eq(w_en),
                         table.r_addr.eq(row_tag)]
            m.d.comb += [lane.i.valid.eq(lk_valid), lane.i.payload.acc.eq(lk_data[j]),
                         lane.i.payload.bias.eq(table.r_data.bias),
                         lane.i.payload.multiplier.eq(table.r_data.multiplier),
                         lane.i.payload.shift.eq(table.r_data.shift)]

        # Credits (hw.credit) and the sequencer (hw.sequencer).
        m.submodules.credit = credit = CreditCounter(rows=R, limit=self._credit_limit, depth=self.fifo_depth)
        m.submodules.seq = seq = Sequencer(min_tile_steps=self.min_tile_steps, max_col_tiles=self.max_col_tiles,
                                           k_width=len(self.gemm.settings.k_steps))
        m.d.comb += [
            seq.act_valid.eq(self.act.valid), seq.wts_valid.eq(self.wts.valid),
            self.act.ready.eq(seq.act_ready), self.wts.ready.eq(seq.wts_ready),
            seq.k_steps.eq(g.k_steps), seq.n_tiles.eq(g.n_tiles), seq.table_base.eq(g.table_base),
            seq.hold.eq(self.gemm.hold), seq.credit.eq(credit.credit), seq.credit_r.eq(credit.credit_r),
            credit.admit.eq(seq.admit), credit.read.eq(self.res.valid & self.res.ready),
            self.gemm.admit.eq(seq.admit), self.gemm.tile_end.eq(seq.tile_end),
        ]
        # Input register: the step enters the array one cycle after it is accepted (only the flags reset).
        a_in = Signal.like(array.a, reset_less=True)
        w_in = Signal.like(array.w, reset_less=True)
        tag_in = Signal.like(array.tag, reset_less=True)
        m.d.comb += [array.a.eq(a_in), array.w.eq(w_in), array.tag.eq(tag_in)]
        m.d.sync += [array.flags.valid.eq(seq.step), array.flags.last.eq(seq.last),
                     array.flags.depthwise.eq(g.depthwise),
                     tag_in.eq(seq.tag), a_in.eq(self.act.payload), w_in.eq(self.wts.payload)]
        return m


def _delayed(m, value, n, name):
    """``value`` through ``n`` registers."""
    for k in range(n):
        reg = Signal.like(value, name=f"{name}_d{k + 1}", reset_less=True)
        m.d.sync += reg.eq(value)
        value = reg
    return value
