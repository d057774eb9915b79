"""Credits for the output FIFO: rows reserved by admitted tiles and not yet read from ``res``.

:class:`CreditCounter` counts ``rows`` for each tile admitted (``admit``, a register pulse one
cycle after the tile's first step) and -1 for each row read (``read``, the ``res`` transfer, taken
through :attr:`CreditCounter.RETURN` registers), and says whether one more tile may be admitted:
``credit`` (and its copy ``credit_r``, for the sequencer's ready logic) is high when the count is
at most ``limit``. The count lags: in cycle t, ``credit`` reflects the tiles whose first step came
up to t - :attr:`LAG` (their ``admit`` pulses up to t - :attr:`LAG` + 1) and the reads up to
t - (:attr:`RETURN` + :attr:`LAG` - 1). The accelerator sizes ``limit`` and the
FIFO from these lags (:attr:`hw.accelerator.Accelerator.fifo_depth`).
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipeline import KEEP_APART, delayed

__all__ = ["CreditCounter"]


class CreditCounter(wiring.Component):
    """Room in the output FIFO for one more tile of ``rows`` rows (see the module docstring)."""

    # Registers from a read on ``res`` to the count (``res.ready`` reaches these and the FIFOs'
    # queues, not the sequencer's logic).
    RETURN = 2
    # Cycles by which `credit` lags an admit: `admit` (the sequencer's register), `delta`,
    # `reserved`, then `credit` itself are registers.
    LAG = 4

    def __init__(self, *, rows, limit, depth):
        self.rows, self.limit, self.depth = rows, limit, depth
        super().__init__({"admit": In(1), "read": In(1), "credit": Out(1, init=1), "credit_r": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        R = self.rows
        # `reserved` moves by `delta`, a register holding this cycle's change (+rows for a tile
        # admitted, -1 for a row read), so its update is one adder with no multiplexer, and
        # `credit` (room for one more tile) is a register holding one compare of `reserved`
        # with a constant. Both lag; the compare leaves room for the tiles admitted meanwhile,
        # and reads counted late only make it stricter.
        reserved = Signal(range(self.depth + 1))
        credit = Signal(init=1, attrs=KEEP_APART, name="dup_credit")
        credit_r = Signal(init=1, attrs=KEEP_APART, name="dup_credit_r")
        read = delayed(m, self.read, self.RETURN, "read_d")
        delta = Signal(range(-1, R + 1))
        # (each bit of the change a function of `admit` and `read`: a multiplexer of constants,
        # one LUT; as a subtraction it was a carry chain after the step logic)
        m.d.sync += [delta.eq(Mux(self.admit, Mux(read, R - 1, R), Mux(read, -1, 0))),
                     reserved.eq(reserved + delta),
                     credit.eq(reserved <= self.limit),
                     credit_r.eq(reserved <= self.limit)]
        m.d.comb += [self.credit.eq(credit), self.credit_r.eq(credit_r)]
        return m
