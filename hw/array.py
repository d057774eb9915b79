"""Output-stationary systolic int8 MAC array.

``rows x cols`` MAC cells; cell (i, j) accumulates ``sum_k a[i][k] * w[k][j]`` of one tile in
int32 (wrapping, as TFLite's accumulator does, so K is unbounded). Raw int8 values only:
zero points are folded into the bias outside the array.

Dataflow. One *step* per cycle carries a column of activations ``a[0..rows-1]`` (one k of
an A tile) and a row of weights ``w[0..cols-1]`` (the same k of a W tile), with flags
``first`` (k = 0) and ``last`` (k = K-1). Row i's activation enters through i skew
registers and then moves right one cell per cycle; column j's weight enters through j
skew registers and moves down; so cell (i, j) sees step s at cycle ``s + i + j``, with
the flags travelling alongside the activations. Each cell's multiplier registers its
operands and its product (:class:`~hw.multiplier.Multiplier`, so the DSP and the 32-bit
adder are in different cycles), and on ``last`` the cell copies its final sum into its
output register, which the next tile does not touch for ``max(rows, cols)`` steps: row i of
a tile is complete ``i + cols + 2`` cycles after its last step and is read out as a whole
(``cols`` int32 values, through two AND-OR register stages), one row per cycle.
Consecutive tiles therefore overlap completely when
``K >= max(rows, cols)``; shorter tiles are padded with idle steps by the sequencer in
:mod:`hw.accelerator`.

The array never stalls: idle cycles travel through it as steps with ``valid`` low, and the
accelerator only admits a tile when its output buffer has room for the tile's rows, so no
register needs a global enable (the high-fanout net that would otherwise limit Fmax).
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .multiplier import Multiplier

__all__ = ["MACCell", "StepFlags", "SystolicArray"]

StepFlags = data.StructLayout({"valid": 1, "first": 1, "last": 1})


class MACCell(wiring.Component):
    """One int8 x int8 multiply-accumulate cell with an int32 accumulator and output register.

    ``a``/``w``/``flags`` are registered to ``a_out``/``w_out``/``flags_out`` for the neighbours
    (latency 1). The product ``a * w`` comes from a :class:`~hw.multiplier.Multiplier` (operands
    and product registered, latency 2) while the flags wait alongside; then, on a valid step,
    ``acc <- (first ? 0 : acc) + product`` (int32 wrap), and on a valid ``last`` step the same
    new value is copied to ``result`` (so ``result`` follows the step by 3 cycles).
    """

    a: In(signed(8))
    w: In(signed(8))
    flags: In(StepFlags)
    a_out: Out(signed(8))
    w_out: Out(signed(8))
    flags_out: Out(StepFlags)
    result: Out(signed(32))

    latency = 1
    result_latency = Multiplier.latency + 1

    def __init__(self, dsp="generic"):
        self._dsp = dsp
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        # Only the flags are reset: data registers are don't-care until a valid step reaches
        # them, and leaving them out of the reset keeps the reset net small (and ECP5 slices,
        # whose two flip-flops share one reset, free to pack any two data bits together).
        a_out, w_out = Signal(signed(8), reset_less=True), Signal(signed(8), reset_less=True)
        acc, result = Signal(signed(32), reset_less=True), Signal(signed(32), reset_less=True)
        m.submodules.mul = mul = Multiplier(8, 8, self._dsp)
        m.d.comb += [mul.a.eq(self.a), mul.b.eq(self.w), mul.en.eq(1)]
        product = mul.p
        flags = self.flags
        for n in range(Multiplier.latency):
            delayed = Signal(StepFlags, name=f"flags_m{n + 1}")
            m.d.sync += delayed.eq(flags)
            previous, flags = flags, delayed
        # A private copy of `first` for the 32 accumulator multiplexers (named dup_: kept apart
        # from flags.first by fpga.synth, so the placer can put it next to the adder).
        first = Signal(name="dup_first")
        m.d.sync += first.eq(previous.first)
        m.d.comb += [self.a_out.eq(a_out), self.w_out.eq(w_out), self.result.eq(result)]
        m.d.sync += [a_out.eq(self.a), w_out.eq(self.w), self.flags_out.eq(self.flags)]
        new = Signal(signed(32))
        m.d.comb += new.eq((Mux(first, 0, acc) + product)[:32].as_signed())
        with m.If(flags.valid):
            m.d.sync += acc.eq(new)
            with m.If(flags.last):
                m.d.sync += result.eq(new)
        return m


class SystolicArray(wiring.Component):
    """``rows x cols`` output-stationary array with input skew and row read-out (see module docstring).

    Members
    -------
    a : In(ArrayLayout(signed(8), rows)); w : In(ArrayLayout(signed(8), cols)); flags : In(StepFlags)
        The step presented in a cycle (``flags.valid`` low for an idle cycle).
    tag : In(tag_width)
        Carried with the step to the row read-out (the accelerator passes the column-tile index).
    row_valid : Out(1); row_tag : Out(tag_width)
    row_data : Out(ArrayLayout(signed(32), cols))
        A completed output row, valid for one cycle.
    """

    def __init__(self, rows, cols, tag_width=16, dsp="generic"):
        for name, v in (("rows", rows), ("cols", cols)):
            if not isinstance(v, int) or v < 1:
                self._MustUse__silence = True  # a refused object is not an unused design
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        self.rows, self.cols, self.tag_width, self._dsp = rows, cols, tag_width, dsp
        super().__init__({
            "a": In(data.ArrayLayout(signed(8), rows)),
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
        return self.cols + MACCell.result_latency + 1

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols

        def delayed(value, n, name, reset_less=True):
            for k in range(n):
                reg = Signal(value.shape(), name=f"{name}_d{k + 1}", reset_less=reset_less)
                m.d.sync += reg.eq(value)
                value = reg
            return value

        cells = [[MACCell(self._dsp) for _ in range(C)] for _ in range(R)]
        for i in range(R):
            for j in range(C):
                cell = cells[i][j]
                m.submodules[f"pe_{i}_{j}"] = cell
                if j == 0:
                    m.d.comb += [cell.a.eq(delayed(self.a[i], i, f"a_skew{i}")),
                                 cell.flags.eq(delayed(self.flags, i, f"flags_skew{i}", reset_less=False))]
                else:
                    m.d.comb += [cell.a.eq(cells[i][j - 1].a_out), cell.flags.eq(cells[i][j - 1].flags_out)]
                if i == 0:
                    m.d.comb += cell.w.eq(delayed(self.w[j], j, f"w_skew{j}"))
                else:
                    m.d.comb += cell.w.eq(cells[i - 1][j].w_out)

        # Cell (i, cols-1) holds row i's result D_i = i + cols - 1 + result_latency cycles after
        # the tile's last step entered. A delay line of (last, tag) finds it; with tiles >=
        # max(rows, cols) steps apart at most one row completes per cycle.
        RL = MACCell.result_latency
        ready_at = [C - 1 + RL + i for i in range(R)]  # D_i
        last = Signal()
        m.d.comb += last.eq(self.flags.valid & self.flags.last)
        line = [(last, self.tag)]
        for k in range(ready_at[-1] + 1):
            prev_last, prev_tag = line[-1]
            l_reg = Signal(name=f"done_last{k + 1}")
            t_reg = Signal(self.tag_width, name=f"done_tag{k + 1}", reset_less=True)
            m.d.sync += [l_reg.eq(prev_last), t_reg.eq(prev_tag)]
            line.append((l_reg, t_reg))

        # Read-out in two register stages, so neither a wide multiplexer nor a select line with
        # hundreds of loads sits in one cycle: per column, a private copy of the one-hot row
        # select (registered from the line a cycle early, so it is high in cycle D_i), then
        # AND-OR over groups of four rows, then OR of the groups. The select copies are named
        # dup_*: fpga.synth keeps them, Yosys would merge identical registers.
        groups = [range(g, min(g + 4, R)) for g in range(0, R, 4)]
        row_data = Signal(data.ArrayLayout(signed(32), C), reset_less=True)
        for j in range(C):
            sel = Signal(R, name=f"dup_readout_sel{j}")
            m.d.sync += sel.eq(Cat(*(line[ready_at[i] - 1][0] for i in range(R))))
            parts = []
            for g, rows in enumerate(groups):
                part = Signal(32, name=f"readout_c{j}_g{g}", reset_less=True)
                terms = [cells[i][j].result.as_unsigned() & sel[i].replicate(32) for i in rows]
                acc = terms[0]
                for t in terms[1:]:
                    acc = acc | t
                m.d.sync += part.eq(acc)
                parts.append(part)
            total = parts[0]
            for part in parts[1:]:
                total = total | part
            m.d.sync += row_data[j].eq(total)
        m.d.comb += self.row_data.eq(row_data)
        # Valid and tag follow the data, two cycles after D_i.
        row_tag = Signal(self.tag_width, reset_less=True)
        m.d.comb += self.row_tag.eq(row_tag)
        m.d.sync += self.row_valid.eq(0)
        for i in range(R):
            done, tag = line[ready_at[i] + 1]
            with m.If(done):
                m.d.sync += [self.row_valid.eq(1), row_tag.eq(tag)]
        return m
