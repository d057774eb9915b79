"""AXI4 write master: a command's data beats to memory, as INCR bursts.

The memory engine's write port. A command (``cmd``: byte ``addr``, byte ``length``) takes
``ceil(length / bytes)`` beats from ``data`` (each with its byte strobes, so a packed int8
tensor whose size is not a multiple of the bus needs no padding in memory) and writes them as
INCR bursts of at most ``max_burst`` beats that never cross a 4 KB boundary, with up to
``max_outstanding`` bursts awaiting their response.

Contract:

- ``addr`` must be aligned to the bus and ``length >= 1``; the command must lie inside the
  write window (``win_base <= addr``, ``addr + length <= win_limit``). One that does not is never
  issued: ``error`` pulses with its reason (``ERRORS``) and its beats are not taken from ``data``.
  A bus master never writes outside the window it was given.
- A burst's AW is issued only when all of its beats are in the beat buffer, so W never waits on
  ``data`` in the middle of a burst (the interconnect is not held by a slow producer).
- A response other than OKAY raises ``bresp_error`` for a cycle. ``idle`` is high when no command
  is being split, nothing is buffered and every burst has its response. ``bytes_written``
  counts the bytes written (each beat's set strobes, counted the cycle after the beat).

AXI: AWID 0, AWSIZE the bus width, AWBURST INCR, AWCACHE 0b0011, AWPROT 0; WLAST on each burst's
last beat; BREADY always high; AW and W payloads held while their VALID waits.
"""

from amaranth import Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_reader import ERRORS, burst_beats, check_parameters, command_layout, take_command
from .pipeline import popcount

__all__ = ["ERRORS", "AxiWriter", "axi4_write_members"]


