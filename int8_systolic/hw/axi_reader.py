"""AXI4 read master: reads of any length from memory, as INCR bursts, to a stream of data beats.

The memory engine's read port. A command (``cmd`` stream: byte ``addr``, byte ``length``)
becomes INCR bursts of at most ``max_burst`` beats that never cross a 4 KB boundary, with up to
``max_outstanding`` bursts in flight, so a memory latency of tens of cycles is hidden: at full
rate the port moves one beat per cycle. The beats come out on ``data`` in order (one ID), each
with ``last`` on a command's final beat.

Contract:

- A command must be aligned to the bus (``addr`` and ``length`` multiples of the data width in
  bytes), ``length >= 1`` beat, and lie inside the read window: ``win_base <= addr`` and
  ``addr + length <= win_limit``. One that is not is never issued: ``error`` pulses for a cycle
  with its reason (``ERRORS``) and the command is dropped (no beat comes out for it). A bus
  master never reads outside the window it was given.
- ``rready`` is always high: a burst is issued only when the beat buffer (``buffer_beats``,
  ``max_outstanding * max_burst`` by default) has room for all of its beats, counting those in
  flight, so the R channel is never held off by ``data.ready``.
- A beat whose RRESP is not OKAY is still delivered; ``rresp_error`` pulses with it.
- ``idle`` is high when no command is being split, no burst is in flight and the buffer is
  empty. ``bytes_read`` counts every beat taken from the bus.

AXI: ARID 0, ARSIZE the bus width, ARBURST INCR, ARCACHE 0b0011 (normal, non-cacheable,
bufferable), ARPROT 0; the AR payload is held stable while ARVALID waits for ARREADY.
Latency: ARVALID rises 6 cycles after a command is taken (three of them checking it); a beat leaves on ``data`` the
cycle after it is taken from the bus (the buffer's first word falls through).
"""

from amaranth import Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["ERRORS", "AxiReader", "axi4_read_members", "burst_beats", "check_parameters", "command_error",
           "command_layout", "take_command"]

# error reasons, as bits of ``error``
ERRORS = {"misaligned": 0, "empty": 1, "window": 2}


def axi4_read_members(data_width, addr_width=32, prefix="m_axi_"):
    """An AXI4 master's read-address and read-data channel ports (flat, with the AMBA names)."""
    return {
        f"{prefix}arid": Out(1), f"{prefix}araddr": Out(addr_width), f"{prefix}arlen": Out(8),
        f"{prefix}arsize": Out(3), f"{prefix}arburst": Out(2), f"{prefix}arcache": Out(4), f"{prefix}arprot": Out(3),
        f"{prefix}arvalid": Out(1), f"{prefix}arready": In(1),
        f"{prefix}rid": In(1), f"{prefix}rdata": In(data_width), f"{prefix}rresp": In(2), f"{prefix}rlast": In(1),
        f"{prefix}rvalid": In(1), f"{prefix}rready": Out(1),
    }


def check_parameters(component, data_width, max_burst, max_outstanding, *extra):
    """Refuse what an AXI4 master of this module cannot be built with (a ValueError naming the parameter)."""
    for ok, message in (
            (data_width in (32, 64, 128), f"data_width must be 32, 64 or 128 bits, got {data_width!r}"),
            (isinstance(max_burst, int) and 1 <= max_burst <= 256,
             f"max_burst must be an integer in [1, 256] beats, got {max_burst!r}"),
            (isinstance(max_outstanding, int) and max_outstanding >= 1,
             f"max_outstanding must be an integer >= 1, got {max_outstanding!r}"), *extra):
        if not ok:
            component._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(message)


def command_error(m, cmd, win_base, win_limit, nbytes, *, whole_beats, end=None):
    """The error bits (``ERRORS``, one set at most, 0 for a good command) of ``cmd`` against the window: its
    address (and, with ``whole_beats``, its length) not a multiple of the bus, no bytes, or outside the window.
    ``end``: the command's ``addr + length`` (34 bits) if the caller has it, a register say."""
    if end is None:
        end = Signal(34)
        m.d.comb += end.eq(cmd.addr + cmd.length)
    misaligned, empty, outside = Signal(), Signal(), Signal()
    unaligned_bits = (cmd.addr | cmd.length) if whole_beats else cmd.addr
    m.d.comb += [
        misaligned.eq((unaligned_bits & (nbytes - 1)) != 0),
        empty.eq(cmd.length == 0),
        outside.eq((cmd.addr < win_base) | (end > win_limit)),
    ]
    return Mux(misaligned, 1 << ERRORS["misaligned"], Mux(empty, 1 << ERRORS["empty"],
                                                          Mux(outside, 1 << ERRORS["window"], 0)))


