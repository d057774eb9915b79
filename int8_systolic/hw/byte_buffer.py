"""A byte-banked buffer: ``width`` consecutive bytes read or written at any byte address, one access per cycle.

The engine's activation and output buffers (docs/engine.md). Byte ``a`` lives in bank
``a % width`` at row ``a // width``, so the ``width`` bytes from any address touch each bank once:
an unaligned vector access costs one cycle, whatever the address (a convolution window's run
at any stride, an output row at any channel offset). Each bank is one memory a byte wide, so on
ECP5 it maps to DP16KD block RAMs (9 bits wide, 2048 deep each).

Ports:

- **write:** ``w_en``, ``w_addr`` (byte address), ``w_data`` (``width`` bytes, byte j for address
  ``w_addr + j``), ``w_strb`` (byte j written only if bit j is set). A write lands at the end of its
  cycle.
- **read:** ``r_en``, ``r_addr``; ``r_data`` holds bytes ``r_addr .. r_addr + width - 1`` ``LATENCY``
  cycles later (2: the banks' registered read, then the rotation into place, registered), and
  keeps them until the next read. A read in the cycle after a write to the same bytes returns the
  new bytes (the banks' reads are not transparent; a read in the write's own cycle returns the old).

Addresses wrap at ``depth`` bytes (a power of two times ``width``).
"""

from amaranth import Array, Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["ByteBuffer"]


class ByteBuffer(wiring.Component):
    LATENCY = 2

    def __init__(self, width=8, depth=4096):
        ok = width in (4, 8, 16, 32) and depth % width == 0 and (depth // width) & (depth // width - 1) == 0
        if not ok:
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"width must be 4, 8, 16 or 32 bytes and depth a power-of-two multiple of it, got "
                             f"width {width!r}, depth {depth!r}")
        self.width, self.depth = width, depth
        self.rows = depth // width
        addr = (depth - 1).bit_length()
        super().__init__({
            "w_en": In(1), "w_addr": In(addr), "w_data": In(8 * width), "w_strb": In(width),
            "r_en": In(1), "r_addr": In(addr), "r_data": Out(8 * width),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.width
        shift = (w - 1).bit_length()
        row_bits = (self.rows - 1).bit_length() or 1

        w_row, w_off = self.w_addr[shift:], self.w_addr[:shift]
        r_row, r_off = self.r_addr[shift:], self.r_addr[:shift]
        w_bytes = Array(self.w_data[8 * j:8 * j + 8] for j in range(w))
        w_strb = Array(self.w_strb[j] for j in range(w))
        banks_out = []
        for b in range(w):
            m.submodules[f"bank{b}"] = bank = Memory(shape=8, depth=self.rows, init=[])
            wp, rp = bank.write_port(), bank.read_port()
            # bank b holds the byte j of the vector with (off + j) % w == b, at row + (off + j >= w)
            j = Signal(shift, name=f"w_j{b}")
            m.d.comb += j.eq(b - w_off)
            # (bank w - 1 never wraps to the next row: no constant comparison for it)
            wrow = Signal(row_bits, name=f"w_row{b}")
            m.d.comb += wrow.eq(w_row + (b < w_off) if b < w - 1 else w_row)
            m.d.comb += [wp.addr.eq(wrow), wp.data.eq(w_bytes[j]), wp.en.eq(self.w_en & w_strb[j])]
            rrow = Signal(row_bits, name=f"r_row{b}")
            m.d.comb += rrow.eq(r_row + (b < r_off) if b < w - 1 else r_row)
            m.d.comb += [rp.addr.eq(rrow), rp.en.eq(self.r_en)]
            banks_out.append(rp.data)
        # the rotation: byte j of the result is bank (off + j) % w
        off = Signal(shift)
        with m.If(self.r_en):
            m.d.sync += off.eq(r_off)
        banks = Array(banks_out)
        rotated = Cat(banks[(off + j)[:shift]] for j in range(w))
        ready = Signal()
        m.d.sync += ready.eq(self.r_en)
        with m.If(ready):
            m.d.sync += self.r_data.eq(rotated)
        return m
