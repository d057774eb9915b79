"""Output-stationary systolic int8 MAC array.

``rows x cols`` MAC cells; cell (i, j) accumulates ``sum_k a[i][k] * w[k][j]`` of one tile in
int32 (wrapping, as TFLite's accumulator does, so K is unbounded). Raw int8 values only:
zero points are folded into the bias outside the array.

Dataflow. One *step* per cycle carries a column of activations ``a[0..rows-1]`` (one k of
an A tile) and a row of weights ``w[0..cols-1]`` (the same k of a W tile), with flags
``valid`` and ``last`` (k = K-1). Row i's activation enters through i skew registers and
then moves right one cell per cycle; column j's weight enters through j skew registers and
moves down; so cell (i, j) sees step s at cycle ``s + i + j``, with the flags travelling
alongside the activations. Each cell's multiplier registers its operands, its product and
(in fabric, twice) the product again (:class:`~hw.multiplier.Multiplier` with
``fabric_stages=2``, so neither the DSP, nor the route out of it, nor the route to the adder
shares a cycle with the 32-bit adder), and on ``last`` the cell clears its accumulator (a
synchronous reset: no "first" multiplexer in front of the carry chain) and presents, for one
cycle, its accumulator before the last product on an ``out`` register and that product on
``out_last``, both zero otherwise: a column's read-out is an OR of its cells, in two
register stages, then one adder per column makes the sums (the cells have one adder each,
the accumulator's). The columns, which finish one cycle apart, are lined up by delay
registers at the array's edge, and row i of a tile leaves whole ``i + cols + 8`` cycles
after its last step.
Depthwise steps (``flags.depthwise``, chosen per step, so per GEMM): each cell multiplies an
activation of its own, ``rows * cols`` of them per step, with the same timing: cell (i, j)'s
enters through ``i + j - 1`` registers of its own and its left neighbour's ``a_out`` register,
which loads it in place of the row's activation. So cell (i, j) accumulates output pixel i of
channel j over the taps, with channel j's weights flowing down column j as in a GEMM; the
result rows, the read-out and the timing are a GEMM's. (Cost: the delay registers, ``sum(i + j
- 1)`` bytes over the cells of columns 1 and up, and one 2:1 multiplexer per ``a_out`` bit.)

Rows leave one per cycle, and a column's cells present on distinct cycles as long as tiles
are ``max(rows, cols)`` steps apart. Consecutive tiles therefore overlap completely when
``K >= max(rows, cols)``; shorter tiles are padded with idle steps by the sequencer in
:mod:`hw.accelerator`.

The array never stalls: idle cycles travel through it as steps with ``valid`` low, and the
accelerator only admits a tile when its output buffer has room for the tile's rows, so no
register needs a global enable (the high-fanout net that would otherwise limit Fmax).
"""

import operator
from functools import reduce

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .multiplier import Multiplier
from .pipeline import KEEP_APART, RING_DEPTH, delayed, ring_delayed

__all__ = ["MACCell", "StepFlags", "SystolicArray"]

StepFlags = data.StructLayout({"valid": 1, "last": 1, "depthwise": 1})
# What waits for the product in a cell: the flags the accumulator needs.
_AccFlags = data.StructLayout({"valid": 1, "last": 1})

# The two parts of a MAC cell's 32-bit accumulator and read-out register that each take their
# clear/enable from a register of their own, per DSP kind: split where the carry chain changes
# logic tiles, so that each tile's flip-flops share one reset net and are packed with their adder
# (nextpnr packs a flip-flop into its adder's slice only if it shares the reset net of the other
# flip-flops there). On ECP5 the chain's first slice carries the carry-in, so bit b sits in tile
# (b + 2) // 8 and tiles start at bits 6, 14, 22, 30; elsewhere the split is at bit 16.
_PARTS = {"ecp5": (slice(0, 14), slice(14, 32)), "generic": (slice(0, 16), slice(16, 32))}


