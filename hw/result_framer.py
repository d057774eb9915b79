"""The result framer of the AXI top: TLAST on the last result row of each GEMM, and ``done``.

The core's ``res`` rows come in GEMM order: per GEMM, ``m_tiles * n_tiles`` tiles of ``rows``
rows. The framer counts them down against the oldest in-flight GEMM's tiles (``head_*``: tiles - 1
and whether that is zero, registers of :class:`hw.gemm_scheduler.GemmScheduler`), passes the
stream on as ``tvalid``/``tready`` with ``tlast`` on that GEMM's last row, and pulses ``done``
(a register) in the cycle after that row is transferred (the scheduler then drops the GEMM, and
the next one's counts load three cycles after: four cycles without a transfer between GEMMs).
``tlast`` is a function of registers, stable while ``tvalid`` waits for ``tready``.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ResultFramer"]


class ResultFramer(wiring.Component):
    """TLAST and GEMM completion on the result stream (see the module docstring)."""

    # Cycles without a transfer after a GEMM's last row (the next GEMM's counts loading).
    IDLE = 4

    def __init__(self, rows, n_width=16):
        self.rows = rows
        super().__init__({
            "head_valid": In(1), "head_m_m1": In(24), "head_n_m1": In(n_width), "head_m_one": In(1),
            "head_n_one": In(1), "done": Out(1),
            "res_valid": In(1), "res_ready": Out(1),
            "tvalid": Out(1), "tready": In(1), "tlast": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        loaded = Signal()
        # rows left in the tile after this one, column tiles left in the row tile, row tiles left,
        # each with a register flagging zero (TLAST is an AND of three flip-flops)
        row_left = Signal(range(self.rows))
        n_left, m_left, n_m1 = Signal.like(self.head_n_m1), Signal(24), Signal.like(self.head_n_m1)
        row_zero, n_zero, m_zero, n_one = Signal(), Signal(), Signal(), Signal()
        last_row = Signal()
        m.d.comb += last_row.eq(row_zero & n_zero & m_zero)
        m.d.comb += [self.tvalid.eq(self.res_valid & loaded), self.res_ready.eq(self.tready & loaded),
                     self.tlast.eq(last_row)]
        take = Signal()
        m.d.comb += take.eq(self.tvalid & self.tready)
        done = Signal()
        m.d.sync += done.eq(take & last_row)
        m.d.comb += self.done.eq(done)
        # The scheduler's head_* copied into registers here (the framer sits by the output FIFOs,
        # whose `res.valid` and `res.ready` it is in the path of; the scheduler is elsewhere). The
        # scheduler drops the GEMM on `done` and shows the next one at head_* two cycles after,
        # so the copies are current three cycles after `done`.
        head = {name: Signal.like(getattr(self, name), name=f"dup_{name}") for name in
                ("head_valid", "head_m_m1", "head_n_m1", "head_m_one", "head_n_one")}
        m.d.sync += [sig.eq(getattr(self, name)) for name, sig in head.items()]
        done_d = Signal(2)
        m.d.sync += done_d.eq(Cat(done, done_d[0]))
        with m.If(~loaded & ~done & ~done_d.any() & head["head_valid"]):
            m.d.sync += [loaded.eq(1), row_left.eq(self.rows - 1), row_zero.eq(self.rows == 1),
                         n_left.eq(head["head_n_m1"]), n_zero.eq(head["head_n_one"]),
                         m_left.eq(head["head_m_m1"]), m_zero.eq(head["head_m_one"]),
                         n_m1.eq(head["head_n_m1"]), n_one.eq(head["head_n_one"])]
        # The row count follows each transfer; the tile counts follow a cycle later (`tile_next`, a
        # register), so only a few flip-flops are in the loop through the FIFOs' res.valid and
        # res.ready. A tile's last row is offered `rows - 1` transfers after its first, so with
        # two rows or more the tile counts are current by then. (With one row a tile, they follow
        # each transfer.)
        tile_next = Signal()
        if self.rows == 1:
            m.d.comb += tile_next.eq(take & ~last_row)
        else:
            m.d.sync += tile_next.eq(take & row_zero & ~last_row)
        with m.If(take):
            with m.If(last_row):
                m.d.sync += loaded.eq(0)
            with m.Elif(~row_zero):
                m.d.sync += [row_left.eq(row_left - 1), row_zero.eq(row_left == 1)]
            with m.Else():
                m.d.sync += [row_left.eq(self.rows - 1), row_zero.eq(self.rows == 1)]
        with m.If(tile_next):
            with m.If(~n_zero):
                m.d.sync += [n_left.eq(n_left - 1), n_zero.eq(n_left == 1)]
            with m.Else():
                m.d.sync += [n_left.eq(n_m1), n_zero.eq(n_one), m_left.eq(m_left - 1), m_zero.eq(m_left == 1)]
        return m
