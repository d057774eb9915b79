"""The engine's stacker: a few-channel CONV_2D's input stored row-stacked, so that a window is one run.

A CONV_2D whose runs are short (``kernel_w * in_c`` bytes, DS-CNN's first layer: 4) gets fewer array
steps from each block of reads than it takes cycles (:func:`host.windows.feed_efficiency`). Stored
row-stacked (:func:`host.windows.stack_input`), the input holds, for each output row ``oy`` and
column ``x``, the ``kernel_h`` input rows ``oy * stride_h + kh - pad_top`` of that column, ``in_c``
bytes each (the zero point for a row in the padding): ``kernel_w * kernel_h * in_c`` contiguous
bytes a window, which the window generator reads as one run (:func:`host.windows.stacked`).

The stacker sits between the input's :class:`hw.loader.Loader` and the input buffer. It takes the
loader's beats (``i_valid`` with ``i_data``: the NHWC input from its first byte, in order) into a FIFO of
``fifo_bytes``: ``i_ready`` while it has room for one, ``room`` its free bytes. It stores far slower than
the port delivers, so the loader asks memory only for what the FIFO can take (its ``room``): a beat it
could not take would stop the read port for every other client. It writes each
input byte to every stacked row that holds it, a byte a cycle (``w_*``, the buffer's write port:
byte 0 of ``w_data`` at ``w_addr``, registered; a write presented in a cycle with ``hold`` high is not taken and
stays, the walk waiting: the engine's capture of an output has the port first). It walks
the input's rows from ``-pad_top`` on, a padding row's bytes being the zero point, and ends an image
at its last input row once every output row is complete (a padding row below the input where the
windows reach one). So, its FIFO never empty and never held, ``done`` pulses
:func:`host.windows.stack_cycles` +
:attr:`Stacker.LATENCY` cycles after the cycle of ``start``.

Its rows' targets come without a division: row ``y``'s first is the output row ``oy0`` with the
largest ``kh0 = y + pad_top - oy0 * stride_h`` below ``kernel_h``, the next ones ``kh0 - stride_h``,
``kh0 - 2 * stride_h``... for the next output rows, while ``kh >= 0``; from one row to the next,
``kh0`` grows by one, less ``stride_h`` (and ``oy0`` one more) when it reaches ``kernel_h``.

``filled`` counts the buffer's bytes from ``base`` that are written, in whole stacked rows (``row_bytes``
= ``in_w * kernel_h * in_c``): a stacked row is complete once its last input row (``kh`` = ``kernel_h``
- 1) is stored. The window generator waits on it as on a linear load's. Inputs from the engine's layer
check: ``khc`` = ``kernel_h * in_c``, ``shc`` = ``stride_h * in_c``, ``row_bytes``. Contract: the inputs
hold from ``start`` until ``busy`` falls; ``dilation_h`` is 1 (the layer check refuses a stacked
layer otherwise), and the loader gives exactly the input's bytes rounded up to whole beats (the
last beat's bytes past the input are dropped). ``done`` pulses as ``busy`` falls, after the last write.
"""

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Stacker", "stack_geometry_layout"]


def stack_geometry_layout():
    """What the stacker takes of a layer (the command descriptor's fields, same widths)."""
    return data.StructLayout({
        "batch": 16, "in_h": 16, "in_w": 16, "in_c": 16, "out_h": 16, "kernel_h": 8, "stride_h": 8, "pad_top": 8,
        "zero_point": signed(8),
    })


