"""The window generator's transpose: ``rows`` vectors of ``width`` bytes in, up to ``width`` steps of ``rows``
bytes out.

A block is ``rows`` consecutive input vectors, vector i holding the next ``width`` bytes of output
pixel i's window run (docs/engine.md); the last vector of a block carries ``steps``, how many of
those bytes are taps (``width`` except at a run's end; a block of 0 steps is dropped). The block
comes out as ``steps`` output words, word k holding byte k of every vector: one step of the
array, element i for pixel i.

Two blocks are held (double buffering), so a block is taken while the previous one goes out: with
``rows == width`` and full blocks the unit moves one vector in and one step out every cycle.
Latency: a block's first step is offered the cycle after its last vector is taken. Both sides are
``lib.stream`` (valid never waits on ready; payloads held until taken).
"""

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Transpose"]


class Transpose(wiring.Component):
    def __init__(self, rows=8, width=8):
        if not (isinstance(rows, int) and rows >= 1 and width in (4, 8, 16, 32)):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"rows must be an integer >= 1 and width 4, 8, 16 or 32 bytes, got {rows!r}, {width!r}")
        self.rows, self.width = rows, width
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"data": 8 * width, "steps": range(width + 1)}))),
            "o": Out(stream.Signature(8 * rows)),
        })

    def elaborate(self, platform):
        m = Module()
        rows, width = self.rows, self.width
        bufs = [[Signal(8 * width, name=f"buf{b}_{i}") for i in range(rows)] for b in range(2)]
        full = [Signal(name=f"full{b}") for b in range(2)]
        steps = [Signal(range(width + 1), name=f"steps{b}") for b in range(2)]

        # --- in: fill buffer `wsel`, vector `wi` ---
        wsel = Signal()
        wi = Signal(range(rows))
        # (control as plain multiplexers of flip-flops: Icarus leaves the case statement an Array index becomes X
        # until one of its inputs changes)
        m.d.comb += self.i.ready.eq(~Mux(wsel, full[1], full[0]))
        with m.If(self.i.valid & self.i.ready):
            for b in range(2):
                for i in range(rows):
                    with m.If((wsel == b) & (wi == i)):
                        m.d.sync += bufs[b][i].eq(self.i.payload.data)
            with m.If(wi == rows - 1):
                m.d.sync += wi.eq(0)
                with m.If(self.i.payload.steps != 0):   # (a block of no steps leaves its buffer to the next)
                    m.d.sync += wsel.eq(~wsel)
                    for b in range(2):
                        with m.If(wsel == b):
                            m.d.sync += [full[b].eq(1), steps[b].eq(self.i.payload.steps)]
            with m.Else():
                m.d.sync += wi.eq(wi + 1)

        # --- out: step `k` of buffer `rsel` ---
        rsel = Signal()
        k = Signal(range(width))
        rows_out = [Array(Array(bufs[b][i][8 * j:8 * j + 8] for j in range(width)) for b in range(2))[rsel][k]
                    for i in range(rows)]
        m.d.comb += [self.o.valid.eq(Mux(rsel, full[1], full[0])), self.o.payload.eq(Cat(*rows_out))]
        with m.If(self.o.valid & self.o.ready):
            with m.If(k == Mux(rsel, steps[1], steps[0]) - 1):
                m.d.sync += [k.eq(0), rsel.eq(~rsel)]
                for b in range(2):
                    with m.If(rsel == b):
                        m.d.sync += full[b].eq(0)
            with m.Else():
                m.d.sync += k.eq(k + 1)
        return m
