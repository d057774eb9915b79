"""A byte-banked buffer: ``width`` consecutive bytes read or written at any byte address, one access per cycle.

The engine's activation, weight and output buffers (docs/engine.md). A row of the buffer is
``lanes`` bytes (``width`` unless given), held in ``lanes // bank_bytes`` banks of ``bank_bytes``
bytes each: byte ``a`` lives in bank ``(a % lanes) // bank_bytes`` at row ``a // lanes``. The
``width`` bytes from any address touch each bank at most once, so an unaligned vector access
costs one cycle whatever the address (a convolution window's run at any stride, an output row
at any channel offset).

Banks one byte wide (the default) map to DP16KD block RAMs 9 bits wide; wider banks map to
DP16KD 36 bits wide with byte enables, so a buffer of many lanes costs no more block RAM than a
narrow one of the same bytes (a DP16KD is 2 KB whatever its shape).

Ports:

- **write:** ``w_en``, ``w_addr`` (byte address), ``w_data`` (``width`` bytes, byte j for address
  ``w_addr + j``), ``w_strb`` (byte j written only if bit j is set). A write lands at the end of its
  cycle.
- **read:** ``r_en``, ``r_addr``; ``r_data`` holds bytes ``r_addr .. r_addr + width - 1`` ``LATENCY``
  cycles later (2: the banks' registered read, then the rotation into place, registered), and
  keeps them until the next read. A read in the cycle after a write to the same bytes returns the
  new bytes (the banks' reads are not transparent; a read in the write's own cycle returns the old).
- **bank read** (``bank_port=True``): ``g_en`` with ``g_rows`` (a row per bank) reads every bank at its
  own row; ``g_data`` holds the ``lanes`` bytes, bank-ordered (bank b's bytes at ``b * bank_bytes``),
  ``LATENCY`` cycles later. It takes the place of a ``read`` in its cycle (``r_en`` low). The depthwise
  window generator reads one pixel's channels from each bank this way.

Addresses wrap at ``depth`` bytes (a power of two times ``lanes``). An access touches a bank at one row
only: ``width <= lanes - bank_bytes + 1``.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["ByteBuffer"]


def _pow2(n):
    return isinstance(n, int) and n >= 1 and n & (n - 1) == 0


class ByteBuffer(wiring.Component):
    LATENCY = 2

    def __init__(self, width=8, depth=4096, *, lanes=None, bank_bytes=1, bank_port=False):
        lanes = width if lanes is None else lanes
        ok = (width in (4, 8, 16, 32) and _pow2(lanes) and _pow2(bank_bytes) and bank_bytes <= lanes
              and width <= lanes - bank_bytes + 1 and depth % lanes == 0 and _pow2(depth // lanes))
        if not ok:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"width must be 4, 8, 16 or 32 bytes, lanes and bank_bytes powers of two with width <= "
                             f"lanes - bank_bytes + 1, and depth a power-of-two multiple of lanes, got width "
                             f"{width!r}, depth {depth!r}, lanes {lanes!r}, bank_bytes {bank_bytes!r}")
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
        self.bank_port = bank_port
        super().__init__(members)

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
            m.submodules[f"bank{b}"] = bank = Memory(shape=8 * bb, depth=self.rows, init=[])
            wp, rp = bank.write_port(granularity=8) if bb > 1 else bank.write_port(), bank.read_port()
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
            m.d.comb += [wp.addr.eq(wrow), wp.data.eq(Cat(datas)), wp.en.eq(Cat(ens))]
            rrow = Signal(self.row_bits, name=f"r_row{b}")
            m.d.comb += rrow.eq(r_row + (b < (r_off >> bshift)) if b < self.banks - 1 else r_row)
            if self.bank_port:
                with m.If(self.g_en):
                    m.d.comb += rp.addr.eq(self.g_rows[b])
                with m.Else():
                    m.d.comb += rp.addr.eq(rrow)
                m.d.comb += rp.en.eq(self.r_en | self.g_en)
            else:
                m.d.comb += [rp.addr.eq(rrow), rp.en.eq(self.r_en)]
            banks_out.append(rp.data)
        raw = Cat(banks_out)
        # the rotation: byte j of the result is lane (off + j) % lanes
        off = Signal(shift)
        with m.If(self.r_en):
            m.d.sync += off.eq(r_off)
        rotated = Cat(raw.word_select((off + j)[:shift], 8) for j in range(w))
        ready = Signal()
        m.d.sync += ready.eq(self.r_en)
        with m.If(ready):
            m.d.sync += self.r_data.eq(rotated)
        if self.bank_port:
            g_ready = Signal()
            m.d.sync += g_ready.eq(self.g_en)
            with m.If(g_ready):
                m.d.sync += self.g_data.eq(raw)
        return m
