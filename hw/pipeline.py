"""Delay lines: values registered a number of cycles, each register named ``f"{name}{n}"`` (n from 1).

Used wherever the RTL moves values one register per cycle on purpose (skew, transit between
distant blocks, credits returned a few cycles late); names starting with ``dup_`` keep Yosys
from merging a line with an identical one elsewhere (see :data:`fpga.synth.KEEP`).
"""

from typing import NamedTuple

from amaranth import Signal

__all__ = ["Line", "delay_lines", "delayed"]


class Line(NamedTuple):
    """One delay line of :func:`delay_lines`: its input, register name prefix, register shape
    (``None``: the input's) and whether its registers are reset."""
    value: object
    name: str
    shape: object = None
    reset_less: bool = False


def delay_lines(m, cycles, lines):
    """Several :class:`Line`\\ s advancing together through ``cycles`` registers each in ``m``'s sync
    domain (created stage by stage); returns each line's last register (its input for 0 cycles)."""
    values = [line.value for line in lines]
    for n in range(1, cycles + 1):
        regs = [Signal(v.shape() if line.shape is None else line.shape, name=f"{line.name}{n}",
                       reset_less=line.reset_less) for v, line in zip(values, lines, strict=True)]
        m.d.sync += [reg.eq(v) for reg, v in zip(regs, values, strict=True)]
        values = regs
    return values


def delayed(m, value, cycles, name, *, shape=None, reset_less=False):
    """``value`` through ``cycles`` registers (see :func:`delay_lines`); returns the last one."""
    return delay_lines(m, cycles, [Line(value, name, shape, reset_less)])[0]
