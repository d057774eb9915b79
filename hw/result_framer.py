"""The result framer of the AXI top: TLAST on the last result row of each GEMM, and ``done``.

The core's ``res`` rows come in GEMM order: per GEMM, ``m_tiles * n_tiles`` tiles of ``rows``
rows. The scheduler (:class:`hw.gemm_scheduler.GemmScheduler`) pushes each GEMM's tile counts
(tiles - 1 and whether that is 0) when it launches the GEMM; the framer keeps them in a queue of
``depth`` (the GEMMs in flight), counts the rows of the oldest down as they are transferred,
sets ``tlast`` on its last row and pulses ``done`` (a register) in the cycle after that row is
transferred. The stream passes through: ``tvalid`` is ``res_valid`` and ``res_ready`` is
``tready``, so the result stream's handshake has no logic of the framer's in it (``tlast`` is an
AND of three flip-flops, stable while ``tvalid`` waits for ``tready``).

That needs the counts of a GEMM to be in place when its first row comes, which they are:

- a GEMM's counts are pushed when it is launched, a few cycles after which they are in the
  queue; its first row leaves the core at least the core's latency after its first step;
- the counts of the GEMM after the oldest are taken from the queue in the cycle after the
  oldest's last row (with ``done``), and the tile counts are first read two transfers into a
  GEMM (its first row is never its last but with one row per tile), by when they are loaded.

With one row per tile (``rows`` = 1) a GEMM's first row may be its last, so there the stream is
held for the cycle of ``done`` (:meth:`ResultFramer.idle`: one cycle without a transfer between
GEMMs, none with ``rows`` >= 2).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["ResultFramer", "counts_layout"]


def counts_layout(n_width):
    """A GEMM's tile counts as the framer takes them: row and column tiles - 1, and whether each is 0."""
    return data.StructLayout({"m_m1": 24, "n_m1": n_width, "m_one": 1, "n_one": 1})


