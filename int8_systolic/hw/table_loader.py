"""The engine's table loader: a layer's per-channel table, read from memory, written into the core's tables.

In memory a layer's table is ``ENTRY_BYTES`` (12) bytes per output channel, little-endian and packed (an
entry may straddle two beats): the folded bias (int32: ``bias - input_zero_point * sum(weights)``), the
multiplier (int32) and the shift (int8), then 3 bytes of padding (:func:`pack_table` writes it); the table's
length is rounded up to whole beats (:func:`table_bytes`), the bytes past the last entry unused. On ``start`` the
loader reads the ``channels`` entries at ``addr`` through a read port (``rd_cmd``/``rd_data``, an
:class:`hw.axi_reader.AxiReader`'s) and writes entry n on ``cfg`` (the core's table stream) at
``lane = n % cols``, ``addr = base + n // cols``: the table rows of the layer's column tiles from
``base`` on. ``done`` pulses after the last entry is written. The core takes a ``cfg`` write every cycle, so
the loader takes a beat every cycle the port offers one (an entry a cycle at most: at 128 bits, three beats in
four). With ``row_stage`` each write carries ``stage`` too (the layer's output stage, for the core's
:class:`hw.accelerator.Accelerator` with ``row_stage``; held from ``start`` to ``done``).
"""

import numpy as np
from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_reader import command_layout
from .channel_table import RowStage, config_layout

__all__ = ["ENTRY_BYTES", "TableLoader", "pack_table", "table_bytes"]

ENTRY_BYTES = 12


