"""The sequencer: cuts the step stream into tiles of K steps, tags each with its table address,
pads short tiles, and admits a tile only when the output FIFO has room for its rows.

Per cycle it accepts one *step* (a transfer on both input streams) while ``act_valid`` and
``wts_valid`` are high and it is open: not padding, and, for a tile's first step, ``credit``
(from :class:`hw.credit.CreditCounter`) and not ``hold``. ``step``/``last`` say, in the step's own
cycle, that a step was accepted and that it ends its tile; ``tag`` is the tile's table address,
``table_base`` + its column-tile index (0 .. ``n_tiles`` - 1, row tile outer), valid with a
tile's last step (where the array takes it; in the cycle after a last step it still shows the
previous tile's). ``admit`` and
``tile_end`` are registers: a tile's first and last step, one cycle later.

Timing contract (what the accelerator and the AXI top rely on):

- ``k_steps`` (K >= 1), ``n_tiles`` (>= 1) and ``table_base`` (``table_base + n_tiles <=
  max_col_tiles``) must be stable from three cycles before a GEMM's first step to the cycle of
  its last step's ``tile_end``: nothing derived from them is read after that cycle, so the next
  GEMM's values may arrive in the cycle after it.
  Between GEMMs the column-tile index must be back at 0, which it is after whole row tiles.
- ``hold`` stops new tiles, not the tile in progress: a tile whose first step was accepted
  runs to its last. Raised in the cycle after a tile's ``admit``, it stops the next tile.
- Tiles of fewer than ``min_tile_steps`` steps are followed by idle cycles up to that, which keeps
  the last steps of consecutive tiles of one K ``min_tile_steps`` apart, as the array needs. When
  K changes between GEMMs to a smaller K, the caller must hold the next GEMM's first step off
  until its first tile's last step is ``min_tile_steps`` after the previous last step (the AXI
  top's scheduler does).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipeline import KEEP_APART

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Step and tile control of the accelerator (see the module docstring for the contract).

    Parameters: ``min_tile_steps`` (>= 2), ``max_col_tiles`` (table depth), ``k_width`` (bits of K).
    """

    ADMIT_LATENCY = 1   # ``admit`` and ``tile_end`` come this many cycles after a tile's first and last step
    SETTLE = 3          # cycles the settings are stable before a GEMM's first step, at least

    def __init__(self, *, min_tile_steps, max_col_tiles, k_width=24):
        assert min_tile_steps >= 2, min_tile_steps
        self.min_tile_steps, self.max_col_tiles = min_tile_steps, max_col_tiles
        super().__init__({
            "act_valid": In(1), "wts_valid": In(1), "act_ready": Out(1), "wts_ready": Out(1),
            "k_steps": In(k_width), "n_tiles": In(range(max_col_tiles + 1)),
            "table_base": In(range(max(max_col_tiles, 2))), "hold": In(1),
            "credit": In(1), "credit_r": In(1),
            "step": Out(1), "last": Out(1), "tag": Out(range(max(max_col_tiles, 2))),
            "admit": Out(1), "tile_end": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        # Only what decides a step is exact in its cycle (`first`, `last`, the padding: a register
        # each); the 24-bit count and the tile index run a cycle behind, on the step registered,
        # so the step (from the streams' valid bits) does not fan out to their enables.
        first = Signal(init=1, attrs=KEEP_APART, name="dup_first")
        # n_tiles - 1 in a register (n_tiles is stable while a layer runs): the wrap test is an
        # equality, not a carry chain after the increment.
        tiles_m1 = Signal.like(self.n_tiles, reset_less=True)
        m.d.sync += tiles_m1.eq(self.n_tiles - 1)
        # What the sequencer needs of K, in registers made in two stages from the port (K is stable
        # while a GEMM runs), so no 24-bit compare sits in front of an enable: K - 2, K == 1 .. 4
        # and the padding of a tile shorter than min_tile_steps, from K's low bits and a flag for
        # the rest being zero.
        c = self.min_tile_steps
        lo_bits = max(3, (c - 1).bit_length())
        k_copy = Signal.like(self.k_steps, reset_less=True, name="k_steps_copy")
        k_lo = Signal(lo_bits, reset_less=True)
        # K < 2**lo_bits, as two registers (the high bits' two halves zero): the port's register sits
        # by the scheduler, so each compare from it is two LUT levels at most, and their AND, one
        # level, goes in the second stage's LUTs by the sequencer.
        high = len(self.k_steps) - lo_bits
        small_lo, small_hi = (Signal(reset_less=True, name=f"k_small_{part}") for part in ("lo", "hi"))
        small = small_lo & small_hi
        m.d.sync += [k_copy.eq(self.k_steps), k_lo.eq(self.k_steps[:lo_bits]),
                     small_lo.eq(self.k_steps[lo_bits:lo_bits + high // 2] == 0),
                     small_hi.eq(self.k_steps[lo_bits + high // 2:] == 0)]
        k_m2 = Signal.like(self.k_steps, reset_less=True)
        k_is = {n: Signal(name=f"k_is_{n}") for n in range(1, 5)}
        # (the padding after a tile of K < min_tile_steps is min_tile_steps - K idle cycles)
        k_short, pad_is_1, pad_is_2 = Signal(), Signal(), Signal()
        pad_m1 = Signal(range(c + 1), reset_less=True)
        m.d.sync += [k_m2.eq(k_copy - 2), k_short.eq(small & (k_lo < c)), pad_m1.eq(c - 1 - k_lo),
                     pad_is_1.eq(small & (k_lo == c - 1)), pad_is_2.eq(small & (k_lo == c - 2))]
        m.d.sync += [k_is[n].eq(small & (k_lo == n)) for n in k_is]
        # idle cycles left != 0, as a register (no compare in front of the enables)
        padding = Signal(attrs=KEEP_APART, name="dup_padding")
        pad = Signal(range(self.min_tile_steps + 1))
        pad_one = Signal()
        open_ = Signal()
        m.d.comb += open_.eq(~padding & (~first | (self.credit & ~self.hold)))
        step = Signal()
        m.d.comb += step.eq(self.act_valid & self.wts_valid & open_)
        # Whether a step now ends its tile (`first` ? K == 1 : no steps left after it): a register
        # made a cycle ahead, so no multiplexer sits between the streams' valid bits and `last_d`.
        # While `first` it follows `k_is[1]`, current two cycles after K changes: `last` is then
        # current three cycles after, as the contract gives.
        last = Signal(attrs=KEEP_APART, name="dup_last")
        # The step, its `first` and its `last`, a cycle later (copies: the array's input flags hold
        # the same values).
        step_d, first_d, last_d = (Signal(attrs=KEEP_APART, name=f"dup_{n}_d") for n in ("step", "first", "last"))
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
        # The tile index: `tile` moves to `tile_next` in the cycle after a tile's last step; the
        # array takes a tile's tag with its last step, at least min_tile_steps >= 2 cycles after
        # the previous tile's, so `tile` is current by then. `tile_next` (the successor, wrapping
        # at n_tiles) and `left` (column tiles after `tile`) are kept a cycle late, and `wraps`
        # takes a registered flag when `tile` moves, so no compare with n_tiles - 1 sits in the
        # move's cycle. Between moves `left` is recomputed from `tile`, so a new n_tiles is seen.
        tile, tile_next = (Signal(range(self.max_col_tiles + 1), name=name) for name in ("tile", "tile_next"))
        left, left_next = (Signal(range(self.max_col_tiles + 1), name=name) for name in ("left", "left_next"))
        wraps, left_is_1, one_tile = Signal(), Signal(), Signal()
        m.d.sync += [one_tile.eq(tiles_m1 == 0), left_is_1.eq(left == 1)]
        # (`last_d` again, a copy by the tile index, which sits by the array's tag input)
        last_t = Signal(attrs=KEEP_APART, name="dup_last_d_tile")
        m.d.sync += last_t.eq(step & last)
        with m.If(last_t):
            m.d.sync += [tile.eq(tile_next), left.eq(left_next), wraps.eq(Mux(wraps, one_tile, left_is_1))]
        with m.Else():
            m.d.sync += [left.eq(tiles_m1 - tile), wraps.eq(left == 0)]
        m.d.sync += [tile_next.eq(Mux(wraps, 0, tile + 1)), left_next.eq(Mux(wraps, tiles_m1, left - 1))]
        with m.If(step):
            m.d.sync += last.eq(Mux(last, k_is[1], Mux(first, k_is[2], remaining_is_1)))
        with m.Elif(first):
            m.d.sync += last.eq(k_is[1])
        with m.If(step):
            m.d.sync += first.eq(last)
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

        # The ready outputs from copies of `first` and `padding` (and `credit_r`), so that no LUT is
        # shared between them and the step's enables.
        first_r, padding_r = (Signal(init=v, attrs=KEEP_APART, name=f"dup_{n}_r")
                              for n, v in (("first", 1), ("padding", 0)))
        with m.If(step):
            m.d.sync += first_r.eq(last)
            with m.If(last & k_short):
                m.d.sync += padding_r.eq(1)
        with m.Elif(padding_r):
            m.d.sync += padding_r.eq(Mux(last_d, ~pad_is_1, ~pad_one))
        open_r = ~padding_r & (~first_r | (self.credit_r & ~self.hold))
        m.d.comb += [self.act_ready.eq(self.wts_valid & open_r), self.wts_ready.eq(self.act_valid & open_r)]

        # The tile's table address: the column-tile index after the GEMM's table base (a copy in a
        # register beside the adder; stable from three cycles before the GEMM's first step).
        base = Signal.like(self.table_base, reset_less=True, name="table_base_copy")
        m.d.sync += base.eq(self.table_base)
        m.d.comb += [self.step.eq(step), self.last.eq(last), self.tag.eq((tile + base)[:len(self.tag)]),
                     self.tile_end.eq(last_d)]
        # A tile admitted (its first step), registered: the credit counter sits away from the
        # sequencer and reads only registers.
        admit = Signal(attrs=KEEP_APART, name="dup_admit_d")
        m.d.sync += admit.eq(step & first)
        m.d.comb += self.admit.eq(admit)
        return m
