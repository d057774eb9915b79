"""The engine's depthwise window generator: a DEPTHWISE_CONV_2D layer's array steps, read from the input buffer's banks.

In the array's depthwise mode (:mod:`hw.array`) a step is ``rows x cols`` bytes: cell (i, j) takes tap
k of output pixel i in output channel ``nt * cols + j``, which reads input channel ``(nt * cols + j) //
depth_multiplier``. So a step needs, for each of the tile's ``rows`` pixels, the ``cols`` channels of
one tap: ``rows`` reads at unrelated addresses in one cycle. The input buffer
(:class:`hw.byte_buffer.ByteBuffer` with ``bank_port``) has ``banks`` banks of ``bank_bytes`` bytes
with a row address each. A pixel's read takes one bank, or two when it does not start on a bank's
first byte; each bank it takes is a *half-read*, served on its own. A bank serves one half-read a
cycle, so a step takes as many cycles as the bank most used by its half-reads (at least one), the
half-reads of each bank in pixel order: the fewest cycles any schedule could take.

The input is stored with a *pitch* of :func:`input_pitch` bytes a pixel (the loader leaves the gap): when
``in_c`` is an even number of banks, one bank more, so that the pixel pitch is an odd number of
banks and consecutive pixels start in different banks. A row tile's pixels at stride 1 are
consecutive input pixels at every tap (but where the tile wraps to the next output row of a VALID
layer), so a step is one cycle. At stride 2 consecutive pixels of a plain layout would fall in half
the banks; so a layer of stride 2 whose pixels are whole bus words holds its input *split*
(:class:`InputLayout`): in that direction the even rows (columns) first, then the odd ones, so that
the pixels a tap reads are again consecutive in the buffer, and a step is one cycle again.
:func:`host.windows.depthwise_step_cycles` counts every step's cycles.

Order (the weight streamer's and the core's): row tile outer (``rows`` output pixels, row-major over
batch, height, width), column tile, then K in TFLite's (kh, kw) order. A tap in the padding, a
pixel past the layer's last, reads the input zero point.

Pipeline (each stage registered, so that no path crosses more than one adder or a few LUTs): the issue of a step
(its pixels, tap and column tile) with a credit for the schedule queue; the reads' addresses; their banks and
whether they are real; each half-read's rank among its bank's; the step's cycle count; the schedule queue; the
serve stage, one cycle a round, that drives the banks' rows; the buffer; each read's two banks; the read's bytes
from its first (a rotation by the read's offset in its bank); each lane's byte among them (the depth multiplier's
channel, at most ``cols - 1`` bytes on); the step assembled and queued. Two selections of eight ways rather than
one of sixteen, the second's choice the same for every read. The serve stage takes a step only with a free
place in the output queue, so nothing ever has to stop mid-pipeline.

``geometry`` (:func:`geometry_layout`) and ``base`` (the input's first byte in the buffer) hold from
``start`` until ``busy`` falls. ``avail`` counts the input's bytes in the buffer as if in NHWC order at the pitch
(however :class:`InputLayout` places them, the loaders write whole pixels in that order): a row tile waits until the
input rows its windows reach are in.
Before its first step the generator spends :attr:`SETUP` cycles on the layer's constants. ``busy`` is
high from the cycle after ``start`` until the last step is taken. At full rate (``o`` always ready, the input in the
buffer: a tile whose rows are still arriving is tested on registered comparisons, a cycle or two late) a layer's
first step is offered ``SETUP + rows + LATENCY + cycles`` cycles after the cycle of ``start``
(the walker's ``rows`` pixels, the tile taken, the pipeline, the step's own cycles), and each next
step its own cycles later.
"""

import dataclasses

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .byte_buffer import ByteBuffer
from .pipeline import KEEP_APART, delayed, popcount
from .products import LAG, latch_products, schedule, sequential_products, setup_cycles

__all__ = ["DepthwiseWindows", "InputLayout", "geometry_layout", "input_pitch", "input_split"]


def geometry_layout():
    """A depthwise layer's geometry as the generator takes it: the command descriptor's fields, the column tiles,
    the input zero point and the input's layout in the buffer (:class:`InputLayout`: the pitch, which stands for the
    channels, and the splits)."""
    return data.StructLayout({
        "batch": 16, "in_h": 16, "in_w": 16, "out_h": 16, "out_w": 16,
        "depth_multiplier": 16, "kernel_h": 8, "kernel_w": 8, "stride_h": 8, "stride_w": 8, "dilation_h": 8,
        "dilation_w": 8, "pad_top": 8, "pad_left": 8, "n_tiles": 16, "zero_point": signed(8), "pitch": 17,
        "split_h": 1, "split_w": 1,
    })


def input_pitch(in_c, bank_bytes, beat_bytes):
    """Bytes a pixel of a depthwise layer's input takes in the buffer: ``in_c``, one bank more when ``in_c`` is an
    even number of banks (and whole beats, so that a loaded beat never straddles two pixels). Works on ints and on
    Amaranth values alike."""
    if isinstance(in_c, int):
        return in_c + bank_bytes if in_c % (2 * bank_bytes) == 0 and in_c % beat_bytes == 0 else in_c
    low = (max(2 * bank_bytes, beat_bytes) - 1).bit_length()      # both powers of two: the larger divides
    return Mux(in_c[:low] == 0, in_c + bank_bytes, in_c)