def table_bytes(channels, data_width):
    """A table's length in memory and on the read port: ``channels`` entries, rounded up to whole beats."""
    nbytes = data_width // 8
    return -(-channels * ENTRY_BYTES // nbytes) * nbytes


def pack_table(bias, multiplier, shift):
    """A layer's table in the engine's memory format: for each channel its folded bias and multiplier (int32) and
    shift (int8), 12 bytes."""
    bias, multiplier, shift = (np.asarray(v, np.int64).reshape(-1) for v in (bias, multiplier, shift))
    n = bias.size
    if not (multiplier.size == shift.size == n):
        raise ValueError(f"a table needs one bias, multiplier and shift per channel, got {n}, {multiplier.size}, "
                         f"{shift.size}")
    for name, v, lo, hi in (("bias", bias, -2**31, 2**31 - 1), ("multiplier", multiplier, -2**31, 2**31 - 1),
                            ("shift", shift, -31, 30)):
        if v.size and (v.min() < lo or v.max() > hi):
            bad = int(v.min() if v.min() < lo else v.max())
            raise ValueError(f"table {name} values must be in [{lo}, {hi}], found {bad}")
    out = np.zeros((n, ENTRY_BYTES), np.uint8)
    out[:, 0:4] = bias.astype("<i4").view(np.uint8).reshape(n, 4)
    out[:, 4:8] = multiplier.astype("<i4").view(np.uint8).reshape(n, 4)
    out[:, 8] = shift.astype(np.int8).view(np.uint8)
    return out.tobytes()


class TableLoader(wiring.Component):
    def __init__(self, cols, max_col_tiles, data_width=64, *, row_stage=False):
        if data_width not in (32, 64, 128):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, got {data_width!r}")
        self.cols, self.max_col_tiles, self.data_width, self.row_stage = cols, max_col_tiles, data_width, row_stage
        super().__init__({
            "start": In(1), "addr": In(32), "channels": In(16), "base": In(range(max_col_tiles)),
            **({"stage": In(RowStage)} if row_stage else {}),
            "rd_cmd": Out(stream.Signature(command_layout())),
            "rd_data": In(stream.Signature(data.StructLayout({"data": data_width, "last": 1}))),
            "cfg": Out(stream.Signature(config_layout(cols, max_col_tiles, row_stage))),
            "busy": Out(1), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        nbytes = self.data_width // 8
        # The entries' bytes go through `acc`, lowest address first: `have` bytes valid (a multiple of 4, the
        # greatest common divisor of a beat and an entry); a beat lands above them, an entry leaves from the bottom.
        cap = ENTRY_BYTES + nbytes
        acc = Signal(8 * cap)
        have = Signal(range(cap + 1))
        entry = Signal(ENTRY_BYTES * 8)           # the entry being written (with `pending`)
        pending = Signal()                        # an entry assembled, not yet written
        lane = Signal(range(max(self.cols, 2)))
        row = Signal(range(self.max_col_tiles))
        left = Signal(16)                         # entries not yet written
        more = Signal()                           # entries remain to be assembled (a register: no count on `ready`)

        length = Signal(20)
        m.d.comb += [length.eq((self.channels * ENTRY_BYTES + nbytes - 1) & ~(nbytes - 1)),
                     self.rd_cmd.payload.addr.eq(self.addr), self.rd_cmd.payload.length.eq(length)]
        m.d.sync += self.done.eq(0)
        issued = Signal()
        with m.If(self.start & ~self.busy):
            m.d.sync += [self.busy.eq(self.channels != 0), issued.eq(0), lane.eq(0), row.eq(self.base),
                         left.eq(self.channels), more.eq(self.channels != 0)]
            with m.If(self.channels == 0):
                m.d.sync += self.done.eq(1)
        m.d.comb += self.rd_cmd.valid.eq(self.busy & ~issued)
        with m.If(self.rd_cmd.valid & self.rd_cmd.ready):
            m.d.sync += issued.eq(1)

        # an entry leaves when `acc` holds one and the register is free (or written in this cycle); a beat is taken
        # when it fits above what stays (the padding after the last entry is taken and dropped with the rest)
        written = Signal()
        emit = Signal()
        m.d.comb += [written.eq(self.cfg.valid & self.cfg.ready),
                     emit.eq((have >= ENTRY_BYTES) & more & (~pending | self.cfg.ready))]
        kept = Signal(range(cap + 1))             # bytes that stay in `acc` this cycle
        m.d.comb += kept.eq(have - Mux(emit, ENTRY_BYTES, 0))
        m.d.comb += self.rd_data.ready.eq(self.busy & (kept + nbytes <= cap))
        take = Signal()
        m.d.comb += take.eq(self.rd_data.valid & self.rd_data.ready)
        rest = Signal.like(acc)
        m.d.comb += rest.eq(Mux(emit, acc >> (8 * ENTRY_BYTES), acc))
        with m.If(take):
            placed = Signal.like(acc)
            with m.Switch(kept):
                for k in range(0, cap - nbytes + 1, 4):
                    with m.Case(k):
                        m.d.comb += placed.eq(Cat(rest[:8 * k], self.rd_data.payload.data))
            m.d.sync += [acc.eq(placed), have.eq(kept + nbytes)]
        with m.Else():
            m.d.sync += [acc.eq(rest), have.eq(kept)]
        with m.If(self.start & ~self.busy):
            m.d.sync += have.eq(0)          # (the last table's padding dropped: a beat lands above `have` bytes only)
        with m.If(emit):
            # (assembled after this one: the written, the one waiting and this one; so more remain while
            # channels - left + pending + 1 < channels)
            m.d.sync += [entry.eq(acc[:ENTRY_BYTES * 8]), more.eq(left > pending + 1)]
        with m.If(emit):
            m.d.sync += pending.eq(1)
        with m.Elif(written):
            m.d.sync += pending.eq(0)
        m.d.comb += [
            self.cfg.valid.eq(pending), self.cfg.payload.addr.eq(row), self.cfg.payload.lane.eq(lane),
            self.cfg.payload.entry.bias.eq(entry[0:32]), self.cfg.payload.entry.multiplier.eq(entry[32:64]),
            self.cfg.payload.entry.shift.eq(entry[64:70]),
        ]
        if self.row_stage:
            m.d.comb += self.cfg.payload.stage.eq(self.stage)
        with m.If(written):
            m.d.sync += left.eq(left - 1)
            with m.If(lane == self.cols - 1):
                m.d.sync += [lane.eq(0), row.eq(row + 1)]
            with m.Else():
                m.d.sync += lane.eq(lane + 1)
            with m.If(left == 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        return m
