"""The accelerator top: systolic array + per-channel tables + requantizer lanes, on streams.

Programming model (what a host does, in order; :mod:`sim.host` implements it):

1. Set the per-layer inputs: ``k_steps`` (K >= 1), ``n_tiles`` (column tiles,
   ceil(N / cols)), ``output_offset`` (output zero point), ``act_min``/``act_max`` and
   ``bypass``. They must stay stable while a layer runs.
2. Write the per-channel table through ``cfg``: for output channel n, ``lane = n % cols``,
   ``addr = n // cols``, the folded bias ``bias - z_a * sum_k w[k][n]``, and the
   ``multiplier``/``shift`` from QuantizeMultiplier. Always ready; one write per cycle.
3. Stream the tiles, row tile outer, column tile inner (``for mt: for nt: for k``): each
   step is one transfer on ``act`` (``a[mt*rows + i][k]`` for i < rows, zero-padded) and
   one on ``wts`` (``w[k][nt*cols + j]`` for j < cols, zero-padded); the two are consumed
   together.
4. Read ``res``: per tile, ``rows`` transfers of ``cols`` int32 lanes (row i of the tile),
   each the int8 result sign-extended (or the int32 accumulator with ``bypass``).

Throughput: one step per cycle while both inputs are valid and ``res`` is ready; tiles
of fewer than ``max(rows, cols)`` steps are padded with idle cycles. Latency: a tile's
last result row leaves :attr:`Accelerator.latency` cycles after its last step, so a GEMM
at full rate takes :meth:`Accelerator.cycles` cycles (tested in Amaranth's simulator). Backpressure on
``res`` stalls the whole datapath (nothing is lost, duplicated or reordered).
"""

from amaranth import Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .array import SystolicArray
from .requantizer import Requantizer

__all__ = ["Accelerator", "ChannelEntry", "config_layout"]

ChannelEntry = data.StructLayout({"bias": signed(32), "multiplier": signed(32), "shift": signed(6)})


def config_layout(cols, max_col_tiles):
    """Payload of the ``cfg`` stream: one per-channel table entry."""
    return data.StructLayout({"addr": range(max_col_tiles), "lane": range(max(cols, 2)), "entry": ChannelEntry})


