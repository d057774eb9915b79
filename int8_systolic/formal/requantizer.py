"""Formal proof harness of :class:`hw.requantizer.Requantizer` against the golden arithmetic.

The harness drives the requantizer with unconstrained inputs every cycle (valid, the four
payload fields, the output's ready: any stall pattern) and unconstrained per-layer settings
held for the whole run (output offset, activation bounds with ``act_min <= act_max``,
bypass), after a reset in the first cycle. It picks one accepted input at a moment of the
solver's choosing (a free "track this one" bit), keeps its payload, follows it down the
pipeline (every stage advances on the same enable, so after n enabled cycles it sits in
stage n), and when the output of the same position in the stream is transferred asserts
that it equals :func:`reference` of the kept payload. At every cycle it also asserts that
no output appears without an input in flight. An element lost, duplicated or reordered
shows as a failed assertion, since the tracked element is any element.

Compositional at the multipliers. A bit-level solver does not prove a 32x32 product equal
to the RTL's four 16x16 partial products and carry-save sums in reasonable time, so the
four multiplier cells are cut: in the proof their products are free values (within the
range of a product of their operand widths). The proof then shows

1. the operands each multiplier registers for the tracked element are the halves of the
   element's (pre-shifted) accumulator and multiplier (:data:`HALVES`), and
2. the RTL's output equals :func:`reference` computed from the 64-bit product
   ``hh * 2**32 + (hl + lh) * 2**16 + ll`` of whatever those cells produce;

and :mod:`formal.identities` proves with z3, over the integers, that this sum of the four
products of the halves is ``x * m`` for every pair of int32 values. What is assumed: each
cell computes ``a * b`` of its registered operands (Amaranth's ``*``, Yosys' ``$mul``; the
ECP5 build's MULT18X18D is simulated against a model, not proved).

:func:`reference` is the golden model's arithmetic (:mod:`golden.fixedpoint`) written as
Amaranth expressions on whole integers: SaturatingRoundingDoublingHighMul as gemmlowp
writes it (``(ab + 2**30) >> 31``, INT32_MIN * INT32_MIN saturating), RoundingDivideByPOT
as one add and one shift (``floor((x + 2**(r-1) - (x < 0)) / 2**r)``), single rounding as one add
and shift; nothing shared with the RTL's one-bit shift stages, decoded rounding constants,
carry-save adds and flip-flop saturation. :mod:`formal.identities` proves with z3 that these
forms equal golden's definitions (gemmlowp's truncating division with a signed nudge, and
RoundingDivideByPOT's mask and threshold) for every input.

``broken`` breaks the RTL (``rtl-*``: the design is elaborated with a wrong constant) or the
reference (the others), to show that the proof finds a counterexample and prints it.
"""

import contextlib

from amaranth import Const, Fragment, Module, Mux, Signal, signed
from amaranth.asserts import AnyConst, AnySeq, Initial
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, ResetSignal

from int8_systolic import hw
from int8_systolic.hw import requantizer as _requantizer  # noqa: F401 (makes hw.requantizer an attribute)
from int8_systolic.hw.multiplier import Multiplier
from int8_systolic.hw.requantizer import Requantizer

