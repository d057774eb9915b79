"""A pin-frugal timing harness for placing and routing the accelerator on a real FPGA package.

The 8x8 accelerator has ~500 port bits; the LFE5U-85F in CABGA381 has 205 user I/Os and the
iCE40 UP5K 39. :class:`NarrowIO` puts every core port behind registers reached through
``width``-bit pins, so the design routes on the real device with the same core logic:

* ``si``: an input shift chain of all the core's input bits (stream payloads and valids,
  ``res.ready``, the per-layer settings) moves ``width`` bits per cycle, every cycle (a scan
  chain); each of its bits drives one core input.
* ``so``: an output chain folds all the core's output bits into a shifting signature (a
  multiple-input signature register: each chain register takes its core output XOR the next
  register), whose last ``width`` bits are the pins; every core output reaches a pin.

* Between each chain and the core, two registers per port bit that are not part of a chain:
  every core input is driven by, and every core output lands in, a flip-flop whose only other
  connection is a second flip-flop, with a whole cycle for the route between them, so the
  placer may put it beside the core logic it serves. A chain register is tied to its
  neighbours in the chain, whose order is that of the core's ports, not of its floorplan, so
  without these the harness's routes, not the core's, would set the Fmax (a real producer or
  consumer sits beside the core's ports, not beside a scan chain).

Neither chain has an enable or a load signal (a control pin would fan out to hundreds of chain
registers across the die). So this is a harness for
synthesis and timing, not a host interface (the core is simulated on its own ports). The
routed Fmax is the core's register-to-register Fmax (the pins are registered too). The wrapper
costs ``3 * (in_bits + out_bits)`` flip-flops (the chains padded to ``width``), the pin
registers and ~``out_bits`` XOR LUTs; :mod:`fpga.synth` measures and reports it separately.
"""

from amaranth import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["NarrowIO"]


class NarrowIO(wiring.Component):
    """Wrap ``core`` (any :class:`wiring.Component` on the ``sync`` domain) between ``width``-bit pins."""

    def __init__(self, core, width=8):
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"width must be an integer >= 1, got {width!r}")
        self._core, self._width = core, width
        self._inputs, self._outputs = [], []
        for _path, member, value in core.signature.flatten(core):
            (self._inputs if member.flow == In else self._outputs).append(Value.cast(value))
        super().__init__({"si": In(width), "so": Out(width)})

    @property
    def in_bits(self):
        return sum(len(v) for v in self._inputs)

    @property
    def out_bits(self):
        return sum(len(v) for v in self._outputs)

    @property
    def register_bits(self):
        """Flip-flops the wrapper describes: both chains padded to ``width``, the port registers and
        the ``si`` pin register."""
        pad = lambda n: -(-n // self._width) * self._width  # noqa: E731
        return pad(self.in_bits) + pad(self.out_bits) + 2 * (self.in_bits + self.out_bits) + self._width

    def elaborate(self, platform):
        m = Module()
        W = self._width
        m.submodules.core = self._core

        si = Signal(W)
        m.d.sync += si.eq(self.si)
        chain_in = Signal(-(-self.in_bits // W) * W)
        m.d.sync += chain_in.eq(Cat(chain_in[W:], si))
        # (without a reset: port register i and chain register i - width load the same bit, and
        # Yosys would merge the two into one, chain register, if they were alike)
        ports_in_far = Signal(self.in_bits, reset_less=True)
        ports_in = Signal(self.in_bits, reset_less=True)
        m.d.sync += [ports_in_far.eq(chain_in), ports_in.eq(ports_in_far)]
        m.d.comb += Cat(*self._inputs).eq(ports_in)

        ports_out = Signal(self.out_bits)
        ports_out_far = Signal(self.out_bits)
        m.d.sync += [ports_out.eq(Cat(*self._outputs)), ports_out_far.eq(ports_out)]
        chain_out = Signal(-(-self.out_bits // W) * W)
        m.d.sync += chain_out.eq(ports_out_far ^ chain_out[W:])
        m.d.comb += self.so.eq(chain_out[:W])
        return m
