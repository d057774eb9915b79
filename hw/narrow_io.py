"""A pin-frugal wrapper for placing and routing the accelerator on a real FPGA package.

The 8x8 accelerator has ~500 port bits; the LFE5U-85F in CABGA381 has 205 user I/Os and the
iCE40 UP5K 39. :class:`NarrowIO` puts every core port behind registers reached through a
``width``-bit bus, so the design routes on the real device with the same core logic:

* ``si`` / ``si_en``: while ``si_en`` is high, an input shift register of all the core's input
  bits (stream payloads and valids, ``res.ready``, the per-layer settings) shifts by ``width``
  bits per cycle; each of its bits drives one core input.
* ``so`` / ``so_load``: with ``so_load`` high, an output register captures all the core's
  output bits (``res`` payload and valid, the readies); otherwise it shifts out ``width`` bits
  per cycle on ``so``.

Every core input is driven by a flip-flop and every core output lands in one, so the routed
Fmax is the core's register-to-register Fmax (the pins are registered too). The wrapper's
own cost is ``in_bits + out_bits + 2*width`` flip-flops and about ``out_bits`` LUTs (the
load/shift multiplexers); :mod:`fpga.synth` measures and reports it separately.
"""

from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["NarrowIO"]


class NarrowIO(wiring.Component):
    """Wrap ``core`` (any :class:`wiring.Component` on the ``sync`` domain) behind a ``width``-bit bus."""

    def __init__(self, core, width=8):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be an integer >= 1, got {width!r}")
        self._core, self._width = core, width
        self._inputs, self._outputs = [], []
        for _path, member, value in core.signature.flatten(core):
            (self._inputs if member.flow == In else self._outputs).append(Value.cast(value))
        super().__init__({"si": In(width), "si_en": In(1), "so": Out(width), "so_load": In(1)})

    @property
    def in_bits(self):
        return sum(len(v) for v in self._inputs)

    @property
    def out_bits(self):
        return sum(len(v) for v in self._outputs)

    def elaborate(self, platform):
        m = Module()
        W = self._width
        m.submodules.core = self._core

        # Pins are registered at the boundary.
        si, si_en, so_load = Signal(W), Signal(), Signal()
        m.d.sync += [si.eq(self.si), si_en.eq(self.si_en), so_load.eq(self.so_load)]

        in_bits = -(-self.in_bits // W) * W
        chain_in = Signal(in_bits)
        with m.If(si_en):
            m.d.sync += chain_in.eq(Cat(chain_in[W:], si))
        m.d.comb += Cat(*self._inputs).eq(chain_in)

        out_bits = -(-self.out_bits // W) * W
        chain_out = Signal(out_bits)
        with m.If(so_load):
            m.d.sync += chain_out.eq(Cat(*self._outputs))
        with m.Else():
            m.d.sync += chain_out.eq(chain_out[W:])
        m.d.sync += self.so.eq(chain_out[:W])
        return m
