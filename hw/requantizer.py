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
elements are in flight.
"""

from amaranth import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RequantInput", "Requantizer"]

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

    Members
    -------
    i : In(stream.Signature(RequantInput))
    o : Out(stream.Signature(signed(32)))
        The int8 result sign-extended to 32 bits, or the int32 accumulator in bypass.
    output_offset, act_min, act_max : In(signed(8))
    bypass : In(1)
    """

    def __init__(self, rounding="double"):
        if rounding not in ("double", "single"):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"rounding must be 'double' or 'single', got {rounding!r}")
        self._rounding = rounding
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

    @property
    def latency(self):
        """Cycles from an input transfer to the corresponding output being valid (no stalls)."""
        return 6

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += [en.eq(~self.o.valid | self.o.ready), self.i.ready.eq(en)]

        valid = [Signal(name=f"valid{n}") for n in range(1, self.latency + 1)]
        with m.If(en):
            m.d.sync += valid[0].eq(self.i.valid)
            m.d.sync += [valid[n].eq(valid[n - 1]) for n in range(1, len(valid))]
        m.d.comb += self.o.valid.eq(valid[-1])

        def stage(name, shape, value):
            reg = Signal(shape, name=name)
            with m.If(en):
                m.d.sync += reg.eq(value)
            return reg

        def carry(sig, n_stages, name):
            for n in range(n_stages):
                sig = stage(f"{name}_d{n + 1}", sig.shape(), sig)
            return sig

        p = self.i.payload
        # Stage 1: add the folded bias (int32 wrap-around).
        acc = stage("acc", signed(32), (p.acc + p.bias)[:32].as_signed())
        mult1 = stage("mult1", signed(32), p.multiplier)
        shift1 = stage("shift1", signed(6), p.shift)

        if self._rounding == "double":
            # Stage 2: left pre-shift by max(shift, 0), wrapping to int32.
            left = Mux(shift1 > 0, shift1.as_unsigned()[:5], 0)
            pre = stage("pre", signed(32), (acc << left)[:32].as_signed())
            mult2 = stage("mult2", signed(32), mult1)
            right2 = stage("right2", 5, Mux(shift1 < 0, (-shift1).as_unsigned()[:5], 0))
            # Stage 3: the 32x32 -> 64 product; note the one overflowing operand pair.
            prod = stage("prod", signed(64), pre * mult2)
            overflow = stage("overflow", 1, (pre == INT32_MIN) & (mult2 == INT32_MIN))
            right3 = stage("right3", 5, right2)
            # Stage 4: SaturatingRoundingDoublingHighMul: (prod + nudge) / 2**31, truncating.
            nudge = Mux(prod >= 0, Const(1 << 30, signed(32)), Const(1 - (1 << 30), signed(32)))
            s = Signal(signed(66))
            m.d.comb += s.eq(prod + nudge)
            trunc = Signal(signed(66))
            m.d.comb += trunc.eq(s + Mux(s < 0, Const((1 << 31) - 1, signed(33)), 0))
            high = stage("high", signed(32), Mux(overflow, INT32_MAX, (trunc >> 31)[:32].as_signed()))
            right4 = stage("right4", 5, right3)
            # Stage 5: RoundingDivideByPOT(high, right): ties away from zero.
            mask = Signal(32)
            m.d.comb += mask.eq((Const(1, 33) << right4) - 1)
            remainder = high.as_unsigned() & mask
            threshold = (mask >> 1) + (high < 0)
            scaled = stage("scaled", signed(32),
                           ((high >> right4) + (remainder > threshold))[:32].as_signed())
        else:
            # Stage 2: total shift 31 - shift (1..62) and its rounding constant 2**(total-1).
            total = stage("total", 6, (31 - shift1)[:6])
            acc2 = stage("acc2", signed(32), acc)
            mult2 = stage("mult2", signed(32), mult1)
            # Stage 3: 64-bit product.
            prod = stage("prod", signed(64), acc2 * mult2)
            total3 = stage("total3", 6, total)
            # Stage 4: add the rounding constant (round half toward +inf).
            rnd = (Const(1, 64) << (total3 - 1).as_unsigned()[:6])[:63]
            summed = stage("summed", signed(65), prod + rnd)
            total4 = stage("total4", 6, total3)
            # Stage 5: arithmetic shift right, truncate to int32 as static_cast does.
            scaled = stage("scaled", signed(32), (summed >> total4)[:32].as_signed())

        # Stage 6: + output offset (int32 wrap-around), clamp to the activation range; or bypass.
        acc_out = carry(acc, 4, "acc_bypass")
        offset = Signal(signed(32))
        m.d.comb += offset.eq((scaled + self.output_offset)[:32].as_signed())
        clamped = Mux(offset < self.act_min, self.act_min, Mux(offset > self.act_max, self.act_max, offset))
        out = stage("out", signed(32), Mux(self.bypass, acc_out, clamped))
        m.d.comb += self.o.payload.eq(out)
        return m
