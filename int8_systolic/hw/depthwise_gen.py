"""The engine's depthwise window generator: a DEPTHWISE_CONV_2D layer's array steps, read from the input buffer's banks.

In the array's depthwise mode (:mod:`hw.array`) a step is ``rows x cols`` bytes: cell (i, j) takes tap
k of output pixel i in output channel ``nt * cols + j``, which reads input channel ``(nt * cols + j) //
depth_multiplier``. So a step needs, for each of the tile's ``rows`` pixels, the ``cols`` channels of
one tap: ``rows`` reads at unrelated addresses in one cycle. The input buffer
(:class:`hw.byte_buffer.ByteBuffer` with ``bank_port``) has ``banks`` banks of ``bank_bytes`` bytes
with a row address each; a pixel's read takes one bank (two when it does not start on a bank's
first byte), so one cycle serves every read whose banks no other read of the cycle takes.

The input is stored with a *pitch* of :func:`input_pitch` bytes a pixel (the loader leaves the gap): when
``in_c`` is an even number of banks, one bank more, so that the pixel pitch is an odd number of
banks and consecutive pixels start in different banks. A row tile's pixels at stride 1 are
consecutive input pixels at every tap (but where the tile wraps to the next output row of a VALID
layer), so a step is one cycle; at stride 2 they fall in half the banks and a step takes two. A
step whose reads collide is served over as many cycles as it needs (the first pending read always
gets its banks), so any geometry is exact, only slower.

Order (the weight streamer's and the core's): row tile outer (``rows`` output pixels, row-major over
batch, height, width), column tile, then K in TFLite's (kh, kw) order. A tap in the padding, a
pixel past the layer's last, reads the input zero point.

``geometry`` (:func:`geometry_layout`) and ``base`` (the input's first byte in the buffer) hold from
``start`` until ``busy`` falls. ``avail`` is how many of the input's ``total`` bytes in the buffer (from
``base``, at the pitch) are written: a row tile waits until the input rows its windows reach are in.
Before its first step the generator spends :attr:`SETUP` cycles on
the layer's constants. ``busy`` is high from the cycle after ``start`` until the last step is taken.
At full rate (``o`` always ready, no collisions) a layer's first step is offered ``SETUP + rows + 2 +
LATENCY`` cycles after the cycle of ``start`` (the walker's ``rows`` pixels, the tile taken, the step issued),
and one follows every cycle.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .byte_buffer import ByteBuffer
from .products import latch_products, sequential_products

__all__ = ["DepthwiseWindows", "geometry_layout", "input_pitch"]


def geometry_layout():
    """A depthwise layer's geometry as the generator takes it: the command descriptor's fields, the column tiles,
    the input zero point and the input's pitch in the buffer (which stands for the channels)."""
    return data.StructLayout({
        "batch": 16, "in_h": 16, "in_w": 16, "out_h": 16, "out_w": 16,
        "depth_multiplier": 16, "kernel_h": 8, "kernel_w": 8, "stride_h": 8, "stride_w": 8, "dilation_h": 8,
        "dilation_w": 8, "pad_top": 8, "pad_left": 8, "n_tiles": 16, "zero_point": signed(8), "pitch": 17,
    })


def input_pitch(in_c, bank_bytes, beat_bytes):
    """Bytes a pixel of a depthwise layer's input takes in the buffer: ``in_c``, one bank more when ``in_c`` is an
    even number of banks (and whole beats, so that a loaded beat never straddles two pixels). Works on ints and on
    Amaranth values alike."""
    if isinstance(in_c, int):
        return in_c + bank_bytes if in_c % (2 * bank_bytes) == 0 and in_c % beat_bytes == 0 else in_c
    low = (max(2 * bank_bytes, beat_bytes) - 1).bit_length()      # both powers of two: the larger divides
    return Mux(in_c[:low] == 0, in_c + bank_bytes, in_c)


