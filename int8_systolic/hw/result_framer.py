"""The result framer of the AXI top: TLAST on the last result row of each GEMM, and ``done``.

The core's ``res`` rows come in GEMM order: per GEMM, ``m_tiles`` row tiles of ``n_tiles * rows``
rows. The scheduler (:class:`hw.gemm_scheduler.GemmScheduler`) pushes each GEMM's counts (row
tiles - 1 and whether that is 0, column tiles) when it launches the GEMM; the framer keeps them
in a queue of ``depth`` (the GEMMs in flight), counts the rows of the oldest down (the row in
its tile, the column tiles, the row tiles), sets ``tlast`` on its last row and pulses ``done`` in
the cycle after that row is transferred.

The stream passes by: ``tvalid`` is ``res_valid`` and ``res_ready`` is ``tready``, so the
result stream's handshake has no logic of the framer's in it, and the framer sees the
transfers a cycle late, through registers (``take_d`` and a copy per group of counts, each of
which may sit by what it feeds: the framer's own logic is not on ``tready``'s net, which reaches
every lane's output FIFO). Its counts describe the row after the last transfer it has seen, with
flags for that row and the one after being their GEMM's last (``z0``, ``z1``); ``tlast`` is
``z1`` when a transfer is in ``take_d`` (not yet counted) and ``z0`` otherwise, a multiplexer of
flip-flops, stable while ``tvalid`` waits for ``tready``.

That needs the counts of a GEMM to be in place when its first row comes, which they are:

- a GEMM's counts are pushed when it is launched, a few cycles after which they are in the
  queue; its first row leaves the core at least the core's latency after its first step;
- the counts of the GEMM after the oldest are taken from the queue in the cycle after the
  oldest's last row (with ``done``); a GEMM has at least two rows with two rows a tile or more,
  so the next ``done`` is two cycles later at the earliest, when the queue's head register
  shows the GEMM after that.

With one row per tile (``rows`` = 1) a GEMM's first row may be its last, so there the stream is
held for the cycle of ``done`` (:meth:`ResultFramer.idle`: one cycle without a transfer between
GEMMs, none with ``rows`` >= 2).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .pipeline import KEEP_APART
from .ring import ring

__all__ = ["ResultFramer", "counts_layout"]


def counts_layout(n_width):
    """A GEMM's counts as the framer takes them: row tiles - 1, whether that is 0, and column tiles."""
    return data.StructLayout({"m_m1": 24, "m_one": 1, "n_tiles": n_width})


