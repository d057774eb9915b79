"""hw.byte_buffer alone in Amaranth's simulator, against a bytearray: random unaligned writes with random strobes
and unaligned reads, reads right after writes, wrap-around at the end, and the latency property."""

import random

import pytest

from int8_systolic.hw.byte_buffer import ByteBuffer
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize(("width", "depth"), [(8, 256), (4, 64), (16, 512)])
def test_unaligned_vectors_equal_a_bytearray(width, depth):
    dut = ByteBuffer(width, depth)
    rng = random.Random(width)
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


def test_parameters_refused():
    with pytest.raises(ValueError, match="width must be 4, 8, 16 or 32 bytes"):
        ByteBuffer(6, 96)
    with pytest.raises(ValueError, match="power-of-two multiple"):
        ByteBuffer(8, 24)
