"""The engine's weight streamer: a layer's weights, resident in an on-chip buffer, streamed to the core in tile order.

The weights are in the engine's layout (docs/engine.md): ``[n_tile][k][cols]``, one ``cols``-byte
word per array step (``w[k][nt * cols + j]``, channels past N zero), from a
:class:`hw.byte_buffer.ByteBuffer` at least ``cols`` bytes wide, from byte ``base`` on (wrapping at its
end: the engine keeps the next layer's weights after this one's). On ``start`` the streamer offers,
on ``o``, the ``n_tiles * k`` words in order (``k`` a column tile), once per row tile (``m_tiles``
times): the weights of the core's steps, row tile outer, column tile inner, k innermost. ``busy`` is high from the cycle
after ``start`` until the last word is taken. One word a cycle: reads are issued while the queue
behind the buffer's latency has room for them, and once the word is loaded: ``avail`` is how many
bytes of the weights are in the buffer (they may still be loading; it only grows from the cycle after ``start``
until ``busy`` falls). At full rate the first word is offered ``ByteBuffer.LATENCY + 2`` cycles after the cycle of
``start``.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .byte_buffer import ByteBuffer

__all__ = ["WeightStreamer"]


class WeightStreamer(wiring.Component):
    _QUEUE = ByteBuffer.LATENCY + 3

    def __init__(self, cols=8, *, buffer_width=8, addr_width=16):
        if not (isinstance(cols, int) and 1 <= cols <= buffer_width and buffer_width in (4, 8, 16, 32)):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"cols must be an integer in [1, buffer_width] and buffer_width 4, 8, 16 or 32 bytes, "
                             f"got {cols!r}, {buffer_width!r}")
        self.cols, self.buffer_width, self.addr_width = cols, buffer_width, addr_width
        super().__init__({
            "start": In(1), "k": In(24), "n_tiles": In(16), "m_tiles": In(32), "avail": In(25),
            "base": In(addr_width),
            "r_en": Out(1), "r_addr": Out(addr_width), "r_data": In(8 * buffer_width),
            "o": Out(stream.Signature(8 * cols)), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cols = self.cols
        running = Signal()
        k_left = Signal(24)        # words of the column tile after this one
        nt = Signal(16)            # column tiles left after this one
        tile = Signal(32)          # row tiles left after this one
        addr = Signal(self.addr_width)
        # kept beside addr, so that no addition is on the issue's path: the word's end, its buffer address
        end = Signal(25)
        r_addr = Signal(self.addr_width)
        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * cols, depth=self._QUEUE)
        pipe = [Signal(name=f"pipe{k}") for k in range(ByteBuffer.LATENCY)]
        in_flight = Signal(range(ByteBuffer.LATENCY + 1))
        credit = Signal(range(self._QUEUE + 1))     # words issued and not yet taken from the queue, below its depth
        credit_ok = Signal()
        issue = Signal()
        # `fits`: the word's bytes are in (end <= avail), a register computed a cycle ahead for both outcomes of the
        # issue. avail only grows during a layer, so a cycle-old test
        # only delays an issue; none is made in the cycle after start, when avail may still be the last layer's.
        fits = Signal()
        m.d.comb += issue.eq(running & fits & credit_ok)
        restart = [addr.eq(0), end.eq(cols), r_addr.eq(self.base)]
        # the countdowns' zero tests, registered with them
        k_last, nt_last, tile_last = Signal(), Signal(), Signal()
        with m.If(self.start & ~self.busy):
            m.d.sync += [running.eq((self.k != 0) & (self.n_tiles != 0) & (self.m_tiles != 0)),
                         k_left.eq(self.k - 1), nt.eq(self.n_tiles - 1), tile.eq(self.m_tiles - 1), *restart,
                         k_last.eq(self.k == 1), nt_last.eq(self.n_tiles == 1), tile_last.eq(self.m_tiles == 1),
                         credit.eq(self._QUEUE), credit_ok.eq(1), fits.eq(0)]
        with m.Else():
            # (an issue that restarts the words for the next row tile: its first word was read in the first)
            wraps = k_last & nt_last
            m.d.sync += fits.eq(Mux(issue, wraps | (end + cols <= self.avail), end <= self.avail))
            # the credit's next value for both outcomes of the issue, from registers; the issue picks one last
            base = credit + (queue.r_en & queue.r_rdy)
            m.d.sync += [credit.eq(base - issue), credit_ok.eq(Mux(issue, base - 1 != 0, base != 0))]
            with m.If(issue):
                m.d.sync += [k_left.eq(k_left - 1), k_last.eq(k_left == 1), addr.eq(addr + cols),
                             end.eq(end + cols), r_addr.eq(r_addr + cols)]
                with m.If(k_last):
                    m.d.sync += [k_left.eq(self.k - 1), k_last.eq(self.k == 1), nt.eq(nt - 1),
                                 nt_last.eq(nt == 1)]
                    with m.If(nt_last):
                        m.d.sync += [nt.eq(self.n_tiles - 1), nt_last.eq(self.n_tiles == 1), tile.eq(tile - 1),
                                     tile_last.eq(tile == 1), *restart]
                        with m.If(tile_last):
                            m.d.sync += running.eq(0)
        m.d.comb += [self.r_en.eq(issue), self.r_addr.eq(r_addr)]
        m.d.sync += pipe[0].eq(issue)
        for k in range(1, len(pipe)):
            m.d.sync += pipe[k].eq(pipe[k - 1])
        m.d.sync += in_flight.eq(in_flight + issue - pipe[-1])
        m.d.comb += [queue.w_en.eq(pipe[-1]), queue.w_data.eq(self.r_data[:8 * cols]),
                     self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data), queue.r_en.eq(self.o.ready)]
        m.d.comb += self.busy.eq(running | (in_flight != 0) | queue.r_rdy)
        return m