class ResultFramer(wiring.Component):
    """TLAST and GEMM completion on the result stream (see the module docstring).

    ``push`` (with ``counts``) queues a launched GEMM's counts; at most ``depth`` GEMMs are pushed
    and not yet ``done``. ``max_col_tiles`` bounds ``counts.n_tiles``."""

    DONE_LATENCY = 1   # ``done`` pulses this many cycles after a GEMM's last row is transferred

    @staticmethod
    def idle(rows):
        """Cycles without a transfer after a GEMM's last row, for an array of ``rows`` rows."""
        return 1 if rows == 1 else 0

    def __init__(self, rows, n_width=16, depth=4, max_col_tiles=64):
        self.rows, self.depth, self.max_col_tiles = rows, depth, max_col_tiles
        super().__init__({
            "push": In(1), "counts": In(counts_layout(n_width)), "done": Out(1),
            "res_valid": In(1), "res_ready": Out(1),
            "tvalid": Out(1), "tready": In(1), "tlast": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        R = self.rows
        # A queue entry: the row tiles' and the column tiles' counts - 1 with flags for each
        # being 0, 1 and 2 (derived here from the pushed counts).
        n_range = range(max(self.max_col_tiles, 2))
        Entry = data.StructLayout({
            "m_m1": 24, "m_zero": 1, "m_is1": 1, "m_is2": 1,
            "n_m1": n_range, "n_is0": 1, "n_is1": 1, "n_is2": 1,
        })
        # The push and the counts registered here (the framer sits by the output FIFOs, the
        # scheduler elsewhere), then the entry derived from them in a register.
        push, pushed = Signal(), Signal.like(self.counts, reset_less=True)
        m.d.sync += [push.eq(self.push), pushed.eq(self.counts)]
        push2, entry = Signal(), Signal(Entry, reset_less=True)
        n_tiles = pushed.n_tiles
        m.d.sync += [push2.eq(push),
                     entry.m_m1.eq(pushed.m_m1), entry.m_zero.eq(pushed.m_one),
                     entry.m_is1.eq(pushed.m_m1 == 1), entry.m_is2.eq(pushed.m_m1 == 2),
                     entry.n_m1.eq(n_tiles - 1), entry.n_is0.eq(n_tiles == 1),
                     entry.n_is1.eq(n_tiles == 2), entry.n_is2.eq(n_tiles == 3)]

        # The queue: a ring of `depth` entries in a memory (LUT RAM on ECP5), written at `tail`;
        # `pop` moves `head`. `nxt` and `nxt_valid` are entry `head` and whether it holds counts,
        # in registers, a cycle behind the pointer and the entries (both from the same cycle, so
        # they agree; after a pop they show the popped entry for a cycle, in which no pop can
        # come). (`nxt_valid` as an AND-OR, not a bit select: see hw.gemm_scheduler's head_valid.)
        D = self.depth
        pop = Signal()
        head, tail, _, valid = ring(m, D, push2, pop, "q")
        m.submodules.queue = queue = Memory(shape=len(entry.as_value()), depth=D, init=[],
                                            attrs={"ram_style": "distributed"})
        wp, rp = queue.write_port(), queue.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(tail), wp.data.eq(entry), wp.en.eq(push2), rp.addr.eq(head)]
        nxt, nxt_valid = Signal(Entry, reset_less=True), Signal()
        m.d.sync += [nxt.as_value().eq(rp.data), nxt_valid.eq(Cat(valid[i] & (head == i) for i in range(D)).any())]

        # The oldest GEMM (`cur`, whether there is one: `cur_valid`), at the row after the last
        # transfer counted, with flags for that row and the one after being its last (z0, z1).
        # ``tlast`` is z1 when a transfer is in `take_d` (not yet counted) and z0 otherwise.
        cur_valid = Signal()
        cur = Signal(Entry, reset_less=True)
        z0, z1 = Signal(), Signal()
        # The transfer registered, in one copy for TLAST and `done` and one per group of counts
        # updated below, each by its group (copies kept apart: the core's output FIFOs register
        # the same transfer).
        take = Signal()
        groups = ("out", "ring", "cur", "c", "m", "z") + (("r",) if R > 1 else ())
        take_ds = {g: Signal(attrs=KEEP_APART, name=f"dup_take_d_{g}") for g in groups}
        m.d.sync += [t.eq(take) for t in take_ds.values()]
        take_d = take_ds["out"]
        m.d.comb += self.tlast.eq(Mux(take_d, z1, z0))
        end = Signal()  # the GEMM's last row was transferred in the previous cycle
        m.d.comb += [end.eq(take_d & z0), self.done.eq(end)]
        if R == 1:
            go = Signal()
            m.d.comb += [go.eq(~end), self.tvalid.eq(self.res_valid & go), self.res_ready.eq(self.tready & go)]
        else:
            m.d.comb += [self.tvalid.eq(self.res_valid), self.res_ready.eq(self.tready)]
        m.d.comb += take.eq(self.tvalid & self.tready)

        # An empty framer loads the queue's head a cycle after it shows counts (`idle_load`, a
        # register: no row comes then, a GEMM's first row following its counts by the core's
        # latency); at a GEMM's last row the head is loaded whether or not it holds counts (only
        # `cur_valid` says so), so the counts' next values do not depend on `nxt_valid`.
        idle_load = Signal()
        m.d.sync += idle_load.eq(~cur_valid & nxt_valid & ~idle_load)
        m.d.comb += pop.eq(Mux(take_ds["ring"], z0 & nxt_valid, idle_load))
        with m.If(take_ds["cur"] & z0):
            m.d.sync += [cur.eq(nxt), cur_valid.eq(nxt_valid)]
        with m.Elif(idle_load):
            m.d.sync += [cur.eq(nxt), cur_valid.eq(1)]
        if R == 1:
            self._count_rows(m, take_ds, idle_load, nxt, cur, z0, z1)
        else:
            self._count_tiles(m, take_ds, idle_load, nxt, cur, z0, z1)
        return m

    def _count_tiles(self, m, take_ds, idle_load, nxt, cur, z0, z1):
        """The counts with two rows a tile or more: the row in the tile (`r`, from R - 1 down), the
        column tiles after this one in the row tile (`c`) and the row tiles after this one
        (`m_left`), each with flags for 0, 1 (and 2). A tile's last row comes R >= 2 transfers
        after the previous one's, so `c` and `m_left` move at most every other cycle, and their
        decrements and compares are registers taken from them in the cycle between (`c_dec`,
        `m_dec`, `c_eq2`, `m_eq3`): no carry chain or compare is in front of a count's update,
        which is one multiplexer of registers."""
        R = self.rows
        r = Signal(range(R), init=R - 1)
        r0, r1, r2 = Signal(), Signal(init=R == 2), Signal(init=R == 3)
        c, c_dec = Signal.like(cur.n_m1), Signal.like(cur.n_m1, reset_less=True)
        c0, c1, c_eq2 = Signal(), Signal(), Signal()
        m_left, m_dec = Signal(24), Signal(24, reset_less=True)
        m_zero, m_is1, m_is2, m_eq3 = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [c_dec.eq(c - 1), c_eq2.eq(c == 2), m_dec.eq(m_left - 1), m_eq3.eq(m_left == 3)]
        tile_start = [r.eq(R - 1), r0.eq(0), r1.eq(R == 2), r2.eq(R == 3)]
        with m.If(take_ds["r"]):
            with m.If(r0):
                m.d.sync += tile_start
            with m.Else():
                m.d.sync += [r.eq(r - 1), r0.eq(r1), r1.eq(r2), r2.eq(r == 3)]
        with m.Elif(idle_load):
            m.d.sync += tile_start

        # A row tile's counts: the next GEMM's at the GEMM's end (or when idle), else the GEMM's own.
        def load_c(src):
            return [c.eq(src.n_m1), c0.eq(src.n_is0), c1.eq(src.n_is1)]
        load_m = [m_left.eq(nxt.m_m1), m_zero.eq(nxt.m_zero), m_is1.eq(nxt.m_is1), m_is2.eq(nxt.m_is2)]
        with m.If(take_ds["c"] & r0):
            with m.If(c0):
                with m.If(m_zero):
                    m.d.sync += load_c(nxt)
                with m.Else():
                    m.d.sync += load_c(cur)
            with m.Else():
                m.d.sync += [c.eq(c_dec), c0.eq(c1), c1.eq(c_eq2)]
        with m.Elif(idle_load):
            m.d.sync += load_c(nxt)
        with m.If(take_ds["m"] & r0 & c0):
            with m.If(m_zero):
                m.d.sync += load_m
            with m.Else():
                m.d.sync += [m_left.eq(m_dec), m_zero.eq(m_is1), m_is1.eq(m_is2), m_is2.eq(m_eq3)]
        with m.Elif(idle_load):
            m.d.sync += load_m

        # z0, z1: a tile's first row is not the GEMM's last (R >= 2); its second-to-last is the
        # last tile's row with r == 1, which with R = 2 is the tile's first row.
        if R == 2:
            last_tile = Mux(c0, Mux(m_zero, nxt.n_is0 & nxt.m_zero, cur.n_is0 & m_is1), c1 & m_zero)
            idle_z1 = nxt.n_is0 & nxt.m_zero
        else:
            last_tile = idle_z1 = 0
        with m.If(take_ds["z"]):
            with m.If(r0):
                m.d.sync += [z0.eq(0), z1.eq(last_tile)]
            with m.Else():
                m.d.sync += [z0.eq(r1 & c0 & m_zero), z1.eq(r2 & c0 & m_zero)]
        with m.Elif(idle_load):
            m.d.sync += [z0.eq(0), z1.eq(idle_z1)]

    def _count_rows(self, m, take_ds, idle_load, nxt, cur, z0, z1):
        """The counts with one row a tile: the rows after this one in its row tile (`inner`, the
        column tiles) with flags for 0, 1, 2, and the row tiles after its row tile (`m_left`)
        likewise. A GEMM's first row may be its last here, so z1 is a function of the flags."""
        inner = Signal.like(cur.n_m1)
        i0, i1, i2 = Signal(), Signal(), Signal()
        m_left = Signal(24)
        m_zero, m_is1, m_is2 = Signal(), Signal(), Signal()
        m.d.comb += z1.eq((~i0 & i1 & m_zero) | (i0 & ~m_zero & cur.n_is0 & m_is1))
        # Each case's assignments, by group: a GEMM's last row (load the next GEMM's counts), the
        # last row of a row tile (the next row tile), any other row.
        load = {"c": [inner.eq(nxt.n_m1), i0.eq(nxt.n_is0), i1.eq(nxt.n_is1), i2.eq(nxt.n_is2)],
                "m": [m_left.eq(nxt.m_m1), m_zero.eq(nxt.m_zero), m_is1.eq(nxt.m_is1), m_is2.eq(nxt.m_is2)],
                "z": [z0.eq(nxt.n_is0 & nxt.m_zero)]}
        tile = {"c": [inner.eq(cur.n_m1), i0.eq(cur.n_is0), i1.eq(cur.n_is1), i2.eq(cur.n_is2)],
                "m": [m_left.eq(m_left - 1), m_zero.eq(m_is1), m_is1.eq(m_is2), m_is2.eq(m_left == 3)],
                "z": [z0.eq(cur.n_is0 & m_is1)]}
        row = {"c": [inner.eq(inner - 1), i0.eq(i1), i1.eq(i2), i2.eq(inner == 3)],
               "z": [z0.eq(i1 & m_zero)]}
        for g in ("c", "m", "z"):
            with m.If(take_ds[g]):
                with m.If(z0):
                    m.d.sync += load[g]
                with m.Elif(i0):
                    m.d.sync += tile.get(g, [])
                with m.Else():
                    m.d.sync += row.get(g, [])
            with m.Elif(idle_load):
                m.d.sync += load[g]