__all__ = ["BROKEN", "HALVES", "PRODUCT_RANGE", "RequantizerProof", "reference"]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
# Deliberate errors, each a plausible bug: the proof must fail on every one.
BROKEN = {
    "rtl-saturation": "RTL: the INT32_MIN * INT32_MIN test compares the multiplier with INT32_MIN + 1",
    "srdhm-tie-down": "reference: SaturatingRoundingDoublingHighMul's nudge 2**30 - 1 (ties toward -inf)",
    "rdbpot-ties-up": "reference: RoundingDivideByPOT rounds ties toward +inf, not away from zero",
    "offset-saturates": "reference: the output offset is added with saturation, not int32 wrap-around",
}
# (partial product) -> (half of the first operand, half of the second): "h" the signed top 16 bits,
# "l" the low 16 bits zero-extended (hw.requantizer's dsp_operands)
HALVES = {name: (name[0], name[1]) for name in ("hh", "hl", "lh", "ll")}
# The range of each partial product: a signed 16-bit half ("h") times a signed half or an unsigned 16-bit
# half ("l"). The cut multipliers may produce any value in it; formal.identities proves the real products lie in it.
PRODUCT_RANGE = {"hh": (-(2**15) * (2**15 - 1), 2**30),
                 "hl": (-(2**15) * (2**16 - 1), (2**15 - 1) * (2**16 - 1)),
                 "lh": (-(2**15) * (2**16 - 1), (2**15 - 1) * (2**16 - 1)),
                 "ll": (0, (2**16 - 1) ** 2)}
# Stage (enabled cycles after the input transfer) at which the multipliers' registered operands
# hold an element: 6 stages to the DSP operand registers in double rounding (bias add, four
# pre-shift stages, the operand registers), 3 in single, then the multiplier's own register.
OPERAND_STAGE = {"double": 7, "single": 4}


def _wrap32(value):
    return value[:32].as_signed()


def _half(value, which):
    return value[16:32].as_signed() if which == "h" else value[:16].as_unsigned()


class _CutMultiplier(Multiplier):
    """The generic multiplier with its product cut: registered operands, then a free product
    (the harness constrains nothing but its range), then the same registers as the real one."""

    def __init__(self, a_width, b_width):
        super().__init__(a_width, b_width, "generic")
        self.a_reg = Signal(signed(a_width), name="cut_a")
        self.b_reg = Signal(signed(b_width), name="cut_b")
        self.product = Signal(signed(a_width + b_width), name="cut_product")

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += [self.a_reg.eq(self.a), self.b_reg.eq(self.b)]
        m.d.comb += self.product.eq(AnySeq(len(self.p)))
        p = Signal.like(self.p, reset_less=True)
        with m.If(self.en):
            m.d.sync += p.eq(self.product)
        self._fabric_registers(m, p, 1)
        return m


class _CutRequantizer(Requantizer):
    def __init__(self, rounding):
        super().__init__(rounding)
        self.cut = {}

    def _multiplier(self, a_width, b_width, name):
        self.cut[name] = _CutMultiplier(a_width, b_width)
        return self.cut[name]


