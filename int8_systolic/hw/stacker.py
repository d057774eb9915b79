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
could not take would stop the read port for every other client. It writes, a write a cycle, a *group* of
consecutive pixels of an input row to each stacked row that holds them (``w_*``, the buffer's write port of
``buffer_width`` bytes: byte j of ``w_data`` at ``w_addr + j`` where ``w_strb`` bit j is set, through a two-entry
:class:`hw.write_queue.WriteQueue`; a write presented in a cycle with ``hold`` high is not taken and stays, the walk
waiting once the queue is full: the engine's capture of an output has the port first). A group is as many pixels as
fit one write at their stacked places (``kernel_h * in_c`` bytes apart) and one beat of input
(:func:`host.windows.stack_group`), the row's last group what is left; the lanes each input byte goes to are a
table built at ``start``, a lane a cycle. A pixel is at most a beat (the layer check refuses a stacked layer
otherwise). It walks
the input's rows from ``-pad_top`` on, a padding row's bytes being the zero point, and ends an image
at its last input row once every output row is complete (a padding row below the input where the
windows reach one). So, its FIFO never empty and never held, ``done`` pulses
:func:`host.windows.stack_cycles` + ``latency`` (``buffer_width`` + 3) cycles after the cycle of ``start``.

Its rows' targets come without a division: row ``y``'s first is the output row ``oy0`` with the
largest ``kh0 = y + pad_top - oy0 * stride_h`` below ``kernel_h``, the next ones ``kh0 - stride_h``,
``kh0 - 2 * stride_h``... for the next output rows, while ``kh >= 0``; from one row to the next,
``kh0`` grows by one, less ``stride_h`` (and ``oy0`` one more) when it reaches ``kernel_h``.

``filled`` counts the buffer's bytes from ``base`` that are written, in whole stacked rows (``row_bytes``
= ``in_w * kernel_h * in_c``): a stacked row is complete once its last input row (``kh`` = ``kernel_h``
- 1) is stored. The window generator waits on it as on a linear load's. Inputs from the engine's layer
check: ``khc`` = ``kernel_h * in_c``, ``shc`` = ``stride_h * in_c``, ``row_bytes``. Contract: the inputs
hold from ``start`` until ``busy`` falls; ``dilation_h`` is 1 and ``in_c`` at most a beat (the layer check refuses a
stacked layer otherwise), and the loader gives exactly the input's bytes rounded up to whole beats (the
last beat's bytes past the input are dropped). ``done`` pulses as ``busy`` falls, after the last write.
"""

from amaranth import Array, Cat, Module, Mux, Signal, signed
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

    def __init__(self, data_width=64, *, buffer_width=16, addr_width=16, fifo_bytes=512):
        if not (data_width in (32, 64, 128) and buffer_width in (4, 8, 16, 32) and isinstance(addr_width, int)
                and 1 <= addr_width <= 32 and isinstance(fifo_bytes, int) and fifo_bytes >= 2 * data_width // 8):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, buffer_width 4, 8, 16 or 32 bytes, addr_width "
                             f"in [1, 32] and fifo_bytes at least two beats, got {data_width!r}, {buffer_width!r}, "
                             f"{addr_width!r}, {fifo_bytes!r}")
        self.data_width, self.buffer_width, self.addr_width = data_width, buffer_width, addr_width
        # from start to the first write: the group table (a lane a cycle), then the walk's set-up
        self.latency = buffer_width + 3
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
        nb, width = self.data_width // 8, self.buffer_width
        running = Signal()
        m.submodules.beats = beats = fifo.SyncFIFOBuffered(width=self.data_width, depth=self.fifo_beats)
        m.d.comb += [self.i_ready.eq(beats.w_rdy), beats.w_en.eq(self.i_valid), beats.w_data.eq(self.i_data),
                     self.room.eq((self.fifo_beats - beats.level) * nb)]

        # --- the group table, built at start, a lane a cycle (`table`): lane q * khc + k of a write holds byte k of
        # the group's pixel q, from byte q * in_c + k of the input (`src`), for the `p_max` pixels whose stacked
        # bytes fit the write and whose input bytes fit a bus word (host.windows.stack_group); `n_of[p]`: the bytes
        # of p pixels, `n_full` and `step_full` a whole group's bytes and its stacked span ---
        table = Signal()
        lane = Signal(range(width + 1))
        q_k = Signal(17)              # the lane's byte in its pixel's stacked bytes
        q_base, q_src = Signal(17), Signal(range(2 * nb + 1))
        q_ok = Signal()               # the lane's pixel fits
        src = Array(Signal(range(nb), name=f"src{i}") for i in range(width))
        used = Array(Signal(name=f"used{i}") for i in range(width))
        n_of = Array(Signal(range(nb + 1), name=f"n_of{p}") for p in range(nb + 1))
        p_max = Signal(range(nb + 1))
        n_full, step_full = Signal(range(nb + 1)), Signal(17)

        # the stream: the beat being stored (b0) and the next (b1), the group's first byte at j in b0
        b0, b1 = Signal(self.data_width), Signal(self.data_width)
        have0, have1 = Signal(), Signal()
        j = Signal(range(nb))
        gn = Signal(range(nb + 1))    # the group's bytes
        eat = Signal()                # the group is stored everywhere (its bytes leave the stream)
        ending = Signal()             # the input's last group stored (the last beat's rest dropped)
        # the walk: image b, input row y (from -pad_top), its pixels left from the group's first, the group's place
        b, y = Signal(16), Signal(signed(18))
        px_left = Signal(16)
        last_g = Signal()             # the group is its row's last
        last_g0, gn0 = Signal(), Signal(range(nb + 1))  # the same for a row's first group (from the table, once built)
        pos = Signal(32)
        # the row's first target (output row oy0 at its row kh0: its byte 0 at base0) and the target being written
        kh0, oy0, base0 = Signal(signed(10)), Signal(17), Signal(32)
        kh_t, oy_t, addr_t = Signal(signed(10)), Signal(17), Signal(32)
        complete = Signal(17)         # the image's output rows complete
        filled = Signal(32)           # bytes of the buffer in complete stacked rows (images before included)
        filled_next = Signal(32)      # filled + row_bytes, kept beside it
        # set at start: the steps of the addresses (next target: a stacked row on, stride_h input rows back; next
        # row's first target after a wrap), the last in the cycle after the table (``prep``: nothing is walked in it)
        t_step, wrap_step = Signal(32), Signal(32)
        prep = Signal()
        kh_wrap, stride_one = Signal(signed(10)), Signal()   # kernel_h - stride_h; stride_h == 1
        # The writes go through a two-entry queue (hw.write_queue): a write presented while ``hold`` is high stays,
        # and the walk waits only once the queue is full (``hold`` drives the queue alone). Each
        # write carries ``filled`` as it will be once it is in the buffer.
        m.submodules.writes = writes = WriteQueue(addr_width=self.addr_width, width=width)
        nw, nw_addr, nw_f = Signal(), Signal(self.addr_width), Signal(25)
        m.d.sync += self.done.eq(0)

        # The walk's tests are registers, each set where the state it tests changes and from registers only:
        pad_row = Signal()            # y < 0 or y >= in_h: a padding row
        has_t = Signal()              # kh0 >= 0 and oy0 < out_h: the row has a target
        last_t, last_t0 = Signal(), Signal()    # the target (kh_t, oy_t) is the row's last; the same at (kh0, oy0)
        kh0_last = Signal()           # kh0 == kernel_h - 1: the row completes its first target's stacked row
        last_b = Signal()             # b == batch - 1
        last_y = Signal()             # y >= in_h - 1
        end0, end1 = Signal(), Signal()         # complete == out_h, complete + 1 == out_h
        # the same at an image's first row (y = -pad_top, kh0 = oy0 = complete = 0)
        pad_i, has_t_i, last_t_i, kh0_last_i, last_y_i = Signal(), Signal(), Signal(), Signal(), Signal()
        end0_i, end1_i = Signal(), Signal()

        def first_row():
            return [pad_row.eq(pad_i), has_t.eq(has_t_i), last_t.eq(last_t_i), last_t0.eq(last_t_i),
                    kh0_last.eq(kh0_last_i), last_y.eq(last_y_i), end0.eq(end0_i), end1.eq(end1_i),
                    px_left.eq(g.in_w), pos.eq(0), last_g.eq(last_g0), gn.eq(gn0)]

        with m.If(self.start & ~running & ~prep & ~table):
            top = Signal(signed(18))
            m.d.comb += top.eq(-g.pad_top)
            m.d.sync += [table.eq(1), lane.eq(0), q_k.eq(0), q_base.eq(0), q_src.eq(0), p_max.eq(0),
                         q_ok.eq(g.in_c <= min(width, nb)),
                         b.eq(0), y.eq(top),
                         kh0.eq(0), oy0.eq(0), base0.eq(0), kh_t.eq(0), oy_t.eq(0), addr_t.eq(0),
                         complete.eq(0), filled.eq(0), filled_next.eq(self.row_bytes),
                         t_step.eq(self.row_bytes - self.shc),
                         pad_i.eq((g.pad_top != 0) | (g.in_h == 0)), has_t_i.eq(g.out_h != 0),
                         last_t_i.eq((g.stride_h != 0) | (g.out_h <= 1)), kh0_last_i.eq(g.kernel_h == 1),
                         last_y_i.eq(top >= g.in_h - 1), end0_i.eq(g.out_h == 0), end1_i.eq(g.out_h == 1),
                         last_b.eq(g.batch == 1),
                         kh_wrap.eq(g.kernel_h - g.stride_h), stride_one.eq(g.stride_h == 1)]
        with m.If(table):
            # lane `lane`: byte q_k of its pixel, used if the pixel fits and q_k < in_c
            m.d.sync += [used[lane[:max(1, (width - 1).bit_length())]].eq(q_ok & (q_k < g.in_c)),
                         src[lane[:max(1, (width - 1).bit_length())]].eq((q_src + q_k)[:len(src[0])])]
            with m.If(q_ok & (q_k == 0)):
                m.d.sync += [p_max.eq(p_max + 1), n_full.eq(q_src + g.in_c), step_full.eq(q_base + self.khc),
                             n_of[p_max + 1].eq(q_src + g.in_c)]
            with m.If(q_k + 1 == self.khc):
                m.d.sync += [q_k.eq(0), q_base.eq(q_base + self.khc), q_src.eq(q_src + g.in_c),
                             q_ok.eq(q_ok & (q_base + self.khc + g.in_c <= width) & (q_src + 2 * g.in_c <= nb))]
            with m.Else():
                m.d.sync += q_k.eq(q_k + 1)
            m.d.sync += lane.eq(lane + 1)
            with m.If(lane == width - 1):
                m.d.sync += [table.eq(0), prep.eq(1)]
        m.d.comb += [last_g0.eq(g.in_w <= p_max), gn0.eq(Mux(last_g0, n_of[g.in_w[:len(p_max)]], n_full))]
        with m.If(prep):
            # (the table complete: the first row, the wrap's step)
            m.d.sync += [prep.eq(0), running.eq(1), wrap_step.eq(g.in_c + t_step)]
            m.d.sync += first_row()

        # the group's bytes: from byte j of the two beats, lane L taking byte src[L] of them (the zero point in a
        # padding row), written where used and src[L] < gn
        rot = Signal(2 * self.data_width)
        m.d.comb += rot.eq(Cat(b0, b1) >> (j * 8))
        lanes = [Signal(8, name=f"lane{i}") for i in range(width)]
        strb = Signal(width)
        for i in range(width):
            m.d.comb += [lanes[i].eq(Mux(pad_row, g.zero_point.as_unsigned(), rot.word_select(src[i], 8))),
                         strb[i].eq(used[i] & (src[i] < gn))]
        avail = Signal()
        m.d.comb += avail.eq(have0 & ((j + gn <= nb) | have1))
        act = Signal()
        m.d.comb += act.eq(running & (pad_row | avail) & writes.ready)
        m.d.comb += [nw.eq(act & has_t), nw_addr.eq(self.base + addr_t[:self.addr_width] + pos[:self.addr_width]),
                     nw_f.eq(filled[:25])]
        with m.If(act):
            with m.If(has_t & ~last_t):
                m.d.sync += [kh_t.eq(kh_t - g.stride_h), oy_t.eq(oy_t + 1), addr_t.eq(addr_t + t_step),
                             last_t.eq((kh_t - g.stride_h < g.stride_h) | (oy_t + 2 >= g.out_h))]
            with m.Else():
                # the group is stored everywhere: the next group, from the row's first target
                m.d.sync += [kh_t.eq(kh0), oy_t.eq(oy0), addr_t.eq(base0), last_t.eq(last_t0)]
                m.d.comb += eat.eq(~pad_row)
                with m.If(~last_g):
                    left = px_left - p_max
                    m.d.sync += [px_left.eq(left), pos.eq(pos + step_full), last_g.eq(left <= p_max),
                                 gn.eq(Mux(left <= p_max, n_of[left[:len(p_max)]], n_full))]
                with m.Else():
                    # the row ends: the next row's first target; a stacked row complete at its kh = kernel_h - 1
                    completed = Signal()
                    new_filled = Signal(32)
                    m.d.comb += [completed.eq(has_t & kh0_last),
                                 new_filled.eq(Mux(completed, filled_next, filled)),
                                 nw_f.eq(new_filled[:25])]
                    m.d.sync += [px_left.eq(g.in_w), pos.eq(0), last_g.eq(last_g0), gn.eq(gn0),
                                 y.eq(y + 1), filled.eq(new_filled),
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
        # the stream: the group's bytes leave (b0 once passed: b1 moves down), beats come from the FIFO into the
        # first free place; at the input's end whatever is left is dropped
        j_next = Signal(range(2 * nb + 1))
        m.d.comb += j_next.eq(j + Mux(eat, gn, 0))
        with m.If(ending):
            m.d.sync += [have0.eq(0), have1.eq(0), j.eq(0)]
        with m.Elif(j_next >= nb):
            m.d.sync += j.eq(j_next - nb)
            with m.If(have1):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += [b0.eq(b1), b1.eq(beats.r_data), have1.eq(beats.r_rdy)]
            with m.Else():
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += [b0.eq(beats.r_data), have0.eq(beats.r_rdy)]
        with m.Else():
            m.d.sync += j.eq(j_next)
            with m.If(~have0):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += [b0.eq(beats.r_data), have0.eq(beats.r_rdy)]
            with m.Elif(~have1):
                m.d.comb += beats.r_en.eq(1)
                m.d.sync += [b1.eq(beats.r_data), have1.eq(beats.r_rdy)]
        # the writes; filled follows the writes that have landed, a cycle after each; done the walk's end and its
        # last write
        m.d.comb += [writes.i_en.eq(nw), writes.i_addr.eq(nw_addr), writes.i_data.eq(Cat(*lanes)),
                     writes.i_strb.eq(strb), writes.i_filled.eq(nw_f), writes.hold.eq(self.hold),
                     writes.clear.eq(self.start & ~running & ~prep & ~table),
                     self.w_en.eq(writes.w_en), self.w_addr.eq(writes.w_addr), self.w_data.eq(writes.w_data),
                     self.w_strb.eq(writes.w_strb), self.filled.eq(writes.filled)]
        fin = Signal()
        with m.If(running):
            m.d.sync += fin.eq(1)
        with m.Elif(fin & writes.drained):
            m.d.sync += [fin.eq(0), self.done.eq(1)]
        m.d.comb += self.busy.eq(table | prep | running | fin)
        return m