def axi4_write_members(data_width, addr_width=32, prefix="m_axi_"):
    """An AXI4 master's write channels' ports (flat, with the AMBA names)."""
    return {
        f"{prefix}awid": Out(1), f"{prefix}awaddr": Out(addr_width), f"{prefix}awlen": Out(8),
        f"{prefix}awsize": Out(3), f"{prefix}awburst": Out(2), f"{prefix}awcache": Out(4), f"{prefix}awprot": Out(3),
        f"{prefix}awvalid": Out(1), f"{prefix}awready": In(1),
        f"{prefix}wdata": Out(data_width), f"{prefix}wstrb": Out(data_width // 8), f"{prefix}wlast": Out(1),
        f"{prefix}wvalid": Out(1), f"{prefix}wready": In(1),
        f"{prefix}bid": In(1), f"{prefix}bresp": In(2), f"{prefix}bvalid": In(1), f"{prefix}bready": Out(1),
    }


def beat_layout(data_width):
    return data.StructLayout({"data": data_width, "strb": data_width // 8})


class AxiWriter(wiring.Component):
    """AXI4 write master (see the module docstring)."""

    def __init__(self, data_width=64, *, max_burst=16, max_outstanding=4, length_width=24):
        check_parameters(self, data_width, max_burst, max_outstanding)
        self.data_width, self.max_burst, self.max_outstanding = data_width, max_burst, max_outstanding
        self.length_width = length_width
        self.bytes = data_width // 8
        super().__init__({
            "cmd": In(stream.Signature(command_layout(length_width))),
            "data": In(stream.Signature(beat_layout(data_width))),
            "win_base": In(32), "win_limit": In(33),
            "error": Out(len(ERRORS)), "bresp_error": Out(1), "idle": Out(1), "bytes_written": Out(32),
            **axi4_write_members(data_width),
        })

    def elaborate(self, platform):
        m = Module()
        size_log2 = Shape.cast(range(self.bytes)).width
        beat_width = self.length_width - size_log2 + 1
        burst_width = Shape.cast(range(self.max_burst + 1)).width

        active = Signal()
        addr = Signal(32)
        beats_left = Signal(beat_width)       # beats of the command not yet given a burst
        accept_left = Signal(beat_width)      # beats of the command not yet taken from `data`

        took = Signal()
        good, cmd, pending = take_command(m, self, active, whole_beats=False)
        m.d.comb += took.eq(good)
        n_beats = Signal(beat_width)
        m.d.comb += n_beats.eq((cmd.length + self.bytes - 1) >> size_log2)
        with m.If(took):
            m.d.sync += [active.eq(1), addr.eq(cmd.addr), beats_left.eq(n_beats), accept_left.eq(n_beats)]

        # --- beats of the active command into the buffer ---
        depth = 2 * self.max_burst
        buf = m.submodules.buffer = fifo.SyncFIFOBuffered(width=self.data_width + self.bytes, depth=depth)
        take = Signal()
        m.d.comb += [take.eq(self.data.valid & self.data.ready),
                     self.data.ready.eq(active & (accept_left != 0) & buf.w_rdy),
                     buf.w_en.eq(take), buf.w_data.eq(Cat(self.data.payload.data, self.data.payload.strb))]
        with m.If(take):
            m.d.sync += accept_left.eq(accept_left - 1)

        # --- AW: the next burst, once all its beats are buffered ---
        burst, fresh, changed = burst_beats(m, addr, beats_left, self.max_burst, size_log2)
        buffered = Signal(range(depth + 1))   # beats in the buffer not yet given to a burst
        awaiting = m.submodules.awaiting = fifo.SyncFIFO(width=burst_width, depth=self.max_outstanding)  # W to send
        responses = Signal(range(self.max_outstanding + 1))      # bursts issued, response not yet received

        awvalid = Signal()
        issue = Signal()
        # The issue's tests of counts are registers, a cycle old: an issue raises AWVALID, so the next can come
        # two cycles later at the earliest, when they hold again; between issues the beats buffered only grow and
        # the responses awaited only fall, so an old value only delays an issue. `settled`: the burst was already
        # current (`fresh`, and not changed) in the cycle those tests were made.
        enough, more, room, settled = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [enough.eq(buffered >= burst), more.eq(beats_left != 0), room.eq(responses < self.max_outstanding),
                     settled.eq(fresh & ~changed)]
        m.d.comb += [issue.eq(active & more & ~awvalid & settled & fresh & enough & awaiting.w_rdy & room),
                     changed.eq(took | issue)]
        with m.If(issue):
            m.d.sync += [awvalid.eq(1), self.m_axi_awaddr.eq(addr), self.m_axi_awlen.eq(burst - 1),
                         addr.eq(addr + (burst << size_log2)), beats_left.eq(beats_left - burst)]
        with m.Elif(awvalid & self.m_axi_awready):
            m.d.sync += awvalid.eq(0)
        with m.If(active & (beats_left == 0) & (accept_left == 0)):
            m.d.sync += active.eq(0)
        m.d.comb += [awaiting.w_en.eq(issue), awaiting.w_data.eq(burst)]
        m.d.sync += buffered.eq(buffered + take - Mux(issue, burst, 0))
        m.d.comb += [
            self.m_axi_awvalid.eq(awvalid), self.m_axi_awid.eq(0), self.m_axi_awsize.eq(size_log2),
            self.m_axi_awburst.eq(0b01), self.m_axi_awcache.eq(0b0011), self.m_axi_awprot.eq(0),
        ]

        # --- W: the oldest issued burst's beats, from the buffer ---
        sent = Signal(burst_width)
        wvalid = Signal()
        m.d.comb += wvalid.eq(awaiting.r_rdy & buf.r_rdy)
        w_taken = Signal()
        m.d.comb += w_taken.eq(wvalid & self.m_axi_wready)
        w_last = Signal()
        m.d.comb += w_last.eq(sent == awaiting.r_data - 1)
        m.d.comb += [
            self.m_axi_wvalid.eq(wvalid), self.m_axi_wdata.eq(buf.r_data[:self.data_width]),
            self.m_axi_wstrb.eq(buf.r_data[self.data_width:]), self.m_axi_wlast.eq(w_last),
            buf.r_en.eq(w_taken), awaiting.r_en.eq(w_taken & w_last),
        ]
        with m.If(w_taken):
            m.d.sync += sent.eq(Mux(w_last, 0, sent + 1))
        # the beat's bytes (its strobes) counted a cycle later
        counted = Signal(range(self.bytes + 1))
        strobes = popcount(buf.r_data[self.data_width + i] for i in range(self.bytes))
        m.d.sync += [counted.eq(Mux(w_taken, strobes, 0)), self.bytes_written.eq(self.bytes_written + counted)]

        # --- B ---
        m.d.comb += self.m_axi_bready.eq(1)
        b_taken = Signal()
        m.d.comb += b_taken.eq(self.m_axi_bvalid)
        m.d.sync += [responses.eq(responses + issue - b_taken), self.bresp_error.eq(b_taken & (self.m_axi_bresp != 0))]
        m.d.comb += self.idle.eq(~pending & ~active & (responses == 0) & ~buf.r_rdy & ~awvalid)
        return m
