"""Ring-buffer bookkeeping shared by the AXI top's queues (:mod:`hw.gemm_scheduler`,
:mod:`hw.result_framer`): the pointers, the count and a valid bit per entry; the caller keeps
the entries (registers or a memory)."""

from amaranth import Mux, Signal

__all__ = ["ring"]


def ring(m, depth, push, pop, name):
    """The bookkeeping of a ring of ``depth`` entries: ``head`` and ``tail`` pointers (``push``
    moves the tail, ``pop`` the head), the ``count`` of entries and a ``valid`` bit per entry.
    The caller writes entry ``tail`` on a push and reads entry ``head``."""
    head, tail = Signal(range(depth), name=f"{name}_head"), Signal(range(depth), name=f"{name}_tail")
    count, valid = Signal(range(depth + 1), name=f"{name}_count"), Signal(depth, name=f"{name}_valid")
    with m.If(push):
        m.d.sync += tail.eq(Mux(tail == depth - 1, 0, tail + 1))
    with m.If(pop):
        m.d.sync += head.eq(Mux(head == depth - 1, 0, head + 1))
    m.d.sync += [count.eq(count + push - pop),
                 valid.eq((valid | Mux(push, 1 << tail, 0)) & ~Mux(pop, 1 << head, 0))]
    return head, tail, count, valid
