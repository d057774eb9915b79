"""hw.byte_buffer alone in Amaranth's simulator, against a bytearray: random unaligned writes with random strobes
and unaligned reads, reads right after writes, wrap-around at the end, and the latency property."""

import random

import pytest

from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize(("width", "depth", "lanes", "bank_bytes"),
                         [(8, 256, None, 1), (4, 64, None, 1), (16, 512, None, 1), (16, 1024, 64, 8), (8, 256, 32, 4),
                          (16, 512, 32, 4)])
def test_unaligned_vectors_equal_a_bytearray(width, depth, lanes, bank_bytes):
    dut = ByteBuffer(width, depth, lanes=lanes, bank_bytes=bank_bytes)
    rng = random.Random(width + (lanes or 0))
    model = bytearray(depth)
    checked = []

    async def bench(ctx):
        due = []          # (cycle the data is due, expected bytes, address)
        for t in range(1500):
            write = rng.random() < 0.5
            read = rng.random() < 0.6
            if write:
                addr, data, strb = rng.randrange(depth), rng.randbytes(width), rng.randrange(1 << width)
                if rng.random() < 0.1:
                    addr = depth - rng.randrange(1, width)   # wraps around the end
                ctx.set(dut.w_en, 1)
                ctx.set(dut.w_addr, addr)
                ctx.set(dut.w_data, int.from_bytes(data, "little"))
                ctx.set(dut.w_strb, strb)
            else:
                ctx.set(dut.w_en, 0)
            if read:
                raddr = rng.randrange(depth)
                ctx.set(dut.r_en, 1)
                ctx.set(dut.r_addr, raddr)
                # the read sees the memory before this cycle's write
                due.append((t + ByteBuffer.LATENCY, bytes(model[(raddr + j) % depth] for j in range(width)), raddr))
            else:
                ctx.set(dut.r_en, 0)
            if write:
                for j in range(width):
                    if strb >> j & 1:
                        model[(addr + j) % depth] = data[j]
            await ctx.tick()
            while due and due[0][0] == t + 1:
                _, want, raddr = due.pop(0)
                got = ctx.get(dut.r_data).to_bytes(width, "little")
                assert got == want, f"read at {raddr} (cycle {t + 1}): got {got.hex()}, want {want.hex()}"
                checked.append(raddr)

    simulate(dut, bench)
    assert len(checked) > 500
    assert {a % width for a in checked} == set(range(width))


@pytest.mark.parametrize(("lanes", "bank_bytes"), [(64, 8), (32, 4)])
def test_bank_reads_equal_a_bytearray(lanes, bank_bytes):
    """The bank port: every bank at its own row, mixed with byte reads and writes; the data bank-ordered."""
    depth, width = 16 * lanes, 16
    dut = ByteBuffer(width, depth, lanes=lanes, bank_bytes=bank_bytes, bank_port=True)
    banks, nrows = lanes // bank_bytes, depth // lanes
    rng = random.Random(lanes)
    model = bytearray(depth)
    checked = {"bank": 0, "byte": 0}

    async def bench(ctx):
        due = []          # (cycle due, kind, expected bytes)
        for t in range(1200):
            write, kind = rng.random() < 0.4, rng.choice(("bank", "byte", None))
            if write:
                addr, data, strb = rng.randrange(depth), rng.randbytes(width), rng.randrange(1 << width)
                ctx.set(dut.w_en, 1)
                ctx.set(dut.w_addr, addr)
                ctx.set(dut.w_data, int.from_bytes(data, "little"))
                ctx.set(dut.w_strb, strb)
            else:
                ctx.set(dut.w_en, 0)
            ctx.set(dut.r_en, kind == "byte")
            ctx.set(dut.g_en, kind == "bank")
            if kind == "byte":
                raddr = rng.randrange(depth)
                ctx.set(dut.r_addr, raddr)
                due.append((t + ByteBuffer.LATENCY, "byte", bytes(model[(raddr + j) % depth] for j in range(width))))
            elif kind == "bank":
                rows = [rng.randrange(nrows) for _ in range(banks)]
                ctx.set(dut.g_rows, rows)
                want = b"".join(bytes(model[r * lanes + b * bank_bytes:r * lanes + (b + 1) * bank_bytes])
                                for b, r in enumerate(rows))
                due.append((t + ByteBuffer.G_LATENCY, "bank", want))
            if write:
                for j in range(width):
                    if strb >> j & 1:
                        model[(addr + j) % depth] = data[j]
            await ctx.tick()
            while due and due[0][0] == t + 1:
                _, what, want = due.pop(0)
                port, n = (dut.g_data, lanes) if what == "bank" else (dut.r_data, width)
                got = ctx.get(port).to_bytes(n, "little")
                assert got == want, f"{what} read (cycle {t + 1}): got {got.hex()}, want {want.hex()}"
                checked[what] += 1

    simulate(dut, bench)
    assert min(checked.values()) > 300


def test_parameters_refused():
    with pytest.raises(ValueError, match="width must be 4, 8, 16 or 32 bytes"):
        ByteBuffer(6, 96)
    with pytest.raises(ValueError, match="power-of-two multiple"):
        ByteBuffer(8, 24)
    with pytest.raises(ValueError, match="width <= lanes - bank_bytes"):
        ByteBuffer(16, 1024, lanes=16, bank_bytes=4)     # a 16-byte access would touch a bank at two rows
