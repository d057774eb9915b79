"""Delay lines: values registered a number of cycles, each register named ``f"{name}{n}"`` (n from 1); and
:func:`popcount`, a balanced sum of single bits.

Used wherever the RTL moves values one register per cycle on purpose (skew, transit between
distant blocks, credits returned a few cycles late); :func:`ring_delayed` keeps long lines in LUT RAM
instead (the flip-flops, not the LUTs, are what an ECP5-85F runs out of first beside the engine).

:data:`KEEP_APART` marks a register that copies another on purpose (one copy near each group of
its loads, to cut fanout and long routes): synthesis would otherwise merge identical registers
back into one. The attributes travel in the exported Verilog: Vivado honours ``DONT_TOUCH``,
Quartus ``preserve``; Yosys has no attribute of a wire that keeps the flip-flop driving it
(``keep`` keeps the wire, not the flip-flop, and on a wire a multiplier drives it left a driver
conflict that changed the iCE40 netlist), so ``fpga.synth`` marks keep the flip-flops driving
``DONT_TOUCH`` wires. By convention such registers are also named ``dup_*``.
"""

from typing import NamedTuple

from amaranth import Const, Signal
from amaranth.lib.memory import Memory

__all__ = ["KEEP_APART", "RING_DEPTH", "Line", "delay_lines", "delayed", "popcount", "ring_delayed"]

#: Entries of a :func:`ring_delayed` ring: one ECP5 LUT-RAM cell (``TRELLIS_DPR16X4``) deep.
RING_DEPTH = 16

KEEP_APART = {"DONT_TOUCH": "true", "preserve": 1}


class Line(NamedTuple):
    """One delay line of :func:`delay_lines`: its input, register name prefix, register shape
    (``None``: the input's), whether its registers are reset and whether they are copies kept apart
    (:data:`KEEP_APART`)."""
    value: object
    name: str
    shape: object = None
    reset_less: bool = False
    keep: bool = False


def delay_lines(m, cycles, lines):
    """Several :class:`Line`\\ s advancing together through ``cycles`` registers each in ``m``'s sync
    domain (created stage by stage); returns each line's last register (its input for 0 cycles)."""
    values = [line.value for line in lines]
    for n in range(1, cycles + 1):
        regs = [Signal(v.shape() if line.shape is None else line.shape, name=f"{line.name}{n}",
                       reset_less=line.reset_less, attrs=KEEP_APART if line.keep else None)
                for v, line in zip(values, lines, strict=True)]
        m.d.sync += [reg.eq(v) for reg, v in zip(regs, values, strict=True)]
        values = regs
    return values


def delayed(m, value, cycles, name, *, shape=None, reset_less=False, keep=False):
    """``value`` through ``cycles`` registers (see :func:`delay_lines`); returns the last one."""
    return delay_lines(m, cycles, [Line(value, name, shape, reset_less, keep)])[0]


def ring_delayed(m, lines, name, en=None):
    """Values delayed in a ring of :data:`RING_DEPTH` entries of LUT RAM rather than in registers: ``lines`` is a
    list of ``(value, cycles)``, each ``cycles`` from 2 to :data:`RING_DEPTH`; returns each value ``cycles`` cycles
    late, from a register. Free-running, or with ``en`` a pipeline's enable: then the ring moves only in enabled
    cycles, and a value comes out ``cycles`` enabled cycles late, as through ``cycles`` registers enabled by ``en``.
    The ring's contents are not reset, only its pointers: from power-up a line is its registers cycle for cycle, but
    after a reset in mid-run it gives the values it held before for its first ``cycles - 1`` cycles, where
    registers would give what they were given during the reset. So a line in a ring must carry data whose valid
    flag travels in reset registers beside it (as every ``reset_less`` line it replaces does).

    The lines share one write pointer, written every cycle, and those of equal ``cycles`` one read pointer,
    ``cycles - 1`` entries behind it, whose read is registered: never the entry being written. The pointers are
    registers kept apart (:data:`KEEP_APART`), so that two groups of lines far apart do not share one. On ECP5 a
    line costs ``ceil(width / 4)`` ``TRELLIS_DPR16X4`` (six LUT sites each) and ``width`` flip-flops whatever its
    length, where registers would cost ``width * cycles`` flip-flops: worth it from three cycles on.
    """
    for _, cycles in lines:
        if not 2 <= cycles <= RING_DEPTH:
            raise ValueError(f"a ring delay line is 2 to {RING_DEPTH} cycles long, got {cycles}")
    step = 1 if en is None else en
    wp = Signal(range(RING_DEPTH), name=f"dup_{name}_wp", attrs=KEEP_APART)
    m.d.sync += wp.eq(wp + step)
    read_ptrs, outs = {}, []
    for n, (value, cycles) in enumerate(lines):
        if cycles not in read_ptrs:
            rp = Signal(range(RING_DEPTH), init=(1 - cycles) % RING_DEPTH, name=f"dup_{name}_rp{cycles}",
                        attrs=KEEP_APART)
            m.d.sync += rp.eq(rp + step)
            read_ptrs[cycles] = rp
        ring = Memory(shape=value.shape(), depth=RING_DEPTH, init=[])
        m.submodules[f"{name}{n}"] = ring
        w_port, r_port = ring.write_port(), ring.read_port(transparent_for=())
        m.d.comb += [w_port.addr.eq(wp), w_port.data.eq(value), w_port.en.eq(step), r_port.addr.eq(read_ptrs[cycles]),
                     r_port.en.eq(step)]
        outs.append(r_port.data)
    return outs


def popcount(bits):
    """The number of set bits among ``bits`` (1-bit values), as a balanced tree of additions (a plain ``sum`` is a
    chain of adders as deep as the bits are many)."""
    vals = list(bits) or [Const(0, 1)]
    while len(vals) > 1:
        vals = [vals[k] + vals[k + 1] if k + 1 < len(vals) else vals[k] for k in range(0, len(vals), 2)]
    return vals[0]