class MACCell(wiring.Component):
    """One int8 x int8 multiply-accumulate cell with an int32 accumulator and a read-out register.

    ``a``/``w``/``flags`` are registered to ``a_out``/``w_out``/``flags_out`` for the neighbours
    (latency 1); on a depthwise step (``flags.depthwise``) ``a_out`` takes ``a_dw`` instead, the
    right-hand neighbour's own activation for the same step. The product ``a * w`` comes from a
    :class:`~hw.multiplier.Multiplier` (operands and product registered, then the product twice more
    in fabric: latency 4), while the flags wait alongside; then, on a valid step, ``acc <- acc +
    product`` (int32 wrap). A valid
    ``last`` step clears ``acc`` (so ``acc`` is zero before every tile's first step, as after
    reset; ``first`` is not needed) and loads ``acc`` (the sum before this product) into
    ``out`` and the product into ``out_last``, which are zero in every other cycle: the tile's
    total is ``out + out_last`` (int32 wrap) in one cycle, ``result_latency`` cycles after the
    last step entered the cell, and the array ORs a column's registers into its read-out and
    adds the two there.
    """

    a: In(signed(8))
    a_dw: In(signed(8))
    w: In(signed(8))
    flags: In(StepFlags)
    a_out: Out(signed(8))
    w_out: Out(signed(8))
    flags_out: Out(StepFlags)
    out: Out(signed(32))
    out_last: Out(signed(16))

    latency = 1
    _MUL_FABRIC_STAGES = 2
    _MUL_LATENCY = Multiplier.latency_of(_MUL_FABRIC_STAGES)
    result_latency = _MUL_LATENCY + 1

    def __init__(self, dsp="generic"):
        self._dsp = dsp
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        # Only the flags and the control bits derived from them are reset: data registers are
        # don't-care until a valid step reaches them, and leaving them out of the reset keeps
        # the reset net small.
        a_out, w_out = Signal(signed(8), reset_less=True), Signal(signed(8), reset_less=True)
        acc = Signal(signed(32), reset_less=True)
        m.submodules.mul = mul = Multiplier(8, 8, self._dsp, copies=2, fabric_stages=self._MUL_FABRIC_STAGES)
        m.d.comb += [mul.a.eq(self.a), mul.b.eq(self.w), mul.en.eq(1)]
        product = mul.p
        # The flags wait for the product: the register for the right-hand neighbour is the first
        # delay, `acc_clear`/`acc_enable` below the last. Copies kept apart: cells on one
        # anti-diagonal hold identical flags, which one register per diagonal would drive across
        # the whole array.
        flags_out = Signal(StepFlags, attrs=KEEP_APART, name="dup_flags_out")
        m.d.comb += [self.a_out.eq(a_out), self.w_out.eq(w_out), self.flags_out.eq(flags_out)]
        m.d.sync += [a_out.eq(Mux(self.flags.depthwise, self.a_dw, self.a)), w_out.eq(self.w),
                     flags_out.eq(self.flags)]
        flags = flags_out
        for n in range(1, self._MUL_LATENCY - 2):
            delayed = Signal(_AccFlags, attrs=KEEP_APART, name=f"dup_flags_m{n + 1}")
            m.d.sync += [delayed.valid.eq(flags.valid), delayed.last.eq(flags.last)]
            flags = delayed
        # The last delay holds "valid" and "valid and last", so each control register below
        # copies (or inverts) one of them: no AND shared by all of them in front.
        valid = Signal(attrs=KEEP_APART, name=f"dup_valid_m{self._MUL_LATENCY - 1}")
        ending = Signal(attrs=KEEP_APART, name=f"dup_ending_m{self._MUL_LATENCY - 1}")
        m.d.sync += [valid.eq(flags.valid), ending.eq(flags.valid & flags.last)]
        # No `first ? 0 : acc` multiplexer in front of the adder's carry chain: the clear is
        # the flip-flops' synchronous reset, driven by a register (high during reset, then "this
        # step is valid and last") and enabled by another; both in one copy per part of the
        # accumulator (_PARTS: split where the carry chain changes logic tiles).
        new = Signal(signed(32))
        m.d.comb += new.eq((acc + product)[:32].as_signed())
        for half, bits in enumerate(_PARTS[self._dsp]):
            clear = Signal(init=1, attrs=KEEP_APART, name=f"dup_acc_clear{half}")
            enable = Signal(attrs=KEEP_APART, name=f"dup_acc_enable{half}")
            m.d.sync += [clear.eq(ending), enable.eq(valid)]
            with m.If(clear):
                m.d.sync += acc[bits].eq(0)
            with m.Elif(enable):
                m.d.sync += acc[bits].eq(new[bits])
        # Read-out: in the cycle the accumulator is cleared, `out` takes the accumulator (the sum
        # of every product but the last) and `out_last` the last product; both are otherwise held
        # at zero (again a synchronous reset, from a register holding the inverse), so a column
        # needs only an OR of its cells, no select lines, and one adder at the array's edge, not
        # one per cell; the cell keeps no copy of its sum, and its only adder is the accumulator.
        out = Signal(signed(32), reset_less=True)
        out_last = Signal(signed(16), reset_less=True)
        for half, bits in enumerate(_PARTS[self._dsp]):
            idle = Signal(init=1, attrs=KEEP_APART, name=f"dup_readout_idle{half}")
            m.d.sync += idle.eq(~ending)
            m.d.sync += out[bits].eq(Mux(idle, 0, acc[bits]))
        idle = Signal(init=1, attrs=KEEP_APART, name="dup_readout_idle_p")
        m.d.sync += idle.eq(~ending)
        m.d.sync += out_last.eq(Mux(idle, 0, mul.p_copy))
        m.d.comb += self.out_last.eq(out_last)
        m.d.comb += self.out.eq(out)
        return m


