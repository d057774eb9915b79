"""The engine's result packer: the core's result rows into a packed NHWC int8 tensor, out as write beats as they
complete.

The core gives, per tile, ``rows`` result rows of ``cols`` lanes (row tile outer, column tile
inner: row i of tile (mt, nt) is output pixel ``mt * rows + i``, channels ``nt * cols + j``). The
packer writes each row's int8 values into a :class:`hw.byte_buffer.ByteBuffer` at byte
``pixel * channels + nt * cols``, strobing only real channels and pixels (past ``channels`` and
past ``pixels`` are the array's padding), so the buffer holds the output tensor exactly as TFLite
lays it out, with no 32-bit lanes.

The bytes of a row tile's pixels are complete once its last column tile's last row is in: the
packer reads them back a bus word at a time, from byte 0, as beats for an
:class:`hw.axi_writer.AxiWriter` command of the layer's ``pixels * channels`` bytes (strobes on
the last), while the next row tiles are computed. So the output is written as the layer runs.

``start`` takes ``pixels`` and ``channels`` (the layer's M and N) and resets the counters; ``res``
is always ready (one row a cycle goes into the buffer); ``busy`` is high from the cycle after
``start`` until the last beat is taken. The buffer holds ``depth`` bytes: a layer's output must fit
(the engine refuses one that does not).
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_writer import beat_layout
from .byte_buffer import ByteBuffer

__all__ = ["ResultPacker"]


class ResultPacker(wiring.Component):
    def __init__(self, rows, cols, *, data_width=64, depth=4096):
        if not (cols <= 32 and data_width in (32, 64, 128)):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"cols must be <= 32 and data_width 32, 64 or 128 bits, got {cols!r}, {data_width!r}")
        self.rows, self.cols, self.data_width, self.depth = rows, cols, data_width, depth
        self.width = min(c for c in (4, 8, 16, 32) if c >= cols)   # the narrowest buffer a result row fits
        super().__init__({
            "start": In(1), "pixels": In(16), "channels": In(16),
            "res": In(stream.Signature(data.ArrayLayout(32, cols))),
            "busy": Out(1), "beats": Out(stream.Signature(beat_layout(data_width))),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, nbytes = self.rows, self.cols, self.data_width // 8
        # one buffer wide enough for a result row; drained a bus word at a time
        width = max(self.width, nbytes)
        buf = m.submodules.buffer = ByteBuffer(width, max(self.depth, width * 2))
        i = Signal(range(rows))          # row of the tile
        mt = Signal(16)                  # first pixel of the row tile
        nt = Signal(16)                  # first channel of the column tile
        total = Signal(32)
        m.d.comb += total.eq(self.pixels * self.channels)
        complete = Signal(33)            # bytes below this are in the buffer (row tiles done)
        r_addr = Signal(32)
        in_flight = Signal(range(ByteBuffer.LATENCY + 2))
        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * nbytes + nbytes, depth=ByteBuffer.LATENCY + 1)
        with m.If(self.start):
            m.d.sync += [i.eq(0), mt.eq(0), nt.eq(0), complete.eq(0), r_addr.eq(0), self.busy.eq(1)]

        pixel = Signal(16)
        m.d.comb += pixel.eq(mt + i)
        m.d.comb += self.res.ready.eq(1)
        take = Signal()
        m.d.comb += take.eq(self.res.valid & self.busy)
        strb = Signal(width)
        m.d.comb += strb.eq(Cat(((nt + j < self.channels) & (pixel < self.pixels)) for j in range(cols)))
        m.d.comb += [
            buf.w_en.eq(take), buf.w_addr.eq(pixel * self.channels + nt),
            buf.w_data.eq(Cat(self.res.payload[j][:8] for j in range(cols))), buf.w_strb.eq(strb),
        ]
        with m.If(take):
            with m.If(i == rows - 1):
                m.d.sync += i.eq(0)
                with m.If(nt + cols >= self.channels):
                    # the row tile is complete: its pixels' bytes may go (the write lands with this edge)
                    m.d.sync += [nt.eq(0), mt.eq(mt + rows), complete.eq(complete + rows * self.channels)]
                with m.Else():
                    m.d.sync += nt.eq(nt + cols)
            with m.Else():
                m.d.sync += i.eq(i + 1)

        # --- drain: aligned bus words from byte 0 up to the complete bytes, through the buffer's read latency ---
        # words read while the writer is not ready wait in `queue`; a read is issued only with room for it
        issue = Signal()
        m.d.comb += issue.eq(self.busy & (r_addr < total) & ((r_addr + nbytes <= complete) | (complete >= total))
                             & (queue.level + in_flight < queue.depth))
        m.d.comb += [buf.r_en.eq(issue), buf.r_addr.eq(r_addr)]
        with m.If(issue):
            m.d.sync += r_addr.eq(r_addr + nbytes)
        # the strobes of each word: bytes below total, carried alongside the buffer's read latency
        strobes = Signal(nbytes)
        m.d.comb += strobes.eq(Cat((r_addr + k < total) for k in range(nbytes)))
        pipe_strb = [Signal(nbytes, name=f"pipe_strb{k}") for k in range(ByteBuffer.LATENCY)]
        pipe_valid = [Signal(name=f"pipe_valid{k}") for k in range(ByteBuffer.LATENCY)]
        m.d.sync += [pipe_strb[0].eq(strobes), pipe_valid[0].eq(issue)]
        for k in range(1, ByteBuffer.LATENCY):
            m.d.sync += [pipe_strb[k].eq(pipe_strb[k - 1]), pipe_valid[k].eq(pipe_valid[k - 1])]
        arrive = pipe_valid[-1]
        m.d.comb += [queue.w_en.eq(arrive), queue.w_data.eq(Cat(buf.r_data[:8 * nbytes], pipe_strb[-1])),
                     self.beats.valid.eq(queue.r_rdy), self.beats.payload.data.eq(queue.r_data[:8 * nbytes]),
                     self.beats.payload.strb.eq(queue.r_data[8 * nbytes:]), queue.r_en.eq(self.beats.ready)]
        m.d.sync += in_flight.eq(in_flight + issue - arrive)
        with m.If(self.busy & ~self.start & (r_addr >= total) & (in_flight == 0) & ~queue.r_rdy):
            m.d.sync += self.busy.eq(0)
        return m