def input_split(in_c, stride_h, stride_w, beat_bytes):
    """Whether a DEPTHWISE_CONV_2D's input is held split by row parity and by column parity (:class:`InputLayout`):
    in a direction of stride 2, when a pixel is whole bus words (the loaders place a pixel's words, never part of
    one). Works on ints and on Amaranth values alike: (split_h, split_w)."""
    if isinstance(in_c, int):
        aligned = in_c % beat_bytes == 0
        return stride_h == 2 and aligned, stride_w == 2 and aligned
    aligned = in_c[:(beat_bytes - 1).bit_length()] == 0
    return (stride_h == 2) & aligned, (stride_w == 2) & aligned


@dataclasses.dataclass(frozen=True)
class InputLayout:
    """Where a layer's input pixel (b, y, x) lies in the input buffer, from the input's first byte: ``pitch`` bytes a
    pixel; split by column parity (``split_w``: the even columns of every row, then the odd ones, each part ``ceil(in_w
    / 2)`` pixels wide) and by row parity (``split_h``: the even rows, then the odd ones, ``ceil(in_h / 2)`` rows
    each), columns inside rows inside images. Unsplit, the plain NHWC order at the pitch. A tap of a stride-2 layer then
    reads, for consecutive output pixels, consecutive stored pixels of one part, and, where a row tile wraps to the
    next output row, the next stored row of that part (a SAME layer's ``out_w`` is the part's width): the pixels of a
    step start in different banks at any tap (the pitch an odd number of banks)."""

    in_h: int
    in_w: int
    pitch: int
    split_h: bool = False
    split_w: bool = False

    @property
    def row_bytes(self):
        """A stored row: a part's pixels."""
        return ((self.in_w + 1) // 2 if self.split_w else self.in_w) * self.pitch

    @property
    def odd_w(self):
        """Where the odd columns start: an image's stored rows of one row part."""
        return ((self.in_h + 1) // 2 if self.split_h else self.in_h) * self.row_bytes

    @property
    def odd_h(self):
        """Where the odd rows start."""
        return self.odd_w << self.split_w

    @property
    def image_bytes(self):
        """An image's bytes (a split direction of odd size leaves a pixel's gap at each row's or part's end)."""
        return self.odd_h << self.split_h

    def address(self, b, y, x):
        ys = (y & 1) * self.odd_h + (y >> 1) * self.row_bytes if self.split_h else y * self.row_bytes
        xs = (x & 1) * self.odd_w + (x >> 1) * self.pitch if self.split_w else x * self.pitch
        return b * self.image_bytes + ys + xs


def _mux_tree(sel, items):
    """``items[sel]`` as a balanced tree of two-way selections on ``sel``'s bits (``items`` past the last repeat it)."""
    items = list(items)
    for bit in range(len(sel)):
        items = [Mux(sel[bit], items[k + 1] if k + 1 < len(items) else items[k], items[k])
                 for k in range(0, len(items), 2)]
    return items[0]


class DepthwiseWindows(wiring.Component):
    """See the module docstring. ``rows``, ``cols``: the array's; the input buffer's ``banks`` of ``bank_bytes`` bytes
    (``bank_bytes >= cols``, ``banks >= rows``, both at least 2), ``addr_width`` bits of byte address and ``dsp``
    the set-up multiplier's (:class:`hw.multiplier.Multiplier`)."""

    # The layer's constants, one product a step (as hw.window_gen, scheduled by hw.products): (name, factor, factor).
    # The addresses' (InputLayout: a stored row rp, the odd columns' part odd_w, an image img) and, for the test of
    # the rows in, the plain NHWC order's (wp, hwp, the *_lin). In a split direction an output pixel steps one stored
    # pixel (row), and a tap's offset d (kw * dilation_w - pad_left) is its parity's part plus floor(d / 2) stored
    # pixels: the operands *_part, step_*, tap_*, lead_* (the halves, rounded as floor(d / 2) needs) and parts. (A
    # product's second factor is 17 bits: a wide one goes first.)
    PRODUCTS = (
        ("rp", "w_part", "pitch"), ("wp", "in_w", "pitch"), ("ext_h", "kernel_h", "dilation_h"),
        ("ohw", "out_h", "out_w"), ("sw_p", "step_w", "pitch"), ("dw_p", "tap_w", "pitch"),
        ("pl_p", "lead_w", "pitch"), ("odd_w", "rp", "h_part"), ("hwp", "wp", "in_h"), ("sh_wp", "rp", "step_h"),
        ("dh_wp", "rp", "tap_h"), ("pt_wp", "rp", "lead_h"), ("sh_lin", "wp", "stride_h"), ("pt_lin", "wp", "pad_top"),
        ("img", "odd_w", "parts"), ("ext_wp", "wp", "ext_h"), ("pixels", "ohw", "batch"), ("lin", "hwp", "batch"),
    )
    # the products the taps' constants are summed from
    _TAP_PRODUCTS = ("rp", "dw_p", "pl_p", "odd_w", "dh_wp", "pt_wp")
    _SCHED = 16         # steps issued and not yet served (the schedule queue's depth)
    _QUEUE = 16         # steps served and not yet taken (the output queue's depth)
    # issue to the schedule queue (copies, addresses, edges, banks, ranks, cycle count), the queue and the serve
    # register, the serve stage's two, the buffer, the banks' pair, the reads' rotations, the lanes' bytes, then the
    # output queue
    LATENCY = 6 + 2 + 2 + ByteBuffer.G_LATENCY + 3 + 1

    def __init__(self, rows=8, cols=8, *, banks=8, bank_bytes=8, addr_width=16, dsp="generic"):
        pow2 = lambda n: isinstance(n, int) and n >= 2 and n & (n - 1) == 0  # noqa: E731
        if not (isinstance(rows, int) and isinstance(cols, int) and 1 <= rows <= banks and 1 <= cols <= bank_bytes
                and pow2(banks) and pow2(bank_bytes) and isinstance(addr_width, int)
                and (banks * bank_bytes - 1).bit_length() < addr_width <= 32):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"need rows <= banks and cols <= bank_bytes (powers of two, at least 2), addr_width "
                             f"beyond a row of the buffer and <= 32, got rows {rows!r}, cols {cols!r}, banks "
                             f"{banks!r}, bank_bytes {bank_bytes!r}, addr_width {addr_width!r}")
        self.rows, self.cols, self.banks, self.bank_bytes, self.addr_width = rows, cols, banks, bank_bytes, addr_width
        self.dsp = dsp
        self.lanes = banks * bank_bytes
        self.row_bits = addr_width - (self.lanes - 1).bit_length()
        # the layer's constants (pipelined, then the taps' sums of them, three registers on), and the depth
        # multiplier's lane offsets (a lane a cycle)
        ready = max(schedule(self.PRODUCTS)[name] for name in self._TAP_PRODUCTS) + LAG + 1
        self.SETUP = max(setup_cycles(self.PRODUCTS), ready + 3, cols) + 1
        super().__init__({
            "start": In(1), "geometry": In(geometry_layout()), "base": In(addr_width), "busy": Out(1),
            "avail": In(25),
            "g_en": Out(1), "g_rows": Out(data.ArrayLayout(self.row_bits, banks)), "g_data": In(8 * self.lanes),
            "o": Out(stream.Signature(8 * rows * cols)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, banks, bb, aw = self.rows, self.cols, self.banks, self.bank_bytes, self.addr_width
        g = self.geometry
        obits, gbits = (bb - 1).bit_length(), (banks - 1).bit_length()
        lane_bits = obits + gbits
        rbits = max((rows - 1).bit_length(), 1)     # a half-read's rank among its bank's
        rw = self.row_bits

        def reg(value, name):
            return delayed(m, value, 1, name)

        # --- the layer's constants, one product a cycle ---
        step = Signal(range(self.SETUP + 1))
        sh, sw = g.split_h, g.split_w
        operands = {"w_part": Mux(sw, (g.in_w + 1) >> 1, g.in_w), "h_part": Mux(sh, (g.in_h + 1) >> 1, g.in_h),
                    "step_w": Mux(sw, 1, g.stride_w), "step_h": Mux(sh, 1, g.stride_h),
                    "tap_w": Mux(sw, g.dilation_w >> 1, g.dilation_w),
                    "tap_h": Mux(sh, g.dilation_h >> 1, g.dilation_h),
                    "lead_w": Mux(sw, (g.pad_left + 1) >> 1, g.pad_left),
                    "lead_h": Mux(sh, (g.pad_top + 1) >> 1, g.pad_top), "parts": Cat(~sh & ~sw, sh ^ sw, sh & sw)}
        const, product = sequential_products(m, self.PRODUCTS, lambda name: operands[name] if name in operands
                                             else g[name], step, dsp=self.dsp)
        # the taps' constants from the products (each a register on its operands; final three cycles after the last
        # product). A tap's offset moves by dx0 (dy0) from an even offset, dx1 (dy1) from an odd one; tx0 (ty0) is
        # the first tap's, t00 both, dy0t / dy1t a row's step with its first column's offset. Unsplit, d * pitch (wp).
        odd_h = Signal(aw)
        flip_x, flip_y = sw & g.dilation_w[0], sh & g.dilation_h[0]   # a tap's step changes its offset's parity
        dx0, dx1, dy0, dy1, tx0, ty0, t00, dy0t, dy1t = (Signal(aw, name=n) for n in (
            "dx0", "dx1", "dy0", "dy1", "tx0", "ty0", "t00", "dy0t", "dy1t"))
        m.d.sync += [odd_h.eq(Mux(sw, const["odd_w"] << 1, const["odd_w"])),
                     dx0.eq(const["dw_p"] + Mux(flip_x, const["odd_w"], 0)),
                     dx1.eq(const["dw_p"] + Mux(flip_x, g.pitch - const["odd_w"], 0)),
                     dy0.eq(const["dh_wp"] + Mux(flip_y, odd_h, 0)),
                     dy1.eq(const["dh_wp"] + Mux(flip_y, const["rp"] - odd_h, 0)),
                     tx0.eq(Mux(sw & g.pad_left[0], const["odd_w"], 0) - const["pl_p"]),
                     ty0.eq(Mux(sh & g.pad_top[0], odd_h, 0) - const["pt_wp"]),
                     t00.eq(ty0 + tx0), dy0t.eq(dy0 + tx0), dy1t.eq(dy1 + tx0)]

        # --- the depth multiplier: output channel c reads input channel c // m. Per lane j of the current column
        # tile, q[j] = (nt * cols + j) // m and r[j] the remainder; a column tile further adds cols = a * m + b,
        # which carries into q exactly when r >= m - b ---
        mult = g.depth_multiplier
        q = [Signal(16, name=f"q{j}") for j in range(cols)]
        r = [Signal(16, name=f"r{j}") for j in range(cols)]
        q0 = [Signal(16, name=f"q0_{j}") for j in range(cols)]    # the first column tile's
        r0 = [Signal(16, name=f"r0_{j}") for j in range(cols)]
        adv_a, adv_a1, adv_b, thr = Signal(16), Signal(16), Signal(16), Signal(16)  # cols // m (+ 1), cols % m, m - b
        # the carry's next test, a comparison of r alone: r - thr >= thr is r >= 2 * thr, r + b >= thr is r >= m - 2b
        thr2, thr_b = Signal(17), Signal(signed(18))
        lane_q, lane_r = Signal(16), Signal(16)     # lane j's, during the set-up
        mult_m1 = Signal(16)                        # depth_multiplier - 1 (lane_r's wrap), set at start

        # --- the pixel walker: the next row tile's pixels, one a cycle, while the current tile runs ---
        nxt_base = [Signal(aw, name=f"nxt_base{i}") for i in range(rows)]     # buffer address, less the tap's
        nxt_y = [Signal(signed(18), name=f"nxt_y{i}") for i in range(rows)]
        nxt_x = [Signal(signed(18), name=f"nxt_x{i}") for i in range(rows)]
        nxt_ok = Signal(rows)
        nxt_bound = Signal(signed(34))              # the buffer's bytes (from base) the tile's windows reach
        nxt_full = Signal()
        w_i = Signal(range(rows))
        walking = Signal()
        # walking & ~nxt_full as registers (set with the two): the walker's step, whose loads are many, one copy for
        # its counters and one for the tile's pixels
        walk = Signal(attrs=KEEP_APART)
        walk_d = Signal(attrs=KEEP_APART)
        wpix = Signal(32)
        ox, oy = Signal(16), Signal(16)
        a_bterm, a_yterm = Signal(aw), Signal(aw)   # the pixel's stored place: b*img + oy*sh_wp (+ xterm: ox*sw_p)
        # the walker's tests, registers kept with what they test: ox == out_w - 1, oy == out_h - 1, wpix < pixels
        w_last_ox, w_last_oy, w_ok = Signal(), Signal(), Signal()
        yy, xx = Signal(signed(18), name="yy"), Signal(signed(18), name="xx")
        # b*hwp, y*wp in the plain order (the rows the windows reach); the column's stored offset
        bterm, yterm, xterm = Signal(32), Signal(signed(34)), Signal(aw)

        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * rows * cols, depth=self._QUEUE)
        outstanding = Signal(range(self._SCHED + self._QUEUE + 1))  # steps issued, not yet taken from `o`
        sched_credit = Signal(range(self._SCHED + 1))
        credit_ok = Signal()                        # sched_credit != 0, registered with it
        out_credit = Signal(range(self._QUEUE + 1))
        out_ok = Signal()                           # out_credit != 0, registered with it
        n_tiles_2 = Signal(17)                      # n_tiles - 2: nt + 2 == n_tiles is nt == n_tiles_2, no adder
        running = Signal()
        with m.FSM() as fsm:
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [step.eq(0), lane_q.eq(0), lane_r.eq(0), adv_a.eq(0), adv_b.eq(cols),
                             sched_credit.eq(self._SCHED), out_credit.eq(self._QUEUE), out_ok.eq(1),
                             mult_m1.eq(mult - 1),
                             n_tiles_2.eq(g.n_tiles - 2)]
                m.next = "SETUP"
            with m.State("SETUP"):
                m.d.sync += step.eq(step + 1)
                latch_products(m, self.PRODUCTS, const, product, step)
                # the lanes' first quotients and remainders, one a cycle; cols // m by subtraction meanwhile
                with m.If(adv_b >= mult):
                    m.d.sync += [adv_b.eq(adv_b - mult), adv_a.eq(adv_a + 1)]
                for j in range(cols):
                    with m.If(step == j):
                        m.d.sync += [q0[j].eq(lane_q), r0[j].eq(lane_r)]
                with m.If(lane_r == mult_m1):
                    m.d.sync += [lane_r.eq(0), lane_q.eq(lane_q + 1)]
                with m.Else():
                    m.d.sync += lane_r.eq(lane_r + 1)
                with m.If(step == self.SETUP - 1):
                    m.d.sync += [w_last_ox.eq(g.out_w == 1), w_last_oy.eq(g.out_h == 1),
                                 w_ok.eq(const["pixels"] != 0)]
                    m.d.sync += [walking.eq(1), wpix.eq(0), ox.eq(0), oy.eq(0), yy.eq(-g.pad_top),
                                 xx.eq(-g.pad_left), bterm.eq(0), yterm.eq(-const["pt_lin"]), xterm.eq(0),
                                 a_bterm.eq(0), a_yterm.eq(0), w_i.eq(0), nxt_full.eq(0),
                                 walk.eq(1), walk_d.eq(1)]
                    m.next = "RUN"
            with m.State("RUN"), m.If(~running):
                m.next = "DRAIN"
            with m.State("DRAIN"), m.If(outstanding == 0):
                m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        # (adv_a, adv_b are final a cycle into RUN; their first use is a column tile's end, rows cycles on at least)
        m.d.sync += [adv_a1.eq(adv_a + 1), thr.eq(mult - adv_b), thr2.eq((mult - adv_b) << 1),
                     thr_b.eq(mult - (adv_b << 1))]

        # the walker fills the next tile's pixels while it is not full
        ok = w_ok
        with m.If(walk_d):
            m.d.sync += [Array(nxt_base)[w_i].eq(a_bterm + a_yterm + xterm), Array(nxt_y)[w_i].eq(yy),
                         Array(nxt_x)[w_i].eq(xx), nxt_ok.bit_select(w_i, 1).eq(ok)]
            with m.If(ok):
                m.d.sync += nxt_bound.eq(bterm + yterm + const["ext_wp"])
        with m.If(walk):
            m.d.sync += [wpix.eq(wpix + 1), w_ok.eq(wpix + 1 < const["pixels"])]
            with m.If(w_i == rows - 1):
                m.d.sync += [w_i.eq(0), nxt_full.eq(1), walk.eq(0), walk_d.eq(0)]
            with m.Else():
                m.d.sync += w_i.eq(w_i + 1)
            with m.If(w_last_ox):
                m.d.sync += [ox.eq(0), xx.eq(-g.pad_left), xterm.eq(0), w_last_ox.eq(g.out_w == 1)]
                with m.If(w_last_oy):
                    m.d.sync += [oy.eq(0), yy.eq(-g.pad_top), yterm.eq(-const["pt_lin"]),
                                 bterm.eq(bterm + const["hwp"]),
                                 a_yterm.eq(0), a_bterm.eq(a_bterm + const["img"]), w_last_oy.eq(g.out_h == 1)]
                with m.Else():
                    m.d.sync += [oy.eq(oy + 1), yy.eq(yy + g.stride_h), yterm.eq(yterm + const["sh_lin"]),
                                 a_yterm.eq(a_yterm + const["sh_wp"]), w_last_oy.eq(oy + 2 == g.out_h)]
            with m.Else():
                m.d.sync += [ox.eq(ox + 1), xx.eq(xx + g.stride_w), xterm.eq(xterm + const["sw_p"]),
                             w_last_ox.eq(ox + 2 == g.out_w)]
            # the tile after the last: nothing more to walk
            with m.If((w_i == 0) & ~ok):
                m.d.sync += [walking.eq(0), nxt_full.eq(0), walk.eq(0), walk_d.eq(0)]

        # --- the issue stage: the current tile's pixels, its column tile and tap ---
        cur_base = [Signal(aw, name=f"cur_base{i}") for i in range(rows)]
        cur_y = [Signal(signed(18), name=f"cur_y{i}") for i in range(rows)]
        cur_x = [Signal(signed(18), name=f"cur_x{i}") for i in range(rows)]
        cur_ok = Signal(rows)
        cur_bound = Signal(signed(34))
        cur_valid = Signal()
        cur_in = Signal()                           # the tile's input rows were in the buffer a cycle ago
        nt = Signal(16)
        kh, kw = Signal(8), Signal(8)
        kh_last, kw_last, nt_last = Signal(), Signal(), Signal()
        kh_y, kw_x = Signal(16), Signal(16)         # kh * dilation_h, kw * dilation_w
        kh_ab = Signal(aw)                          # base + kh's byte offset
        tap = Signal(aw)                            # ... + kw's
        par_y, par_x = Signal(), Signal()           # the tap's row and column offsets are odd (split directions)

        # The issue has hundreds of loads (the counters, the lanes, the tile's registers). Its four state bits are
        # kept in copies, one per group of loads (KEEP_APART: synthesis would merge them back), each group's
        # issue an AND of its own copies; the copies take the same next value as the bit.
        # the taps, two halves of the lanes, the tile's registers, the tile's control (cur_valid, cur_in)
        groups = 5
        dup = {name: [Signal(name=f"dup_{name}{k}", attrs=KEEP_APART) for k in range(groups)]
               for name in ("running", "cur_valid", "cur_in", "credit_ok")}
        issue = Signal()
        pop = Signal()                              # the serve stage takes a step from the schedule queue
        next_credit = Signal.like(sched_credit)
        m.d.comb += next_credit.eq(sched_credit - issue + pop)
        m.d.comb += issue.eq(running & cur_valid & cur_in & credit_ok)
        issues = [Signal(name=f"issue{k}") for k in range(groups)]
        m.d.comb += [issues[k].eq(dup["running"][k] & dup["cur_valid"][k] & dup["cur_in"][k] & dup["credit_ok"][k])
                     for k in range(groups)]
        last_step = Signal()
        m.d.comb += last_step.eq(kw_last & kh_last & nt_last)
        load = Signal()         # the tile's registers' (hundreds of loads)
        load_c = Signal()       # the same decision from the fifth group's copies: the tile's control alone uses it
        m.d.comb += [load.eq(dup["running"][3] & nxt_full & (~dup["cur_valid"][3] | (issues[3] & last_step))),
                     load_c.eq(dup["running"][4] & nxt_full & (~dup["cur_valid"][4] | (issues[4] & last_step)))]
        # avail only grows during a layer, so comparisons a cycle or two old are safe (and only ever late). Each is a
        # register: the whole input in, the next tile's rows in, the current tile's. The next tile's is of its final
        # bound once nxt_full has been high a cycle before (nxt_settled); a load before that waits a cycle. In the
        # cycle after a load, the current tile is the one nxt_in compared.
        avail = self.avail.as_signed()
        all_in, nxt_in, cur_in_r = Signal(), Signal(), Signal()
        nxt_settled, loaded = Signal(), Signal()
        m.d.sync += [all_in.eq(self.avail >= const["lin"]), nxt_in.eq(nxt_bound <= avail),
                     cur_in_r.eq(cur_bound <= avail), nxt_settled.eq(nxt_full), loaded.eq(load_c)]
        nxt = {name: Signal(name=f"{name}_next") for name in dup}
        m.d.comb += [nxt["cur_in"].eq(all_in | Mux(load_c, nxt_in & nxt_settled, Mux(loaded, nxt_in, cur_in_r))),
                     nxt["running"].eq(running), nxt["cur_valid"].eq(cur_valid), nxt["credit_ok"].eq(credit_ok)]
        with m.If(fsm.ongoing("SETUP") & (step == self.SETUP - 1)):
            m.d.comb += nxt["running"].eq(1)
        with m.If(~walking & ~nxt_full & ~cur_valid & fsm.ongoing("RUN")):
            m.d.comb += nxt["running"].eq(0)
        with m.If(fsm.ongoing("SETUP")):
            m.d.comb += nxt["cur_valid"].eq(0)
        with m.Elif(load_c):
            m.d.comb += nxt["cur_valid"].eq(1)
        with m.Elif(issues[4] & last_step):
            m.d.comb += nxt["cur_valid"].eq(0)
        with m.If(fsm.ongoing("IDLE") & self.start):
            m.d.comb += nxt["credit_ok"].eq(1)
        with m.Elif(~fsm.ongoing("IDLE")):
            m.d.comb += nxt["credit_ok"].eq(next_credit != 0)
        for name, value in (("running", running), ("cur_valid", cur_valid), ("cur_in", cur_in),
                            ("credit_ok", credit_ok)):
            m.d.sync += [value.eq(nxt[name]), *(c.eq(nxt[name]) for c in dup[name])]
        with m.If(load):
            m.d.sync += [*(cur_base[i].eq(nxt_base[i]) for i in range(rows)),
                         *(cur_y[i].eq(nxt_y[i]) for i in range(rows)), *(cur_x[i].eq(nxt_x[i]) for i in range(rows)),
                         cur_ok.eq(nxt_ok), cur_bound.eq(nxt_bound), nxt_full.eq(0), walk.eq(walking),
                         walk_d.eq(walking)]
        # the tap counters
        with m.If(issues[0]):
            with m.If(~kw_last):
                m.d.sync += [kw.eq(kw + 1), kw_last.eq(kw + 2 == g.kernel_w), kw_x.eq(kw_x + g.dilation_w),
                             tap.eq(tap + Mux(par_x, dx1, dx0)), par_x.eq(par_x ^ flip_x)]
            with m.Else():
                m.d.sync += [kw.eq(0), kw_last.eq(g.kernel_w == 1), kw_x.eq(0), par_x.eq(sw & g.pad_left[0])]
                with m.If(~kh_last):
                    m.d.sync += [kh.eq(kh + 1), kh_last.eq(kh + 2 == g.kernel_h), kh_y.eq(kh_y + g.dilation_h),
                                 kh_ab.eq(kh_ab + Mux(par_y, dy1, dy0)), tap.eq(kh_ab + Mux(par_y, dy1t, dy0t)),
                                 par_y.eq(par_y ^ flip_y)]
                with m.Else():
                    m.d.sync += [kh.eq(0), kh_last.eq(g.kernel_h == 1), kh_y.eq(0), kh_ab.eq(self.base + ty0),
                                 tap.eq(self.base + t00), par_y.eq(sh & g.pad_top[0])]
        # the column tile and the lanes' channels, a tile's last tap on. cy[j] (the carry, r[j] >= thr) is a
        # register set with r[j], and refreshed in every other cycle: thr, thr2 and thr_b are final in RUN's first
        # cycle, the first column tile's end comes rows + 1 cycles on at least
        cy = [Signal(name=f"cy{j}") for j in range(cols)]
        m.d.sync += [cy[j].eq(r[j] >= thr) for j in range(cols)]
        for k, lanes in ((1, range(cols // 2)), (2, range(cols // 2, cols))):
            with m.If(issues[k] & kw_last & kh_last):
                with m.If(~nt_last):
                    if k == 1:
                        m.d.sync += [nt.eq(nt + 1), nt_last.eq(nt == n_tiles_2)]
                    for j in lanes:
                        m.d.sync += [q[j].eq(Mux(cy[j], q[j] + adv_a1, q[j] + adv_a)),
                                     r[j].eq(Mux(cy[j], r[j] - thr, r[j] + adv_b)),
                                     cy[j].eq(Mux(cy[j], r[j] >= thr2, r[j] >= thr_b))]
                with m.Else():
                    if k == 1:
                        m.d.sync += [nt.eq(0), nt_last.eq(g.n_tiles == 1)]
                    m.d.sync += [*(q[j].eq(q0[j]) for j in lanes), *(r[j].eq(r0[j]) for j in lanes),
                                 *(cy[j].eq(r0[j] >= thr) for j in lanes)]
        with m.If(fsm.ongoing("SETUP")):
            m.d.sync += [nt.eq(0), kh.eq(0), kw.eq(0), kh_y.eq(0), kw_x.eq(0), kh_ab.eq(self.base + ty0),
                         tap.eq(self.base + t00), par_x.eq(sw & g.pad_left[0]), par_y.eq(sh & g.pad_top[0]),
                         kw_last.eq(g.kernel_w == 1),
                         kh_last.eq(g.kernel_h == 1), nt_last.eq(g.n_tiles == 1)]
        with m.If(fsm.ongoing("SETUP") & (step == self.SETUP - 1)):
            m.d.sync += [*(q[j].eq(q0[j]) for j in range(cols)), *(r[j].eq(r0[j]) for j in range(cols))]

        # --- A: the step's pixels and tap, copied every cycle (the tile and tap may change next cycle), with no
        # enable: `issue` already has the counters to drive ---
        sel_width = obits + 1                       # lane j's byte in a read, less the read's first byte's
        a_v = reg(issue, "a_v")
        a_base = [reg(cur_base[i], f"a_base{i}") for i in range(rows)]
        a_y = [reg(cur_y[i], f"a_y{i}") for i in range(rows)]
        a_x = [reg(cur_x[i], f"a_x{i}") for i in range(rows)]
        a_ok = reg(cur_ok, "a_ok")
        a_tq = reg((tap + q[0])[:aw], "a_tq")
        a_khy, a_kwx = reg(kh_y, "a_khy"), reg(kw_x, "a_kwx")
        a_sel = reg(Cat((q[j] - q[0])[:sel_width] for j in range(cols)), "a_sel")
        # --- B: each read's address and tap position ---
        b_v, b_ok, b_sel = reg(a_v, "b_v"), reg(a_ok, "b_ok"), reg(a_sel, "b_sel")
        b_addr = [reg((a_base[i] + a_tq)[:aw], f"b_addr{i}") for i in range(rows)]
        b_y = [reg(a_y[i] + a_khy, f"b_y{i}") for i in range(rows)]
        b_x = [reg(a_x[i] + a_kwx, f"b_x{i}") for i in range(rows)]
        # --- B2: the tap's position against the input's edges, each comparison registered ---
        b2_v, b2_sel = reg(b_v, "b2_v"), reg(b_sel, "b2_sel")
        b2_in = [reg(Cat(b_ok[i], b_y[i] >= 0, b_y[i] < g.in_h, b_x[i] >= 0, b_x[i] < g.in_w), f"b2_in{i}")
                 for i in range(rows)]
        b2_addr = [reg(b_addr[i], f"b2_addr{i}") for i in range(rows)]
        # --- C: real or padding; the read's banks and rows ---
        c_v, c_sel = reg(b2_v, "c_v"), reg(b2_sel, "c_sel")
        c_pad, c_unal, c_first, c_off, c_row1, c_row2, c_use = [], [], [], [], [], [], []
        for i in range(rows):
            real = b2_in[i].all()
            off, first, row = b2_addr[i][:obits], b2_addr[i][obits:lane_bits], b2_addr[i][lane_bits:]
            onehot = Signal(banks, name=f"onehot{i}")
            m.d.comb += onehot.eq(Cat(first == b for b in range(banks)))
            c_pad.append(reg(~real, f"c_pad{i}"))
            c_unal.append(reg(real & (off != 0), f"c_unal{i}"))
            c_first.append(reg(first, f"c_first{i}"))
            c_off.append(reg(off, f"c_off{i}"))
            c_row1.append(reg(row, f"c_row1_{i}"))
            # the second bank, past the last, is bank 0 of the next row
            c_row2.append(reg((row + (first == banks - 1))[:self.row_bits], f"c_row2_{i}"))
            c_use.append(reg(Mux(real, onehot | Mux(off != 0, onehot.rotate_left(1), 0), 0), f"c_use{i}"))
        # --- D: each half-read's rank among its bank's (the pixels before it using the bank), each bank's count ---
        d_v, d_sel = reg(c_v, "d_v"), reg(c_sel, "d_sel")
        d_pad = [reg(c_pad[i], f"d_pad{i}") for i in range(rows)]
        d_unal = [reg(c_unal[i], f"d_unal{i}") for i in range(rows)]
        d_first = [reg(c_first[i], f"d_first{i}") for i in range(rows)]
        d_off = [reg(c_off[i], f"d_off{i}") for i in range(rows)]
        d_row1 = [reg(c_row1[i], f"d_row1_{i}") for i in range(rows)]
        d_row2 = [reg(c_row2[i], f"d_row2_{i}") for i in range(rows)]
        d_rank = [reg(Cat(Cat(popcount(c_use[k][b] for k in range(i)), Const(0, rbits))[:rbits]
                          for b in range(banks)), f"d_rank{i}") for i in range(rows)]
        d_count = [reg(popcount(c_use[k][b] for k in range(rows)), f"d_count{b}") for b in range(banks)]
        # --- E: the ranks of each read's two banks; whether the step has a round after round c ---
        # (fields of several elements are flat, sliced by hand: no element alias wires "x.f[i]", on which Yosys'
        # ABC9 pass asserts unless they are purged first, YosysHQ/yosys#4349)
        entry = data.StructLayout({
            "row1": rw * rows, "row2": rw * rows, "first": gbits * rows, "off": obits * rows,
            "rank1": rbits * rows, "rank2": rbits * rows,
            "unal": rows, "pad": rows, "more": rows, "sel": cols * sel_width,
        })
        e = Signal(entry, name="sched_entry")
        e_v = reg(d_v, "e_v")
        for i in range(rows):
            m.d.sync += [e.row1.word_select(i, rw).eq(d_row1[i]), e.row2.word_select(i, rw).eq(d_row2[i]),
                         e.first.word_select(i, gbits).eq(d_first[i]), e.off.word_select(i, obits).eq(d_off[i]),
                         e.rank1.word_select(i, rbits).eq(d_rank[i].word_select(d_first[i], rbits)),
                         e.rank2.word_select(i, rbits).eq(d_rank[i].word_select((d_first[i] + 1)[:gbits], rbits))]
        m.d.sync += [e.unal.eq(Cat(d_unal)), e.pad.eq(Cat(d_pad)), e.sel.eq(d_sel),
                     e.more.eq(Cat(Cat(d_count[b] > c for b in range(banks)).any() for c in range(1, rows + 1)))]
        sq = m.submodules.sched = fifo.SyncFIFO(width=entry.size, depth=self._SCHED)
        m.d.comb += [sq.w_en.eq(e_v), sq.w_data.eq(e)]

        # --- the serve stage: one round of a step a cycle; a step enters with a place in the output queue ---
        cur = Signal(entry, name="serving")
        s_v = Signal()
        rnd = Signal(range(rows))
        s_last = Signal()                           # round rnd is the step's last (a register, set with rnd)
        m.d.comb += [pop.eq(sq.r_rdy & out_ok & (~s_v | s_last)), sq.r_en.eq(pop)]
        with m.If(pop):
            m.d.sync += [cur.eq(sq.r_data), s_v.eq(1), rnd.eq(0), s_last.eq(~entry(sq.r_data).more[0])]
        with m.Elif(s_v & s_last):
            m.d.sync += s_v.eq(0)
        with m.Elif(s_v):
            m.d.sync += [rnd.eq(rnd + 1), s_last.eq(~cur.more.bit_select(rnd + 1, 1))]
        taken = Signal()
        m.d.comb += taken.eq(self.o.valid & self.o.ready)
        with m.If(~fsm.ongoing("IDLE")):
            # (the credit's next value for both outcomes of the pop, from registers; the pop picks one last)
            out_base = out_credit + taken
            m.d.sync += [sched_credit.eq(next_credit), out_credit.eq(Mux(pop, out_base - 1, out_base)),
                         out_ok.eq(Mux(pop, out_base != 1, out_base != 0)),
                         outstanding.eq(outstanding + issue - taken)]
        # S1: which half-read each bank serves this round
        hit1 = [s_v & (cur.rank1.word_select(i, rbits) == rnd) & ~cur.pad[i] for i in range(rows)]
        hit2 = [s_v & (cur.rank2.word_select(i, rbits) == rnd) & cur.unal[i] for i in range(rows)]
        first = [cur.first.word_select(i, gbits) for i in range(rows)]
        s1_sel1 = [reg(Cat(hit1[i] & (first[i] == b) for b in range(banks)), f"s1_sel1_{i}") for i in range(rows)]
        s1_sel2 = [reg(Cat(hit2[i] & ((first[i] + 1)[:gbits] == b) for b in range(banks)), f"s1_sel2_{i}")
                   for i in range(rows)]
        s1_row1 = [reg(cur.row1.word_select(i, rw), f"s1_row1_{i}") for i in range(rows)]
        s1_row2 = [reg(cur.row2.word_select(i, rw), f"s1_row2_{i}") for i in range(rows)]
        # what the data side needs of the round, from here to the data
        side = data.StructLayout({"v": 1, "last": 1, "t1": rows, "t2": rows, "pad": rows, "first": gbits * rows,
                                  "off": obits * rows, "sel": cols * sel_width})
        s1 = Signal(side, name="side_s1")
        m.d.sync += [s1.v.eq(s_v), s1.last.eq(s_v & s_last), s1.t1.eq(Cat(hit1)), s1.t2.eq(Cat(hit2)),
                     s1.pad.eq(cur.pad), s1.first.eq(cur.first), s1.off.eq(cur.off), s1.sel.eq(cur.sel)]
        # S2: each bank's row, to the buffer (registered flat, for the same reason)
        g_rows = Signal(rw * banks)
        for b in range(banks):
            row = Const(0, rw)
            for i in range(rows):
                row = row | Mux(s1_sel1[i][b], s1_row1[i], 0) | Mux(s1_sel2[i][b], s1_row2[i], 0)
            m.d.sync += g_rows.word_select(b, rw).eq(row)
        m.d.comb += self.g_rows.eq(g_rows)
        g_en = reg(s1.v, "g_en_r")
        m.d.comb += self.g_en.eq(g_en)
        x2 = delayed(m, s1, 1 + ByteBuffer.G_LATENCY, "side_s")   # beside the buffer's data

        # --- the data: each read's two banks, then each lane's byte, padding as the zero point ---
        # (selections by shifts, not case statements: Icarus never evaluates a case block whose inputs have not
        # changed since time 0)
        p1 = reg(x2, "side_p1")
        x2_first = [x2.first.word_select(i, gbits) for i in range(rows)]
        pair = [reg(Cat(self.g_data.word_select(x2_first[i], 8 * bb),
                        self.g_data.word_select((x2_first[i] + 1)[:gbits], 8 * bb)), f"pair{i}") for i in range(rows)]
        p1_off = [reg(x2.off.word_select(i, obits), f"p1_off{i}") for i in range(rows)]
        # each read's bytes from its first on (a lane's channel is at most cols - 1 bytes past the read's first)
        p2 = reg(p1, "side_p2")
        win = [[reg(_mux_tree(p1_off[i], [pair[i].word_select(o + k, 8) for o in range(bb)]), f"win{i}_{k}")
                for k in range(cols)] for i in range(rows)]
        # the lane's byte is in the read's second bank when its position is past the first's last byte
        p2_second = [[reg((p1_off[i] + p1.sel.word_select(j, sel_width))[obits], f"second{i}_{j}")
                      for j in range(cols)] for i in range(rows)]
        # lane j's channel, (q[j] - q[0]) <= j bytes past the read's first
        p3 = reg(p2, "side_p3")
        byte = [[reg(_mux_tree(p2.sel.word_select(j, sel_width)[:max(j.bit_length(), 1)], win[i][:j + 1]),
                     f"byte{i}_{j}") for j in range(cols)] for i in range(rows)]
        take = [[reg(Mux(p2_second[i][j], p2.t2[i], p2.t1[i]), f"take{i}_{j}") for j in range(cols)]
                for i in range(rows)]
        zp = g.zero_point.as_unsigned()
        assembled = [[Signal(8, name=f"asm{i}_{j}") for j in range(cols)] for i in range(rows)]
        value = [[Signal(8, name=f"val{i}_{j}") for j in range(cols)] for i in range(rows)]
        for i in range(rows):
            for j in range(cols):
                m.d.comb += value[i][j].eq(Mux(p3.pad[i], zp, Mux(take[i][j], byte[i][j], assembled[i][j])))
        with m.If(p3.v):
            m.d.sync += [assembled[i][j].eq(value[i][j]) for i in range(rows) for j in range(cols)]
        # the core's depthwise step: element j * rows + i is cell (i, j)'s
        m.d.comb += [queue.w_en.eq(p3.v & p3.last),
                     queue.w_data.eq(Cat(value[i][j] for j in range(cols) for i in range(rows)))]
        m.d.comb += [self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data), queue.r_en.eq(self.o.ready)]
        return m