class Accelerator(wiring.Component):
    """``rows x cols`` int8 GEMM accelerator with TFLite requantization (see module docstring).

    Parameters: ``rows``, ``cols`` (>= 1), ``rounding`` ("double"/"single"),
    ``max_col_tiles`` (depth of the per-channel tables: N <= max_col_tiles * cols).
    """

    def __init__(self, rows=8, cols=8, rounding="double", max_col_tiles=64):
        error = None
        if rounding not in ("double", "single"):
            error = f"rounding must be 'double' or 'single', got {rounding!r}"
        elif not isinstance(max_col_tiles, int) or max_col_tiles < 1:
            error = f"max_col_tiles must be an integer >= 1, got {max_col_tiles!r}"
        for name, v in (("rows", rows), ("cols", cols)):
            if not isinstance(v, int) or v < 1:
                error = f"{name} must be an integer >= 1, got {v!r}"
        if error:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(error)
        self._array = SystolicArray(rows, cols)
        self._lanes = [Requantizer(rounding) for _ in range(cols)]  # one per column, in lockstep
        self.rows, self.cols, self.rounding, self.max_col_tiles = rows, cols, rounding, max_col_tiles
        super().__init__({
            "act": In(stream.Signature(data.ArrayLayout(signed(8), rows))),
            "wts": In(stream.Signature(data.ArrayLayout(signed(8), cols))),
            "cfg": In(stream.Signature(config_layout(cols, max_col_tiles))),
            "res": Out(stream.Signature(data.ArrayLayout(signed(32), cols))),
            "k_steps": In(24),
            "n_tiles": In(range(max_col_tiles + 1)),
            "output_offset": In(signed(8)),
            "act_min": In(signed(8)),
            "act_max": In(signed(8)),
            "bypass": In(1),
        })

    @property
    def name(self):
        """Verilog module name encoding the configuration."""
        return f"int8_systolic_{self.rows}x{self.cols}_{self.rounding}"

    @property
    def min_tile_steps(self):
        """Shortest tile (steps); shorter tiles are padded with idle cycles up to this."""
        return self._array.min_tile_steps

    @property
    def latency(self):
        """Cycles from a tile's last step accepted to its last result row transferred (``res`` ready).

        The array's read-out latency, ``rows - 1`` more cycles for the tile's later rows,
        one cycle of table lookup and the requantizer pipeline.
        """
        return self._array.latency + self.rows - 1 + 1 + self._lanes[0].latency

    def cycles(self, m, k, n):
        """Cycles of a full-rate GEMM from the first step accepted to the last result transferred."""
        tiles = -(-m // self.rows) * -(-n // self.cols)
        return (tiles - 1) * max(k, self.min_tile_steps) + k + self.latency

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        m.submodules.array = array = self._array

        # Requantizer lanes (one per column), all in lockstep.
        lanes = self._lanes
        for j, lane in enumerate(lanes):
            m.submodules[f"requant{j}"] = lane
            m.d.comb += [lane.output_offset.eq(self.output_offset), lane.act_min.eq(self.act_min),
                         lane.act_max.eq(self.act_max), lane.bypass.eq(self.bypass),
                         lane.o.ready.eq(self.res.ready), self.res.payload[j].eq(lane.o.payload)]
        m.d.comb += self.res.valid.eq(lanes[0].o.valid)

        # Lookup stage: holds one array row while the per-channel tables are read.
        lk_valid = Signal()
        lk_data = Signal(data.ArrayLayout(signed(32), C))
        lk_en = Signal()
        m.d.comb += lk_en.eq(~lk_valid | lanes[0].i.ready)
        with m.If(lk_en):
            m.d.sync += [lk_valid.eq(array.row_valid), lk_data.eq(array.row_data)]
        en = Signal()
        m.d.comb += [en.eq(~array.row_valid | lk_en), array.en.eq(en)]

        m.d.comb += self.cfg.ready.eq(1)
        for j, lane in enumerate(lanes):
            table = Memory(shape=ChannelEntry, depth=self.max_col_tiles, init=[])
            m.submodules[f"table{j}"] = table
            wp = table.write_port()
            rp = table.read_port()
            m.d.comb += [wp.addr.eq(self.cfg.payload.addr), wp.data.eq(self.cfg.payload.entry),
                         wp.en.eq(self.cfg.valid & (self.cfg.payload.lane == j)),
                         rp.addr.eq(array.row_tag), rp.en.eq(lk_en)]
            m.d.comb += [lane.i.valid.eq(lk_valid), lane.i.payload.acc.eq(lk_data[j]),
                         lane.i.payload.bias.eq(rp.data.bias), lane.i.payload.multiplier.eq(rp.data.multiplier),
                         lane.i.payload.shift.eq(rp.data.shift)]

        # Sequencer: count k within a tile, tag tiles with their column-tile index, pad short tiles.
        k = Signal(24)
        tile = Signal(range(self.max_col_tiles + 1))
        pad = Signal(range(self.min_tile_steps + 1))
        padding = Signal()
        m.d.comb += padding.eq(pad != 0)
        step = Signal()
        first, last = Signal(), Signal()
        m.d.comb += [
            step.eq(self.act.valid & self.wts.valid & ~padding),
            self.act.ready.eq(en & self.wts.valid & ~padding),
            self.wts.ready.eq(en & self.act.valid & ~padding),
            first.eq(k == 0),
            last.eq(k == self.k_steps - 1),
            array.flags.valid.eq(step), array.flags.first.eq(first), array.flags.last.eq(last),
            array.tag.eq(tile),
        ]
        for i in range(R):
            m.d.comb += array.a[i].eq(self.act.payload[i])
        for j in range(C):
            m.d.comb += array.w[j].eq(self.wts.payload[j])
        with m.If(en):
            with m.If(step):
                m.d.sync += k.eq(k + 1)
                with m.If(last):
                    m.d.sync += k.eq(0)
                    m.d.sync += tile.eq(0)
                    with m.If(tile + 1 < self.n_tiles):
                        m.d.sync += tile.eq(tile + 1)
                    with m.If(self.k_steps < self.min_tile_steps):
                        m.d.sync += pad.eq(self.min_tile_steps - self.k_steps)
            with m.Elif(padding):
                m.d.sync += pad.eq(pad - 1)
        return m