def take_command(m, master, active, *, whole_beats):
    """Take ``master.cmd`` into a register, check it there (:func:`command_error`: its end, then the comparisons,
    each registered beside a copy of it), and hand a good one over when the master is not ``active``; a bad one pulses
    ``master.error`` with its reason and is dropped. Three registered stages; the next commands are checked while one
    is split. Returns ``(good, cmd, pending)``: ``good`` is high in the cycle a good command is handed over, ``cmd`` is
    that command (registers), and ``pending`` says a command is in a stage (the master is not idle)."""
    layout = master.cmd.payload.shape()
    a_v, e_v, b_v = Signal(), Signal(), Signal()
    a, e, b = Signal(layout), Signal(layout), Signal(layout)
    e_end = Signal(34)
    b_err = Signal(len(ERRORS))
    error = command_error(m, e, master.win_base, master.win_limit, master.bytes, whole_beats=whole_beats, end=e_end)
    good, bad, pending = Signal(), Signal(), Signal()
    m.d.comb += [master.cmd.ready.eq(~a_v), good.eq(b_v & ~active & (b_err == 0)), bad.eq(b_v & (b_err != 0)),
                 pending.eq(a_v | e_v | b_v)]
    with m.If(master.cmd.valid & ~a_v):
        m.d.sync += [a_v.eq(1), a.eq(master.cmd.payload)]
    with m.If(a_v & ~e_v):
        m.d.sync += [a_v.eq(0), e_v.eq(1), e.eq(a), e_end.eq(a.addr + a.length)]
    with m.If(e_v & ~b_v):
        m.d.sync += [e_v.eq(0), b_v.eq(1), b.eq(e), b_err.eq(error)]
    with m.If(good | bad):
        m.d.sync += b_v.eq(0)
    m.d.sync += master.error.eq(Mux(bad, b_err, 0))
    return good, b, pending


def burst_beats(m, addr, beats_left, max_burst, size_log2):
    """The next burst's beats: at most ``max_burst``, what is left, and what fits before the next 4 KB boundary;
    registered, so it is the value of ``addr`` and ``beats_left`` a cycle ago. Returns ``(burst, fresh, changed)``:
    the caller drives ``changed`` high in a cycle it moves ``addr`` or ``beats_left``, and ``fresh`` is low in the
    cycle after, when ``burst`` is stale. A master issues at most every other cycle (its valid stays up a cycle),
    so the register costs only the cycle after a command is taken."""
    to_boundary = Signal(13 - size_log2 + 1)
    limit = Signal(len(beats_left))
    burst = Signal(range(max_burst + 1))
    changed, fresh = Signal(), Signal()
    m.d.comb += [
        to_boundary.eq((4096 - addr[:12]) >> size_log2),
        limit.eq(Mux(beats_left < max_burst, beats_left, max_burst)),
    ]
    m.d.sync += [burst.eq(Mux(to_boundary < limit, to_boundary, limit)), fresh.eq(~changed)]
    return burst, fresh, changed


def command_layout(length_width=24):
    return data.StructLayout({"addr": 32, "length": length_width})


