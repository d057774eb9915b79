"""The output FIFO of a requantizer lane: rows in a memory (block RAM on ECP5) moved by credit
into a 16-row queue that the result stream reads.

:class:`OutputFIFO` (latency :attr:`OutputFIFO.LATENCY` cycles from a write to ``r_rdy`` on an
empty FIFO, one row per cycle in and out) is built from :class:`RowFIFO` and :func:`nonempty_flag`.
Contract: a write must not come when ``depth`` rows are in the FIFO; its user counts what it
sends (the accelerator's credits, :mod:`hw.credit`).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .ecp5_ram import DP16KD_DEPTH, LUTRAM_DEPTH, dp16kd
from .pipeline import KEEP_APART, Line, delay_lines, delayed

__all__ = ["OutputFIFO", "RowFIFO", "nonempty_flag"]


def nonempty_flag(m, add, remove, limit, name, keep=False):
    """A register that is 1 exactly when a count, 0 after reset and moved by ``add - remove``
    each cycle (1-bit signals), is not zero; the count stays within 0..``limit``.

    The count itself runs a cycle behind (``<name>_d``, moved by the change registered), so no
    multiplexer of ``add``/``remove`` follows its adder; whether the count is 1, which the flag
    needs when the count goes down, follows from the registered change and flags for the
    delayed count being 0, 1 or 2 (registers too)."""
    attrs = KEEP_APART if keep else None
    count_d = Signal(range(limit + 1), name=f"{name}_d", attrs=attrs)
    change = Signal(range(-1, 2), name=f"{name}_change", attrs=attrs)
    m.d.sync += [change.eq(add - remove), count_d.eq(count_d + change)]
    is0, is1, is2 = (Signal(init=n == 0, name=f"{name}_is{n}", attrs=attrs) for n in range(3))
    with m.If(change == 1):
        m.d.sync += [is0.eq(0), is1.eq(is0), is2.eq(is1)]
    with m.Elif(change == -1):
        m.d.sync += [is0.eq(is1), is1.eq(is2), is2.eq(count_d == 3)]
    count_is_1 = Mux(change == 1, is0, Mux(change == -1, is2, is1))
    nonempty = Signal(name=f"{name}_nonempty", attrs=attrs)
    with m.If(add & ~remove):
        m.d.sync += nonempty.eq(1)
    with m.Elif(remove & ~add):
        m.d.sync += nonempty.eq(~count_is_1)
    return nonempty


class RowFIFO(wiring.Component):
    """Synchronous first-word-fall-through FIFO, like :class:`SyncFIFO` (a write into an empty
    queue is at ``r_data`` with ``r_rdy`` the next cycle; holds ``depth`` entries), but with the
    storage memory's attributes under our control (``ram_style``) and its count kept by
    :func:`nonempty_flag`; a write must not come when it is full (its user, :class:`OutputFIFO`,
    counts what it sends). ``r_rdy`` is a register; ``r_data`` is read combinationally from the
    memory at a register's address, so a read (``r_en``) moves only the read pointer and the
    count's flags, not a data register (``res.ready``, which reaches every lane, enables no
    32-bit register).
    ``depth`` is a power of two; at 16 the memory is one ECP5 LUT-RAM cell deep. With
    ``r_rdy_copy``, ``r_rdy_copy`` is ``r_rdy`` from flip-flops of its own (else it is 0)."""

    LATENCY = 1   # a write into an empty queue is at r_data with r_rdy this many cycles later

    def __init__(self, *, width, depth, attrs, r_rdy_copy=False):
        assert depth & (depth - 1) == 0, depth
        self.width, self.depth, self._attrs, self._copy = width, depth, attrs, r_rdy_copy
        super().__init__({"w_data": In(width), "w_en": In(1), "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
                          "r_rdy_copy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        # wrap at depth; dup_: several FIFOs run in lockstep and must keep their own copies
        produce = Signal(range(self.depth), attrs=KEEP_APART, name="dup_produce")
        consume = Signal(range(self.depth), attrs=KEEP_APART, name="dup_consume")
        # entries != 0, as a register (no compare in front of the read enables, and the read does
        # not reach the count's adder)
        do_read = Signal()
        nonempty = nonempty_flag(m, self.w_en, do_read, self.depth, "dup_level", keep=True)
        m.d.comb += [self.r_rdy.eq(nonempty), do_read.eq(nonempty & self.r_en)]
        # (`r_rdy_copy`: the same flag from registers of its own, for a user of ``r_rdy & r_en``
        # elsewhere on the die, which would otherwise share this FIFO's read-enable LUT)
        if self._copy:
            m.d.comb += self.r_rdy_copy.eq(nonempty_flag(m, self.w_en, do_read, self.depth, "dup_level_copy",
                                                         keep=True))
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(do_read):
            m.d.sync += consume.eq(consume + 1)

        m.submodules.storage = storage = Memory(shape=self.width, depth=self.depth, init=[], attrs=self._attrs)
        wp, rp = storage.write_port(), storage.read_port(domain="comb")
        m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_en), rp.addr.eq(consume),
                     self.r_data.eq(rp.data)]
        return m


class OutputFIFO(wiring.Component):
    """One lane's output FIFO: ``depth`` rows in a memory read in two cycles, then a
    :class:`RowFIFO` of ``QUEUE`` rows (LUT RAM) that holds what has been read and feeds ``res``.

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

    Same interface as :class:`RowFIFO`: a row written (``w_en``) in cycle c is at ``r_data``
    with ``r_rdy`` in cycle c + ``LATENCY`` when the FIFO is empty; a write must not come when
    ``depth`` rows are in the FIFO (the accelerator's credits ensure it). ``r_rdy_copy`` likewise."""

    _HOPS, _RETURN = 1, 2
    LATENCY = 1 + 2 + _HOPS + 1   # issue, memory read, hops to the queue, queue
    QUEUE = LUTRAM_DEPTH

    def __init__(self, *, width, depth, ram, dsp, r_rdy_copy=False):
        self.width, self.depth, self.ram, self.dsp, self._copy = width, depth, ram, dsp, r_rdy_copy
        self.mem_depth = 1 << (depth - 1).bit_length()  # a power of two: the pointers wrap by themselves
        if dsp == "ecp5":
            assert self.mem_depth <= DP16KD_DEPTH, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
                          "r_rdy_copy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        M, Q = self.mem_depth, self.QUEUE
        m.submodules.queue = queue = RowFIFO(width=self.width, depth=Q, attrs={"ram_style": self.ram},
                                             r_rdy_copy=self._copy)
        # (copies kept apart: the lanes' FIFOs run in lockstep, with identical registers)
        produce = Signal(range(M), attrs=KEEP_APART, name="dup_produce")
        consume = Signal(range(M), attrs=KEEP_APART, name="dup_consume")
        room = Signal(init=1, attrs=KEEP_APART, name="dup_room")  # fewer than Q rows issued and not read: a register
        issue, read = Signal(), Signal()
        # rows in the memory (written, not issued) != 0, as a register
        nonempty = nonempty_flag(m, self.w_en, issue, M, "dup_level", keep=True)
        m.d.comb += [issue.eq(nonempty & room), read.eq(self.r_en & queue.r_rdy)]
        with m.If(self.w_en):
            m.d.sync += produce.eq(produce + 1)
        with m.If(issue):
            m.d.sync += consume.eq(consume + 1)
        # The credit comes back through _RETURN registers (so the queue may sit away from the memory).
        # The issued rows are counted the same way, a cycle behind, and `room` a cycle after the
        # count: in cycle t it has seen the issues up to t - 3, so it leaves room for three.
        read = delayed(m, read, self._RETURN, "dup_read_d", keep=True)
        issued_d = Signal(range(Q + 1), attrs=KEEP_APART, name="dup_issued_d")
        issued_change = Signal(range(-1, 2), attrs=KEEP_APART, name="dup_issued_change")
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
                m.submodules[f"bram{k}"] = dp16kd(produce, w_data[18 * k:18 * k + 18], self.w_en,
                                                   consume, r_data[18 * k:18 * k + 18])
        else:
            m.submodules.storage = storage = Memory(shape=self.width, depth=M, init=[],
                                                    attrs={"ram_style": self.ram})
            wp, rp = storage.write_port(), storage.read_port()
            m.d.comb += [wp.addr.eq(produce), wp.data.eq(self.w_data), wp.en.eq(self.w_en), rp.addr.eq(consume)]
            out_reg = Signal(self.width, reset_less=True)
            m.d.sync += out_reg.eq(rp.data)
            m.d.comb += out.eq(out_reg)
        arrived = Signal(attrs=KEEP_APART, name="dup_arrived")
        reading = Signal(attrs=KEEP_APART, name="dup_reading")
        m.d.sync += [reading.eq(issue), arrived.eq(reading)]
        arrived, out = delay_lines(m, self._HOPS, [Line(arrived, "dup_hop_valid", keep=True),
                                                   Line(out, "hop_data", reset_less=True)])
        m.d.comb += [queue.w_data.eq(out), queue.w_en.eq(arrived),
                     self.r_data.eq(queue.r_data), self.r_rdy.eq(queue.r_rdy), queue.r_en.eq(self.r_en),
                     self.r_rdy_copy.eq(queue.r_rdy_copy)]
        return m


