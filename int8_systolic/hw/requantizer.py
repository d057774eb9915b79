"""Fixed-point requantizer: TFLite's int8 output stage in hardware, one result per cycle.

Implements, bit for bit, :func:`golden.staged.requantize_stages` for one output element::

    acc    = raw_acc + folded_bias                              (int32, wraps)
    scaled = MultiplyByQuantizedMultiplier(acc, multiplier, shift)
    out    = clamp(scaled + output_offset, act_min, act_max)    (the add wraps in int32)

``rounding="double"`` (TFLite's reference kernels): for ``shift > 0`` the accumulator is
first shifted left by ``shift`` with int32 wrap-around, then
SaturatingRoundingDoublingHighMul (ties toward +inf, INT32_MIN * INT32_MIN saturates),
then RoundingDivideByPOT by ``-shift`` (ties away from zero). ``rounding="single"``
(``TFLITE_SINGLE_ROUNDING``): ``(acc * multiplier + 2**(30 - shift)) >> (31 - shift)``
truncated to int32. ``shift`` covers -31..+30.

With ``bypass`` set, ``acc`` (TFLite's int32 accumulator, bias included) is streamed out
unchanged instead, for flows that dequantize in floating point.

Latency: :attr:`Requantizer.latency` cycles from an accepted input to its output being
valid; throughput one element per cycle. The whole pipeline stalls while the output is
valid and not ready (``i.ready = ~o.valid | o.ready``), so no element is lost,
duplicated or reordered under any stall pattern. Per-layer values (``output_offset``,
``act_min``, ``act_max``, ``bypass``) are plain inputs that must be held stable while
elements are in flight; more exactly, an element reads ``output_offset`` in the 19th enabled cycle after the one its
input is taken in, and the bounds in the 22nd (so they may change between elements, each in time for its own).
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .multiplier import DSP_KINDS, Multiplier
from .pipeline import KEEP_APART, ring_delayed

__all__ = ["RequantInput", "Requantizer"]

# Entries in the bypass line (see Requantizer.elaborate): one ECP5 LUT-RAM cell.
_BYPASS_DEPTH = 16

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

RequantInput = data.StructLayout({
    "acc": signed(32),         # raw accumulator sum(q_a * q_w)
    "bias": signed(32),        # folded bias: bias - z_a * sum(q_w)
    "multiplier": signed(32),  # Q0.31 mantissa from QuantizeMultiplier
    "shift": signed(6),        # -31 .. +30
})


class Requantizer(wiring.Component):
    """Pipelined per-element requantizer (see module docstring).

    Parameters
    ----------
    rounding : "double" or "single"
        Elaboration-time choice of TFLite's rounding variant.
    ring_delays : bool
        The double rounding's multiplier, carried to the DSPs past the five pre-shift stages, and its right shift,
        carried to the stages that use it, in LUT-RAM rings (:func:`~hw.pipeline.ring_delayed`) rather than
        registers: cycle-for-cycle identical, about 200 fewer flip-flops a lane. For targets with LUT RAM (ECP5).

    Members
    -------
    i : In(stream.Signature(RequantInput))
    o : Out(stream.Signature(signed(32)))
        The int8 result sign-extended to 32 bits, or the int32 accumulator in bypass.
    output_offset, act_min, act_max : In(signed(8))
    bypass : In(1)
    """

    def __init__(self, rounding="double", dsp="generic", ring_delays=False):
        if rounding not in ("double", "single"):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"rounding must be 'double' or 'single', got {rounding!r}")
        if dsp not in DSP_KINDS:
            self._MustUse__silence = True
            raise ValueError(f"dsp must be one of {DSP_KINDS}, got {dsp!r}")
        self._rounding, self._dsp, self._ring_delays = rounding, dsp, bool(ring_delays)
        super().__init__({
            "i": In(stream.Signature(RequantInput)),
            "o": Out(stream.Signature(signed(32))),
            "output_offset": In(signed(8)),
            "act_min": In(signed(8)),
            "act_max": In(signed(8)),
            "bypass": In(1),
        })

    @property
    def rounding(self):
        return self._rounding

    #: Cycles from an input transfer to the corresponding output being valid (no stalls).
    latency = 25

    def _multiplier(self, a_width, b_width, name):
        """The multiplier of partial product ``name`` ("hh", "hl", "lh", "ll"); the formal proof
        (:mod:`formal.requantizer`) substitutes one whose product is a cut point."""
        return Multiplier(a_width, b_width, self._dsp)

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]

        # (copies kept apart: every lane has the same valid chain, and one chain would drive every
        # lane's output FIFO across the die)
        valid = [Signal(attrs=KEEP_APART, name=f"dup_valid{n}") for n in range(1, self.latency + 1)]
        with m.If(en):
            m.d.sync += valid[0].eq(self.i.valid)
            m.d.sync += [valid[n].eq(valid[n - 1]) for n in range(1, len(valid))]
        m.d.comb += self.o.valid.eq(valid[-1])

        def stage(name, shape, value, keep=False):
            # (data: only the valid chain is reset)
            reg = Signal(shape, name=name, reset_less=True, attrs=KEEP_APART if keep else None)
            with m.If(en):
                m.d.sync += reg.eq(value)
            return reg

        def taps(sig, n_stages, name, keep=False):
            """``sig`` and its copies delayed by 1 .. ``n_stages`` stages."""
            out = [sig]
            for n in range(n_stages):
                out.append(stage(f"{name}_d{n + 1}", sig.shape(), out[-1], keep))
            return out

        def carry(sig, n_stages, name, keep=False):
            """``sig`` delayed by ``n_stages`` stages."""
            return taps(sig, n_stages, name, keep)[-1]

        def equals(value, const, name):
            """Whether ``value`` == ``const``, three stages later (32 bits) or two (16): the 4-bit
            groups, then ANDs of up to four flags per stage, each stage one LUT level."""
            bits = Const(const, len(value))
            flags = stage(f"{name}_g", len(value) // 4, Cat(*(value[g:g + 4] == bits[g:g + 4]
                                                                for g in range(0, len(value), 4))))
            n = 0
            while len(flags) > 1:
                n += 1
                flags = stage(f"{name}_r{n}", -(-len(flags) // 4),
                              Cat(*(flags[g:g + 4].all() for g in range(0, len(flags), 4))))
            return flags

        def dsp_operands(a, b, a_name, b_name):
            """One stage: the operands of the four partial products of ``a * b`` (see
            :func:`partial_products`), registered once per multiplier (copies: a register beside
            each DSP block, not one driving two of them)."""
            halves = {"h": (lambda v: v[16:].as_signed()), "l": (lambda v: v[:16])}
            operands = {}
            for name in ("hh", "hl", "lh", "ll"):
                x, y = halves[name[0]](a), halves[name[1]](b)
                operands[name] = (stage(f"dup_{a_name}_{name}", x.shape(), x, keep=True),
                                  stage(f"dup_{b_name}_{name}", y.shape(), y, keep=True))
            return operands

        def partial_products(operands):
            """Three stages (:class:`Multiplier` registers its operands, its product, and the product
            again in fabric): the four 16x16 partial products of the signed 32x32 product ``a * b``,
            from :func:`dsp_operands`.

            ``a * b = hh * 2**32 + (hl + lh) * 2**16 + ll``; each fits an 18x18 signed DSP multiplier
            (unsigned halves zero-extended to 17 bits), so the 64-bit product costs four DSP blocks
            and a few additions in later stages.
            """
            out = []
            for name in ("hh", "hl", "lh", "ll"):
                x, y = operands[name]
                x_width = 16 if name[0] == "h" else 17
                y_width = 16 if name[1] == "h" else 17
                mul = self._multiplier(x_width, y_width, name)
                m.submodules[f"mul_{name}"] = mul
                m.d.comb += [mul.a.eq(x), mul.b.eq(y), mul.en.eq(en)]
                out.append(mul.p)
            hh, hl, lh, ll = out
            return hh, hl, lh, ll.as_unsigned()[:32]

        # Pipeline: every stage of the double-rounding variant (the one measured on ECP5) is at
        # most one carry chain (an add or a compare) or one level of LUTs deep (a shift stage
        # shifts by one bit of its amount: a 2:1 multiplexer per bit, one LUT4 whose flip-flop
        # nextpnr packs with it), so that the lanes keep up with the array on ECP5.
        p = self.i.payload
        # Stage 1: add the folded bias (int32 wrap-around).
        acc = stage("acc", signed(32), (p.acc + p.bias)[:32].as_signed())
        mult1 = stage("mult1", signed(32), p.multiplier)

        if self._rounding == "double":
            # Stage 1 also splits the shift into a left and a right amount.
            # (in bypass the left shift is zero, for the bypass line below)
            left = stage("left", 5, Mux((p.shift > 0) & ~self.bypass, p.shift.as_unsigned()[:5], 0))
            right1 = stage("right1", 5, Mux(p.shift < 0, (-p.shift).as_unsigned()[:5], 0))
            # Stages 2-6: left pre-shift by max(shift, 0), wrapping to int32, one bit of the
            # amount per stage (each bit of a stage is a 2:1 multiplexer: one LUT, whose flip-flop
            # nextpnr packs with it), the amount and the multiplier travelling alongside.
            # The last stage's result in one register for the bypass line and in one copy per DSP
            # block of each operand's half (dsp_operands).
            # (the multiplier at stage 5, and the right shift at the stages that read it: right[n] aligned with
            # stage n's inputs, right[2] = right1; only bit k of right[15 + k] is read)
            if self._ring_delays:
                mult_5, = ring_delayed(m, [(p.multiplier, 5)], "mult_ring", en)
                right10, = ring_delayed(m, [(right1, 8)], "right_ring", en)
                right = {10: right10, 15: ring_delayed(m, [(right10, 5)], "right15_ring", en)[0]}
                for n in range(16, 20):
                    right[n] = stage(f"right_d{n - 2}", 5, right[n - 1])
            else:
                mult_5 = carry(mult1, 4, "mult")
                right = dict(enumerate(taps(right1, 17, "right"), start=2))
            pre, amount = acc, left
            for k in range(5):
                if k == 4:
                    pre_4, by16 = pre, amount[4]   # stage 5: shifted by left[:4]
                    shifted = Mux(amount[k], pre << (1 << k), pre)[:32].as_signed()
                    operands = dsp_operands(shifted, mult_5, "pre5", "mult6")
                    pre = stage("dup_pre5_bypass", signed(32), shifted, keep=True)  # (a copy, kept apart from those)
                    break
                pre = stage(f"pre{k + 1}", signed(32), Mux(amount[k], pre << (1 << k), pre)[:32].as_signed())
                amount = stage(f"left{k + 2}", 5, amount)
            # Stages 7-9: partial products of pre * multiplier (in the DSPs); note the one
            # saturating operand pair.
            hh, hl, lh, ll = partial_products(operands)
            bypass_src, bypass_stage = pre, 6
            # The test for that pair reads neither operand's registers at the DSPs' inputs (`dup_pre5_*`,
            # `dup_mult6_*`), but their values a stage earlier (`pre_4`, `mult_5`), in one LUT level per
            # stage: by stage 8, whether mult == INT32_MIN and, for the last shift step (by 16 or not),
            # whether pre will be INT32_MIN (its low half 0x8000, or all of it 0x80000000); stage 9 picks one.
            mult_min = equals(mult_5, INT32_MIN, "mult_min")                 # stage 8
            min_if_shift = carry(equals(pre_4[:16], 0x8000, "pre_min16"), 1, "pre_min16")
            min_if_not = equals(pre_4, INT32_MIN, "pre_min32")              # stage 8
            by16 = carry(by16, 3, "by16")
            pre_min = stage("pre_min", 1, Mux(by16, min_if_shift, min_if_not))
            overflow = carry(stage("overflow", 1, pre_min & carry(mult_min, 1, "mult_min")), 1, "overflow")
            # SaturatingRoundingDoublingHighMul = (prod + nudge) / 2**31 truncated toward zero, which
            # for either sign of prod equals floor((prod + 2**30) / 2**31): ties go toward +inf.
            # Stage 10: the middle partial products, the low one's top half and the rounding
            # constant 2**30 in carry-save form (below); decode the right shift as 4 * q + r (q
            # one-hot and thermometer, r likewise).
            l_eq = stage("l_eq", 4, Cat(*(right[10][:2] == v for v in range(4))))
            l_gt = Cat(stage("l_gt", 3, Cat(*(right[10][:2] > v for v in range(3)))), Const(0, 1))
            r_eq = stage("r_eq", 8, Cat(*(right[10][2:5] == v for v in range(8))))
            r_gt = Cat(stage("r_gt", 7, Cat(*(right[10][2:5] > v for v in range(7)))), Const(0, 1))
            # The sum of (prod + 2**30)'s parts below hh's weight, taken from bit 16, is
            # t = hl + lh + ((ll + 2**30) >> 16) = hl + lh + (ll >> 16) + 2**14 (ll's low 16 bits
            # carry nothing into it): a carry-save stage, one LUT per bit (sum and carry of three
            # bits; at bits 14-16 the third is (ll >> 16) + 2**14, made from ll's two top bits),
            # and one addition in the next, rather than two additions at the DSPs' outputs.
            x = Cat(ll[16:30], ~ll[30], ll[31] ^ ll[30], ll[31] & ll[30])
            u, v, w = (Cat(op, *([fill] * (35 - len(op))))  # to 35 bits, hl and lh signed
                       for op, fill in ((hl, hl[-1]), (lh, lh[-1]), (x, Const(0, 1))))
            csa_s = stage("csa_s", 35, u ^ v ^ w)
            csa_c = stage("csa_c", 35, (u & v) | (u & w) | (v & w))
            hh4 = stage("hh4", signed(32), hh)
            # Stage 11: bits 16 and up of (prod + 2**30) below hh's weight; the rounding constants of
            # RoundingDivideByPOT for the right shift: 2**(right-1) (or 0) and 2**(right-1) - 1 (or 0).
            t = stage("t", signed(35), (csa_s + (csa_c << 1))[:35].as_signed())
            hh5 = stage("hh5", signed(32), hh4)
            # (from the two halves of the shift decoded a stage earlier, so each bit is one LUT)
            half = stage("half", 31, Cat(*(r_eq[(b + 1) // 4] & l_eq[(b + 1) % 4] for b in range(31))))
            half_m1 = stage("half_m1", 30, Cat(*(r_gt[(b + 1) // 4] | (r_eq[(b + 1) // 4] & l_gt[(b + 1) % 4])
                                                 for b in range(30))))
            # Stage 12: high = (prod + 2**30) >> 31 = (hh + (t >> 16)) * 2 + t[15]; INT32_MIN**2 saturates.
            # (the saturation is the flip-flops' synchronous set/reset, not a multiplexer after the
            # adder; ECP5's set/reset acts whether or not the clock enable is high, so the set is
            # "overflow and enabled": set under an enable would cost a LUT after the carry chain.
            # And the register's initial value is the value it is set to: an ECP5 flip-flop's
            # initial value is its set/reset value, so another would cost an OR LUT after the chain.)
            # (High's sign again in a second flip-flop, a copy for half of the rounding constant's
            # 31 multiplexers below. It is set to INT32_MAX's sign, 0, which is its initial value.)
            high = Signal(signed(32), name="high", init=INT32_MAX, reset_less=True)
            high_sign = Signal(attrs=KEEP_APART, name="dup_high_sign", reset_less=True)
            value = Cat(t[15], hh5 + (t >> 16))[:32].as_signed()
            saturate = Signal()
            m.d.comb += saturate.eq(overflow & en)
            with m.If(saturate):
                m.d.sync += [high.eq(INT32_MAX), high_sign.eq(0)]
            with m.Elif(en):
                m.d.sync += [high.eq(value), high_sign.eq(value[31])]
            half6, half_m1_6 = carry(half, 1, "half"), carry(half_m1, 1, "half_m1")
            # Stages 13-14: RoundingDivideByPOT(high, right), ties away from zero, as
            # floor((high + 2**(right-1) - (high < 0)) / 2**right): the constant for high's sign ...
            rnd = stage("rnd", 31, Cat(Mux(high < 0, half_m1_6, half6)[:16], Mux(high_sign, half_m1_6, half6)[16:]))
            high9 = carry(high, 1, "high")
            # ... the addition ...
            scaled = stage("rounded", signed(33), high9 + rnd)
            # Stages 15-19: ... then the arithmetic shift, one bit of the amount per stage.
            for k in range(5):
                scaled = stage(f"scaled{k + 1}", signed(33), Mux(right[15 + k][k], scaled >> (1 << k), scaled))
            scaled = scaled[:32].as_signed()
        else:
            # Stages 2-3: total shift 31 - shift (1..62); a stage of delay keeps both variants' latency equal.
            total = carry(stage("total", 6, (31 - p.shift)[:6]), 2, "total")
            e = carry(stage("e", 6, (30 - p.shift)[:6]), 2, "e")  # total - 1: the rounding bit
            acc1, mult2 = stage("acc2", signed(32), acc), stage("mult2", signed(32), mult1)
            acc2 = stage("acc3", signed(32), acc1)
            # Stages 4-6: partial products of acc * multiplier; the rounding constant 2**(total-1) split at bit 32.
            hh, hl, lh, ll = partial_products(dsp_operands(acc1, mult2, "acc3", "mult3"))
            bypass_src, bypass_stage = acc2, 3
            rnd_lo3 = carry(stage("rnd_lo", 32, Cat(*(e == b for b in range(32)))), 2, "rnd_lo")
            rnd_hi3 = carry(stage("rnd_hi", 30, Cat(*(e == b + 32 for b in range(30)))), 2, "rnd_hi")
            # total[n]: aligned with stage n + 4's inputs.
            total = taps(total, 7, "total")
            # Stage 7: add the rounding constant (round half toward +inf) to the partial products.
            lo = stage("lo", 33, ll + rnd_lo3)
            mid = stage("mid", signed(34), hl + lh)
            hh4 = stage("hh4", signed(33), hh + rnd_hi3)
            # Stage 8: carry the low half into the middle one.
            t = stage("t", signed(35), mid + (lo >> 16))
            lo5 = stage("lo5", 16, lo[:16])
            hh5 = stage("hh5", signed(33), hh4)
            # Stage 9: the 64-bit sum prod + 2**(total-1).
            summed = stage("summed", signed(66), Cat(lo5, t[:16], hh5 + (t >> 16)).as_signed())
            # Stages 10-11: arithmetic shift right by total (by multiples of 8, then by 0..7),
            # truncated to int32 as static_cast does.
            coarse = stage("coarse", signed(66), summed >> Cat(Const(0, 3), total[6][3:6]))
            # (and eight stages of delay: the double-rounding variant takes eight more stages)
            scaled = carry(stage("scaled", signed(32), (coarse >> total[7][:3])[:32].as_signed()), 8, "scaled")

        # Stage 20: + output offset (int32 wrap-around).
        offset = stage("offset", signed(32), (scaled + self.output_offset)[:32].as_signed())
        # Stages 21-25: clamp to [act_min, act_max]. Both bounds are int8, so saturating to int8
        # first changes nothing, and then the compares are 8 bits wide instead of 32.
        # Stage 21: is offset within int8 (bits 7..31 all equal)? Four partial tests.
        upper = [offset[7:19], offset[19:32]]
        zeros = [stage(f"zeros{n}", 1, part == 0) for n, part in enumerate(upper)]
        ones = [stage(f"ones{n}", 1, part == (1 << len(part)) - 1) for n, part in enumerate(upper)]
        offset13 = carry(offset, 1, "offset")
        # Stage 22: saturate to int8.
        in_range = (zeros[0] & zeros[1]) | (ones[0] & ones[1])
        sat = stage("sat", signed(8), Mux(in_range, offset13[:8], Mux(offset13[31], -128, 127)))
        # Stage 23: compare with the activation range: the signs of two 9-bit differences (the
        # top sum bit of a carry chain; a `<` would add a carry break-out and LUTs after it).
        # (the bounds are read here only, and carried to the clamp: they may change from one element to the next, as
        # the accelerator's per-row output stage changes them)
        below = stage("below", 1, (sat - self.act_min)[8])
        above = stage("above", 1, (self.act_max - sat)[8])
        act_min, act_max = stage("act_min", signed(8), self.act_min), stage("act_max", signed(8), self.act_max)
        sat15 = carry(sat, 1, "sat")
        # Stage 24: clamp.
        clamped = stage("clamped", signed(8), Mux(below, act_min, Mux(above, act_max, sat15)))
        # Stage 25: the clamped value or, in bypass, the accumulator; the bypass flag in two
        # registered copies of 16 loads each.
        # The accumulator travels to stage latency - 1 in a ring buffer of 16 entries (one ECP5
        # LUT-RAM cell deep: its pointer wraps by itself and no bank multiplexer follows the read)
        # with a registered read (LUT RAM and one register on ECP5, block RAM on iCE40) rather
        # than a line of 32-bit registers: each enabled cycle reads the entry written 16 cycles
        # earlier, then overwrites it. It enters at stage `bypass_stage` (in bypass the double
        # rounding's pre-shift is forced to zero, so `pre` is the accumulator), and registers
        # make up the rest.
        depth = _BYPASS_DEPTH
        m.submodules.bypass_line = line = Memory(shape=signed(32), depth=depth, init=[])
        line_w, line_r = line.write_port(), line.read_port(transparent_for=())
        ptr = Signal(range(depth))
        with m.If(en):
            m.d.sync += ptr.eq(ptr + 1)
        m.d.comb += [line_w.addr.eq(ptr), line_w.data.eq(bypass_src), line_w.en.eq(en),
                     line_r.addr.eq(ptr), line_r.en.eq(en)]
        bypass_wait = self.latency - 1 - (bypass_stage + depth + 1)
        assert bypass_wait >= 0, "the bypass line is longer than the pipeline"
        acc_out = carry(line_r.data, bypass_wait, "bypass_out")
        wide = Signal(signed(32))
        m.d.comb += wide.eq(clamped)
        out = Signal(signed(32))
        for half in range(2):
            # (two copies kept apart, one per half)
            bypass = carry(self.bypass, 2, f"dup_bypass{half}", keep=True)
            bits = slice(16 * half, 16 * half + 16)
            m.d.comb += out[bits].eq(stage(f"out{half}", 16, Mux(bypass, acc_out[bits], wide[bits])))
        m.d.comb += self.o.payload.eq(out)
        return m
