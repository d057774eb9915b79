"""The GEMM scheduler of the AXI top: a descriptor queue, and the launch of each GEMM on the core.

A *descriptor* (:func:`descriptor_layout`) is one GEMM's settings: K, column and row tiles, table
base, the array's mode (GEMM or depthwise, see :mod:`hw.array`) and the output stage. Descriptors
wait in a queue of ``queue_depth``; the scheduler takes the head, drives the core's per-GEMM inputs
from it (held stable for the whole GEMM: no timing contract is left to the host) and counts the
GEMM's tiles as the core admits them. When the last tile is admitted it holds further tiles off
(:attr:`hw.sequencer.Sequencer.hold`), and after that
tile's last step it launches the next GEMM:

- at once if the next GEMM's output stage (zero point, bounds, bypass) equals the running one's:
  only K, the tiles, the table base and the mode change, which the core reads at its input, so the new GEMM's
  first step follows the last one's by :attr:`GemmScheduler.GAP` cycles and the pipeline is not
  drained (the GEMMs of one layer);
- otherwise once every result row of the GEMMs in flight has been transferred, since the output
  stage is read at the end of the pipeline.

A launched GEMM stays *in flight* (an entry of ``flight_depth``: its table range) until its last
result row is transferred (``done``); its tile counts go to the result framer
(:mod:`hw.result_framer`) when it is launched (``launched``, ``counts``), to place TLAST.
``row_busy`` says whether a table row belongs to a queued or in-flight GEMM (the register block
refuses table writes there).

Launch timing: a GEMM is launched (``launch``, a register) two cycles after the core reports
the previous one's last step (its ``tile_end``), or later; the core's inputs change in the next
cycle, and ``hold`` falls so that the GEMM's first step can come ``SETTLE`` cycles after they
changed. Between two GEMMs of one output stage queued in time, the first step comes
:attr:`GemmScheduler.GAP` cycles after the last. The queues are rings: a push writes one entry, a
launch or a ``done`` moves a pointer, so no wide enable depends on the core's pulses.
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .gemm_control import gemm_control
from .pipeline import KEEP_APART
from .result_framer import counts_layout
from .ring import ring
from .sequencer import Sequencer

__all__ = ["GemmScheduler", "descriptor_layout"]


def descriptor_layout(max_col_tiles=64):
    """One GEMM's settings as the scheduler queues them, checked (so as narrow as the table):
    K, the column tiles, ``end`` = base + n_tiles (the table rows it reads are [base, end)), the
    tile counts - 1 and whether each is 0 (the counts the scheduler and the framer load), and the
    output stage."""
    row = range(max(max_col_tiles, 2))
    tiles = range(max_col_tiles + 1)
    return data.StructLayout({
        "k": 24, "n_tiles": tiles, "base": row, "end": tiles, "depthwise": 1,
        "m_m1": 24, "n_m1": row, "m_one": 1, "n_one": 1,
        "output_offset": signed(8), "act_min": signed(8), "act_max": signed(8), "bypass": 1,
        # the output stage equals that of the descriptor queued before it (the one launched
        # before it, since descriptors launch in order): compared when pushed, so the launch
        # decision reads one flag, not a 25-bit compare of `head` with the running GEMM
        "same_output": 1,
    })


_OUTPUT_FIELDS = ("output_offset", "act_min", "act_max", "bypass")


class GemmScheduler(wiring.Component):
    """Descriptor queue and GEMM launch (see the module docstring).

    ``push`` queues ``desc`` in the next cycle (the caller checks it and ``full`` first; ``desc``
    must hold through that cycle). Core side, ``gemm`` (:func:`hw.gemm_control.gemm_control`, joined to
    the core's with ``wiring.connect``): the per-GEMM settings and ``hold`` are outputs (registers),
    ``admit``/``tile_end`` the core's tile pulses.
    ``final_step`` is high in the cycle of the core's ``tile_end`` for a GEMM's last step.
    ``launched`` (a register) pulses in the cycle after a launch, with the GEMM's counts
    (``counts``, registers) for the framer; ``done`` (a register, one pulse per GEMM) drops the
    oldest GEMM in flight.
    """

    # Cycles the core's per-GEMM inputs are stable before a GEMM's first step (hw.sequencer).
    SETTLE = Sequencer.SETTLE
    # Cycles from a push request, or a change of `check_row`, to `row_busy` saying so; a GEMM's rows are
    # freed in `row_busy` ROW_BUSY_LAG + 1 cycles after its `done`.
    ROW_BUSY_LAG = 4
    # From a GEMM's last step to the next one's first, at the earliest: tile_end, its copy, the
    # launch register, the settings' registers, then SETTLE cycles (more for a short K: see `gap`).
    GAP = 4 + SETTLE

    def gap(self, k):
        """Cycles from a GEMM's last step to the next one's first (of K = ``k``), at the earliest."""
        return max(self.GAP, self.min_tile_steps - k + 1)

    def __init__(self, *, max_col_tiles, min_tile_steps=2, queue_depth=4, flight_depth=4):
        self.max_col_tiles, self.queue_depth, self.flight_depth = max_col_tiles, queue_depth, flight_depth
        self.min_tile_steps = min_tile_steps
        Desc = descriptor_layout(max_col_tiles)
        super().__init__({
            "push": In(1), "desc": In(Desc), "full": Out(1),
            "queued": Out(range(queue_depth + 1)), "in_flight": Out(range(flight_depth + 1)),
            "active": Out(1), "busy": Out(1),
            "gemm": Out(gemm_control(max_col_tiles)), "final_step": Out(1),
            "launched": Out(1), "counts": Out(counts_layout(Desc["n_tiles"].shape)), "done": In(1),
            "check_row": In(range(max(max_col_tiles, 2))), "row_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        Desc = descriptor_layout(self.max_col_tiles)
        Q, F = self.queue_depth, self.flight_depth
        launch = Signal()  # a register: the head becomes the running GEMM (see below)

        # The queue: a ring of Q entries in a memory (LUT RAM on ECP5: a few cells, where entries
        # of flip-flops and the multiplexers choosing the head spread across the die), written at
        # `tail` by a push request (registered here) and read at `head` into the `head`
        # register; a launch moves `head`. The entries' table ranges are also kept in registers
        # (`rows`), which the busy-row check compares all at once.
        push = Signal()
        q_head, q_tail, count, q_valid = ring(m, Q, push, launch, "q")
        m.d.sync += push.eq(self.push)
        m.d.comb += [self.full.eq(count == Q), self.queued.eq(count)]
        desc_bits = self.desc.as_value()
        m.submodules.queue = queue = Memory(shape=len(desc_bits), depth=Q, init=[],
                                            attrs={"ram_style": "distributed"})
        wp, rp = queue.write_port(), queue.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(q_tail), wp.data.eq(desc_bits), wp.en.eq(push), rp.addr.eq(q_head)]
        Rows = data.StructLayout({f: Desc[f].shape for f in ("base", "end")})
        rows = [Signal(Rows, name=f"rows{i}", reset_less=True) for i in range(Q)]
        # (written with the push request, a cycle before the entry, so the busy-row check sees the
        # rows four cycles after the request: see below)
        # (`q_tail` one-hot alongside, so each entry's write enable is a 2-input LUT, not a compare)
        tail_hot = Signal(Q, init=1, name="q_tail_hot")
        with m.If(push):
            m.d.sync += tail_hot.eq(tail_hot.rotate_left(1))
        for i in range(Q):
            with m.If(self.push & tail_hot[i]):
                m.d.sync += [rows[i].base.eq(self.desc.base), rows[i].end.eq(self.desc.end)]
        # The head entry and whether it holds a descriptor, in registers (a cycle behind the
        # pointers, both from the same cycle, so they agree: no multiplexer of the ring is on a
        # path that ends elsewhere than here). (`head_valid` as an AND-OR, not an Array: Amaranth
        # makes an Array an `always @*` that Icarus does not run until an input changes, and an
        # X here would reach `count`.)
        head, head_valid = Signal(Desc, reset_less=True), Signal()
        m.d.sync += [head.as_value().eq(rp.data),
                     head_valid.eq(Cat(q_valid[i] & (q_head == i) for i in range(Q)).any())]

        # GEMMs in flight, a ring likewise: a launch writes `f_tail`, `done` (the framer's register)
        # moves `f_head`; an entry holds the GEMM's table rows.
        Flight = data.StructLayout({f: Desc[f].shape for f in ("base", "end")})
        flight = [Signal(Flight, name=f"flight{i}", reset_less=True) for i in range(F)]
        # (`done` registered here: the framer is by the output FIFOs, away from here; a GEMM
        # leaves a cycle later, which only delays a launch that waits for room or for the
        # pipeline to drain, and frees table rows a cycle later)
        done = Signal()
        m.d.sync += done.eq(self.done)
        _, f_tail, f_count, f_valid = ring(m, F, launch, done, "f")
        # (a write enable register per entry, made with `launch`: see `ending` below)
        f_we = [Signal(attrs=KEEP_APART, name=f"dup_f_we{i}") for i in range(F)]
        for i, we in enumerate(f_we):
            with m.If(we):
                m.d.sync += [getattr(flight[i], f).eq(getattr(head, f)) for f in Flight.members]
        m.d.comb += self.in_flight.eq(f_count)
        # The launched GEMM's counts for the framer, in registers (from `head`, which still
        # holds the GEMM in the cycle of `launch`).
        m.d.sync += self.launched.eq(launch)
        with m.If(launch):
            m.d.sync += [getattr(self.counts, f).eq(getattr(head, f)) for f in ("m_m1", "m_one", "n_tiles")]

        # Table rows in use: any queued or in-flight GEMM's [base, end), in four register stages: a
        # copy of `check_row` (dup_: near the compares, the register block's copy being near the
        # core's table ports), each entry's two compares, a flag per entry with its valid bit,
        # then their OR. So `row_busy` is four cycles late (ROW_BUSY_LAG), and an entry written by a
        # push is seen four cycles after the push request: its user, the register block, whose push request is
        # a register a cycle after the DESC_PUSH write's strobe, commits table entries at least
        # five cycles after any write's strobe (AXI4-Lite writes being serial, see
        # hw.axi_top.WRITE_LATENCY), so after any push or change of `check_row`; entries leaving
        # only make it stricter. (The AXI top's testbench commits at a push's heels.)
        check_row = Signal.like(self.check_row, attrs=KEEP_APART, name="dup_check_row", reset_less=True)
        m.d.sync += check_row.eq(self.check_row)
        # (an entry's valid bit taken with the compares of the same cycle's bounds: at a launch the
        # flight entry's bounds are written with its valid bit, so it counts from the next cycle,
        # and the queue entry it left counts a cycle longer, so the GEMM's rows stay busy)
        q_valid_d, f_valid_d = Signal.like(q_valid), Signal.like(f_valid)
        m.d.sync += [q_valid_d.eq(q_valid), f_valid_d.eq(f_valid)]
        entries = [(q_valid[i] | q_valid_d[i], rows[i].base, rows[i].end) for i in range(Q)]
        entries += [(f_valid_d[i], flight[i].base, flight[i].end) for i in range(F)]
        above, below = Signal(len(entries)), Signal(len(entries))
        m.d.sync += [above.eq(Cat(check_row >= base for _, base, _ in entries)),
                     below.eq(Cat(check_row < end for _, _, end in entries))]
        flags = Signal(len(entries))
        m.d.sync += flags.eq(Cat(valid for valid, _, _ in entries) & above & below)
        m.d.sync += self.row_busy.eq(flags.any())

        # The running GEMM's settings (the core's inputs) and tile counts: the column tiles after
        # the next tile to be admitted in its row tile, and the row tiles after its row tile, each
        # with a register flagging zero (so the last tile is known from two flip-flops).
        cur = Signal(Desc)
        hold = Signal(init=1)  # (the core's `hold`: no tile admitted after reset until a GEMM is launched)
        g = self.gemm.settings
        m.d.comb += [g.k_steps.eq(cur.k), g.n_tiles.eq(cur.n_tiles), g.table_base.eq(cur.base),
                     g.depthwise.eq(cur.depthwise)]
        m.d.comb += [getattr(g, f).eq(getattr(cur, f)) for f in _OUTPUT_FIELDS]
        n_left, m_left = Signal.like(cur.n_m1), Signal(24)
        n_zero, m_zero = Signal(), Signal()
        # (`final_tile` = n_zero & m_zero and `settle_one` = settle == 1, each a register of its own
        # made alongside, so the state machine reads one flip-flop for each)
        final_tile, settle_one = Signal(), Signal()
        settle = Signal(range(max(self.SETTLE, self.min_tile_steps) + 1))
        first_settle = Signal()
        # Whether the head may be launched once no GEMM takes steps, a register made from registers
        # of one cycle (`head` and `head_valid`; after a launch they are current two cycles on, and
        # the next GEMM's end comes five cycles on at the earliest: LAUNCH, SETTLE cycles, a K = 1
        # tile's admit): queued, room in flight, and its output stage the running one's (compared
        # when it was pushed: `same_output`), or nothing in flight.
        may_launch = Signal()
        m.d.sync += may_launch.eq(head_valid & (f_count < F) & (head.same_output | (f_count == 0)))

        # `ending` (below): no GEMM is taking steps. With `may_launch` the head is launched:
        # `launch`, a register, is high in the next cycle (state LAUNCH), which loads the head into
        # the core's settings; they reach the core the cycle after, as the sequencer's contract
        # allows.
        ending = Signal()
        # (`cur` loads with copies of `launch`, dup_launch*, each for 32 bits of it)
        cur_bits, head_bits = cur.as_value(), head.as_value()
        for n, lo in enumerate(range(0, len(cur_bits), 32)):
            copy = Signal(attrs=KEEP_APART, name=f"dup_launch{n}")
            m.d.sync += copy.eq(ending & may_launch)
            with m.If(copy):
                m.d.sync += cur_bits[lo:lo + 32].eq(head_bits[lo:lo + 32])
        m.d.sync += [launch.eq(ending & may_launch),
                     *(we.eq(ending & may_launch & (f_tail == i)) for i, we in enumerate(f_we))]
        # The array needs a tile's last step at least min_tile_steps (p) cycles after the previous
        # tile's. The core pads after a short tile for the next tile of the same K; a GEMM with a
        # smaller K (K < p - 6) must start later: its first step comes settle + 4 cycles after the
        # last GEMM's last step, so settle >= p - 3 - K. (`settle_init`, the head's, a register a
        # cycle behind `head`: current at a launch, which comes two cycles after `head` changes at
        # the earliest, through `may_launch`.)
        settle_init = Signal.like(settle)
        init = self.SETTLE
        for k in reversed(range(1, max(1, self.min_tile_steps - 3 - self.SETTLE))):
            init = Mux(head.k == k, self.min_tile_steps - 3 - k, init)
        m.d.sync += settle_init.eq(init)
        with m.If(launch):
            m.d.sync += [settle.eq(settle_init), first_settle.eq(1), settle_one.eq(0)]  # (SETTLE > 1)
        # The state, one-hot: IDLE, LAUNCH (`launch` itself), SETTLE, RUN (tiles to admit) and TAIL
        # (the last tile admitted, its last step to come), each a register whose next value is a
        # function of a few flip-flops (as an encoded state machine, its decode took four LUT
        # levels in front of the tile counters' enables). `ending`: no GEMM takes steps now (idle,
        # or the running GEMM's last step's tile_end was in the previous cycle: `final_d`, a
        # register, so the launch registers read flip-flops only, not the core's pulses).
        idle, settling, running, tail = Signal(init=1), Signal(), Signal(), Signal()
        last_admit, final_d = Signal(), Signal()
        m.d.sync += final_d.eq(self.final_step)
        m.d.comb += [last_admit.eq(running & self.gemm.admit & final_tile),
                     self.final_step.eq(self.gemm.tile_end & (last_admit | tail)),
                     ending.eq(idle | final_d),
                     self.active.eq(~idle)]
        m.d.sync += [idle.eq(ending & ~may_launch),
                     settling.eq(launch | (settling & ~settle_one)),
                     running.eq((settling & settle_one) | (running & ~last_admit)),
                     tail.eq((last_admit | tail) & ~self.gemm.tile_end)]
        with m.If(settling):
            m.d.sync += [settle.eq(settle - 1), settle_one.eq(settle == 2), first_settle.eq(0)]
        # The tile counts change at each admit (tiles come two cycles apart at least) and once
        # per GEMM when they are loaded from `cur` (`load`, in the second SETTLE cycle, `cur`
        # being current from the first). The counts move by a decrement or a reload, with the
        # core's `admit` in their enables only; their flags (zero, last tile) are computed a
        # cycle ahead, from flags and `cur`, into registers (`nxt_*`: while running, the flags
        # after the next admit; otherwise the GEMM's first), so an update of a flag only selects
        # flip-flops. (After the last tile's admit the counts are not read again before
        # the next load.)
        load = Signal()
        m.d.sync += load.eq(first_settle)
        # (with each count, whether it is 1: on a reload from `cur`, a register made from it,
        # current since `cur` is; on a decrement from a register of the count being 2, a cycle
        # behind the count: current at the next admit, two cycles on at least)
        n_is1, m_is1 = Signal(), Signal()
        cur_n_is1, cur_m_is1, n_eq2, m_eq2 = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [cur_n_is1.eq(cur.n_m1 == 1), cur_m_is1.eq(cur.m_m1 == 1), n_eq2.eq(n_left == 2),
                     m_eq2.eq(m_left == 2)]
        with m.If(load | (self.gemm.admit & n_zero)):
            m.d.sync += [n_left.eq(cur.n_m1), n_is1.eq(cur_n_is1)]
        with m.Elif(self.gemm.admit):
            m.d.sync += [n_left.eq(n_left - 1), n_is1.eq(n_eq2)]
        with m.If(load):
            m.d.sync += [m_left.eq(cur.m_m1), m_is1.eq(cur_m_is1)]
        with m.Elif(self.gemm.admit & n_zero):
            m.d.sync += [m_left.eq(m_left - 1), m_is1.eq(m_eq2)]
        nxt_n_zero, nxt_m_zero, nxt_final = Signal(), Signal(), Signal()
        with m.If(~running):
            m.d.sync += [nxt_n_zero.eq(cur.n_one), nxt_m_zero.eq(cur.m_one), nxt_final.eq(cur.n_one & cur.m_one)]
        with m.Elif(n_zero):  # the next row tile
            m.d.sync += [nxt_n_zero.eq(cur.n_one), nxt_m_zero.eq(m_is1), nxt_final.eq(cur.n_one & m_is1)]
        with m.Else():
            m.d.sync += [nxt_n_zero.eq(n_is1), nxt_m_zero.eq(m_zero), nxt_final.eq(n_is1 & m_zero)]
        with m.If(self.gemm.admit | load):
            m.d.sync += [n_zero.eq(nxt_n_zero), m_zero.eq(nxt_m_zero), final_tile.eq(nxt_final)]
        with m.If(settling & settle_one):
            m.d.sync += hold.eq(0)
        with m.If(last_admit):
            # (K = 1: the tile's first step is its last, and its tile_end comes with its admit)
            m.d.sync += hold.eq(1)
        m.d.comb += [self.busy.eq((count != 0) | self.active | (f_count != 0)), self.gemm.hold.eq(hold)]
        return m