class SystolicArray(wiring.Component):
    """``rows x cols`` output-stationary array with input skew and row read-out (see module docstring).

    Members
    -------
    a : In(ArrayLayout(signed(8), rows * cols)); w : In(ArrayLayout(signed(8), cols)); flags : In(StepFlags)
        The step presented in a cycle (``flags.valid`` low for an idle cycle). ``a[i]`` is row i's
        activation, which every cell of the row multiplies; on a depthwise step
        (``flags.depthwise``) cell (i, j) multiplies ``a[j * rows + i]`` instead (for j = 0 the
        same element).
    tag : In(tag_width)
        Carried to the row read-out: a tile's rows carry the tag presented with its last step
        (``flags.last``); the accelerator passes the column-tile index.
    row_valid : Out(1); row_tag : Out(tag_width)
    row_data : Out(ArrayLayout(signed(32), cols))
        A completed output row, valid for one cycle.

    With ``ring_delays`` the depthwise activations' delay lines and the columns' deskew lines of three to
    :data:`~hw.pipeline.RING_DEPTH` cycles are rings in LUT RAM (:func:`~hw.pipeline.ring_delayed`, one ring
    per column), not registers: the same values in the same cycles, about 2 400 fewer flip-flops on 8x8 for
    ``sum(i + j - 1)`` LUT-RAM cells. For targets with LUT RAM (ECP5); elsewhere a ring would take a block RAM.
    """

    #: A delay line at least this long goes in a ring when ``ring_delays`` is set (shorter: registers are as cheap).
    RING_MIN_CYCLES = 3

    def __init__(self, rows, cols, tag_width=16, dsp="generic", ring_delays=False):
        for name, v in (("rows", rows), ("cols", cols)):
            if not isinstance(v, int) or v < 1:
                self._MustUse__silence = True  # a refused object is not an unused design
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self.rows, self.cols, self.tag_width, self._dsp = rows, cols, tag_width, dsp
        self.ring_delays = bool(ring_delays)
        super().__init__({
            "a": In(data.ArrayLayout(signed(8), rows * cols)),
            "w": In(data.ArrayLayout(signed(8), cols)),
            "flags": In(StepFlags),
            "tag": In(tag_width),
            "row_valid": Out(1),
            "row_tag": Out(tag_width),
            "row_data": Out(data.ArrayLayout(signed(32), cols)),
        })

    @property
    def min_tile_steps(self):
        """Shortest tile period (in steps) for which read-out rows and result registers never collide."""
        return max(self.rows, self.cols)

    @property
    def latency(self):
        """Cycles from a tile's last step to its row 0 being presented on ``row_*`` (row i follows i cycles later)."""
        return self.cols + MACCell.result_latency + 3

    def _in_ring(self, cycles):
        return self.ring_delays and self.RING_MIN_CYCLES <= cycles <= RING_DEPTH

    def _delayed_group(self, m, lines, name):
        """``lines`` (``(value, cycles, register name)``) delayed, those :meth:`_in_ring` in one ring group, the
        others in registers; returns the delayed values in order."""
        ring = [n for n, (_, cycles, _) in enumerate(lines) if self._in_ring(cycles)]
        outs = dict(zip(ring, ring_delayed(m, [lines[n][:2] for n in ring], name) if ring else [], strict=True))
        return [outs[n] if n in outs else delayed(m, value, cycles, reg_name, reset_less=True)
                for n, (value, cycles, reg_name) in enumerate(lines)]

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        # Depthwise: cell (i, j) sees step s at cycle s + i + j through its left neighbour's a_out register,
        # which then loads this cell's own activation, i + j - 1 cycles after the step entered.
        a_dw = {}
        for j in range(1, C):
            column = self._delayed_group(
                m, [(self.a[j * R + i], i + j - 1, f"a_dw{i}_{j}_d") for i in range(R)], f"a_dw_ring{j}_")
            a_dw.update({(i, j): v for i, v in enumerate(column)})

        cells = [[MACCell(self._dsp) for _ in range(C)] for _ in range(R)]
        for i in range(R):
            for j in range(C):
                cell = cells[i][j]
                m.submodules[f"pe_{i}_{j}"] = cell
                if j == 0:
                    m.d.comb += [cell.a.eq(delayed(m, self.a[i], i, f"a_skew{i}_d", reset_less=True)),
                                 cell.flags.eq(delayed(m, self.flags, i, f"flags_skew{i}_d"))]
                else:
                    m.d.comb += [cell.a.eq(cells[i][j - 1].a_out), cell.flags.eq(cells[i][j - 1].flags_out),
                                 cells[i][j - 1].a_dw.eq(a_dw[i, j])]
                if i == 0:
                    m.d.comb += cell.w.eq(delayed(m, self.w[j], j, f"w_skew{j}_d", reset_less=True))
                else:
                    m.d.comb += cell.w.eq(cells[i - 1][j].w_out)

        # Cell (i, j) presents its result on `out`/`out_last` D_i - (cols - 1 - j) cycles after
        # the tile's last step entered the array, where D_i = i + cols - 1 + result_latency (the
        # last cell of row i). With tiles >= max(rows, cols) steps apart at most one row of a
        # column is presented per cycle, and a column's read-out is the OR of its cells' registers:
        # groups of four rows, registered, then the groups, registered (so no wide OR sits in one
        # cycle), then out + out_last, registered. Then column j waits cols - j cycles at the
        # array's edge, so that row i leaves whole in cycle D_i + 4, away from the DSPs (a cell
        # keeps no copy of its sum). A delay line of (last, tag) gives the row's valid flag and tag.
        RL = MACCell.result_latency
        ready_at = [C - 1 + RL + i for i in range(R)]  # D_i
        last = Signal()
        m.d.comb += last.eq(self.flags.valid & self.flags.last)
        line = [(last, self.tag)]
        # (row 0's flag and tag, D_0 + 3 registers down; the line once ran to D_{rows-1} + 3 with
        # its tail unused, which `make mutate` found: mutants lengthening it changed nothing)
        for k in range(ready_at[0] + 3):
            prev_last, prev_tag = line[-1]
            # (copies kept apart from the cells' identical flag registers, far away)
            l_reg = Signal(attrs=KEEP_APART, name=f"dup_done_last{k + 1}")
            t_reg = Signal(self.tag_width, name=f"done_tag{k + 1}", reset_less=True)
            m.d.sync += [l_reg.eq(prev_last), t_reg.eq(prev_tag)]
            line.append((l_reg, t_reg))

        groups = [range(g, min(g + 4, R)) for g in range(0, R, 4)]
        row_data = Signal(data.ArrayLayout(signed(32), C), reset_less=True)
        totals = []
        for j in range(C):
            parts = []
            for g, rows in enumerate(groups):
                part = Signal(48, name=f"readout_c{j}_g{g}", reset_less=True)
                m.d.sync += part.eq(reduce(operator.or_, (Cat(cells[i][j].out, cells[i][j].out_last)
                                                          for i in rows)))
                parts.append(part)
            column = Signal(48, name=f"readout_c{j}", reset_less=True)
            m.d.sync += column.eq(reduce(operator.or_, parts))
            total = Signal(signed(32), name=f"readout_sum{j}", reset_less=True)
            m.d.sync += total.eq(column[:32].as_signed() + column[32:].as_signed())
            totals.append((total, C - j - 1, f"deskew_c{j}_d"))
        for j, total in enumerate(self._delayed_group(m, totals, "deskew_ring")):
            m.d.sync += row_data[j].eq(total)
        m.d.comb += self.row_data.eq(row_data)
        # Valid and tag follow the data, four cycles after D_i. All rows of a tile carry its tag,
        # and the next tile's row 0 comes >= rows cycles later: the tag is captured at row 0.
        row_tag = Signal(self.tag_width, reset_less=True)
        m.d.comb += self.row_tag.eq(row_tag)
        done0, tag0 = line[-1]
        with m.If(done0):
            m.d.sync += row_tag.eq(tag0)
        # Rows follow row 0 on consecutive cycles: a down-counter, not an OR over the delay line.
        if R == 1:
            m.d.sync += self.row_valid.eq(done0)
        else:
            rows_left = Signal(range(R))
            with m.If(done0):
                m.d.sync += rows_left.eq(R - 1)
            with m.Elif(rows_left != 0):
                m.d.sync += rows_left.eq(rows_left - 1)
            m.d.sync += self.row_valid.eq(done0 | (rows_left != 0))
        return m