class ResultFramer(wiring.Component):
    """TLAST and GEMM completion on the result stream (see the module docstring).

    ``push`` (with ``counts``) queues a launched GEMM's counts; at most ``depth`` GEMMs are pushed
    and not yet ``done``."""

    @staticmethod
    def idle(rows):
        """Cycles without a transfer after a GEMM's last row, for an array of ``rows`` rows."""
        return 1 if rows == 1 else 0

    def __init__(self, rows, n_width=16, depth=4):
        self.rows, self.depth = rows, depth
        super().__init__({
            "push": In(1), "counts": In(counts_layout(n_width)), "done": Out(1),
            "res_valid": In(1), "res_ready": Out(1),
            "tvalid": Out(1), "tready": In(1), "tlast": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        Counts = self.counts.shape()
        # The queue: a ring of `depth` entries in a memory (LUT RAM on ECP5). A push writes entry
        # `tail` a cycle on (the push and the counts registered here, beside the output FIFOs);
        # `pop` moves `head`, a one-hot pointer. `nxt` and `nxt_valid` are entry `head` and
        # whether it holds counts, in registers, a cycle behind the pointer and the entries (both
        # from the same cycle, so they agree; after a pop they show the popped entry for a cycle,
        # in which no pop can come: see below).
        D = self.depth
        push, pushed = Signal(), Signal(Counts, reset_less=True)
        m.d.sync += [push.eq(self.push), pushed.eq(self.counts)]
        tail, head = Signal(D, init=1), Signal(D, init=1)
        with m.If(push):
            m.d.sync += tail.eq(tail.rotate_left(1))
        m.submodules.queue = queue = Memory(shape=len(pushed.as_value()), depth=D, init=[],
                                            attrs={"ram_style": "distributed"})
        wp, rp = queue.write_port(), queue.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(_binary(tail)), wp.data.eq(pushed), wp.en.eq(push), rp.addr.eq(_binary(head))]
        valid = Signal(D)
        pop = Signal()
        m.d.sync += valid.eq((valid | Mux(push, tail, 0)) & ~Mux(pop, head, 0))
        with m.If(pop):
            m.d.sync += head.eq(head.rotate_left(1))
        nxt, nxt_valid = Signal(Counts, reset_less=True), Signal()
        m.d.sync += [nxt.as_value().eq(rp.data), nxt_valid.eq((valid & head).any())]

        # The oldest GEMM's counts: rows left in the tile after this one, column tiles left in
        # the row tile, row tiles left, each with a register flagging zero.
        cur_valid = Signal()
        row_left = Signal(range(self.rows), init=self.rows - 1)
        row_zero = Signal(init=self.rows == 1)
        n_left, m_left, n_m1 = Signal.like(self.counts.n_m1), Signal(24), Signal.like(self.counts.n_m1)
        n_zero, m_zero, n_one = Signal(), Signal(), Signal()
        last_row = Signal()
        m.d.comb += [last_row.eq(row_zero & n_zero & m_zero), self.tlast.eq(last_row)]
        done = Signal()
        m.d.comb += self.done.eq(done)
        take = Signal()
        if self.rows == 1:
            go = Signal()
            m.d.comb += [go.eq(cur_valid & ~done), self.tvalid.eq(self.res_valid & go),
                         self.res_ready.eq(self.tready & go)]
        else:
            m.d.comb += [self.tvalid.eq(self.res_valid), self.res_ready.eq(self.tready)]
        m.d.comb += take.eq(self.tvalid & self.tready)
        m.d.sync += done.eq(take & last_row)

        # The head entry becomes the oldest GEMM after the last one's last row (`done`), or when
        # there is none. (A pop comes at least two cycles after the one before: `done` follows a
        # GEMM's last row, which is at least its second transfer with two rows a tile or more,
        # and with one, the stream is held in the cycle of `done`; after a pop with no GEMM
        # before, `cur_valid` is set.)
        m.d.comb += pop.eq((done | ~cur_valid) & nxt_valid)
        with m.If(pop):
            m.d.sync += [cur_valid.eq(1), n_left.eq(nxt.n_m1), n_zero.eq(nxt.n_one),
                         m_left.eq(nxt.m_m1), m_zero.eq(nxt.m_one), n_m1.eq(nxt.n_m1), n_one.eq(nxt.n_one)]
        with m.Elif(done):
            m.d.sync += cur_valid.eq(0)
        # The row count follows each transfer; the tile counts follow a cycle later (`tile_next`, a
        # register), so only a few flip-flops are in the loop through the FIFOs' res.valid and
        # res.ready. A tile's last row is offered `rows - 1` transfers after its first, so with
        # two rows or more the tile counts are current by then. (With one row a tile, they follow
        # each transfer.)
        with m.If(take):
            with m.If(~row_zero):
                m.d.sync += [row_left.eq(row_left - 1), row_zero.eq(row_left == 1)]
            with m.Else():
                m.d.sync += [row_left.eq(self.rows - 1), row_zero.eq(self.rows == 1)]
        tile_next = Signal()
        if self.rows == 1:
            m.d.comb += tile_next.eq(take & ~last_row)
        else:
            m.d.sync += tile_next.eq(take & row_zero & ~last_row)
        with m.If(tile_next):
            with m.If(~n_zero):
                m.d.sync += [n_left.eq(n_left - 1), n_zero.eq(n_left == 1)]
            with m.Else():
                m.d.sync += [n_left.eq(n_m1), n_zero.eq(n_one), m_left.eq(m_left - 1), m_zero.eq(m_left == 1)]
        return m


def _binary(onehot):
    """The index of the set bit of a one-hot value."""
    bits = max(1, (len(onehot) - 1).bit_length())
    return Cat(Cat(onehot[i] for i in range(len(onehot)) if i >> b & 1).any() for b in range(bits))