class Stacker(wiring.Component):
    """See the module docstring. ``data_width``: the loader's beats (32, 64 or 128 bits); ``buffer_width``: the
    input buffer's write port (bytes); ``addr_width``: bits of its byte address."""

    LATENCY = 2

    def __init__(self, data_width=64, *, buffer_width=16, addr_width=16, fifo_bytes=512):
        if not (data_width in (32, 64, 128) and buffer_width in (4, 8, 16, 32) and isinstance(addr_width, int)
                and 1 <= addr_width <= 32 and isinstance(fifo_bytes, int) and fifo_bytes >= 2 * data_width // 8):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, buffer_width 4, 8, 16 or 32 bytes, addr_width "
                             f"in [1, 32] and fifo_bytes at least two beats, got {data_width!r}, {buffer_width!r}, "
                             f"{addr_width!r}, {fifo_bytes!r}")
        self.data_width, self.buffer_width, self.addr_width = data_width, buffer_width, addr_width
        self.fifo_beats = fifo_bytes // (data_width // 8)
        super().__init__({
            "start": In(1), "geometry": In(stack_geometry_layout()), "khc": In(17), "shc": In(32),
            "row_bytes": In(32), "base": In(addr_width),
            "i_valid": In(1), "i_data": In(data_width), "i_ready": Out(1), "room": Out(16), "hold": In(1),
            "w_en": Out(1), "w_addr": Out(addr_width), "w_data": Out(8 * buffer_width), "w_strb": Out(buffer_width),
            "busy": Out(1), "done": Out(1), "filled": Out(25),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        nb = self.data_width // 8
        running = Signal()
        # the beat being stored and its next byte; the beat after it, taken while this one is stored (so a byte a
        # cycle when the loader keeps up: a beat lasts at least its bytes' cycles)
        beat, have, j = Signal(self.data_width), Signal(), Signal(range(nb))
        m.submodules.beats = beats = fifo.SyncFIFOBuffered(width=self.data_width, depth=self.fifo_beats)
        release = Signal()            # the beat's last byte stored this cycle
        ending = Signal()             # the input's last byte stored this cycle (the last beat's rest dropped)
        m.d.comb += [self.i_ready.eq(beats.w_rdy), beats.w_en.eq(self.i_valid), beats.w_data.eq(self.i_data),
                     self.room.eq((self.fifo_beats - beats.level) * nb)]
        # the walk: image b, input row y (from -pad_top), column x, channel c; pos = x * khc + c
        b, y, x, c = Signal(16), Signal(signed(18)), Signal(16), Signal(16)
        pos = Signal(32)
        # the row's first target (output row oy0 at its row kh0: its byte 0 at base0) and the target being written
        kh0, oy0, base0 = Signal(signed(10)), Signal(17), Signal(32)
        kh_t, oy_t, addr_t = Signal(signed(10)), Signal(17), Signal(32)
        complete = Signal(17)         # the image's output rows complete
        filled = Signal(32)           # bytes of the buffer in complete stacked rows (images before included)
        # set at start: the steps of the addresses
        t_step, px_step = Signal(32), Signal(32)     # next target: a stacked row on, stride_h input rows back
        # a write presented while ``hold`` is high is not taken: it stays, and the walk waits
        stall = Signal()
        m.d.comb += stall.eq(self.w_en & self.hold)
        with m.If(~stall):
            m.d.sync += self.w_en.eq(0)
        m.d.sync += self.done.eq(0)

        with m.If(self.start & ~running):
            m.d.sync += [running.eq(1), b.eq(0), y.eq(-g.pad_top), x.eq(0), c.eq(0), pos.eq(0),
                         kh0.eq(0), oy0.eq(0), base0.eq(0), kh_t.eq(0), oy_t.eq(0), addr_t.eq(0),
                         complete.eq(0), filled.eq(0),
                         t_step.eq(self.row_bytes - self.shc), px_step.eq(self.khc - g.in_c + 1)]

        pad_row, has_t, last_t = Signal(), Signal(), Signal()
        last_c, last_x, last_row_b = Signal(), Signal(), Signal()
        m.d.comb += [pad_row.eq((y < 0) | (y >= g.in_h)), has_t.eq((kh0 >= 0) & (oy0 < g.out_h)),
                     last_t.eq((kh_t < g.stride_h) | (oy_t + 1 >= g.out_h)),
                     last_c.eq(c == g.in_c - 1), last_x.eq(x == g.in_w - 1), last_row_b.eq(b == g.batch - 1)]
        byte = Signal(8)
        m.d.comb += byte.eq(Mux(pad_row, g.zero_point.as_unsigned(), beat.word_select(j, 8)))
        act = Signal()
        m.d.comb += act.eq(running & (pad_row | have) & ~stall)
        with m.If(act):
            with m.If(has_t):
                m.d.sync += [self.w_en.eq(1), self.w_addr.eq(self.base + addr_t[:self.addr_width] +
                                                              pos[:self.addr_width]),
                             self.w_data.eq(byte.replicate(self.buffer_width))]
            with m.If(has_t & ~last_t):
                m.d.sync += [kh_t.eq(kh_t - g.stride_h), oy_t.eq(oy_t + 1), addr_t.eq(addr_t + t_step)]
            with m.Else():
                # the byte is stored everywhere: the next byte, from the row's first target
                m.d.sync += [kh_t.eq(kh0), oy_t.eq(oy0), addr_t.eq(base0)]
                with m.If(~pad_row):
                    m.d.sync += j.eq(j + 1)
                    m.d.comb += release.eq(j == nb - 1)
                with m.If(~last_c):
                    m.d.sync += [c.eq(c + 1), pos.eq(pos + 1)]
                with m.Elif(~last_x):
                    m.d.sync += [c.eq(0), x.eq(x + 1), pos.eq(pos + px_step)]
                with m.Else():
                    # the row ends: the next row's first target; a stacked row complete at its kh = kernel_h - 1
                    completed = has_t & (kh0 == g.kernel_h - 1)
                    done_rows = Signal(17)
                    new_filled = Signal(32)
                    m.d.comb += [done_rows.eq(complete + completed),
                                 new_filled.eq(Mux(completed, filled + self.row_bytes, filled))]
                    m.d.sync += [c.eq(0), x.eq(0), pos.eq(0), y.eq(y + 1), complete.eq(done_rows),
                                 filled.eq(new_filled)]
                    wrap = kh0 + 1 >= g.kernel_h
                    n_kh = Mux(wrap, kh0 + 1 - g.stride_h, kh0 + 1)
                    n_oy = Mux(wrap, oy0 + 1, oy0)
                    n_base = Mux(wrap, base0 + g.in_c + t_step, base0 + g.in_c)
                    m.d.sync += [kh0.eq(n_kh), oy0.eq(n_oy), base0.eq(n_base), kh_t.eq(n_kh), oy_t.eq(n_oy),
                                 addr_t.eq(n_base)]
                    with m.If((y >= g.in_h - 1) & (done_rows == g.out_h)):
                        # the image ends: the next one's first row, or the end (the last beat's rest dropped)
                        m.d.sync += [b.eq(b + 1), y.eq(-g.pad_top), complete.eq(0), kh0.eq(0), oy0.eq(0),
                                     base0.eq(new_filled), kh_t.eq(0), oy_t.eq(0), addr_t.eq(new_filled)]
                        with m.If(last_row_b):
                            m.d.sync += running.eq(0)
                            m.d.comb += ending.eq(1)
        # (after the walk's statements: a beat's refill wins over its byte count, the end over both)
        m.d.comb += beats.r_en.eq(~have | release)
        with m.If((~have | release) & beats.r_rdy):
            m.d.sync += [beat.eq(beats.r_data), have.eq(1), j.eq(0)]
        with m.Elif(release):
            m.d.sync += have.eq(0)
        with m.If(ending):
            m.d.sync += have.eq(0)
        # the buffer's byte 0 only; filled and the end follow the last write (registered) by a cycle
        m.d.comb += self.w_strb.eq(1)
        # (filled follows the writes that have landed: not while one waits)
        fin = Signal()
        with m.If(~stall):
            m.d.sync += [fin.eq(running), self.filled.eq(filled[:25])]
            with m.If(fin & ~running):
                m.d.sync += self.done.eq(1)
        with m.If(self.start & ~running):
            m.d.sync += self.filled.eq(0)
        m.d.comb += self.busy.eq(running | fin)
        return m
