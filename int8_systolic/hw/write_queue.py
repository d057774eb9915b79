"""A buffer write port's two-entry queue: a writer that yields the port to another (``hold``) without that other's
handshake reaching the writer's state.

In the engine the capture of a layer's output has the input buffer's write port first; the input's loader and the
stacker write when it does not. Held directly, each would stop in the cycle the capture writes, and the capture's
write enable would drive the hundreds of loads of its walk or counters. Through this queue the writer sees only
``ready``, a register (the queue's level below two), and the hold drives the queue alone.

``i_en`` with ``i_addr``, ``i_data``, ``i_strb`` writes into the queue (only while ``ready``); ``i_filled`` is the
writer's count of bytes written as it will be once this write is in the buffer. The queue's head is presented on
``w_*`` and leaves it in a cycle without ``hold``; ``filled`` is then the head's ``i_filled``, a cycle later, so it
never counts a byte before it is in the buffer. With ``hold`` low throughout, a write is presented the cycle after it
is queued. ``drained``: nothing will be left in the queue after this cycle but what is queued in it. ``clear`` (the
writer's start, the queue empty) sets ``filled`` to 0.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["WriteQueue"]


class WriteQueue(wiring.Component):
    """See the module docstring. ``addr_width``: bits of the buffer's byte address; ``width``: bytes of its write
    port; ``filled_width``: bits of the count."""

    def __init__(self, *, addr_width, width, filled_width=25):
        if not (isinstance(addr_width, int) and 1 <= addr_width <= 32 and isinstance(width, int) and width >= 1
                and isinstance(filled_width, int) and filled_width >= 1):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"addr_width must be in [1, 32], width and filled_width at least 1, got {addr_width!r}, "
                             f"{width!r}, {filled_width!r}")
        self.addr_width, self.width, self.filled_width = addr_width, width, filled_width
        super().__init__({
            "clear": In(1),
            "i_en": In(1), "i_addr": In(addr_width), "i_data": In(8 * width), "i_strb": In(width),
            "i_filled": In(filled_width), "ready": Out(1),
            "w_en": Out(1), "w_addr": Out(addr_width), "w_data": Out(8 * width), "w_strb": Out(width),
            "hold": In(1), "filled": Out(filled_width), "drained": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        entry = data.StructLayout({"addr": self.addr_width, "data": 8 * self.width, "strb": self.width,
                                   "filled": self.filled_width})
        m.submodules.q = q = fifo.SyncFIFO(width=entry.size, depth=2)
        head = Signal(entry)
        taken = Signal()
        m.d.comb += [q.w_en.eq(self.i_en), q.w_data.eq(Cat(self.i_addr, self.i_data, self.i_strb, self.i_filled)),
                     self.ready.eq(q.w_rdy), head.eq(q.r_data), taken.eq(q.r_rdy & ~self.hold),
                     q.r_en.eq(taken), self.w_en.eq(q.r_rdy), self.w_addr.eq(head.addr), self.w_data.eq(head.data),
                     self.w_strb.eq(head.strb),
                     self.drained.eq((q.level == 0) | ((q.level == 1) & taken))]
        with m.If(taken):
            m.d.sync += self.filled.eq(head.filled)
        with m.If(self.clear):
            m.d.sync += self.filled.eq(0)
        return m
