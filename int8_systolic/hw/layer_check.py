"""The engine's layer check: a MAC command's sizes computed and checked before anything of it is read or written.

On ``start`` the check takes the decoded command (``command``, :func:`hw.commands.layout`; its fields
already at their minimums, :class:`hw.command_fetch.CommandFetch`), the two windows and computes, one
product a step (one pipelined multiplier, :mod:`hw.products`) or one quotient bit a cycle, then checks in
registered stages (:meth:`LayerCheck.check_cycles` cycles in all; ``dsp`` is the multiplier's kind):

- ``k`` = kernel_h * kernel_w * in_c (kernel_h * kernel_w for DEPTHWISE_CONV_2D), ``n_tiles`` =
  ceil(out_c / cols), ``pixels`` = batch * out_h * out_w, ``m_tiles`` = ceil(pixels / rows);
- the bytes the layer moves: its input (batch * in_h * in_w * in_c, rounded up to whole beats),
  weights (n_tiles * k * cols, the engine's layout, rounded up), table (12 per output channel, rounded up) and
  output (pixels * out_c). The input takes ``in_buf`` = batch * in_h * in_w * pitch bytes of the
  input buffer (:func:`hw.depthwise_gen.input_pitch`), or row-stacked (``stack``, :class:`hw.stacker.Stacker`)
  batch * out_h * ``row_bytes`` (``row_bytes`` = in_w * ``khc``, ``khc`` = kernel_h * in_c; ``shc`` = stride_h
  * in_c, the stacker's too), and the output would take ``out_buf`` = pixels * its pitch there (the engine
  keeps it on chip for the next layer when both fit).

Then ``done`` pulses with ``error`` (:data:`ERRORS`: the bit of the first failed check in this
order, one bit, so a user reads one reason) and the values:

- ``INCONSISTENT``: an inconsistent layer. A FULLY_CONNECTED not 1x1 everywhere; a window that starts
  outside the padded input ((out - 1) * stride >= in + pad); a padding as large as the filter's
  extent ((kernel - 1) * dilation + 1); act_min > act_max; a DEPTHWISE_CONV_2D whose out_c is not
  in_c * depth_multiplier, another op with a depth multiplier other than 1; ``stack`` on another op than
  CONV_2D.
- ``UNSUPPORTED``: what this engine does not run yet: bypass; ``stack`` with dilation_h other than 1,
  ``khc`` of 2**16 or more, or a pixel (in_c) larger than a bus word.
- ``TOO_BIG``: the input (in the buffer), the weights or the output larger than its buffer, an output to ``keep``
  that does not fit in the input buffer after the input and a row of its banks (``lanes``), more column tiles than
  the core's tables hold, K of 2**24 or more.
- ``MISALIGNED``: an address not a multiple of the bus width.
- ``WINDOW``: a tensor not inside its window: input and output in the read-write window, weights
  and table in the read-only one.

Products saturate at 2**32 - 1 (so a huge layer fails TOO_BIG rather than wrapping into a small one).
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from . import commands
from .depthwise_gen import input_pitch, input_split
from .products import latch_products, sequential_products, setup_cycles
from .table_loader import ENTRY_BYTES

__all__ = ["ERRORS", "LayerCheck"]

ERRORS = {"INCONSISTENT": 0, "UNSUPPORTED": 1, "TOO_BIG": 2, "MISALIGNED": 3, "WINDOW": 4}

_MAX = (1 << 32) - 1


def _pow2(n):
    return n & (n - 1) == 0


def _times(value, k):
    """``value * k`` for a constant ``k``, as a sum of shifts: synthesis would give a constant a multiplier block."""
    return sum(value << s for s in range(k.bit_length()) if k >> s & 1)


class LayerCheck(wiring.Component):
    # (result, factor, factor): factors are command fields, earlier results, "<field>-1", the constant "cols",
    # "in_c_or_1" (1 for DEPTHWISE_CONV_2D, whose K is the taps alone) and "n_tiles"; in the order hw.products
    # schedules them (a result LAG + 1 steps before its first use, where it can)
    # The input's and the kept output's places in the input buffer (hw.depthwise_gen.InputLayout): a stored row
    # (rp: "w_part" pixels, the row's part when split by column), the odd columns' offset (odd_w: "h_part" rows), an
    # image (img: "parts" of odd_w), the batch. (A product's second factor is 17 bits: a wide one goes first.)
    PRODUCTS = (
        ("hw", "in_h", "in_w"), ("khw", "kernel_h", "kernel_w"), ("ohw", "out_h", "out_w"),
        ("rp", "w_part", "pitch"), ("out_rp", "ow_part", "out_pitch"), ("khc", "kernel_h", "in_c"),
        ("span_h", "out_h-1", "stride_h"), ("span_w", "out_w-1", "stride_w"),
        ("ext_h", "kernel_h-1", "dilation_h"), ("ext_w", "kernel_w-1", "dilation_w"),
        ("cm", "in_c", "depth_multiplier"), ("hwc", "hw", "in_c"), ("k", "khw", "in_c_or_1"),
        ("pixels", "ohw", "batch"), ("odd_w", "rp", "h_part"), ("out_odd_w", "out_rp", "oh_part"),
        ("stk_row", "khc", "in_w"), ("shc", "in_c", "stride_h"),
        ("in_bytes", "hwc", "batch"), ("kc", "k", "cols"),
        ("out_bytes", "pixels", "out_c"), ("img", "odd_w", "parts"), ("out_img", "out_odd_w", "out_parts"),
        ("stk_img", "stk_row", "out_h"),
        ("w_bytes", "kc", "n_tiles"), ("in_buf", "img", "batch"), ("out_buf", "out_img", "batch"),
        ("stk_buf", "stk_img", "batch"),
    )
    SETUP = setup_cycles(PRODUCTS)

    @staticmethod
    def check_cycles(rows, cols):
        """The check's latency: ``done`` pulses this many cycles and one after the cycle of ``start``.
        ceil(out_c / cols) (a shift when cols is a power of two, else 17 quotient bits, a bit a cycle) and n_tiles
        latched, then the products, then ceil(pixels / rows) (likewise, 32 bits), then the lengths, the ends, the
        flags and the check a cycle each."""
        return (1 if _pow2(cols) else 17 + 1) + LayerCheck.SETUP + (0 if _pow2(rows) else 32) + 4

    def __init__(self, rows, cols, *, data_width=64, in_depth=4096, w_depth=4096, out_depth=4096, max_col_tiles=64,
                 bank_bytes=8, lanes=64, dsp="generic"):
        self.rows, self.cols, self.data_width, self.bank_bytes = rows, cols, data_width, bank_bytes
        self.lanes = lanes
        self.in_depth, self.w_depth, self.out_depth, self.max_col_tiles = in_depth, w_depth, out_depth, max_col_tiles
        self.dsp = dsp
        self.cycles = self.check_cycles(rows, cols)
        super().__init__({
            "start": In(1), "command": In(commands.layout()),
            "ro_base": In(32), "ro_limit": In(33), "rw_base": In(32), "rw_limit": In(33),
            "busy": Out(1), "done": Out(1), "error": Out(len(ERRORS)),
            "k": Out(32), "n_tiles": Out(16), "pixels": Out(32), "m_tiles": Out(32),
            "in_len": Out(32), "w_len": Out(32), "t_len": Out(32), "out_len": Out(32),
            "in_buf": Out(32), "out_buf": Out(32), "khc": Out(17), "shc": Out(32), "row_bytes": Out(32),
            "capture": Out(1), "split_h": Out(1), "split_w": Out(1), "rp": Out(32), "odd_w": Out(32),
            "out_rp": Out(32), "out_odd_w": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.command
        nbytes = self.data_width // 8
        is_dw = c.op == commands.OPS["DEPTHWISE_CONV_2D"]
        n_tiles = Signal(32)
        pitch, out_pitch = Signal(17), Signal(17)
        m.d.comb += [pitch.eq(input_pitch(c.in_c, self.bank_bytes, nbytes)),
                     out_pitch.eq(input_pitch(c.out_c, self.bank_bytes, nbytes))]
        # a DEPTHWISE_CONV_2D of stride 2 holds its input split by parity (hw.depthwise_gen.input_split); the output
        # kept on chip is split as the command says
        split_h, split_w = Signal(), Signal()
        in_h_split, in_w_split = input_split(c.in_c, c.stride_h, c.stride_w, nbytes)
        m.d.comb += [split_h.eq(is_dw & in_h_split), split_w.eq(is_dw & in_w_split)]
        osh, osw = c.out_split_h, c.out_split_w

        def part(v, split):
            return Mux(split, (v + 1) >> 1, v)

        operands = {**{f.name: c[f.name] for f in commands.FIELDS if f.name != "op"}, "cols": self.cols,
                    "pitch": pitch, "out_pitch": out_pitch, "in_c_or_1": Mux(is_dw, 1, c.in_c),
                    "n_tiles": n_tiles[:17], "w_part": part(c.in_w, split_w), "h_part": part(c.in_h, split_h),
                    "ow_part": part(c.out_w, osw), "oh_part": part(c.out_h, osh),
                    "parts": Cat(~split_h & ~split_w, split_h ^ split_w, split_h & split_w),
                    "out_parts": Cat(~osh & ~osw, osh ^ osw, osh & osw)}
        for f in ("out_h", "out_w", "kernel_h", "kernel_w"):
            operands[f"{f}-1"] = c[f] - 1

        step = Signal(range(self.SETUP + 1))
        val, product = sequential_products(m, self.PRODUCTS, operands.__getitem__, step, dsp=self.dsp, saturate=True)

        # ceil(x / d) by restoring division, most significant quotient bit first
        div_x, rem, quo = Signal(32), Signal(33), Signal(32)
        bit = Signal(range(33))
        trial = Signal(34)
        divisor = Signal(16)
        m.d.comb += trial.eq(Cat(div_x[31], rem) - divisor)

        def start_division(x, d, bits):
            # x + d - 1, so the quotient is rounded up (saturating: x is at most 2**32 - 1, then unchanged)
            up = Signal(33, name=f"up_{bits}")
            m.d.comb += up.eq(x + d - 1)
            return [div_x.eq(Mux(up[32], _MAX, up[:32]) << (32 - bits)), rem.eq(0), quo.eq(0), bit.eq(bits),
                    divisor.eq(d)]

        def ceil_shift(x, d):
            # ceil(x / d) for d a power of two, rounded as start_division rounds (x + d - 1 saturating at 32 bits)
            up = Signal(33, name=f"up_shift_{len(x)}")
            m.d.comb += up.eq(x + d - 1)
            return Mux(up[32], _MAX, up[:32]) >> (d.bit_length() - 1)

        division_step = [rem.eq(Mux(trial[33], Cat(div_x[31], rem)[:33], trial[:33])),
                         quo.eq(Cat(~trial[33], quo[:31])), div_x.eq(div_x << 1), bit.eq(bit - 1)]

        # the staged check's registers
        in_len, w_len, t_len = Signal(32), Signal(32), Signal(32)
        in_pad_h, in_pad_w = Signal(17), Signal(17)
        ends = {name: Signal(34, name=f"end_{name}") for name in ("input", "output", "weights", "table")}
        shape, unsupported, too_big, misaligned, window = Signal(), Signal(), Signal(), Signal(), Signal()
        # (each comparison registered on its own in ENDS, their ORs in FLAGS: no comparison and OR in one cycle)
        shape_bits, big_bits = Signal(9), Signal(5)
        in_buf = Signal(32)
        beside = Signal()          # the output fits in the input buffer after the input (capture, or keep)

        def beats(v):
            up = Signal(33)
            m.d.comb += up.eq(v + nbytes - 1)
            return Mux(up[32], _MAX, up[:32] & ~(nbytes - 1))

        is_fc = c.op == commands.OPS["FULLY_CONNECTED"]
        is_conv = c.op == commands.OPS["CONV_2D"]
        ones = (c.in_h == 1) & (c.in_w == 1) & (c.out_h == 1) & (c.out_w == 1) & (c.kernel_h == 1) & (c.kernel_w == 1)
        # (input and output in the read-write window, weights and table in the read-only one)
        spans = (("input", c.input_addr, self.rw_base, self.rw_limit), ("output", c.output_addr, self.rw_base,
                 self.rw_limit), ("weights", c.weights_addr, self.ro_base, self.ro_limit),
                 ("table", c.table_addr, self.ro_base, self.ro_limit))

        m.d.sync += self.done.eq(0)
        with m.FSM() as fsm:
            with m.State("IDLE"), m.If(self.start):
                if _pow2(self.cols):
                    m.next = "N_DONE"
                else:
                    m.d.sync += start_division(c.out_c, self.cols, 17)
                    m.next = "N_TILES"
            with m.State("N_TILES"):
                m.d.sync += division_step
                with m.If(bit == 1):
                    m.next = "N_DONE"
            with m.State("N_DONE"):
                m.d.sync += [n_tiles.eq(ceil_shift(c.out_c, self.cols) if _pow2(self.cols) else quo), step.eq(0)]
                m.next = "PRODUCTS"
            with m.State("PRODUCTS"):
                m.d.sync += step.eq(step + 1)
                latch_products(m, self.PRODUCTS, val, product, step)
                with m.If(step == self.SETUP - 1):
                    if _pow2(self.rows):
                        m.next = "WEIGHTS"
                    else:
                        m.d.sync += start_division(val["pixels"], self.rows, 32)
                        m.next = "M_TILES"
            with m.State("M_TILES"):
                m.d.sync += division_step
                with m.If(bit == 1):
                    m.next = "WEIGHTS"
            with m.State("WEIGHTS"):
                m_tiles = ceil_shift(val["pixels"], self.rows) if _pow2(self.rows) else quo
                m.d.sync += [self.m_tiles.eq(m_tiles), in_len.eq(beats(val["in_bytes"])),
                             w_len.eq(beats(val["w_bytes"])),
                             t_len.eq(beats(_times(c.out_c, ENTRY_BYTES))), in_pad_h.eq(c.in_h + c.pad_top),
                             in_pad_w.eq(c.in_w + c.pad_left),
                             in_buf.eq(Mux(c.stack, val["stk_buf"], val["in_buf"])),
                             unsupported.eq(c.bypass | (c.stack & ((c.dilation_h != 1) | (val["khc"] >> 16 != 0)
                                                                      | (c.in_c > nbytes))))]
                m.next = "ENDS"
            with m.State("ENDS"):
                m.d.sync += [ends["input"].eq(c.input_addr + in_len),
                             ends["output"].eq(c.output_addr + val["out_bytes"]),
                             ends["weights"].eq(c.weights_addr + w_len), ends["table"].eq(c.table_addr + t_len),
                             shape_bits.eq(Cat(is_fc & ~ones, val["span_h"] >= in_pad_h, val["span_w"] >= in_pad_w,
                                               c.pad_top > val["ext_h"], c.pad_left > val["ext_w"],
                                               c.act_min > c.act_max,
                                               Mux(is_dw, val["cm"] != c.out_c, c.depth_multiplier != 1),
                                               c.stack & ~is_conv,
                                               (osh | osw) & (c.out_c[:(nbytes - 1).bit_length()] != 0))),
                             # (the input's bytes in the buffer: at least in_len rounded to a beat, unless
                             # row-stacked, which stores only the rows the windows reach)
                             big_bits.eq(Cat(w_len > self.w_depth, val["out_bytes"] > self.out_depth,
                                             n_tiles > self.max_col_tiles, val["k"] >= 1 << 24,
                                             in_buf > self.in_depth)),
                             beside.eq(in_buf + val["out_buf"] + self.lanes <= self.in_depth),
                             misaligned.eq(((c.input_addr | c.weights_addr | c.table_addr | c.output_addr)
                                            & (nbytes - 1)) != 0)]
                m.next = "FLAGS"
            with m.State("FLAGS"):
                m.d.sync += [window.eq(Cat(~((addr >= base) & (ends[name] <= limit))
                                           for name, addr, base, limit in spans).any()),
                             shape.eq(shape_bits.any()), too_big.eq(big_bits.any() | (c.keep & ~beside))]
                m.next = "CHECK"
            with m.State("CHECK"):
                failed = Cat(shape, unsupported, too_big, misaligned, window)
                m.d.sync += [self.done.eq(1), self.error.eq(failed & -failed),
                             self.in_len.eq(in_len), self.w_len.eq(w_len), self.t_len.eq(t_len),
                             self.out_len.eq(val["out_bytes"]), self.k.eq(val["k"]), self.n_tiles.eq(n_tiles),
                             self.pixels.eq(val["pixels"]), self.in_buf.eq(in_buf),
                             self.out_buf.eq(val["out_buf"]), self.khc.eq(val["khc"]), self.shc.eq(val["shc"]),
                             self.row_bytes.eq(val["stk_row"]), self.capture.eq(beside),
                             self.split_h.eq(split_h), self.split_w.eq(split_w), self.rp.eq(val["rp"]),
                             self.odd_w.eq(val["odd_w"]), self.out_rp.eq(val["out_rp"]),
                             self.out_odd_w.eq(val["out_odd_w"])]
                m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        return m
