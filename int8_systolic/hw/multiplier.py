"""Registered signed multiplier: where the RTL names the ECP5 DSP primitive (and, for the ECP5
build's tables, :mod:`hw.accelerator` names DP16KD).

``p = a * b`` with both operands and the product registered, and the product registered
once more (latency 3, one product per cycle, every register advances when ``en`` is high).
The last register is in fabric on purpose: on ECP5 the route out of a DSP block is long (about
4 ns for a lone multiplier, 7 ns in a full 8x8 array), so it gets a cycle with no logic after
it, and the adder that consumes the product starts from a nearby flip-flop. Two
implementations, cycle for cycle identical:

* ``dsp="generic"``: Amaranth registers around ``*``. Portable (ASIC flows, simulation,
  Xilinx, iCE40, where Yosys packs the registers into ``SB_MAC16`` itself).
* ``dsp="ecp5"``: one ``MULT18X18D`` with its own input and output registers enabled.
  Yosys never enables them when it infers a multiplier on ECP5, and nextpnr times the
  combinational ``MULT18X18D`` at 3.93 ns, so an inferred multiplier caps the clock at
  about 143 MHz even alone (registered 16x17 multiply on the LFE5U-85F, speed grade 6);
  with the internal registers it routes at 508 MHz. Simulation needs a model of the
  primitive: :mod:`sim.ecp5_models` writes one.

With ``fabric_stages=2`` the product goes through two fabric registers (latency 4): one
for the route out of the DSP and one for the route to the consumer, which may sit apart (the
MAC cells, see :class:`~hw.array.MACCell`). With ``dsp="generic"`` the extra stage is a
second register on the operands instead, the same cycle for cycle (see ``elaborate``).
With ``copies=2`` the last fabric register is duplicated and the second copy drives
``p_copy`` (the same value in every cycle), for a consumer whose adder should be the only
load of its operand.

Operands up to 18 bits, signed (pass unsigned values zero-extended into a signed shape).
"""

from amaranth import ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pipeline import KEEP_APART

__all__ = ["DSP_KINDS", "Multiplier"]

DSP_KINDS = ("generic", "ecp5")


class Multiplier(wiring.Component):
    """``p = a * b``, latency 2 + ``fabric_stages`` (see module docstring).

    Parameters: ``a_width``, ``b_width`` (signed widths, 2..18), ``dsp`` ("generic" or "ecp5"),
    ``copies`` (1 or 2), ``fabric_stages`` (1 or 2).
    Members: ``a``: In(signed(a_width)), ``b``: In(signed(b_width)), ``en``: In(1),
    ``p``: Out(signed(a_width + b_width)); with ``copies=2`` also ``p_copy`` (equal to ``p``).
    """

    @staticmethod
    def latency_of(fabric_stages):
        """The latency of a multiplier with ``fabric_stages`` fabric registers."""
        return 2 + fabric_stages

    def __init__(self, a_width, b_width, dsp="generic", copies=1, fabric_stages=1):
        if dsp not in DSP_KINDS:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"dsp must be one of {DSP_KINDS}, got {dsp!r}")
        for name, v in (("a_width", a_width), ("b_width", b_width)):
            if not 2 <= v <= 18:
                self._MustUse__silence = True
                raise ValueError(f"{name} must be 2..18, got {v}")
        if copies not in (1, 2):
            self._MustUse__silence = True
            raise ValueError(f"copies must be 1 or 2, got {copies!r}")
        if fabric_stages not in (1, 2):
            self._MustUse__silence = True
            raise ValueError(f"fabric_stages must be 1 or 2, got {fabric_stages!r}")
        self.dsp, self.copies, self.fabric_stages = dsp, copies, fabric_stages
        self.latency = self.latency_of(fabric_stages)
        members = {"a": In(signed(a_width)), "b": In(signed(b_width)), "en": In(1),
                   "p": Out(signed(a_width + b_width))}
        if copies == 2:
            members["p_copy"] = Out(signed(a_width + b_width))
        super().__init__(members)

    def _fabric_registers(self, m, product, stages):
        """The last stages: ``product`` registered ``stages`` times in fabric, the last register
        in ``copies`` copies."""
        # (copies kept apart: they hold the same value)
        for n in range(stages - 1):
            reg = Signal.like(self.p, reset_less=True, attrs=KEEP_APART, name=f"dup_p{n + 2}")
            with m.If(self.en):
                m.d.sync += reg.eq(product)
            product = reg
        for port, name in (("p", "dup_pf"), ("p_copy", "dup_pf_copy"))[:self.copies]:
            reg = Signal.like(self.p, reset_less=True, attrs=KEEP_APART, name=name)
            with m.If(self.en):
                m.d.sync += reg.eq(product)
            m.d.comb += getattr(self, port).eq(reg)

    def elaborate(self, platform):
        m = Module()
        if self.dsp == "generic":
            # (a second fabric stage is a second operand register here, not a register after the
            # product: with two registers after `*`, Yosys' iCE40 DSP mapping (synth_ice40 -dsp,
            # Yosys 0.70) tied the product to constant zero, "Driver-driver conflict ... Resolved
            # using constant"; the latency and every cycle are the same)
            a, b = self.a, self.b
            for _ in range(self.fabric_stages):
                a_reg, b_reg = Signal.like(self.a, reset_less=True), Signal.like(self.b, reset_less=True)
                with m.If(self.en):
                    m.d.sync += [a_reg.eq(a), b_reg.eq(b)]
                a, b = a_reg, b_reg
            p = Signal.like(self.p, reset_less=True)
            with m.If(self.en):
                m.d.sync += p.eq(a * b)
            self._fabric_registers(m, p, 1)
            return m

        a18, b18, p36 = Signal(signed(18)), Signal(signed(18)), Signal(signed(36))
        self._fabric_registers(m, p36[:len(self.p)], self.fabric_stages)
        m.d.comb += [a18.eq(self.a), b18.eq(self.b)]
        zero = Const(0, 1)
        ports = {f"i_A{k}": a18[k] for k in range(18)}
        ports.update({f"i_B{k}": b18[k] for k in range(18)})
        ports.update({f"o_P{k}": p36[k] for k in range(36)})
        for n in range(4):
            ports.update({f"i_CLK{n}": ClockSignal("sync") if n == 0 else zero,
                          f"i_CE{n}": self.en if n == 0 else Const(1, 1), f"i_RST{n}": zero})
        m.submodules.dsp = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
            p_REG_INPUTB_CLK="CLK0", p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
            p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE",
            p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0", p_REG_OUTPUT_RST="RST0",
            p_CLK0_DIV="ENABLED", p_CLK1_DIV="ENABLED", p_CLK2_DIV="ENABLED", p_CLK3_DIV="ENABLED",
            p_HIGHSPEED_CLK="NONE", p_GSR="DISABLED", p_CAS_MATCH_REG="FALSE", p_SOURCEB_MODE="B_SHIFT",
            p_MULT_BYPASS="DISABLED", p_RESETMODE="SYNC",
            i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=zero, i_SOURCEB=zero,
            # C, SRIA, SRIB (cascade and shift inputs) stay unconnected: nextpnr cannot route constants to them.
            **ports)
        return m