class AxiReader(wiring.Component):
    """AXI4 read master (see the module docstring).

    ``data_width``: 32, 64 or 128 bits; ``max_burst``: beats per burst, 1 to 256; ``max_outstanding``:
    bursts in flight, >= 1; ``length_width``: bits of a command's byte length.
    """

    def __init__(self, data_width=64, *, max_burst=16, max_outstanding=4, length_width=24, buffer_beats=None):
        buffer_beats = max_outstanding * max_burst if buffer_beats is None else buffer_beats
        check_parameters(self, data_width, max_burst, max_outstanding,
                         (isinstance(buffer_beats, int) and buffer_beats >= max_burst,
                          f"buffer_beats must be an integer >= max_burst ({max_burst}), got {buffer_beats!r}"))
        self.data_width, self.max_burst, self.max_outstanding = data_width, max_burst, max_outstanding
        self.buffer_beats, self.length_width = buffer_beats, length_width
        self.bytes = data_width // 8
        super().__init__({
            "cmd": In(stream.Signature(command_layout(length_width))),
            "data": Out(stream.Signature(data.StructLayout({"data": data_width, "last": 1}))),
            "win_base": In(32), "win_limit": In(33),
            "error": Out(len(ERRORS)), "rresp_error": Out(1), "idle": Out(1), "bytes_read": Out(32),
            **axi4_read_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        size_log2 = Shape.cast(range(self.bytes)).width       # log2(bytes)
        beat_width = self.length_width - size_log2 + 1

        # --- the command being split into bursts ---
        active = Signal()
        addr = Signal(32)
        beats_left = Signal(beat_width)

        # commands are checked in registers before they are split; a bad one only raises `error`
        took = Signal()
        good, cmd, pending = take_command(m, self, active, whole_beats=True)
        m.d.comb += took.eq(good)
        with m.If(took):
            m.d.sync += [active.eq(1), addr.eq(cmd.addr), beats_left.eq(cmd.length >> size_log2)]

        # --- the beat buffer: every beat of every burst in flight has a place reserved ---
        buf = m.submodules.buffer = fifo.SyncFIFOBuffered(width=self.data_width + 1, depth=self.buffer_beats)
        reserved = Signal(range(self.buffer_beats + 1))   # beats in flight or in the buffer

        # --- AR: the next burst of the active command ---
        burst, fresh, changed = burst_beats(m, addr, beats_left, self.max_burst, size_log2)
        free = Signal(range(self.buffer_beats + 1))       # a cycle ago: never more than now but after an issue,
        m.d.sync += free.eq(self.buffer_beats - reserved)  # and an issue is never in the cycle after another
        room = Signal()
        m.d.comb += room.eq(free >= burst)
        # one entry per burst in flight (so its depth bounds them): is the burst its command's last?
        lasts = m.submodules.lasts = fifo.SyncFIFO(width=1, depth=self.max_outstanding)

        arvalid = Signal()
        issue = Signal()
        m.d.comb += [issue.eq(active & ~arvalid & fresh & room & lasts.w_rdy), changed.eq(took | issue)]
        ar_taken = Signal()
        m.d.comb += ar_taken.eq(arvalid & self.m_axi_arready)
        with m.If(issue):
            m.d.sync += [
                arvalid.eq(1), self.m_axi_araddr.eq(addr), self.m_axi_arlen.eq(burst - 1),
                addr.eq(addr + (burst << size_log2)), beats_left.eq(beats_left - burst),
            ]
            with m.If(beats_left == burst):
                m.d.sync += active.eq(0)
        with m.Elif(ar_taken):
            m.d.sync += arvalid.eq(0)
        m.d.comb += [lasts.w_en.eq(issue), lasts.w_data.eq(beats_left == burst)]
        m.d.comb += [
            self.m_axi_arvalid.eq(arvalid), self.m_axi_arid.eq(0), self.m_axi_arsize.eq(size_log2),
            self.m_axi_arburst.eq(0b01), self.m_axi_arcache.eq(0b0011), self.m_axi_arprot.eq(0),
        ]

        # --- R: into the buffer; rlast closes a burst ---
        r_taken = Signal()
        m.d.comb += [self.m_axi_rready.eq(1), r_taken.eq(self.m_axi_rvalid)]
        m.d.comb += [buf.w_en.eq(r_taken), buf.w_data.eq(Cat(self.m_axi_rdata, self.m_axi_rlast & lasts.r_data))]
        m.d.comb += lasts.r_en.eq(r_taken & self.m_axi_rlast)
        m.d.sync += [self.rresp_error.eq(r_taken & (self.m_axi_rresp != 0))]
        with m.If(r_taken):
            m.d.sync += self.bytes_read.eq(self.bytes_read + self.bytes)

        # --- out ---
        m.d.comb += [
            self.data.valid.eq(buf.r_rdy), self.data.payload.data.eq(buf.r_data[:self.data_width]),
            self.data.payload.last.eq(buf.r_data[self.data_width]), buf.r_en.eq(self.data.ready),
        ]
        out_taken = Signal()
        m.d.comb += out_taken.eq(self.data.valid & self.data.ready)
        m.d.sync += reserved.eq(reserved + Mux(issue, burst, 0) - out_taken)
        m.d.comb += self.idle.eq(~pending & ~active & ~lasts.r_rdy & (reserved == 0) & ~arvalid)
        return m
