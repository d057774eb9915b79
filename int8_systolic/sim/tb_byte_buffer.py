"""cocotb: ``hw.byte_buffer.ByteBuffer`` as Verilog, against a bytearray (the ECP5 build's ``DP16KD`` banks with
``sim/ecp5_models.py``'s model, or the generic build).

Random unaligned writes with random strobes, unaligned reads and (with the bank port) bank reads, every read's
bytes compared ``ByteBuffer.LATENCY`` (bank reads ``G_LATENCY``) cycles later. A read never takes a block RAM
word that the same cycle's write changes (the contract leaves that read undefined on the ECP5), except in the
collision phase at the end, which checks that the ECP5 model returns such a read's bytes of that word inverted
(the guard that makes a design depending on one fail its golden comparison) and the generic build the old
bytes. Writes one JSON line of figures to ``TB_RESULTS``. Environment: ``TB_SEED``, ``TB_WIDTH``, ``TB_DEPTH``,
``TB_LANES``, ``TB_BANK_BYTES``, ``TB_CYCLES``, ``TB_ECP5`` (1: the DP16KD build).
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from ..hw.byte_buffer import ByteBuffer

SEED = int(os.environ.get("TB_SEED", "1"))
WIDTH = int(os.environ["TB_WIDTH"])
DEPTH = int(os.environ["TB_DEPTH"])
LANES = int(os.environ["TB_LANES"])
BANK_BYTES = int(os.environ["TB_BANK_BYTES"])
CYCLES = int(os.environ.get("TB_CYCLES", "3000"))
ECP5 = os.environ.get("TB_ECP5") == "1"
WORDS = BANK_BYTES // 4 if BANK_BYTES >= 4 else BANK_BYTES      # block RAM words in a bank's row


def place(addr):
    """The block RAM word of byte ``addr``: (bank, row, word in the bank's row), a word being 4 bytes in banks of
    4 bytes or more (512 x 36 DP16KDs side by side) and a byte otherwise (2048 x 9)."""
    return (addr % LANES) // BANK_BYTES, (addr % DEPTH) // LANES, addr % BANK_BYTES // (4 if BANK_BYTES >= 4 else 1)


def write_rows(addr, strb):
    return {place(addr + j) for j in range(WIDTH) if strb >> j & 1}


@cocotb.test()
async def buffer(dut):
    rng = random.Random(SEED)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    bank_port = hasattr(dut, "g_en")
    banks, rows = LANES // BANK_BYTES, DEPTH // LANES
    row_bits = max(1, (rows - 1).bit_length())
    for name in ("w_en", "r_en") + (("g_en",) if bank_port else ()):
        getattr(dut, name).value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    model = bytearray(DEPTH)
    due = []                       # (cycle, port, expected bytes, what)
    checked = {"r": 0, "g": 0, "collided": 0}
    # the writes fill a region at random, then reads and writes mix over it; the last cycles collide on purpose
    collide_from = CYCLES - 200
    for t in range(CYCLES + ByteBuffer.LATENCY):
        await FallingEdge(dut.clk)
        while due and due[0][0] == t:
            _, port, want, what = due.pop(0)
            got = int((dut.r_data if port == "r" else dut.g_data).value).to_bytes(len(want), "little")
            assert got == want, f"{what}: got {got.hex()}, want {want.hex()}"
            checked["collided" if "collid" in what else port] += 1
        if t >= CYCLES:                           # the last reads' data
            dut.w_en.value = dut.r_en.value = 0
            if bank_port:
                dut.g_en.value = 0
            continue
        write = rng.random() < 0.5
        taken = set()
        if write:
            addr = rng.randrange(DEPTH) if rng.random() > 0.1 else DEPTH - rng.randrange(1, WIDTH)
            data, strb = rng.randbytes(WIDTH), rng.randrange(1, 1 << WIDTH)
            dut.w_addr.value, dut.w_data.value = addr, int.from_bytes(data, "little")
            dut.w_strb.value = strb
            taken = write_rows(addr, strb)
        dut.w_en.value = int(write)
        collide = t >= collide_from and write
        r_en = g_en = 0
        if collide:
            # a read of a bank row the write changes: on the ECP5 model that row's old bytes inverted
            (bank, row, word), = rng.sample(sorted(taken), 1)
            raddr = (row * LANES + bank * BANK_BYTES + word * min(BANK_BYTES, 4) + rng.randrange(min(BANK_BYTES, 4)))
            raddr %= DEPTH
            want = bytearray(model[(raddr + j) % DEPTH] for j in range(WIDTH))
            for j in range(WIDTH):
                if ECP5 and place(raddr + j) in taken:
                    want[j] ^= 0xFF
            dut.r_addr.value, r_en = raddr, 1
            due.append((t + ByteBuffer.LATENCY, "r", bytes(want), f"read at {raddr} collided (cycle {t})"))
        elif bank_port and rng.random() < 0.3:
            picks = [rng.randrange(rows) for _ in range(banks)]
            if not {(b, r, w) for b, r in enumerate(picks) for w in range(WORDS)} & taken:
                dut.g_rows.value = sum(r << (row_bits * b) for b, r in enumerate(picks))
                g_en = 1
                want = b"".join(bytes(model[r * LANES + b * BANK_BYTES:r * LANES + (b + 1) * BANK_BYTES])
                                for b, r in enumerate(picks))
                due.append((t + ByteBuffer.G_LATENCY, "g", want, f"bank read of rows {picks} (cycle {t})"))
        elif rng.random() < 0.6:
            raddr = rng.randrange(DEPTH)
            if not {place(raddr + j) for j in range(WIDTH)} & taken:
                dut.r_addr.value, r_en = raddr, 1
                due.append((t + ByteBuffer.LATENCY, "r", bytes(model[(raddr + j) % DEPTH] for j in range(WIDTH)),
                            f"read at {raddr} (cycle {t})"))
        dut.r_en.value = r_en
        if bank_port:
            dut.g_en.value = g_en
        if write:
            for j in range(WIDTH):
                if strb >> j & 1:
                    model[(addr + j) % DEPTH] = data[j]
    assert not due
    with open(os.environ["TB_RESULTS"], "a") as f:
        f.write(json.dumps({"test": "buffer", **checked}) + "\n")
