"""The engine's window generator: a CONV_2D layer's array steps read from the input buffer, never stored as im2col.

The input (NHWC int8) sits in a :class:`hw.byte_buffer.ByteBuffer` from byte 0. On ``start`` the
generator takes the layer's ``geometry`` (:func:`geometry_layout`: the descriptor's shapes, strides,
dilations and top/left padding, the column tiles ``n_tiles`` and the input ``zero_point``) and
produces, on ``o``, the activation steps of the GEMM the array runs: row tile outer (``rows`` output
pixels, row-major over batch, height, width), column tile inner (the same steps again for each of
the ``n_tiles`` column tiles), then K in TFLite's (kh, kw, c) order. Element i of a step is tap k of
the tile's pixel i (the input zero point for a tap in the padding and for a pixel past the layer's
last).

How (docs/engine.md): for each row tile, column tile, *run* of the reduction axis (the ``kernel_w *
in_c`` contiguous bytes of one input row when ``dilation_w`` is 1, ``in_c`` bytes per kw otherwise)
and chunk of ``width`` bytes of the run, one buffer read per pixel of the tile: a *block* of
``rows`` vectors, which a :class:`hw.transpose.Transpose` turns into up to ``width`` steps. The
reads, their order and their padding masks are exactly :func:`host.windows.blocks`'s (the test
compares them read for read). A tap is padding when its input row is outside [0, in_h) or its
column outside [0, in_w); within a run the columns grow with the byte, so the real bytes of a
run are one interval, found with two clamps per read rather than a division per byte.

Rate: one read a cycle, so a layer whose runs are multiples of ``width`` bytes feeds the array a
step a cycle (with ``rows == width``); a shorter chunk costs ``rows`` read cycles for fewer steps
(:func:`host.windows.feed_efficiency`). Before its first read the generator spends
:attr:`WindowGenerator.SETUP` cycles on the layer's constants (products of the geometry, one
multiplier used in turn).

The input may still be loading: ``avail`` is how many of its ``total`` bytes are in the buffer (from
byte 0), and a read waits until the bytes it covers are in (or the whole input is: a read past
its end is padding). Contract: ``geometry`` holds from ``start`` until ``busy`` falls. The caller (the engine) has
checked that the input fits the buffer and that the output pixels' windows start inside the
padded input ((out - 1) * stride < in + pad, pad < the filter's extent), so every product and
sum fits 32 bits; a read of a padding byte may address anything (it is masked), a real byte is
always inside the input. ``busy`` is high from the cycle after ``start`` until the last vector has
gone into the transpose. At full rate (``o`` always ready, runs of whole reads) a layer's first step
is offered ``SETUP + rows + LATENCY`` cycles after the cycle of ``start``, and one follows every cycle.
"""

from amaranth import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .byte_buffer import ByteBuffer
from .products import latch_products, sequential_products, setup_cycles
from .transpose import Transpose

__all__ = ["WindowGenerator", "geometry_layout"]


def geometry_layout():
    """A layer's geometry as the generator takes it (the command descriptor's fields, same widths)."""
    return data.StructLayout({
        "batch": 16, "in_h": 16, "in_w": 16, "in_c": 16, "out_h": 16, "out_w": 16,
        "kernel_h": 8, "kernel_w": 8, "stride_h": 8, "stride_w": 8, "dilation_h": 8, "dilation_w": 8,
        "pad_top": 8, "pad_left": 8, "n_tiles": 16, "zero_point": signed(8), "pitch": 17,
    })


