"""The engine's weight prefetcher: a run of weights read from memory into the weight buffer's ring, ahead of the
commands that use them.

The compiler lays a command list's weights out in command order, one after another (``weights_ahead`` in each
command says how many bytes of later commands' weights follow its own: docs/engine.md, Weights read ahead). So the
weights of many layers are one linear run, and the engine reads it as the ring has room, not a layer at a time: a
layer whose own bytes are few (a large 1x1 convolution on a few pixels) finds its weights already read during the
layers before it, whose MACs left the port idle.

On ``start`` it reads ``length`` bytes (whole beats) at ``addr`` through a read port (``rd_cmd`` out, ``rd_data``
in: a :class:`hw.read_arbiter.ReadArbiter` client), in commands of at most ``chunk`` bytes, and writes beat ``n`` at
byte ``base + n * bus bytes`` of a :class:`hw.byte_buffer.ByteBuffer` (``w_*``), wrapping at its end. The bytes
asked for stay within ``limit`` (bytes from ``addr``, whole beats: the engine's ring tail plus the ring's size, so no
beat overwrites weights still in use and no beat ever waits in the read port): a command ends at the limit, shorter
than ``chunk`` if it must, since a layer may wait for the bytes just below it. ``asked`` counts the bytes asked for,
``loaded`` those written. While ``lazy`` (the engine: the run is ahead of what any layer waits for) it asks for a
command only once the last one's beats are all written, so that its reads ahead queue in front of another
client's read one burst at most. ``abort`` stops asking: ``busy`` then falls once the beats asked for are written (AXI
cannot cancel a burst). ``done`` pulses as ``busy`` falls.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_reader import command_layout

__all__ = ["WeightPrefetch"]


class WeightPrefetch(wiring.Component):
    """See the module docstring. ``data_width``: the read port's beats (32, 64 or 128 bits); ``buffer_width``: the
    weight buffer's write port (bytes, at least a beat); ``addr_width``: bits of its byte address; ``chunk``: the
    largest command (a power of two, at least a beat)."""

    def __init__(self, data_width=64, *, buffer_width=8, addr_width=16, chunk=256):
        if not (data_width in (32, 64, 128) and buffer_width in (4, 8, 16, 32) and 8 * buffer_width >= data_width
                and isinstance(addr_width, int) and 1 <= addr_width <= 32
                and isinstance(chunk, int) and chunk >= data_width // 8 and chunk & (chunk - 1) == 0
                and chunk <= 1 << 16):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, buffer_width (4, 8, 16 or 32 bytes) at least a "
                             f"beat, addr_width in [1, 32] and chunk a power of two of at least a beat, at most 64 KB, "
                             f"got {data_width!r}, {buffer_width!r}, {addr_width!r}, {chunk!r}")
        self.data_width, self.buffer_width, self.addr_width, self.chunk = data_width, buffer_width, addr_width, chunk
        super().__init__({
            "start": In(1), "addr": In(32), "length": In(32), "base": In(addr_width), "limit": In(33),
            "abort": In(1), "lazy": In(1),
            "rd_cmd": Out(stream.Signature(command_layout())),
            "rd_data": In(stream.Signature(data.StructLayout({"data": data_width, "last": 1}))),
            "w_en": Out(1), "w_addr": Out(addr_width), "w_data": Out(8 * buffer_width), "w_strb": Out(buffer_width),
            "busy": Out(1), "done": Out(1), "asked": Out(32), "loaded": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        nb, chunk = self.data_width // 8, self.chunk
        next_addr = Signal(32)
        left = Signal(32)             # bytes not yet asked for
        stopped = Signal()            # aborted: nothing more is asked
        owed = Signal(32)             # asked, not yet written
        w_ptr = Signal(self.addr_width)
        # the next command: min(left, chunk, limit - asked), and whether it is not empty: registers, a cycle old (the
        # limit only grows during a run, so an old value only delays a command or shortens it; none is asked in the
        # cycle after one, whose bytes they did not count). A command ends at the limit, so that the bytes a layer
        # waits for below it are asked for even where a whole chunk would pass it.
        length = Signal(range(chunk + 1))
        ok = Signal()
        issue, accept = Signal(), Signal()
        m.d.comb += [issue.eq(self.rd_cmd.valid & self.rd_cmd.ready),
                     accept.eq(self.rd_data.valid & self.rd_data.ready)]
        m.d.sync += self.done.eq(0)
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), next_addr.eq(self.addr), left.eq(self.length), stopped.eq(0), owed.eq(0),
                         w_ptr.eq(self.base), ok.eq(0), length.eq(0), self.asked.eq(0), self.loaded.eq(0)]
        with m.Elif(self.busy):
            room = Signal(34)
            n = Signal(range(chunk + 1))
            m.d.comb += room.eq(Mux(self.limit > self.asked, self.limit - self.asked, 0))
            m.d.comb += n.eq(Mux(left < chunk, Mux(room < left, room, left), Mux(room < chunk, room, chunk)))
            m.d.sync += [length.eq(n), ok.eq((n != 0) & ~issue)]
            owed_next = Signal(32)
            more_next = Signal()
            m.d.comb += [owed_next.eq(owed + Mux(issue, length, 0) - Mux(accept, nb, 0)),
                         more_next.eq((left != Mux(issue, length, 0)) & ~stopped & ~self.abort)]
            m.d.sync += owed.eq(owed_next)
            with m.If(self.abort):
                m.d.sync += stopped.eq(1)
            with m.If(issue):
                m.d.sync += [next_addr.eq(next_addr + length), left.eq(left - length),
                             self.asked.eq(self.asked + length)]
            with m.If(accept):
                m.d.sync += [w_ptr.eq(w_ptr + nb), self.loaded.eq(self.loaded + nb)]
            with m.If(~more_next & (owed_next == 0)):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        # (lazy: one command at a time, so a read ahead of need leaves at most one burst before another client's)
        m.d.comb += [self.rd_cmd.valid.eq(self.busy & ok & ~stopped & ~self.abort & (~self.lazy | (owed == 0))),
                     self.rd_cmd.payload.addr.eq(next_addr), self.rd_cmd.payload.length.eq(length),
                     self.rd_data.ready.eq(self.busy),
                     self.w_en.eq(accept), self.w_addr.eq(w_ptr), self.w_data.eq(self.rd_data.payload.data),
                     self.w_strb.eq((1 << nb) - 1)]
        return m
