"""The engine's loader: a linear copy from memory into an on-chip buffer (the input, the weights).

On ``start`` the loader reads ``length`` bytes at ``addr`` through a read port (``rd_cmd`` out,
``rd_data`` in: a :class:`hw.read_arbiter.ReadArbiter` client) and writes beat n at byte
``base + n * bus bytes`` of a :class:`hw.byte_buffer.ByteBuffer` (``w_*``, the buffer's write port; the
buffer at least a beat wide), from byte ``base`` on (wrapping at the buffer's end). ``addr``,
``length`` and ``base`` are taken at ``start``. ``addr`` and ``length`` are whole beats (the read port refuses
others: the engine rounds a tensor's length up, and its allocator leaves the bytes after a tensor
inside the window). The copy is read in commands of at most ``chunk`` bytes, so that two loaders
sharing the port through the arbiter take turns rather than one waiting for the other's whole
tensor. With ``pixel`` (bytes) and a larger ``pitch``, a depthwise layer's input is spread out: byte i of pixel p
goes to ``base + p * pitch + i`` (:func:`hw.depthwise_gen.input_pitch`; ``pixel`` is then whole beats); with
``pitch == pixel`` (0 and 0 too) the copy is linear. With ``split_h`` or ``split_w`` (and ``pixel`` whole beats) the
pixels of an NHWC tensor of ``in_h`` x ``in_w`` pixels are placed as :class:`hw.depthwise_gen.InputLayout` says (a
stride-2 depthwise layer's input split by parity), ``row_bytes`` and ``odd_w`` its stored row and its odd columns'
offset. ``loaded`` counts the bytes written so far, ``filled``
the buffer's bytes from ``base`` below which every byte is written (``loaded`` for a linear copy; the
engine starts computing on the first bytes and its readers wait for the bytes they need), ``w_filled`` what
``filled`` will be once this cycle's write is in (for a :class:`hw.write_queue.WriteQueue` that carries it).
While ``hold`` is high the loader takes no beat (another writer has the buffer's port). With ``throttle`` (the
engine's input loader, feeding the slower :class:`hw.stacker.Stacker` when ``throttled``), a command is asked for
only when it and the bytes asked but not yet written fit ``room``, so that no beat of it waits in the read port.
``done`` pulses after the last beat is written; ``busy`` is high from the cycle after ``start`` to then. The copy
runs at the port's rate: the buffer takes a beat every cycle.

With ``pairs`` (a buffer at least two beats wide), a beat whose successor lands right after it (not the copy's
last beat, nor a spread pixel's) waits for it, and the two are written in one cycle: a copy at the port's rate
then takes the buffer's write port every other cycle, leaving the rest to another writer (the engine's input
buffer is written by the input's loader and by the capture of the running layer's output). A waiting beat is
written alone in a cycle no beat comes (not while ``hold``); ``filled`` and ``loaded`` count written bytes only.
Not while ``throttled``: the stacker takes a beat at a time.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_reader import command_layout

__all__ = ["Loader"]


class Loader(wiring.Component):
    def __init__(self, data_width=64, *, buffer_width=8, addr_width=16, chunk=256, throttle=False, pairs=False):
        if not (data_width in (32, 64, 128) and buffer_width in (4, 8, 16, 32)
                and 8 * buffer_width >= (2 if pairs else 1) * data_width
                and isinstance(chunk, int) and chunk >= data_width // 8 and chunk & (chunk - 1) == 0
                and chunk <= 1 << 16):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, buffer_width (4, 8, 16 or 32 bytes) at "
                             f"least a beat (two with pairs) and chunk a power of two of at least a beat, at most "
                             f"64 KB, got {data_width!r}, {buffer_width!r}, {chunk!r}")
        self.data_width, self.buffer_width, self.addr_width, self.chunk = data_width, buffer_width, addr_width, chunk
        self.throttle, self.pairs = throttle, pairs
        super().__init__({
            **({"throttled": In(1), "room": In(16)} if throttle else {}),
            "start": In(1), "addr": In(32), "length": In(24), "base": In(addr_width), "pixel": In(17),
            "pitch": In(17), "in_h": In(16), "in_w": In(16), "split_h": In(1), "split_w": In(1),
            "row_bytes": In(addr_width), "odd_w": In(addr_width),
            "rd_cmd": Out(stream.Signature(command_layout())),
            "rd_data": In(stream.Signature(data.StructLayout({"data": data_width, "last": 1}))),
            "w_en": Out(1), "w_addr": Out(addr_width), "w_data": Out(8 * buffer_width), "w_strb": Out(buffer_width),
            "busy": Out(1), "done": Out(1), "loaded": Out(25), "filled": Out(25), "w_filled": Out(25), "hold": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        nbytes = self.data_width // 8
        next_addr = Signal(32)
        left = Signal(25)          # bytes not yet asked for
        # (the inputs are taken at start: the engine prepares its next layer meanwhile)
        pixel, pitch = Signal(17), Signal(17)
        spread = Signal()          # a pitch larger than the pixel
        # kept by one addition a beat each, so that no sum is on the write's or `filled`'s path
        w_ptr = Signal(self.addr_width)        # where the next beat goes
        pix_addr = Signal(self.addr_width)     # the current pixel's place
        pix_start = Signal(25)                 # the current pixel's offset from base
        pix_left = Signal(18)                  # bytes of the current pixel not yet written
        unwritten = Signal(25)                 # bytes of the input not yet written
        filled = Signal(25)
        # a split layout (hw.depthwise_gen.InputLayout): the pixel's column and row, whether each is the last and
        # odd, the row's and the image's places; the steps from an even and an odd column (row) to the next
        aw = self.addr_width
        split_h, split_w = Signal(), Signal()
        in_w, in_h, col, row = Signal(16), Signal(16), Signal(16), Signal(16)
        col_last, row_last, col_odd, row_odd = Signal(), Signal(), Signal(), Signal()
        row_addr, img_addr = Signal(aw), Signal(aw)
        dx_even, dx_odd, dy_even, dy_odd, image = (Signal(aw, name=n) for n in (
            "dx_even", "dx_odd", "dy_even", "dy_odd", "image"))
        odd_h = Signal(aw)
        m.d.comb += odd_h.eq(Mux(self.split_w, self.odd_w << 1, self.odd_w))
        with m.If(self.start & ~self.busy):
            m.d.sync += [split_h.eq(self.split_h), split_w.eq(self.split_w),
                         in_w.eq(self.in_w), in_h.eq(self.in_h), col.eq(0), row.eq(0),
                         col_last.eq(self.in_w == 1), row_last.eq(self.in_h == 1), col_odd.eq(0), row_odd.eq(0),
                         row_addr.eq(self.base), img_addr.eq(self.base),
                         dx_even.eq(Mux(self.split_w, self.odd_w, self.pitch)),
                         dx_odd.eq(Mux(self.split_w, self.pitch - self.odd_w, self.pitch)),
                         dy_even.eq(Mux(self.split_h, odd_h, self.row_bytes)),
                         dy_odd.eq(Mux(self.split_h, self.row_bytes - odd_h, self.row_bytes)),
                         image.eq(Mux(self.split_h, odd_h << 1, odd_h))]
        m.d.sync += self.done.eq(0)
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(1), next_addr.eq(self.addr), left.eq(self.length), self.loaded.eq(0),
                         pixel.eq(self.pixel), pitch.eq(self.pitch),
                         spread.eq(self.pitch != self.pixel), pix_addr.eq(self.base), w_ptr.eq(self.base),
                         pix_start.eq(0), pix_left.eq(self.pixel), unwritten.eq(self.length), filled.eq(0)]
        # the next command: up to `chunk` bytes, so the arbiter interleaves it with the other clients' (a register,
        # kept with `left`: min(left, chunk) after each command)
        length = Signal(25)
        issue = Signal()
        m.d.comb += issue.eq(self.rd_cmd.valid & self.rd_cmd.ready)
        accept = Signal()          # a beat taken
        m.d.comb += accept.eq(self.rd_data.valid & self.rd_data.ready)
        more = Signal()            # left is not 0
        with m.If(self.start & ~self.busy):
            m.d.sync += [length.eq(Mux(self.length > self.chunk, self.chunk, self.length)), more.eq(self.length != 0)]
        with m.Elif(issue):
            m.d.sync += [length.eq(Mux(left > 2 * self.chunk, self.chunk,
                                       Mux(left > self.chunk, left - self.chunk, 0))),
                         more.eq(left > self.chunk)]
        may = 1
        if self.throttle:
            # (throttled: asked for only when the bytes asked and not yet written, and these, fit the room. The test
            # is a register, a cycle old, and no command is asked for in the cycle after one: since then the bytes
            # owed have only fallen, and the room by no more than they, as the beats written go into the FIFO whose
            # free bytes it is)
            owed = Signal(len(self.room) + 1)   # (throttled, at most the room and a command: `room` is 16 bits)
            fits = Signal()
            # (throttled, no beat waits for a pair: a beat taken is a beat written)
            m.d.sync += [owed.eq(owed + Mux(issue, length, 0) - Mux(accept, nbytes, 0)),
                         fits.eq((owed + length[:len(owed)] <= self.room) & ~issue)]
            with m.If(self.start & ~self.busy):
                m.d.sync += [owed.eq(0), fits.eq(0)]
            may = ~self.throttled | fits
        m.d.comb += [self.rd_cmd.valid.eq(self.busy & more & may), self.rd_cmd.payload.addr.eq(next_addr),
                     self.rd_cmd.payload.length.eq(length)]
        with m.If(issue):
            m.d.sync += [next_addr.eq(next_addr + self.chunk), left.eq(Mux(left > self.chunk, left - self.chunk, 0))]
        m.d.comb += self.rd_data.ready.eq(self.busy & ~self.hold)
        # (expressions, not values set under an If: Icarus leaves the latter X until an input of the If changes, and
        # the capture's inputs may not change for a whole layer)
        # (registers kept with the counts they test, so that no comparison is on a write's path)
        pixel_end = Signal()       # the next beat is a spread pixel's last: the one after lands a pitch on
        final = Signal()           # the next beat is the copy's last
        one_beat_pixel = Signal()  # a pixel is one beat
        with m.If(self.start & ~self.busy):
            m.d.sync += [pixel_end.eq(((self.pitch != self.pixel) | self.split_h | self.split_w)
                                      & (self.pixel <= nbytes)),
                         one_beat_pixel.eq(self.pixel <= nbytes), final.eq(self.length <= nbytes)]
        with m.Elif(accept):
            m.d.sync += [pixel_end.eq((spread | split_h | split_w)
                                      & Mux(pixel_end, one_beat_pixel, pix_left <= 2 * nbytes)),
                         final.eq(unwritten <= 2 * nbytes)]
        if self.pairs:
            held = Signal()                            # a beat waits for the next
            held_data = Signal(self.data_width)
            held_addr = Signal(self.addr_width)
            held_filled = Signal(25)                   # `filled` before it
            pairing = ~self.throttled if self.throttle else 1
            wait = Signal()                            # the beat taken waits for its successor
            m.d.comb += wait.eq(accept & ~held & pairing & ~pixel_end & ~final)
            m.d.comb += [self.w_en.eq((accept & ~wait) | (~accept & held & ~self.hold)),
                         self.w_addr.eq(Mux(held, held_addr, w_ptr)),
                         self.w_data.eq(Mux(held, Cat(held_data, self.rd_data.payload.data),
                                            self.rd_data.payload.data)),
                         self.w_strb.eq(Mux(held & accept, (1 << 2 * nbytes) - 1, (1 << nbytes) - 1)),
                         self.filled.eq(Mux(held, held_filled, filled))]
            with m.If(wait):
                m.d.sync += [held.eq(1), held_data.eq(self.rd_data.payload.data), held_addr.eq(w_ptr),
                             held_filled.eq(filled)]
            with m.Elif(self.w_en):
                m.d.sync += held.eq(0)
            with m.If(self.w_en):
                m.d.sync += self.loaded.eq(self.loaded + Mux(held & accept, 2 * nbytes, nbytes))
        else:
            m.d.comb += [self.w_en.eq(accept), self.w_addr.eq(w_ptr), self.w_data.eq(self.rd_data.payload.data),
                         self.w_strb.eq((1 << nbytes) - 1), self.filled.eq(filled)]
            with m.If(self.w_en):
                m.d.sync += self.loaded.eq(self.loaded + nbytes)
        # filled after the beat taken; a write without one is a waiting beat's, already counted
        filled_next = Signal(25)
        m.d.comb += [filled_next.eq(Mux(pixel_end, pix_start + pitch, filled + nbytes)),
                     self.w_filled.eq(Mux(accept, filled_next, filled))]
        with m.If(accept):
            m.d.sync += [unwritten.eq(unwritten - nbytes), filled.eq(filled_next)]
            with m.If(pixel_end):
                # the pixel's last beat: the next pixel starts a pitch on, or where the split layout puts it
                nxt = Signal(aw)
                m.d.comb += nxt.eq(pix_addr + pitch)
                with m.If(split_h | split_w):
                    with m.If(~col_last):
                        m.d.comb += nxt.eq(pix_addr + Mux(col_odd, dx_odd, dx_even))
                        m.d.sync += [col.eq(col + 1), col_last.eq(col + 2 == in_w), col_odd.eq(col_odd ^ split_w)]
                    with m.Else():
                        m.d.sync += [col.eq(0), col_last.eq(in_w == 1), col_odd.eq(0)]
                        with m.If(~row_last):
                            m.d.comb += nxt.eq(row_addr + Mux(row_odd, dy_odd, dy_even))
                            m.d.sync += [row.eq(row + 1), row_last.eq(row + 2 == in_h),
                                         row_odd.eq(row_odd ^ split_h), row_addr.eq(nxt)]
                        with m.Else():
                            m.d.comb += nxt.eq(img_addr + image)
                            m.d.sync += [row.eq(0), row_last.eq(in_h == 1), row_odd.eq(0), row_addr.eq(nxt),
                                         img_addr.eq(nxt)]
                m.d.sync += [pix_left.eq(pixel), pix_addr.eq(nxt), w_ptr.eq(nxt), pix_start.eq(pix_start + pitch)]
            with m.Else():
                m.d.sync += [pix_left.eq(pix_left - nbytes), w_ptr.eq(w_ptr + nbytes)]
            with m.If(final):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        return m
