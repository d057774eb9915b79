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

``start`` takes ``pixels`` and ``channels`` (the layer's M and N; ``dsp`` is the kind of the multiplier
that counts the layer's bytes) and resets the counters; ``res`` is ready from the cycle after ``start``
until the layer's last result row is taken (one row a cycle goes into the buffer), so the next layer's
rows wait in the core while this one drains; ``busy`` is high from the cycle after ``start`` until the
last beat is taken. The buffer holds ``depth`` bytes: a layer's output must fit
(the engine refuses one that does not).
"""

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_writer import beat_layout
from .byte_buffer import ByteBuffer
from .multiplier import Multiplier

__all__ = ["ResultPacker"]


class ResultPacker(wiring.Component):
    def __init__(self, rows, cols, *, data_width=64, depth=4096, dsp="generic"):
        if not (cols <= 32 and data_width in (32, 64, 128)):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"cols must be <= 32 and data_width 32, 64 or 128 bits, got {cols!r}, {data_width!r}")
        self.rows, self.cols, self.data_width, self.depth, self.dsp = rows, cols, data_width, depth, dsp
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
        buf = m.submodules.buffer = ByteBuffer(width, max(self.depth, width * 2), dsp=self.dsp)
        i = Signal(range(rows))          # row of the tile
        px, ch = Signal(16), Signal(16)  # the layer's pixels and channels, taken at start
        mt = Signal(16)                  # first pixel of the row tile
        nt = Signal(16)                  # first channel of the column tile
        # the layer's bytes, pixels * channels: a multiplier with its own registers, a few cycles after start
        # (long before the first row tile is complete)
        mul = m.submodules.total = Multiplier(17, 17, dsp=self.dsp)
        m.d.comb += [mul.a.eq(px), mul.b.eq(ch), mul.en.eq(1)]
        total = Signal(32)
        m.d.sync += total.eq(mul.p)
        settle = Signal(range(mul.latency + 3))     # cycles until `total` is this layer's
        with m.If(settle != 0):
            m.d.sync += settle.eq(settle - 1)
        complete = Signal(33)            # bytes below this are written (row tiles done; a write lands a cycle later)
        receiving = Signal()             # the layer's result rows are not all in
        r_addr = Signal(32)
        in_flight = Signal(range(ByteBuffer.LATENCY + 2))
        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * nbytes + nbytes, depth=ByteBuffer.LATENCY + 2)
        # where the next row goes, kept by one addition a row (not a multiplication): w_ptr = pixel * channels + nt
        w_ptr, col_base = Signal(33), Signal(33)    # ..., and the column tile's row 0
        pixel = Signal(16)               # mt + i
        ch_left = Signal(signed(17))     # channels - nt: the column tile's real lanes
        with m.If(self.start):
            m.d.sync += [i.eq(0), mt.eq(0), nt.eq(0), complete.eq(0), r_addr.eq(0), self.busy.eq(1),
                         settle.eq(mul.latency + 2),
                         px.eq(self.pixels), ch.eq(self.channels), w_ptr.eq(0), col_base.eq(0), pixel.eq(0),
                         ch_left.eq(self.channels), receiving.eq(1)]

        m.d.comb += self.res.ready.eq(receiving)
        take = Signal()
        m.d.comb += take.eq(self.res.valid & receiving)
        strb = Signal(width)
        m.d.comb += strb.eq(Cat((ch_left > j) & (pixel < px) for j in range(cols)))
        # the write goes to the buffer a cycle after its row is taken, and lands at the end of that cycle: the
        # drain's `word_in`, a register computed from `complete`, lets its bytes be read the cycle after
        wq_en, wq_addr = Signal(name="wq_en"), Signal(len(buf.w_addr), name="wq_addr")
        wq_data, wq_strb = Signal(8 * width, name="wq_data"), Signal(width, name="wq_strb")
        m.d.sync += [wq_en.eq(take), wq_addr.eq(w_ptr), wq_strb.eq(strb),
                     wq_data.eq(Cat(self.res.payload[j][:8] for j in range(cols)))]
        m.d.comb += [buf.w_en.eq(wq_en), buf.w_addr.eq(wq_addr), buf.w_data.eq(wq_data), buf.w_strb.eq(wq_strb)]
        with m.If(take):
            with m.If(i == rows - 1):
                m.d.sync += i.eq(0)
                with m.If(ch_left <= cols):
                    # the row tile is complete: its pixels' bytes may go (the write lands with this edge)
                    tile_end = complete + rows * ch
                    m.d.sync += [nt.eq(0), mt.eq(mt + rows), complete.eq(tile_end), w_ptr.eq(tile_end),
                                 col_base.eq(tile_end), pixel.eq(mt + rows), ch_left.eq(ch),
                                 receiving.eq(mt + rows < px)]
                with m.Else():
                    m.d.sync += [nt.eq(nt + cols), w_ptr.eq(col_base + cols), col_base.eq(col_base + cols),
                                 pixel.eq(mt), ch_left.eq(ch_left - cols)]
            with m.Else():
                m.d.sync += [i.eq(i + 1), w_ptr.eq(w_ptr + ch), pixel.eq(pixel + 1)]

        # --- drain: aligned bus words from byte 0 up to the complete bytes, through the buffer's read latency ---
        # words read while the writer is not ready wait in `queue`; a read is issued only with room for it. (A read's
        # entry is free again LATENCY + 2 cycles after its issue: the buffer's latency, a cycle in the queue, a cycle
        # for the credit's register. So LATENCY + 2 entries let a read go every cycle, as a layer of K = cols gives
        # a row every cycle and the drain must keep up with it)
        # The issue's conditions are registers, each computed a cycle ahead for both outcomes of this cycle's issue
        # (an issue moves r_addr a word on). `complete` only grows while a layer drains, so the flag computed from its
        # value a cycle old is late by a cycle at most, never wrong; `total` is final a cycle before `settle` ends.
        r_next = Signal(32)            # r_addr + nbytes
        below = Signal()               # r_addr < total
        word_in = Signal()             # the word at r_addr is complete: r_addr + nbytes <= complete, or all is
        credit = Signal(range(queue.depth + 1), init=queue.depth)   # the queue's free entries, less those in flight
        issue = Signal()
        m.d.comb += issue.eq(self.busy & ~self.start & (settle == 0) & below & word_in & (credit != 0))
        m.d.comb += [buf.r_en.eq(issue), buf.r_addr.eq(r_addr)]
        with m.If(issue):
            m.d.sync += [r_addr.eq(r_next), r_next.eq(r_next + nbytes), below.eq(r_next < total),
                         word_in.eq((r_next + nbytes <= complete) | (complete >= total))]
        with m.Else():
            m.d.sync += [below.eq(r_addr < total), word_in.eq((r_next <= complete) | (complete >= total))]
        with m.If(self.start):
            m.d.sync += r_next.eq(nbytes)
        m.d.sync += credit.eq(credit - issue + (queue.r_en & queue.r_rdy))
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
        with m.If(self.busy & ~self.start & (settle == 0) & ~below & (in_flight == 0) & ~queue.r_rdy):
            m.d.sync += self.busy.eq(0)
        return m