class DepthwiseWindows(wiring.Component):
    """See the module docstring. ``rows``, ``cols``: the array's; the input buffer's ``banks`` of ``bank_bytes`` bytes
    (``bank_bytes >= cols``, ``banks >= rows``) and ``addr_width`` bits of byte address."""

    # The layer's constants, one product a cycle (as hw.window_gen): (name, factor, factor)
    PRODUCTS = (
        ("wp", "in_w", "pitch"), ("sw_p", "stride_w", "pitch"), ("dw_p", "dilation_w", "pitch"),
        ("pl_p", "pad_left", "pitch"), ("sh_wp", "stride_h", "wp"), ("dh_wp", "dilation_h", "wp"),
        ("pt_wp", "pad_top", "wp"), ("hwp", "in_h", "wp"), ("ext_h", "kernel_h", "dilation_h"),
        ("ext_wp", "ext_h", "wp"), ("ohw", "out_h", "out_w"), ("pixels", "batch", "ohw"),
    )
    _QUEUE = 8
    # a step's reads registered, the buffer's latency; then into the queue
    LATENCY = 1 + ByteBuffer.LATENCY + 1

    def __init__(self, rows=8, cols=8, *, banks=8, bank_bytes=8, addr_width=16):
        pow2 = lambda n: isinstance(n, int) and n >= 1 and n & (n - 1) == 0  # noqa: E731
        if not (isinstance(rows, int) and isinstance(cols, int) and 1 <= rows <= banks and 1 <= cols <= bank_bytes
                and pow2(banks) and pow2(bank_bytes) and isinstance(addr_width, int)
                and (banks * bank_bytes - 1).bit_length() < addr_width <= 32):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"need rows <= banks and cols <= bank_bytes (powers of two), addr_width beyond a row of "
                             f"the buffer and <= 32, got rows {rows!r}, cols {cols!r}, banks {banks!r}, bank_bytes "
                             f"{bank_bytes!r}, addr_width {addr_width!r}")
        self.rows, self.cols, self.banks, self.bank_bytes, self.addr_width = rows, cols, banks, bank_bytes, addr_width
        self.lanes = banks * bank_bytes
        self.row_bits = max(addr_width - (self.lanes - 1).bit_length(), 1)
        # the layer's constants, then the depth multiplier's lane offsets (a lane a cycle)
        self.SETUP = len(self.PRODUCTS) + cols + 1
        super().__init__({
            "start": In(1), "geometry": In(geometry_layout()), "base": In(addr_width), "busy": Out(1),
            "avail": In(25), "total": In(25),
            "g_en": Out(1), "g_rows": Out(data.ArrayLayout(self.row_bits, banks)), "g_data": In(8 * self.lanes),
            "o": Out(stream.Signature(8 * rows * cols)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, cols, banks, bb = self.rows, self.cols, self.banks, self.bank_bytes
        g = self.geometry
        obits, gbits = (bb - 1).bit_length(), (banks - 1).bit_length()
        lane_bits = obits + gbits

        # --- the layer's constants, one product a cycle ---
        step = Signal(range(self.SETUP + 1))
        const, product = sequential_products(m, self.PRODUCTS, lambda name: g[name], step)

        # --- the depth multiplier: output channel c reads input channel c // m. Per lane j of the current column
        # tile, q[j] = (nt * cols + j) // m and r[j] the remainder; a column tile further adds cols = a * m + b ---
        mult = g.depth_multiplier
        q = [Signal(16, name=f"q{j}") for j in range(cols)]
        r = [Signal(16, name=f"r{j}") for j in range(cols)]
        q0 = [Signal(16, name=f"q0_{j}") for j in range(cols)]    # the first column tile's
        r0 = [Signal(16, name=f"r0_{j}") for j in range(cols)]
        adv_a, adv_b = Signal(16), Signal(16)       # cols // m, cols % m
        lane_q, lane_r = Signal(16), Signal(16)     # lane j's, during the set-up

        # --- the pixel walker: the next row tile's pixels, one a cycle, while the current tile runs ---
        nxt_base = [Signal(signed(34), name=f"nxt_base{i}") for i in range(rows)]
        nxt_y = [Signal(signed(18), name=f"nxt_y{i}") for i in range(rows)]
        nxt_x = [Signal(signed(18), name=f"nxt_x{i}") for i in range(rows)]
        nxt_ok = Signal(rows)
        nxt_bound = Signal(signed(34))              # the buffer's bytes (from base) the tile's windows reach
        nxt_full = Signal()
        w_i = Signal(range(rows))
        walking = Signal()
        wpix = Signal(32)
        ox, oy = Signal(16), Signal(16)
        yy, xx = Signal(signed(18)), Signal(signed(18))
        bterm, yterm, xterm = Signal(32), Signal(signed(34)), Signal(signed(34))    # b*hwp, y*wp, x*P

        queue = m.submodules.queue = fifo.SyncFIFO(width=8 * rows * cols, depth=self._QUEUE)
        in_flight = Signal(range(self._QUEUE + 1))  # steps issued, not yet in the queue
        running = Signal()
        with m.FSM() as fsm:
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [step.eq(0), lane_q.eq(0), lane_r.eq(0), adv_a.eq(0), adv_b.eq(cols)]
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
                with m.If(lane_r + 1 == mult):
                    m.d.sync += [lane_r.eq(0), lane_q.eq(lane_q + 1)]
                with m.Else():
                    m.d.sync += lane_r.eq(lane_r + 1)
                with m.If(step == self.SETUP - 1):
                    m.d.sync += [running.eq(1), walking.eq(1), wpix.eq(0), ox.eq(0), oy.eq(0), yy.eq(-g.pad_top),
                                 xx.eq(-g.pad_left), bterm.eq(0), yterm.eq(-const["pt_wp"]), xterm.eq(-const["pl_p"]),
                                 w_i.eq(0), nxt_full.eq(0)]
                    m.next = "RUN"
            with m.State("RUN"), m.If(~running):
                m.next = "DRAIN"
            with m.State("DRAIN"), m.If((in_flight == 0) & ~self.o.valid):
                m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))

        # the walker fills the next tile's pixels while it is not full
        with m.If(walking & ~nxt_full):
            ok = wpix < const["pixels"]
            m.d.sync += [Array(nxt_base)[w_i].eq(bterm + yterm + xterm), Array(nxt_y)[w_i].eq(yy),
                         Array(nxt_x)[w_i].eq(xx), nxt_ok.bit_select(w_i, 1).eq(ok), wpix.eq(wpix + 1)]
            with m.If(ok):
                m.d.sync += nxt_bound.eq(bterm + yterm + const["ext_wp"])
            with m.If(w_i == rows - 1):
                m.d.sync += [w_i.eq(0), nxt_full.eq(1)]
            with m.Else():
                m.d.sync += w_i.eq(w_i + 1)
            with m.If(ox == g.out_w - 1):
                m.d.sync += [ox.eq(0), xx.eq(-g.pad_left), xterm.eq(-const["pl_p"])]
                with m.If(oy == g.out_h - 1):
                    m.d.sync += [oy.eq(0), yy.eq(-g.pad_top), yterm.eq(-const["pt_wp"]), bterm.eq(bterm + const["hwp"])]
                with m.Else():
                    m.d.sync += [oy.eq(oy + 1), yy.eq(yy + g.stride_h), yterm.eq(yterm + const["sh_wp"])]
            with m.Else():
                m.d.sync += [ox.eq(ox + 1), xx.eq(xx + g.stride_w), xterm.eq(xterm + const["sw_p"])]
            # the tile after the last: nothing more to walk
            with m.If((w_i == 0) & ~ok):
                m.d.sync += [walking.eq(0), nxt_full.eq(0)]

        # --- the issue stage: the current tile's pixels, its column tile and tap ---
        cur_base = [Signal(signed(34), name=f"cur_base{i}") for i in range(rows)]
        cur_y = [Signal(signed(18), name=f"cur_y{i}") for i in range(rows)]
        cur_x = [Signal(signed(18), name=f"cur_x{i}") for i in range(rows)]
        cur_ok = Signal(rows)
        cur_bound = Signal(signed(34))
        cur_valid = Signal()
        nt = Signal(16)
        kh, kw = Signal(8), Signal(8)
        kh_y, kw_x = Signal(16), Signal(16)         # kh * dilation_h, kw * dilation_w
        kh_a, kw_a = Signal(32), Signal(32)         # their padded byte offsets

        s1_busy = Signal()                          # the read stage holds a step with reads pending
        s1_free = Signal()                          # ... and lets it go this cycle
        waiting = Signal()
        m.d.comb += waiting.eq((self.avail < self.total) & (cur_bound > self.avail.as_signed()))
        issue = Signal()
        m.d.comb += issue.eq(running & cur_valid & ~waiting & (~s1_busy | s1_free)
                             & (queue.level + in_flight < self._QUEUE))
        last_tap = Signal()
        m.d.comb += last_tap.eq((kh == g.kernel_h - 1) & (kw == g.kernel_w - 1))
        last_step = Signal()
        m.d.comb += last_step.eq(last_tap & (nt == g.n_tiles - 1))
        load = Signal()
        m.d.comb += load.eq(running & nxt_full & (~cur_valid | (issue & last_step)))
        with m.If(load):
            m.d.sync += [*(cur_base[i].eq(nxt_base[i]) for i in range(rows)),
                         *(cur_y[i].eq(nxt_y[i]) for i in range(rows)), *(cur_x[i].eq(nxt_x[i]) for i in range(rows)),
                         cur_ok.eq(nxt_ok), cur_bound.eq(nxt_bound), cur_valid.eq(1), nxt_full.eq(0)]
        with m.Elif(issue & last_step):
            m.d.sync += cur_valid.eq(0)
        with m.If(~walking & ~nxt_full & ~cur_valid & fsm.ongoing("RUN")):
            m.d.sync += running.eq(0)
        # the tap and column tile counters (the lanes' channels per column tile)
        with m.If(issue):
            with m.If(kw != g.kernel_w - 1):
                m.d.sync += [kw.eq(kw + 1), kw_x.eq(kw_x + g.dilation_w), kw_a.eq(kw_a + const["dw_p"])]
            with m.Else():
                m.d.sync += [kw.eq(0), kw_x.eq(0), kw_a.eq(0)]
                with m.If(kh != g.kernel_h - 1):
                    m.d.sync += [kh.eq(kh + 1), kh_y.eq(kh_y + g.dilation_h), kh_a.eq(kh_a + const["dh_wp"])]
                with m.Else():
                    m.d.sync += [kh.eq(0), kh_y.eq(0), kh_a.eq(0)]
                    with m.If(nt != g.n_tiles - 1):
                        m.d.sync += nt.eq(nt + 1)
                        for j in range(cols):
                            carry = r[j] + adv_b >= mult
                            m.d.sync += [q[j].eq(q[j] + adv_a + carry), r[j].eq(r[j] + adv_b - Mux(carry, mult, 0))]
                    with m.Else():
                        m.d.sync += [nt.eq(0), *(q[j].eq(q0[j]) for j in range(cols)),
                                     *(r[j].eq(r0[j]) for j in range(cols))]
        with m.If(fsm.ongoing("SETUP")):
            m.d.sync += [nt.eq(0), kh.eq(0), kw.eq(0), kh_y.eq(0), kw_x.eq(0), kh_a.eq(0), kw_a.eq(0), cur_valid.eq(0)]
        with m.If(fsm.ongoing("SETUP") & (step == self.SETUP - 1)):
            m.d.sync += [*(q[j].eq(q0[j]) for j in range(cols)), *(r[j].eq(r0[j]) for j in range(cols))]

        # each pixel's read: cols bytes from its tap's first channel (the lanes pick theirs from them)
        s1_addr = [Signal(self.addr_width, name=f"s1_addr{i}") for i in range(rows)]
        s1_need = [Signal(banks, name=f"s1_need{i}") for i in range(rows)]
        s1_pad = Signal(rows)
        s1_sel = Signal(cols * (obits + 1))         # lane j's byte in a read's two banks, less the read's offset
        pending = Signal(rows)
        with m.If(issue):
            for i in range(rows):
                y = cur_y[i] + kh_y
                x = cur_x[i] + kw_x
                real = cur_ok[i] & (y >= 0) & (y < g.in_h) & (x >= 0) & (x < g.in_w)
                addr = Signal(self.addr_width, name=f"addr{i}")
                m.d.comb += addr.eq(cur_base[i] + kh_a + kw_a + q[0] + self.base)
                first = addr[obits:lane_bits] if gbits else Const(0, 1)
                unaligned = addr[:obits] != 0 if obits else Const(0, 1)
                bank = Signal(banks, name=f"bank{i}")      # the read's first bank, one-hot
                m.d.comb += bank.eq(Const(1, banks) << first)
                need = Mux(real, bank | Mux(unaligned, bank.rotate_left(1), 0), 0)
                m.d.sync += [s1_addr[i].eq(addr), s1_need[i].eq(need), s1_pad[i].eq(~real)]
            m.d.sync += [pending.eq((1 << rows) - 1),
                         s1_sel.eq(Cat((q[j] - q[0])[:obits + 1] for j in range(cols)))]
        with m.Elif(s1_free):
            m.d.sync += pending.eq(0)
        m.d.comb += s1_busy.eq(pending != 0)

        # --- the read stage: every pending read whose banks no earlier winner of the cycle took ---
        taken = Const(0, banks)
        win = []
        for i in range(rows):
            w = Signal(name=f"win{i}")
            m.d.comb += w.eq(pending[i] & ((s1_need[i] & taken) == 0))
            taken = taken | Mux(w, s1_need[i], 0)
            win.append(w)
        wins = Cat(win)
        m.d.comb += s1_free.eq(s1_busy & ((pending & ~wins) == 0))
        with m.If(s1_busy & ~s1_free & ~issue):
            m.d.sync += pending.eq(pending & ~wins)
        for b in range(banks):
            row = Const(0, self.row_bits)
            for i in range(rows):
                base_row = s1_addr[i][lane_bits:]
                first_bank = s1_addr[i][obits:lane_bits] if gbits else Const(0, 1)
                # the read's second bank, past the last, is bank 0 of the next row
                rrow = base_row + (first_bank != 0) if b == 0 else base_row
                row = row | Mux(win[i] & s1_need[i][b], rrow, 0)
            m.d.comb += self.g_rows[b].eq(row)
        m.d.comb += self.g_en.eq(s1_busy)

        # --- the data, LATENCY - 1 cycles on: each read's cols bytes from its two banks, padding as the zero point ---
        d_valid, d_last = Signal(2), Signal(2)
        d_win = [Signal(rows, name=f"d_win{k}") for k in range(2)]
        d_pad = [Signal(rows, name=f"d_pad{k}") for k in range(2)]
        d_off = [[Signal(lane_bits, name=f"d_off{k}_{i}") for i in range(rows)] for k in range(2)]
        d_sel = [Signal.like(s1_sel, name=f"d_sel{k}") for k in range(2)]
        m.d.sync += [d_valid.eq(Cat(s1_busy, d_valid[0])), d_last.eq(Cat(s1_free, d_last[0])),
                     d_win[0].eq(wins), d_win[1].eq(d_win[0]), d_pad[0].eq(s1_pad), d_pad[1].eq(d_pad[0]),
                     d_sel[0].eq(s1_sel), d_sel[1].eq(d_sel[0]),
                     *(d_off[0][i].eq(s1_addr[i][:lane_bits]) for i in range(rows)),
                     *(d_off[1][i].eq(d_off[0][i]) for i in range(rows))]
        words = Array(self.g_data[8 * bb * b:8 * bb * (b + 1)] for b in range(banks))
        zp = g.zero_point.as_unsigned()
        assembled = [[Signal(8, name=f"asm{i}_{j}") for j in range(cols)] for i in range(rows)]
        value = [[Signal(8, name=f"val{i}_{j}") for j in range(cols)] for i in range(rows)]
        for i in range(rows):
            # the read's two banks (the second past the last is bank 0), then each lane's byte of them
            first = d_off[1][i][obits:] if gbits else Const(0, 1)
            pair = Signal(16 * bb, name=f"pair{i}")
            m.d.comb += pair.eq(Cat(words[first], words[(first + 1)[:gbits] if gbits else first]))
            pair_bytes = Array(pair[8 * k:8 * k + 8] for k in range(2 * bb))
            for j in range(cols):
                sel = d_sel[1][j * (obits + 1):(j + 1) * (obits + 1)]
                byte = pair_bytes[(d_off[1][i][:obits] + sel)[:obits + 1]] if obits else pair_bytes[sel]
                m.d.comb += value[i][j].eq(Mux(d_win[1][i], Mux(d_pad[1][i], zp, byte), assembled[i][j]))
        with m.If(d_valid[1] & ~d_last[1]):
            m.d.sync += [assembled[i][j].eq(value[i][j]) for i in range(rows) for j in range(cols)]
        # the core's depthwise step: element j * rows + i is cell (i, j)'s
        push = d_valid[1] & d_last[1]
        m.d.comb += [queue.w_en.eq(push), queue.w_data.eq(Cat(value[i][j] for j in range(cols) for i in range(rows)))]
        m.d.sync += in_flight.eq(in_flight + issue - push)
        m.d.comb += [self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data), queue.r_en.eq(self.o.ready)]
        return m
