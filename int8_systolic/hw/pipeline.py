"""Delay lines: values registered a number of cycles, each register named ``f"{name}{n}"`` (n from 1); and
:func:`popcount`, a balanced sum of single bits.

Used wherever the RTL moves values one register per cycle on purpose (skew, transit between
distant blocks, credits returned a few cycles late).

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

__all__ = ["KEEP_APART", "Line", "delay_lines", "delayed", "popcount"]

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


def popcount(bits):
    """The number of set bits among ``bits`` (1-bit values), as a balanced tree of additions (a plain ``sum`` is a
    chain of adders as deep as the bits are many)."""
    vals = list(bits) or [Const(0, 1)]
    while len(vals) > 1:
        vals = [vals[k] + vals[k + 1] if k + 1 < len(vals) else vals[k] for k in range(0, len(vals), 2)]
    return vals[0]
