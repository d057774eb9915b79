"""A byte-banked buffer: ``width`` consecutive bytes read or written at any byte address, one access per cycle.

The engine's activation, weight and output buffers (docs/engine.md). A row of the buffer is
``lanes`` bytes (``width`` unless given), held in ``lanes // bank_bytes`` banks of ``bank_bytes``
bytes each: byte ``a`` lives in bank ``(a % lanes) // bank_bytes`` at row ``a // lanes``. The
``width`` bytes from any address touch each bank at most once, so an unaligned vector access
costs one cycle whatever the address (a convolution window's run at any stride, an output row
at any channel offset).

Banks one byte wide (the default) map to DP16KD block RAMs 9 bits wide; wider banks map to
DP16KD 36 bits wide with byte enables, so a buffer of many lanes costs no more block RAM than a
narrow one of the same bytes (a DP16KD is 2 KB whatever its shape). With ``dsp="ecp5"`` the banks are
those ``DP16KD`` instantiated (:func:`hw.ecp5_ram.dp16kd`) with their output registers, which
Yosys never enables when it maps a memory itself (the block RAM's clock-to-out without it is most of
a cycle at 175 MHz); ``dsp="generic"`` is a memory and a register, with the same timing.

Ports:

- **write:** ``w_en``, ``w_addr`` (byte address), ``w_data`` (``width`` bytes, byte j for address
  ``w_addr + j``), ``w_strb`` (byte j written only if bit j is set). A write lands at the end of its
  cycle.
- **read:** ``r_en``, ``r_addr``; ``r_data`` holds bytes ``r_addr .. r_addr + width - 1`` ``LATENCY``
  cycles later (4: the banks' registered read, their output register, then the rotation into
  place in two registered stages), and keeps them until the next read. A read in the cycle after a write to the
  same bytes returns the new bytes. A read in the write's own cycle of a bank row the write
  changes is undefined with ``dsp="ecp5"`` (the block RAM's ports collide) and returns the old
  bytes otherwise: the engine never depends on one.
- **bank read** (``bank_port=True``): ``g_en`` with ``g_rows`` (a row per bank) reads every bank at its
  own row; ``g_data`` holds the ``lanes`` bytes, bank-ordered (bank b's bytes at ``b * bank_bytes``),
  ``G_LATENCY`` (3) cycles later. It takes the place of a ``read`` in its cycle (``r_en`` low). The depthwise
  window generator reads one pixel's channels from each bank this way.

Addresses wrap at ``depth`` bytes (a power of two times ``lanes``). An access touches a bank at one row
only: ``width <= lanes - bank_bytes + 1``.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .ecp5_ram import DP16KD_MODES, dp16kd

__all__ = ["ByteBuffer"]


def _pow2(n):
    return isinstance(n, int) and n >= 1 and n & (n - 1) == 0


class ByteBuffer(wiring.Component):
    LATENCY = 4
    G_LATENCY = 3

    def __init__(self, width=8, depth=4096, *, lanes=None, bank_bytes=1, bank_port=False, dsp="generic"):
        lanes = width if lanes is None else lanes
        ok = (width in (4, 8, 16, 32) and _pow2(lanes) and _pow2(bank_bytes) and bank_bytes <= lanes
              and width <= lanes - bank_bytes + 1 and depth % lanes == 0 and _pow2(depth // lanes)
              and dsp in ("generic", "ecp5"))
        if not ok:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"width must be 4, 8, 16 or 32 bytes, lanes and bank_bytes powers of two with width <= "
                             f"lanes - bank_bytes + 1, depth a power-of-two multiple of lanes and dsp 'generic' or "
                             f"'ecp5', got width {width!r}, depth {depth!r}, lanes {lanes!r}, bank_bytes "
                             f"{bank_bytes!r}, dsp {dsp!r}")
        self.width, self.depth, self.lanes, self.bank_bytes = width, depth, lanes, bank_bytes
        self.banks = lanes // bank_bytes
        self.rows = depth // lanes
        self.row_bits = (self.rows - 1).bit_length() or 1
        addr = (depth - 1).bit_length()
        members = {
            "w_en": In(1), "w_addr": In(addr), "w_data": In(8 * width), "w_strb": In(width),
            "r_en": In(1), "r_addr": In(addr), "r_data": Out(8 * width),
        }
        if bank_port:
            members |= {"g_en": In(1), "g_rows": In(data.ArrayLayout(self.row_bits, self.banks)),
                        "g_data": Out(8 * lanes)}
        self.bank_port, self.dsp = bank_port, dsp
        super().__init__(members)

    def _dp16kd_width(self):
        return 9 if self.bank_bytes < 4 else 36

    def _deep(self):
        """DP16KDs stacked in a bank with ``dsp="ecp5"``."""
        return -(-self.rows // DP16KD_MODES[self._dp16kd_width()])

    def _ecp5_bank(self, m, b, w_row, w_data, w_en, r_row):
        """Bank ``b`` as DP16KDs: a byte each in 2048 x 9 below 4 bytes, 4 bytes each in 512 x 36 from 4 on,
        side by side; stacked when deeper than one. Returns the row read two cycles before (the read, then the
        block RAMs' output registers)."""
        bb = self.bank_bytes
        width = self._dp16kd_width()
        per = width // 9                                  # bytes per DP16KD word
        words = DP16KD_MODES[width]
        deep = self._deep()
        low = min(self.row_bits, (words - 1).bit_length())
        outs = []
        for d in range(deep):
            hit = (w_row[low:] == d) if deep > 1 else 1
            out = Signal(8 * bb, name=f"bank{b}_out{d}")
            for k in range(-(-bb // per)):
                data = Cat(Cat(w_data.word_select(k * per + j, 8), Const(0, 1)) for j in range(per))
                en = Cat(w_en[k * per + j] & hit for j in range(per))
                got = Signal(width, name=f"bank{b}_{d}_{k}")
                m.submodules[f"bank{b}_{d}_{k}"] = dp16kd(w_row[:low], data, en, r_row[:low], got, width=width)
                m.d.comb += out.word_select(k, 8 * per).eq(Cat(got.word_select(j, 9)[:8] for j in range(per)))
            outs.append(out)
        if deep == 1:
            return outs[0]
        # the stacked RAM a row came from, delayed as the read is
        sel = [Signal(self.row_bits - low, name=f"bank{b}_sel{n}") for n in range(2)]
        m.d.sync += [sel[0].eq(r_row[low:]), sel[1].eq(sel[0])]
        return Cat(outs).word_select(sel[1], 8 * bb)

    def elaborate(self, platform):
        m = Module()
        w, lanes, bb = self.width, self.lanes, self.bank_bytes
        shift = (lanes - 1).bit_length()
        bshift = (bb - 1).bit_length()
        wbits = (w - 1).bit_length()              # width is 4 to 32: at least 2

        w_row, w_off = self.w_addr[shift:], self.w_addr[:shift]
        r_row, r_off = self.r_addr[shift:], self.r_addr[:shift]
        banks_out = []
        for b in range(self.banks):
            # a bank before the access's first byte holds its last bytes, at the next row (no constant
            # comparison for the last bank, which never wraps)
            wrow = Signal(self.row_bits, name=f"w_row{b}")
            m.d.comb += wrow.eq(w_row + (b < (w_off >> bshift)) if b < self.banks - 1 else w_row)
            datas, ens = [], []
            for lane in range(b * bb, b * bb + bb):
                j = Signal(shift, name=f"w_j{lane}")        # the access's byte landing in this lane
                m.d.comb += j.eq(lane - w_off)
                # (a w-way selection on j's low bits, qualified by j < w: no mux over all the lanes)
                datas.append(self.w_data.word_select(j[:wbits], 8))
                ens.append(self.w_en & (j < w) & self.w_strb.bit_select(j[:wbits], 1))
            rrow = Signal(self.row_bits, name=f"r_row{b}")
            m.d.comb += rrow.eq(r_row + (b < (r_off >> bshift)) if b < self.banks - 1 else r_row)
            row = Signal(self.row_bits, name=f"row{b}")      # the row this bank reads
            m.d.comb += row.eq(Mux(self.g_en, self.g_rows[b], rrow) if self.bank_port else rrow)
            if self.dsp == "ecp5":
                banks_out.append(self._ecp5_bank(m, b, wrow, Cat(datas), Cat(ens), row))
                continue
            en = self.r_en | self.g_en if self.bank_port else self.r_en
            m.submodules[f"bank{b}"] = bank = Memory(shape=8 * bb, depth=self.rows, init=[])
            wp, rp = bank.write_port(granularity=8) if bb > 1 else bank.write_port(), bank.read_port()
            m.d.comb += [wp.addr.eq(wrow), wp.data.eq(Cat(datas)), wp.en.eq(Cat(ens)), rp.addr.eq(row), rp.en.eq(en)]
            out = Signal(8 * bb, name=f"bank{b}_out")     # (the block RAM's output register, as on the ECP5)
            m.d.sync += out.eq(rp.data)
            banks_out.append(out)
        raw = Cat(banks_out)
        # The rotation, byte j of the result being lane (off + j) % lanes, in two registered stages: by granules of
        # G bytes (with the stacked block RAMs' selection, if any), then by bytes within a granule. G balances the
        # two selections (each at most 8 ways in the engine's buffers: one slice level of LUT4 and PFUMX).
        deep = self._deep() if self.dsp == "ecp5" else 1
        gran = min((1 << k for k in range(shift + 1)), key=lambda g: (max(deep * lanes // g, g), g))
        gshift = (gran - 1).bit_length()
        n_gran = -(-(w + gran - 1) // gran)           # the granules a read's bytes can span
        offs = [Signal(shift, name=f"off{n}") for n in range(3)]
        readies = [Signal(name=f"ready{n}") for n in range(3)]
        m.d.sync += [offs[0].eq(r_off), readies[0].eq(self.r_en)]
        m.d.sync += [offs[n].eq(offs[n - 1]) for n in (1, 2)] + [readies[n].eq(readies[n - 1]) for n in (1, 2)]
        coarse = Signal(8 * gran * n_gran)
        top = offs[1][gshift:]
        m.d.sync += coarse.eq(Cat(raw.word_select((top + q)[:shift - gshift], 8 * gran) if shift > gshift
                                  else raw for q in range(n_gran)))
        fine = offs[2][:gshift] if gshift else 0
        with m.If(readies[2]):
            m.d.sync += self.r_data.eq(Cat(coarse.word_select(fine + j, 8) for j in range(w)))
        if self.bank_port:
            g_readies = [Signal(name=f"g_ready{n}") for n in range(2)]
            m.d.sync += [g_readies[0].eq(self.g_en), g_readies[1].eq(g_readies[0])]
            with m.If(g_readies[1]):
                m.d.sync += self.g_data.eq(raw)
        return m