def reference(m, kept, x, products, settings, rounding, broken=None):
    """The golden output of one element (``kept``: its payload), as a signed(32) signal in ``m``.

    ``x``: the multiplier's other operand (:func:`operand`); ``products``: the four partial
    products (hh, hl, lh, ll) of the halves of ``x`` and the multiplier, whose weighted sum
    is their 64-bit product.
    """
    acc = Signal(signed(32), name="ref_acc")
    m.d.comb += acc.eq(_wrap32(kept.acc + kept.bias))
    shift, mult = kept.shift, kept.multiplier
    prod = Signal(signed(66), name="ref_prod")
    m.d.comb += prod.eq((products["hh"] << 32) + ((products["hl"] + products["lh"]) << 16)
                        + products["ll"])
    scaled = Signal(signed(32), name="ref_scaled")
    if rounding == "double":
        right = Mux(shift < 0, (-shift).as_unsigned()[:5], 0)
        # SaturatingRoundingDoublingHighMul, as gemmlowp: the one overflowing pair saturates.
        nudge = (1 << 30) - (1 if broken == "srdhm-tie-down" else 0)
        high = Signal(signed(32), name="ref_high")
        overflow = (x == INT32_MIN) & (mult == INT32_MIN)
        m.d.comb += high.eq(Mux(overflow, INT32_MAX, _wrap32((prod + nudge) >> 31)))
        # RoundingDivideByPOT, ties away from zero, as floor((high + 2**(right-1) - (high < 0)) / 2**right)
        # (formal.identities proves it equals gemmlowp's mask-and-threshold form, golden's definition).
        half = Signal(signed(34), name="ref_half")
        if broken == "rdbpot-ties-up":
            m.d.comb += half.eq(Mux(right > 0, (Const(1, signed(34)) << right) >> 1, 0))
        else:
            m.d.comb += half.eq(Mux(right > 0, ((Const(1, signed(34)) << right) >> 1) - (high < 0), 0))
        m.d.comb += scaled.eq(_wrap32((high + half) >> right))
    else:
        total = Signal(6, name="ref_total")
        m.d.comb += total.eq(31 - shift)
        rounded = Signal(signed(67), name="ref_rounded")
        m.d.comb += rounded.eq(prod + (Const(1, signed(67)) << (total - 1)[:6]))
        m.d.comb += scaled.eq(_wrap32(rounded >> total))
    offset = Signal(signed(32), name="ref_offset")
    if broken == "offset-saturates":
        wide = scaled + settings["output_offset"]
        m.d.comb += offset.eq(Mux(wide > INT32_MAX, INT32_MAX, Mux(wide < INT32_MIN, INT32_MIN, wide)))
    else:
        m.d.comb += offset.eq(_wrap32(scaled + settings["output_offset"]))
    lo, hi = settings["act_min"], settings["act_max"]
    out = Signal(signed(32), name="ref_out")
    m.d.comb += out.eq(Mux(settings["bypass"], acc, Mux(offset < lo, lo, Mux(offset > hi, hi, offset))))
    return out


def operand(m, kept, rounding):
    """The accumulator operand of the element's multiplication: the accumulator (bias added), in double
    rounding shifted left by max(shift, 0) first, wrapping to int32."""
    x = Signal(signed(32), name="ref_pre")
    acc = _wrap32(kept.acc + kept.bias)
    if rounding == "double":
        acc = _wrap32(acc << Mux(kept.shift > 0, kept.shift.as_unsigned()[:5], 0))
    m.d.comb += x.eq(acc)
    return x


@contextlib.contextmanager
def _rtl_broken(broken):
    """Elaborate the RTL with a wrong constant (``rtl-*`` entries of :data:`BROKEN`)."""
    if broken != "rtl-saturation":
        yield
        return
    saved = hw.requantizer.INT32_MIN
    hw.requantizer.INT32_MIN = saved + 1
    try:
        yield
    finally:
        hw.requantizer.INT32_MIN = saved


