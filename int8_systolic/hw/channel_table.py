"""The per-channel table of a requantizer lane: each output channel's folded bias, multiplier and
shift, looked up by the column-tile tag of a result row (:class:`ChannelTable`, read latency 4).
"""

import operator
from functools import reduce

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .ecp5_ram import LUTRAM_BITS, LUTRAM_DEPTH, dp16kd
from .pipeline import KEEP_APART

__all__ = ["ChannelEntry", "ChannelTable", "RowStage", "config_layout"]

ChannelEntry = data.StructLayout({"bias": signed(32), "multiplier": signed(32), "shift": signed(6)})


#: A table row's output stage (:class:`hw.accelerator.Accelerator` with ``row_stage``): the output zero point and the
#: activation bounds of the GEMM whose column tile the row is.
RowStage = data.StructLayout({"output_offset": signed(8), "act_min": signed(8), "act_max": signed(8)})


def config_layout(cols, max_col_tiles, row_stage=False):
    """Payload of the ``cfg`` stream: one per-channel table entry (with ``row_stage``, and its row's output stage)."""
    fields = {"addr": range(max_col_tiles), "lane": range(max(cols, 2)), "entry": ChannelEntry}
    if row_stage:
        fields["stage"] = RowStage
    return data.StructLayout(fields)


# ECP5 block RAM tables (dsp="ecp5"): 1024 x 18 DP16KDs, as many as a table entry needs.
_DP16KD_COUNT = -(-ChannelEntry.size // 18)


class ChannelTable(wiring.Component):
    """One lane's per-channel table, read in four cycles: ``r_data`` is the entry at the
    ``r_addr`` of four cycles earlier (the fourth a register that only copies); a read whose
    ``r_addr`` comes with or after a write's ``w_en`` sees it. ``w_en`` has one bit per bank (the
    writer decodes the bank, :meth:`in_bank`, before its register, so no decoder sits between that
    register and the LUT-RAM cells' write enables).

    With ``ram="distributed"`` the table is split into banks of 16 entries (one ECP5 LUT-RAM
    cell deep), each with its own copy of the read address (copies kept apart, KEEP_APART);
    cycle 1 registers the address copies, cycle 2 reads every bank into a register that is zero
    unless the entry is in that bank, cycle 3 ORs the banks' registers.
    With ``ram="block"`` it is one memory and the third cycle is a plain register. With
    ``dsp="ecp5"`` it is four ``DP16KD`` block RAMs (1024 x 18 each, written on port A, read on
    port B) whose output registers are the third cycle; a table write and a read of the same
    entry must not fall in one cycle (the host writes the tables before a layer's steps)."""

    READ_LATENCY = 4    # r_data is the entry at r_addr of this many cycles earlier
    # A write with w_en in cycle t is seen by a read whose r_addr comes in cycle t + WRITE_LATENCY or later
    # (with dsp="ecp5" a write must not come in the cycle after a read of its entry: see above).
    WRITE_LATENCY = 0

    def __init__(self, depth, ram, dsp="generic"):
        self.depth, self.ram, self.dsp = depth, ram, dsp
        self.banks = -(-depth // LUTRAM_DEPTH) if ram == "distributed" and dsp != "ecp5" else 1
        super().__init__({"w_addr": In(range(depth)), "w_data": In(ChannelEntry), "w_en": In(self.banks),
                          "r_addr": In(range(depth)), "r_data": Out(ChannelEntry)})

    def in_bank(self, addr, bank):
        """Whether table address ``addr`` is in ``bank``."""
        return (addr >> LUTRAM_BITS) == bank if self.banks > 1 else 1

    def elaborate(self, platform):
        m = Module()
        # The lookup's last cycle, a register that only copies: the lane's first stage computes
        # from the entry's fields, and the RAM (or the banks' OR) stays out of that cycle.
        r_data = Signal(ChannelEntry, reset_less=True)
        r_data_out = Signal(ChannelEntry, name="r_data_out", reset_less=True)
        m.d.sync += r_data_out.eq(r_data)
        m.d.comb += self.r_data.eq(r_data_out)
        if self.dsp == "ecp5":
            # Cycle 1 the fabric address register, cycle 2 the block RAM's read, cycle 3 its
            # output register (REGMODE OUTREG, which Yosys never enables by itself: the RAM's
            # clock-to-out without it is most of a cycle). Four 1024 x 18 RAMs side by side, one
            # address register beside each.
            w_data = Cat(self.w_data.as_value(), Const(0, 18 * _DP16KD_COUNT - ChannelEntry.size))
            r_data_bits = Signal(18 * _DP16KD_COUNT)
            m.d.comb += r_data.eq(r_data_bits[:ChannelEntry.size])
            for k in range(_DP16KD_COUNT):
                addr = Signal(range(self.depth), attrs=KEEP_APART, name=f"dup_addr{k}", reset_less=True)
                m.d.sync += addr.eq(self.r_addr)
                m.submodules[f"bram{k}"] = dp16kd(self.w_addr, w_data[18 * k:18 * k + 18], self.w_en[0],
                                                   addr, r_data_bits[18 * k:18 * k + 18])
            return m
        if self.banks == 1:
            mem = Memory(shape=ChannelEntry, depth=self.depth, init=[], attrs={"ram_style": self.ram})
            m.submodules.bank0 = mem
            wp, rp = mem.write_port(), mem.read_port()
            addr = Signal(range(self.depth), attrs=KEEP_APART, name="dup_addr0", reset_less=True)
            m.d.sync += [addr.eq(self.r_addr), r_data.eq(rp.data)]
            m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), wp.en.eq(self.w_en[0]),
                         rp.addr.eq(addr)]
            return m
        # Each bank's read register holds zero unless the entry is in that bank (its synchronous
        # reset, from a register beside it), so the third cycle is an OR of the banks: no bank
        # select fans out to every bit of the entry.
        reads = []
        for b in range(self.banks):
            depth = min(LUTRAM_DEPTH, self.depth - b * LUTRAM_DEPTH)
            mem = Memory(shape=ChannelEntry, depth=depth, init=[], attrs={"ram_style": self.ram})
            m.submodules[f"bank{b}"] = mem
            wp, rp = mem.write_port(), mem.read_port(domain="comb")
            # (copies kept apart: every lane's table has the same addresses and misses)
            addr = Signal(range(depth), attrs=KEEP_APART, name=f"dup_addr{b}", reset_less=True)
            miss = Signal(attrs=KEEP_APART, name=f"dup_miss{b}", reset_less=True)
            m.d.sync += [addr.eq(self.r_addr), miss.eq(~self.in_bank(self.r_addr, b))]
            m.d.comb += [wp.addr.eq(self.w_addr), wp.data.eq(self.w_data), rp.addr.eq(addr),
                         wp.en.eq(self.w_en[b])]
            read = Signal(ChannelEntry.size, name=f"read{b}", reset_less=True)
            m.d.sync += read.eq(Mux(miss, 0, rp.data.as_value()))
            reads.append(read)
        m.d.sync += r_data.eq(reduce(operator.or_, reads))
        return m