class WindowGenerator(wiring.Component):
    """See the module docstring. ``rows``: the array's rows (pixels a tile); ``width``: bytes a read (4, 8, 16
    or 32), the buffer's width; ``addr_width``: bits of the buffer's byte address; ``dsp``: the set-up
    multiplier's (:class:`hw.multiplier.Multiplier`)."""

    # The layer's constants, one product a cycle: (name, factor, factor), factors being geometry fields or
    # earlier products.
    # (A pixel takes ``pitch`` bytes of the buffer: the "c" of these names is the pitch but in kw_c, a run's length.)
    PRODUCTS = (
        ("ohw", "out_h", "out_w"), ("wc", "in_w", "pitch"), ("sw_c", "stride_w", "pitch"),
        ("dw_c", "dilation_w", "pitch"), ("kw_c", "kernel_w", "in_c"), ("pl_c", "pad_left", "pitch"),
        ("sh_wc", "stride_h", "wc"), ("dh_wc", "dilation_h", "wc"), ("pt_wc", "pad_top", "wc"),
        ("hwc", "in_h", "wc"), ("pixels", "batch", "ohw"),
    )
    SETUP = setup_cycles(PRODUCTS) + 1
    # Read pipeline: the read's operands registered, then the buffer's latency; reads are issued only
    # while the queue behind it has room for every read in flight.
    _STAGES = 1 + ByteBuffer.LATENCY
    _QUEUE = 8
    # Cycles from a block's last read to its first step offered on ``o``: the read pipeline, the queue, the
    # transpose.
    LATENCY = _STAGES + 2

    def __init__(self, rows=8, width=8, addr_width=16, *, dsp="generic"):
        if not (isinstance(rows, int) and rows >= 1 and width in (4, 8, 16, 32)
                and isinstance(addr_width, int) and (width - 1).bit_length() < addr_width <= 32):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"rows must be an integer >= 1, width 4, 8, 16 or 32 bytes and addr_width enough for "
                             f"one read and <= 32, got {rows!r}, {width!r}, {addr_width!r}")
        self.rows, self.width, self.addr_width, self.dsp = rows, width, addr_width, dsp
        super().__init__({
            "start": In(1), "geometry": In(geometry_layout()), "base": In(addr_width), "busy": Out(1),
            "avail": In(25), "total": In(25),
            "r_en": Out(1), "r_addr": Out(addr_width), "r_data": In(8 * width),
            "o": Out(stream.Signature(8 * rows)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, width = self.rows, self.width
        g = self.geometry
        m.submodules.transpose = transpose = Transpose(rows, width)
        wiring.connect(m, transpose.o, wiring.flipped(self.o))

        # --- the layer's constants, one product a cycle ---
        step = Signal(range(self.SETUP + 1))
        const, product = sequential_products(m, self.PRODUCTS, lambda name: g[name], step, dsp=self.dsp)
        run_len = Signal(32)      # bytes of a run: kernel_w pixels' channels if they are contiguous, else one's
        contiguous = Signal()
        m.d.comb += [contiguous.eq((g.dilation_w == 1) & (g.pitch == g.in_c)),
                     run_len.eq(Mux(contiguous, const["kw_c"], g.in_c))]

        # --- the pixel walker: the next output pixel's position, in the first block of each row tile ---
        p = Signal(32)            # the pixel's index
        ox, oy = Signal(16), Signal(16)
        bterm = Signal(32)        # b * hwc
        yy = Signal(signed(32))   # the pixel's first input row: oy * stride_h - pad_top
        yterm = Signal(signed(32))  # yy * wc
        xc = Signal(signed(32))   # its first input column, times in_c: (ox * stride_w - pad_left) * in_c

        def walker_reset():
            return [p.eq(0), ox.eq(0), oy.eq(0), bterm.eq(0), yy.eq(-g.pad_top), yterm.eq(-const["pt_wc"]),
                    xc.eq(-const["pl_c"])]

        # each tile's pixels, kept for the blocks after its first
        pix_base = Array(Signal(32, name=f"pix_base{i}") for i in range(rows))
        pix_y = Array(Signal(signed(32), name=f"pix_y{i}") for i in range(rows))
        pix_x = Array(Signal(signed(32), name=f"pix_x{i}") for i in range(rows))
        pix_ok = Array(Signal(name=f"pix_ok{i}") for i in range(rows))

        # --- the read counters: row tile, column tile, run (kh, kw), chunk, pixel ---
        running = Signal()
        i = Signal(range(rows))
        off = Signal(32)
        kh, kw = Signal(8), Signal(8)
        kh_rows = Signal(16)      # kh * dilation_h
        kh_wc = Signal(32)        # kh * dilation_h * wc
        kw_c = Signal(32)         # kw * dilation_w * pitch (the run's first tap)
        nt = Signal(16)
        first = Signal()          # the row tile's first block: the walker gives the pixels
        tile_p = Signal(32)       # the row tile's first pixel

        # --- the read pipeline ---
        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * width + (width + 1).bit_length(), depth=self._QUEUE)
        in_flight = Signal(range(self._STAGES + 1))
        issue = Signal()
        waiting = Signal()      # the read's bytes are not all loaded yet

        with m.FSM() as fsm:
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += step.eq(0)
                m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += step.eq(step + 1)
                latch_products(m, self.PRODUCTS, const, product, step)
                with m.If(step == self.SETUP - 1):
                    m.d.sync += [*walker_reset(), running.eq(1), i.eq(0), off.eq(0), kh.eq(0), kw.eq(0),
                                 kh_rows.eq(0), kh_wc.eq(0), kw_c.eq(0), nt.eq(0), first.eq(1), tile_p.eq(0)]
                    m.next = "RUN"
            with m.State("RUN"), m.If(~running & (in_flight == 0) & ~queue.r_rdy):
                m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))

        # the pixel of this read: the walker's in a tile's first block, else the one kept
        cur_base, cur_y, cur_x, cur_ok = Signal(32), Signal(signed(32)), Signal(signed(32)), Signal()
        with m.If(first):
            m.d.comb += [cur_base.eq(bterm + yterm + xc), cur_y.eq(yy), cur_x.eq(xc), cur_ok.eq(p < const["pixels"])]
        with m.Else():
            m.d.comb += [cur_base.eq(pix_base[i]), cur_y.eq(pix_y[i]), cur_x.eq(pix_x[i]), cur_ok.eq(pix_ok[i])]

        last_chunk = Signal()
        m.d.comb += last_chunk.eq(off + width >= run_len)
        last_run = Signal()
        m.d.comb += last_run.eq((kh == g.kernel_h - 1) & (contiguous | (kw == g.kernel_w - 1)))
        addr_now = Signal(32)
        m.d.comb += addr_now.eq(cur_base + kh_wc + kw_c + off)
        m.d.comb += [waiting.eq((self.avail < self.total) & (addr_now.as_signed() + width > self.avail)),
                     issue.eq(running & ~waiting & (queue.level + in_flight < self._QUEUE))]
        with m.If(issue):
            with m.If(first):
                m.d.sync += [pix_base[i].eq(cur_base), pix_y[i].eq(cur_y), pix_x[i].eq(cur_x), pix_ok[i].eq(cur_ok)]
                m.d.sync += p.eq(p + 1)
                with m.If(ox == g.out_w - 1):
                    m.d.sync += [ox.eq(0), xc.eq(-const["pl_c"])]
                    with m.If(oy == g.out_h - 1):
                        m.d.sync += [oy.eq(0), yy.eq(-g.pad_top), yterm.eq(-const["pt_wc"]),
                                     bterm.eq(bterm + const["hwc"])]
                    with m.Else():
                        m.d.sync += [oy.eq(oy + 1), yy.eq(yy + g.stride_h), yterm.eq(yterm + const["sh_wc"])]
                with m.Else():
                    m.d.sync += [ox.eq(ox + 1), xc.eq(xc + const["sw_c"])]
            with m.If(i == rows - 1):
                m.d.sync += [i.eq(0), first.eq(0)]
                with m.If(last_chunk):
                    m.d.sync += off.eq(0)
                    with m.If(~last_run & ~contiguous & (kw != g.kernel_w - 1)):
                        m.d.sync += [kw.eq(kw + 1), kw_c.eq(kw_c + const["dw_c"])]
                    with m.Elif(~last_run):
                        m.d.sync += [kw.eq(0), kw_c.eq(0), kh.eq(kh + 1), kh_rows.eq(kh_rows + g.dilation_h),
                                     kh_wc.eq(kh_wc + const["dh_wc"])]
                    with m.Else():
                        m.d.sync += [kw.eq(0), kw_c.eq(0), kh.eq(0), kh_rows.eq(0), kh_wc.eq(0)]
                        with m.If(nt != g.n_tiles - 1):
                            m.d.sync += nt.eq(nt + 1)
                        with m.Else():
                            m.d.sync += [nt.eq(0), tile_p.eq(tile_p + rows), first.eq(1)]
                            with m.If(tile_p + rows >= const["pixels"]):
                                m.d.sync += running.eq(0)
                with m.Else():
                    m.d.sync += off.eq(off + width)
            with m.Else():
                m.d.sync += i.eq(i + 1)

        # stage 1: the read's address, input row and first column (times in_c), registered
        s1_valid, s1_ok, s1_last = Signal(), Signal(), Signal()
        s1_addr, s1_off, s1_len = Signal(32), Signal(32), Signal(32)
        s1_y, s1_x = Signal(signed(33)), Signal(signed(33))
        s1_n = Signal(range(width + 1))
        remaining = Signal(32)
        m.d.comb += remaining.eq(run_len - off)
        m.d.sync += [s1_valid.eq(issue), s1_ok.eq(cur_ok), s1_last.eq(i == rows - 1),
                     s1_addr.eq(addr_now), s1_off.eq(off), s1_len.eq(run_len),
                     s1_y.eq(cur_y + kh_rows), s1_x.eq(cur_x + kw_c),
                     s1_n.eq(Mux(remaining < width, remaining, width))]
        m.d.comb += [self.r_en.eq(s1_valid), self.r_addr.eq((s1_addr + self.base)[:self.addr_width])]

        # the run's real bytes are [lo, hi): columns 0 .. in_w - 1 of the input
        lo, hi = Signal(signed(34)), Signal(signed(34))
        lo_raw, hi_raw = Signal(signed(34)), Signal(signed(34))
        m.d.comb += [lo_raw.eq(-s1_x), hi_raw.eq(const["wc"] - s1_x)]
        m.d.comb += [lo.eq(Mux(lo_raw < 0, 0, Mux(lo_raw > s1_len, s1_len, lo_raw))),
                     hi.eq(Mux(hi_raw < 0, 0, Mux(hi_raw > s1_len, s1_len, hi_raw)))]
        row_ok = Signal()
        m.d.comb += row_ok.eq(s1_ok & (s1_y >= 0) & (s1_y < g.in_h))
        pad = Signal(width)
        m.d.comb += pad.eq(Cat(~row_ok | (s1_off + j < lo) | (s1_off + j >= hi) for j in range(width)))

        # stages 2 and 3: the mask and steps alongside the buffer's read
        m1 = Signal(width + (width + 1).bit_length() + 1)
        m2 = Signal.like(m1)
        v1, v2 = Signal(), Signal()
        m.d.sync += [m1.eq(Cat(pad, Mux(s1_last, s1_n, 0), s1_last)), v1.eq(s1_valid), m2.eq(m1), v2.eq(v1)]
        m.d.sync += in_flight.eq(in_flight + issue - v2)
        zp = g.zero_point.as_unsigned()
        merged = Cat(Mux(m2[j], zp, self.r_data[8 * j:8 * j + 8]) for j in range(width))
        steps_bits = (width + 1).bit_length()
        m.d.comb += [queue.w_en.eq(v2), queue.w_data.eq(Cat(merged, m2[width:width + steps_bits]))]
        m.d.comb += [transpose.i.valid.eq(queue.r_rdy), transpose.i.payload.data.eq(queue.r_data[:8 * width]),
                     transpose.i.payload.steps.eq(queue.r_data[8 * width:]), queue.r_en.eq(transpose.i.ready)]
        return m
