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

Rate: one read a cycle (generated through registered stages into a read queue, issued once its bytes are
loaded), so a layer whose runs are multiples of ``width`` bytes feeds the array a
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
from .pipeline import Line, delay_lines, delayed
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
    # Read pipeline: a read generated, then six registered stages to the read queue, whose last two entries are
    # registers (``_GEN`` cycles from the counters to the head); issued, it is registered to the buffer, then the
    # buffer's latency; reads are issued only while the step queue behind has room for every read in flight.
    _GEN = 9
    _STAGES = 1 + ByteBuffer.LATENCY
    _QUEUE = 8
    # Cycles from a block's last read generated to its first step offered on ``o``: the generation, the read
    # pipeline, the step queue, the transpose (a generated read issues at once at full rate).
    LATENCY = _GEN + _STAGES + 2

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
        # (registers, set in the set-up)
        run_len = Signal(32)      # bytes of a run: kernel_w pixels' channels if they are contiguous, else one's
        contiguous = Signal()
        run_len_now = Signal(32)
        m.d.comb += run_len_now.eq(Mux(contiguous, const["kw_c"], g.in_c))

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

        # --- the read counters: row tile, column tile, run (kh, kw), chunk, pixel ---
        running = Signal()
        i = Signal(range(rows))
        off = Signal(32)
        remaining = Signal(32)    # run_len - off, kept with off
        kh, kw = Signal(8), Signal(8)
        kh_rows = Signal(16)      # kh * dilation_h
        kh_wc = Signal(32)        # kh * dilation_h * wc
        kw_c = Signal(32)         # kw * dilation_w * pitch (the run's first tap)
        nt = Signal(16)
        first = Signal()          # the row tile's first block: the walker gives the pixels
        tile_p = Signal(32)       # the row tile's first pixel
        # The counters' tests are registers, each set where its counter changes, from registers only: ox == out_w - 1,
        # oy == out_h - 1, kh == kernel_h - 1, kw == kernel_w - 1, nt == n_tiles - 1, the chunk is its run's last
        # (remaining <= width), the row tile is the layer's last (tile_p + rows >= pixels); and the same at a
        # counter's 0 (or a run's first chunk), set in the set-up.
        last_ox, last_oy, last_kh, last_kw, last_nt, last_chunk, last_tile = (Signal(name=f"last_{n}") for n in (
            "ox", "oy", "kh", "kw", "nt", "chunk", "tile"))
        one_ox, one_oy, one_kh, one_kw, one_nt, one_chunk = (Signal(name=f"one_{n}") for n in (
            "ox", "oy", "kh", "kw", "nt", "chunk"))

        # The reads are generated a cycle each into the read queue (`reads`), through registered stages that each
        # hold one adder; a read leaves the queue once its bytes are loaded and the step queue behind it has room.
        # Credits (registered) stand for the room, so no stage waits on a later one.
        reads_depth = 16
        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * width + (width + 1).bit_length(), depth=self._QUEUE)
        gen_credit = Signal(range(reads_depth + 1))     # reads generated, not yet issued, below the read queue's depth
        gen_ok = Signal()
        step_credit = Signal(range(self._QUEUE + 1))    # reads issued, not yet out of the step queue
        step_ok = Signal()
        adv = Signal()
        m.d.comb += adv.eq(running & gen_ok)
        issue = Signal()
        in_flight = Signal(range(reads_depth + self._STAGES + 1))   # generated, not yet in the step queue

        with m.FSM() as fsm:
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [step.eq(0), gen_credit.eq(reads_depth), gen_ok.eq(1), step_credit.eq(self._QUEUE),
                             step_ok.eq(1), contiguous.eq((g.dilation_w == 1) & (g.pitch == g.in_c)),
                             one_ox.eq(g.out_w == 1), one_oy.eq(g.out_h == 1), one_kh.eq(g.kernel_h == 1),
                             one_kw.eq(g.kernel_w == 1), one_nt.eq(g.n_tiles == 1)]
                m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += step.eq(step + 1)
                latch_products(m, self.PRODUCTS, const, product, step)
                # (kw_c is latched steps before the set-up's last: run_len and its test are final a cycle before)
                m.d.sync += [run_len.eq(run_len_now), one_chunk.eq(run_len_now <= width)]
                with m.If(step == self.SETUP - 1):
                    m.d.sync += [*walker_reset(), running.eq(1), i.eq(0), off.eq(0), remaining.eq(run_len),
                                 kh.eq(0), kw.eq(0),
                                 kh_rows.eq(0), kh_wc.eq(0), kw_c.eq(0), nt.eq(0), first.eq(1), tile_p.eq(0),
                                 last_chunk.eq(one_chunk), last_ox.eq(one_ox), last_oy.eq(one_oy),
                                 last_kh.eq(one_kh), last_kw.eq(one_kw), last_nt.eq(one_nt),
                                 last_tile.eq(const["pixels"] <= rows)]
                    m.next = "RUN"
            with m.State("RUN"), m.If(~running & (in_flight == 0) & ~queue.r_rdy):
                m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))

        last_run = Signal()
        m.d.comb += last_run.eq(last_kh & (contiguous | last_kw))
        with m.If(adv):
            with m.If(first):
                m.d.sync += p.eq(p + 1)
                with m.If(last_ox):
                    m.d.sync += [ox.eq(0), xc.eq(-const["pl_c"]), last_ox.eq(one_ox)]
                    with m.If(last_oy):
                        m.d.sync += [oy.eq(0), yy.eq(-g.pad_top), yterm.eq(-const["pt_wc"]),
                                     bterm.eq(bterm + const["hwc"]), last_oy.eq(one_oy)]
                    with m.Else():
                        m.d.sync += [oy.eq(oy + 1), yy.eq(yy + g.stride_h), yterm.eq(yterm + const["sh_wc"]),
                                     last_oy.eq(oy + 2 == g.out_h)]
                with m.Else():
                    m.d.sync += [ox.eq(ox + 1), xc.eq(xc + const["sw_c"]), last_ox.eq(ox + 2 == g.out_w)]
            with m.If(i == rows - 1):
                m.d.sync += [i.eq(0), first.eq(0)]
                with m.If(last_chunk):
                    m.d.sync += [off.eq(0), remaining.eq(run_len), last_chunk.eq(one_chunk)]
                    with m.If(~last_run & ~contiguous & ~last_kw):
                        m.d.sync += [kw.eq(kw + 1), kw_c.eq(kw_c + const["dw_c"]), last_kw.eq(kw + 2 == g.kernel_w)]
                    with m.Elif(~last_run):
                        m.d.sync += [kw.eq(0), kw_c.eq(0), kh.eq(kh + 1), kh_rows.eq(kh_rows + g.dilation_h),
                                     kh_wc.eq(kh_wc + const["dh_wc"]), last_kw.eq(one_kw),
                                     last_kh.eq(kh + 2 == g.kernel_h)]
                    with m.Else():
                        m.d.sync += [kw.eq(0), kw_c.eq(0), kh.eq(0), kh_rows.eq(0), kh_wc.eq(0), last_kw.eq(one_kw),
                                     last_kh.eq(one_kh)]
                        with m.If(~last_nt):
                            m.d.sync += [nt.eq(nt + 1), last_nt.eq(nt + 2 == g.n_tiles)]
                        with m.Else():
                            m.d.sync += [nt.eq(0), tile_p.eq(tile_p + rows), first.eq(1), last_nt.eq(one_nt),
                                         last_tile.eq(tile_p + 2 * rows >= const["pixels"])]
                            with m.If(last_tile):
                                m.d.sync += running.eq(0)
                with m.Else():
                    m.d.sync += [off.eq(off + width), remaining.eq(remaining - width),
                                 last_chunk.eq(remaining <= 2 * width)]
            with m.Else():
                m.d.sync += i.eq(i + 1)

        def reg(value, name):
            return delayed(m, value, 1, name)

        # G1: the read's terms, copied (every cycle: the counters move on after a read)
        g1_v, g1_first, g1_i = reg(adv, "g1_v"), reg(first, "g1_first"), reg(i, "g1_i")
        g1_bt, g1_xc, g1_yy = reg((bterm + yterm)[:32], "g1_bt"), reg(xc, "g1_xc"), reg(yy, "g1_yy")
        g1_ok = reg(p < const["pixels"], "g1_ok")
        g1_tap = reg((kh_wc + kw_c)[:32], "g1_tap")
        g1_off, g1_khr, g1_kwc = reg(off, "g1_off"), reg(kh_rows, "g1_khr"), reg(kw_c, "g1_kwc")
        g1_last = reg(i == rows - 1, "g1_last")
        g1_n = reg(Mux(remaining < width, remaining, width)[:(width + 1).bit_length()], "g1_n")
        # G2: the pixel (the walker's in a tile's first block, kept for the blocks after it), the run's offset
        pix_base = Array(Signal(32, name=f"pix_base{k}") for k in range(rows))
        pix_y = Array(Signal(signed(32), name=f"pix_y{k}") for k in range(rows))
        pix_x = Array(Signal(signed(32), name=f"pix_x{k}") for k in range(rows))
        pix_ok = Array(Signal(name=f"pix_ok{k}") for k in range(rows))
        g2_base, g2_y, g2_x, g2_ok = Signal(32), Signal(signed(32)), Signal(signed(32)), Signal()
        with m.If(g1_first):
            m.d.sync += [g2_base.eq(g1_bt + g1_xc), g2_y.eq(g1_yy), g2_x.eq(g1_xc), g2_ok.eq(g1_ok)]
            with m.If(g1_v):
                m.d.sync += [pix_base[g1_i].eq(g1_bt + g1_xc), pix_y[g1_i].eq(g1_yy), pix_x[g1_i].eq(g1_xc),
                             pix_ok[g1_i].eq(g1_ok)]
        with m.Else():
            m.d.sync += [g2_base.eq(pix_base[g1_i]), g2_y.eq(pix_y[g1_i]), g2_x.eq(pix_x[g1_i]),
                         g2_ok.eq(pix_ok[g1_i])]
        g2_v, g2_tap = reg(g1_v, "g2_v"), reg((g1_tap + g1_off)[:32], "g2_tap")
        # (the run's first column and the read's offset in it, as one term: the padding is found relative to the read)
        g2_khr, g2_kwo = reg(g1_khr, "g2_khr"), reg(g1_kwc + g1_off, "g2_kwo")
        g2_last, g2_n = reg(g1_last, "g2_last"), reg(g1_n, "g2_n")
        # G3: the read's address, input row and first column (times in_c)
        g3_v, g3_ok = reg(g2_v, "g3_v"), reg(g2_ok, "g3_ok")
        g3_last, g3_n = reg(g2_last, "g3_last"), reg(g2_n, "g3_n")
        g3_addr = reg((g2_base + g2_tap)[:32], "g3_addr")
        g3_y, g3_x = reg(g2_y + g2_khr, "g3_y"), reg(g2_x + g2_kwo, "g3_x")
        # G4: the buffer address, the read's end (for the wait) and the read's real bytes [lo, hi) relative to its
        # first: the columns 0 .. in_w - 1 (times in_c) less the read's first column g3_x
        g4_v, g4_last, g4_n = reg(g3_v, "g4_v"), reg(g3_last, "g4_last"), reg(g3_n, "g4_n")
        g4_raddr = reg((g3_addr + self.base)[:self.addr_width], "g4_raddr")
        g4_end = reg(g3_addr.as_signed() + width, "g4_end")
        g4_row_ok = reg(g3_ok & (g3_y >= 0) & (g3_y < g.in_h), "g4_row_ok")
        g4_lo_raw, g4_hi_raw = reg(-g3_x, "g4_lo_raw"), reg(const["wc"] - g3_x, "g4_hi_raw")
        # G5: the clamps to the read's n bytes (beyond n is the run's end: padding)
        lo = reg(Mux(g4_lo_raw < 0, 0, Mux(g4_lo_raw > g4_n, g4_n, g4_lo_raw[:len(g4_n)])), "g5_lo")
        hi = reg(Mux(g4_hi_raw < 0, 0, Mux(g4_hi_raw > g4_n, g4_n, g4_hi_raw[:len(g4_n)])), "g5_hi")
        g5_v, g5_last, g5_n = reg(g4_v, "g5_v"), reg(g4_last, "g5_last"), reg(g4_n, "g5_n")
        g5_raddr, g5_end, g5_row_ok = reg(g4_raddr, "g5_raddr"), reg(g4_end, "g5_end"), reg(g4_row_ok, "g5_row_ok")
        # G6: the read's padding mask, then the read queue
        pad = reg(Cat(~g5_row_ok | (j < lo) | (j >= hi) for j in range(width)), "g6_pad")
        g6_v, g6_last, g6_n = reg(g5_v, "g6_v"), reg(g5_last, "g6_last"), reg(g5_n, "g6_n")
        g6_raddr, g6_end = reg(g5_raddr, "g6_raddr"), reg(g5_end, "g6_end")
        read = data.StructLayout({"raddr": self.addr_width, "end": signed(len(g6_end)), "pad": width, "last": 1,
                                  "n": len(g6_n)})
        # the read queue: reads_depth - 1 entries, then the entry before the head and the head in flip-flops
        reads = m.submodules.reads = fifo.SyncFIFO(width=read.size, depth=reads_depth - 1)
        entry = Signal(read)
        m.d.comb += [entry.raddr.eq(g6_raddr), entry.end.eq(g6_end), entry.pad.eq(pad), entry.last.eq(g6_last),
                     entry.n.eq(g6_n), reads.w_en.eq(g6_v), reads.w_data.eq(entry)]

        # the issue: the head, once its bytes are in (or the whole input is: past its end is padding). Both tests are
        # registers a cycle old (avail only grows during a layer, so they are only ever late): the head's compares the
        # entry it takes as it takes it, then itself every cycle, so no comparison is on the issue's path. The entry
        # before the head (`pre`) is a register too, so that the comparison starts from flip-flops, not from the
        # queue's memory.
        head, head_v, head_in, all_in = Signal(read), Signal(), Signal(), Signal()
        pre, pre_v = Signal(read), Signal()
        refill, pre_refill = Signal(), Signal()
        m.d.comb += [refill.eq(~head_v | issue), pre_refill.eq(~pre_v | refill), reads.r_en.eq(pre_refill)]
        m.d.sync += all_in.eq(self.avail >= self.total)
        with m.If(pre_refill):
            m.d.sync += [pre.eq(reads.r_data), pre_v.eq(reads.r_rdy)]
        with m.If(refill):
            m.d.sync += [head.eq(pre), head_v.eq(pre_v), head_in.eq(pre.end <= self.avail)]
        with m.Else():
            m.d.sync += head_in.eq(head.end <= self.avail)
        m.d.comb += issue.eq(head_v & step_ok & (all_in | head_in))
        with m.If(~fsm.ongoing("IDLE")):
            # each credit's next value for both outcomes of the issue, from registers; the issue picks one last
            taken = queue.r_en & queue.r_rdy
            gen_base, step_base = gen_credit - adv, step_credit + taken
            m.d.sync += [gen_credit.eq(gen_base + issue), step_credit.eq(step_base - issue),
                         gen_ok.eq(Mux(issue, gen_base + 1 != 0, gen_base != 0)),
                         step_ok.eq(Mux(issue, step_base - 1 != 0, step_base != 0))]
        # the read, registered to the buffer
        r_en, r_addr = reg(issue, "s1_en"), reg(head.raddr, "s1_addr")
        m.d.comb += [self.r_en.eq(r_en), self.r_addr.eq(r_addr)]

        # the mask and steps alongside the buffer's read
        m2, v2 = delay_lines(m, self._STAGES, [Line(Cat(head.pad, Mux(head.last, head.n, 0), head.last), "mask"),
                                               Line(issue, "valid")])
        m.d.sync += in_flight.eq(in_flight + adv - v2)
        zp = g.zero_point.as_unsigned()
        merged = Cat(Mux(m2[j], zp, self.r_data[8 * j:8 * j + 8]) for j in range(width))
        steps_bits = (width + 1).bit_length()
        m.d.comb += [queue.w_en.eq(v2), queue.w_data.eq(Cat(merged, m2[width:width + steps_bits]))]
        m.d.comb += [transpose.i.valid.eq(queue.r_rdy), transpose.i.payload.data.eq(queue.r_data[:8 * width]),
                     transpose.i.payload.steps.eq(queue.r_data[8 * width:]), queue.r_en.eq(transpose.i.ready)]
        return m
