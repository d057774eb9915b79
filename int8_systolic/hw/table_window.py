"""The table window: the TABLE_* registers as a way to write the core's per-channel tables.

Contract: ``index`` (TABLE_INDEX's lane and row), ``bias`` and ``multiplier`` are the staged
registers; ``commit`` is TABLE_SHIFT's strobe, with the shift in ``shift``. At a commit the entry
goes to the core's ``cfg`` stream a cycle later (a register: the core's tables are across the die)
unless it is refused: out of range (``row`` >= ``max_col_tiles`` or ``lane`` >= ``cols``: the
``range`` error) or into a queued or running GEMM's rows (``row_busy``, which answers for
``check_row``: the ``busy`` error). Either way the index moves on to the next lane, then the next
row (``index_next`` with ``index_load``, loaded by the register block). The range flags are
registers made from the index, current at a commit: register writes are at least five cycles apart.
"""

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .channel_table import config_layout
from .register_block import register_layout
from .registers import reg

__all__ = ["TableWindow"]


class TableWindow(wiring.Component):
    """TABLE_* registers to the core's ``cfg`` stream (see the module docstring)."""

    def __init__(self, cols, max_col_tiles):
        self.cols, self.max_col_tiles = cols, max_col_tiles
        index = register_layout(reg("TABLE_INDEX"))
        super().__init__({
            "index": In(index), "bias": In(32), "multiplier": In(32), "commit": In(1),
            "shift": In(reg("TABLE_SHIFT").field("SHIFT").width),
            "index_next": Out(index), "index_load": Out(1),
            "check_row": Out(range(max(max_col_tiles, 2))), "row_busy": In(1),
            "cfg": Out(stream.Signature(config_layout(cols, max_col_tiles))),
            "errors": Out(data.StructLayout({"range": 1, "busy": 1})),
        })

    def elaborate(self, platform):
        m = Module()
        lane, row = self.index.lane, self.index.row
        m.d.comb += self.check_row.eq(row)
        out_of_range = Signal()
        m.d.sync += out_of_range.eq((row >= self.max_col_tiles) | (lane >= self.cols))
        m.d.comb += [self.errors.range.eq(self.commit & out_of_range),
                     self.errors.busy.eq(self.commit & ~out_of_range & self.row_busy)]
        cfg = self.cfg.payload
        m.d.sync += [self.cfg.valid.eq(self.commit & ~out_of_range & ~self.row_busy),
                     cfg.addr.eq(row), cfg.lane.eq(lane),
                     cfg.entry.bias.eq(self.bias), cfg.entry.multiplier.eq(self.multiplier),
                     cfg.entry.shift.eq(self.shift)]
        lane_last = Signal()
        m.d.sync += lane_last.eq(lane >= self.cols - 1)
        m.d.comb += self.index_load.eq(self.commit)
        with m.If(lane_last):
            m.d.comb += [self.index_next.lane.eq(0), self.index_next.row.eq(row + 1)]
        with m.Else():
            m.d.comb += [self.index_next.lane.eq(lane + 1), self.index_next.row.eq(row)]
        return m