class RequantizerProof(Elaboratable):
    """The requantizer with the tracking harness; ``rounding`` "double" or "single"."""

    def __init__(self, rounding="double", broken=None, max_elements=255, stalls=True, bypass=None):
        if rounding not in OPERAND_STAGE:
            raise ValueError(f"rounding must be 'double' or 'single', got {rounding!r}")
        if broken is not None and broken not in BROKEN:
            raise ValueError(f"broken must be one of {', '.join(BROKEN)}, got {broken!r}")
        self.rounding, self.broken, self.max_elements, self.stalls = rounding, broken, max_elements, stalls
        self.bypass = bypass     # None: any; True/False: the bypass setting fixed

    def elaborate(self, platform):
        m = Module()
        dut = _CutRequantizer(self.rounding)
        with _rtl_broken(self.broken):
            m.submodules.dut = Fragment.get(dut, platform)    # elaborated now: the cut multipliers exist
        m.d.comb += Assume(ResetSignal() == Initial())           # reset in the first cycle, never again
        # Any input in any cycle, any stall pattern.
        p = dut.i.payload
        m.d.comb += [dut.i.valid.eq(AnySeq(1)), p.acc.eq(AnySeq(32)), p.bias.eq(AnySeq(32)),
                     p.multiplier.eq(AnySeq(32)), p.shift.eq(AnySeq(6)), dut.o.ready.eq(AnySeq(1))]
        m.d.comb += Assume((p.shift >= -31) & (p.shift <= 30))
        if not self.stalls:
            m.d.comb += Assume(dut.o.ready)
        if self.rounding == "single":
            m.d.comb += Assume(p.multiplier >= 0)    # golden (and TFLite) require it in single rounding
        # Per-layer settings: any values, held for the whole run.
        settings = {}
        for name, shape in (("output_offset", signed(8)), ("act_min", signed(8)), ("act_max", signed(8)),
                            ("bypass", 1)):
            settings[name] = Signal(shape, name=f"layer_{name}")
            m.d.comb += [settings[name].eq(AnyConst(shape)), getattr(dut, name).eq(settings[name])]
        m.d.comb += Assume(settings["act_min"] <= settings["act_max"])
        if self.bypass is not None:
            m.d.comb += Assume(settings["bypass"] == int(self.bypass))
        # The cut products: any value a product of operands of those widths can take.
        for name, mul in dut.cut.items():
            lo, hi = PRODUCT_RANGE[name]
            m.d.comb += Assume((mul.product >= lo) & (mul.product <= hi))

        # Track one element: the solver chooses which accepted input.
        en = dut.i.ready
        n_in = Signal(range(self.max_elements + 1))
        n_out = Signal(range(self.max_elements + 1))
        tracking, tracked_done = Signal(), Signal()
        tag = Signal(range(self.max_elements + 1))
        stage = Signal(range(64))
        kept = Signal.like(p, name="kept")
        products = {name: Signal.like(mul.product, name=f"kept_{name}") for name, mul in dut.cut.items()}
        choose = AnySeq(1)
        accepted = dut.i.valid & en
        delivered = dut.o.valid & dut.o.ready
        with m.If(accepted):
            m.d.sync += n_in.eq(n_in + 1)
            with m.If(choose & ~tracking & ~tracked_done):
                m.d.sync += [tracking.eq(1), tag.eq(n_in), kept.eq(p), stage.eq(1)]
        with m.If(tracking & en & (stage < 63)):
            m.d.sync += stage.eq(stage + 1)
        with m.If(delivered):
            m.d.sync += n_out.eq(n_out + 1)
        m.d.comb += Assume(n_in < self.max_elements)

        # 1. The operands the multipliers hold for the tracked element are the halves of its operands.
        x = operand(m, kept, self.rounding)
        operand_stage = OPERAND_STAGE[self.rounding]
        at_multipliers = tracking & (stage == operand_stage)
        # (in bypass the double rounding's pre-shift is forced to zero: the product is unused there)
        with m.If(at_multipliers & ~settings["bypass"]):
            for name, mul in dut.cut.items():
                a_half, b_half = HALVES[name]
                m.d.comb += [Assert(mul.a_reg == _half(x, a_half)),
                             Assert(mul.b_reg == _half(kept.multiplier, b_half))]
        with m.If(at_multipliers & en):          # the products the RTL registers for this element
            m.d.sync += [products[name].eq(mul.product) for name, mul in dut.cut.items()]

        # 2. Its output is the reference computed from those products.
        want = reference(m, kept, x, products, settings, self.rounding, self.broken)
        check = Signal()
        m.d.comb += check.eq(delivered & tracking & (n_out == tag))
        with m.If(check):
            m.d.comb += Assert(dut.o.payload == want)
            m.d.sync += [tracking.eq(0), tracked_done.eq(1)]
        # Nothing comes out that did not go in.
        with m.If(~ResetSignal()):
            m.d.comb += Assert(n_out <= n_in)
            with m.If(dut.o.valid):
                m.d.comb += Assert(n_out < n_in)
        m.d.comb += Cover(check)          # the check is reachable (the proof is not vacuous)
        self.signals = {"kept": kept, "settings": settings, "want": want, "got": dut.o.payload, "check": check,
                        "products": products}
        return m
