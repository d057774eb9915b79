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
byte 0 of ``w_data`` at ``w_addr``, through a two-entry :class:`hw.write_queue.WriteQueue`; a write presented in a
cycle with ``hold`` high is not taken and stays, the walk waiting once the queue is full: the engine's capture of an
output has the port first). It walks
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

from .write_queue import WriteQueue

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

    LATENCY = 3

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
        filled_next = Signal(32)      # filled + row_bytes, kept beside it
        # set at start: the steps of the addresses (next target: a stacked row on, stride_h input rows back; next
        # pixel; next row's first target after a wrap), the last in the cycle after start (``prep``: nothing is
        # walked in it)
        t_step, px_step, wrap_step = Signal(32), Signal(32), Signal(32)
        prep = Signal()
        kh_wrap, stride_one = Signal(signed(10)), Signal()   # kernel_h - stride_h; stride_h == 1
        # The writes go through a two-entry queue (hw.write_queue): a write presented while ``hold`` is high stays,
        # and the walk waits only once the queue is full (``hold`` drives the queue alone). Each
        # write carries ``filled`` as it will be once it is in the buffer.
        m.submodules.writes = writes = WriteQueue(addr_width=self.addr_width, width=self.buffer_width)
        nw, nw_addr, nw_data, nw_f = Signal(), Signal(self.addr_width), Signal(8), Signal(25)
        m.d.sync += self.done.eq(0)

        # The walk's tests are registers, each set where the state it tests changes and from registers only:
        pad_row = Signal()            # y < 0 or y >= in_h: a padding row
        has_t = Signal()              # kh0 >= 0 and oy0 < out_h: the row has a target
        last_t, last_t0 = Signal(), Signal()    # the target (kh_t, oy_t) is the row's last; the same at (kh0, oy0)
        kh0_last = Signal()           # kh0 == kernel_h - 1: the row completes its first target's stacked row
        last_c, last_x, last_b = Signal(), Signal(), Signal()   # c == in_c - 1, x == in_w - 1, b == batch - 1
        last_y = Signal()             # y >= in_h - 1
        end0, end1 = Signal(), Signal()         # complete == out_h, complete + 1 == out_h
        # the same at an image's first row (y = -pad_top, kh0 = oy0 = complete = 0), and c == 0, x == 0's
        pad_i, has_t_i, last_t_i, kh0_last_i, last_y_i = Signal(), Signal(), Signal(), Signal(), Signal()
        end0_i, end1_i, one_c, one_x = Signal(), Signal(), Signal(), Signal()

        def first_row():
            return [pad_row.eq(pad_i), has_t.eq(has_t_i), last_t.eq(last_t_i), last_t0.eq(last_t_i),
                    kh0_last.eq(kh0_last_i), last_y.eq(last_y_i), end0.eq(end0_i), end1.eq(end1_i),
                    last_c.eq(one_c), last_x.eq(one_x)]

        with m.If(self.start & ~running & ~prep):
            top = Signal(signed(18))
            m.d.comb += top.eq(-g.pad_top)
            m.d.sync += [prep.eq(1), b.eq(0), y.eq(top), x.eq(0), c.eq(0), pos.eq(0),
                         kh0.eq(0), oy0.eq(0), base0.eq(0), kh_t.eq(0), oy_t.eq(0), addr_t.eq(0),
                         complete.eq(0), filled.eq(0), filled_next.eq(self.row_bytes),
                         t_step.eq(self.row_bytes - self.shc), px_step.eq(self.khc - g.in_c + 1),
                         pad_i.eq((g.pad_top != 0) | (g.in_h == 0)), has_t_i.eq(g.out_h != 0),
                         last_t_i.eq((g.stride_h != 0) | (g.out_h <= 1)), kh0_last_i.eq(g.kernel_h == 1),
                         last_y_i.eq(top >= g.in_h - 1), end0_i.eq(g.out_h == 0), end1_i.eq(g.out_h == 1),
                         one_c.eq(g.in_c == 1), one_x.eq(g.in_w == 1), last_b.eq(g.batch == 1),
                         kh_wrap.eq(g.kernel_h - g.stride_h), stride_one.eq(g.stride_h == 1)]
        with m.If(prep):
            m.d.sync += [prep.eq(0), running.eq(1), wrap_step.eq(g.in_c + t_step)]
            m.d.sync += first_row()

        byte = Signal(8)
        m.d.comb += byte.eq(Mux(pad_row, g.zero_point.as_unsigned(), beat.word_select(j, 8)))
        act = Signal()
        m.d.comb += act.eq(running & (pad_row | have) & writes.ready)
        m.d.comb += [nw.eq(act & has_t), nw_addr.eq(self.base + addr_t[:self.addr_width] + pos[:self.addr_width]),
                     nw_data.eq(byte), nw_f.eq(filled[:25])]
        with m.If(act):
            with m.If(has_t & ~last_t):
                m.d.sync += [kh_t.eq(kh_t - g.stride_h), oy_t.eq(oy_t + 1), addr_t.eq(addr_t + t_step),
                             last_t.eq((kh_t - g.stride_h < g.stride_h) | (oy_t + 2 >= g.out_h))]
            with m.Else():
                # the byte is stored everywhere: the next byte, from the row's first target
                m.d.sync += [kh_t.eq(kh0), oy_t.eq(oy0), addr_t.eq(base0), last_t.eq(last_t0)]
                with m.If(~pad_row):
                    m.d.sync += j.eq(j + 1)
                    m.d.comb += release.eq(j == nb - 1)
                with m.If(~last_c):
                    m.d.sync += [c.eq(c + 1), pos.eq(pos + 1), last_c.eq(c + 2 == g.in_c)]
                with m.Elif(~last_x):
                    m.d.sync += [c.eq(0), x.eq(x + 1), pos.eq(pos + px_step), last_c.eq(one_c),
                                 last_x.eq(x + 2 == g.in_w)]
                with m.Else():
                    # the row ends: the next row's first target; a stacked row complete at its kh = kernel_h - 1
                    completed = Signal()
                    new_filled = Signal(32)
                    m.d.comb += [completed.eq(has_t & kh0_last),
                                 new_filled.eq(Mux(completed, filled_next, filled)),
                                 nw_f.eq(new_filled[:25])]
                    m.d.sync += [c.eq(0), x.eq(0), pos.eq(0), y.eq(y + 1), filled.eq(new_filled),
                                 last_c.eq(one_c), last_x.eq(one_x),
                                 pad_row.eq((y + 1 < 0) | (y + 1 >= g.in_h)), last_y.eq(y + 2 >= g.in_h)]
                    with m.If(completed):
                        m.d.sync += [filled_next.eq(filled_next + self.row_bytes), complete.eq(complete + 1),
                                     end0.eq(end1), end1.eq(complete + 2 == g.out_h)]
                    # wrap: kh0 + 1 reaches kernel_h (kh0 is kernel_h - 1 at most: kh0_last), the row's first target
                    # one output row on, at kh0 = kernel_h - stride_h (kh_wrap, set at start)
                    with m.If(kh0_last):
                        lt = (kh_wrap < g.stride_h) | (oy0 + 2 >= g.out_h)
                        m.d.sync += [kh0.eq(kh_wrap), oy0.eq(oy0 + 1), base0.eq(base0 + wrap_step),
                                     kh_t.eq(kh_wrap), oy_t.eq(oy0 + 1), addr_t.eq(base0 + wrap_step),
                                     has_t.eq((kh_wrap >= 0) & (oy0 + 1 < g.out_h)), last_t.eq(lt), last_t0.eq(lt),
                                     kh0_last.eq(stride_one)]
                    with m.Else():
                        lt = (kh0 + 1 < g.stride_h) | (oy0 + 1 >= g.out_h)
                        m.d.sync += [kh0.eq(kh0 + 1), base0.eq(base0 + g.in_c), kh_t.eq(kh0 + 1),
                                     addr_t.eq(base0 + g.in_c), has_t.eq((kh0 + 1 >= 0) & (oy0 < g.out_h)),
                                     last_t.eq(lt), last_t0.eq(lt), kh0_last.eq(kh0 + 2 == g.kernel_h)]
                    with m.If(last_y & Mux(completed, end1, end0)):
                        # the image ends: the next one's first row, or the end (the last beat's rest dropped)
                        m.d.sync += [b.eq(b + 1), y.eq(-g.pad_top), complete.eq(0), kh0.eq(0), oy0.eq(0),
                                     base0.eq(new_filled), kh_t.eq(0), oy_t.eq(0), addr_t.eq(new_filled),
                                     last_b.eq(b + 2 == g.batch)]
                        m.d.sync += first_row()
                        with m.If(last_b):
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
        # the writes, the buffer's byte 0 only; filled follows the writes that have landed, a cycle after each; done
        # the walk's end and its last write
        m.d.comb += [writes.i_en.eq(nw), writes.i_addr.eq(nw_addr),
                     writes.i_data.eq(nw_data.replicate(self.buffer_width)),
                     writes.i_strb.eq(1), writes.i_filled.eq(nw_f), writes.hold.eq(self.hold),
                     writes.clear.eq(self.start & ~running & ~prep),
                     self.w_en.eq(writes.w_en), self.w_addr.eq(writes.w_addr), self.w_data.eq(writes.w_data),
                     self.w_strb.eq(writes.w_strb), self.filled.eq(writes.filled)]
        fin = Signal()
        with m.If(running):
            m.d.sync += fin.eq(1)
        with m.Elif(fin & writes.drained):
            m.d.sync += [fin.eq(0), self.done.eq(1)]
        m.d.comb += self.busy.eq(prep | running | fin)
        return m
