"""hw.table_loader alone in Amaranth's simulator: tables packed by pack_table in a Python memory, the read port
served with random delays and gaps; every cfg write is the entry of its channel at lane n % cols, row
base + n // cols."""

import random

import numpy as np
import pytest

from int8_systolic.hw.table_loader import ENTRY_BYTES, TableLoader, pack_table
from int8_systolic.sim.amaranth_bench import simulate

ADDR = 0x400


def run(dut, table, channels, base, rng, cycles=2000, p_ready=0.7, p_offer=0.8, taken=None):
    """``taken``: a list the cycles a beat is taken are appended to."""
    nbytes = dut.data_width // 8
    writes, done = [], []

    async def bench(ctx):
        ctx.set(dut.addr, ADDR)
        ctx.set(dut.channels, channels)
        ctx.set(dut.base, base)
        beats = []
        for t in range(cycles):
            ctx.set(dut.start, t == 2)
            ctx.set(dut.rd_cmd.ready, rng.random() < p_ready)
            if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                p = ctx.get(dut.rd_cmd.payload)
                assert (p["addr"], p["length"]) == (ADDR, channels * ENTRY_BYTES)
                chunk = table[:p["length"]]
                beats = [chunk[i:i + nbytes] for i in range(0, len(chunk), nbytes)]
            offer = bool(beats) and rng.random() < p_offer
            ctx.set(dut.rd_data.valid, offer)
            if offer:
                ctx.set(dut.rd_data.payload, {"data": int.from_bytes(beats[0], "little"), "last": len(beats) == 1})
                if ctx.get(dut.rd_data.ready):
                    beats.pop(0)
                    if taken is not None:
                        taken.append(t)
            ctx.set(dut.cfg.ready, 1)
            if ctx.get(dut.cfg.valid):
                p = ctx.get(dut.cfg.payload)
                e = p["entry"]
                writes.append((p["addr"], p["lane"], e["bias"], e["multiplier"], e["shift"]))
            await ctx.tick()
            if ctx.get(dut.done):
                done.append(t)

    simulate(dut, bench)
    return writes, done


@pytest.mark.parametrize(("data_width", "cols"), [(32, 4), (64, 8), (128, 3)])
def test_every_entry_lands_at_its_lane_and_row(data_width, cols):
    rng = random.Random(data_width)
    n, base = rng.randint(1, 40), rng.randint(0, 5)
    bias = np.array([rng.randint(-2**31, 2**31 - 1) for _ in range(n)])
    mult = np.array([rng.randint(-2**31, 2**31 - 1) for _ in range(n)])
    shift = np.array([rng.randint(-31, 30) for _ in range(n)])
    dut = TableLoader(cols, 16, data_width)
    writes, done = run(dut, pack_table(bias, mult, shift), n, base, rng)
    assert writes == [(base + c // cols, c % cols, int(bias[c]), int(mult[c]), int(shift[c])) for c in range(n)]
    assert len(done) == 1


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_a_beat_is_taken_every_cycle_the_port_offers_one(data_width):
    """The loader keeps the read port's rate: it assembles the next entry while the last is written (a beat
    refused while an entry waits for the core would leave the port idle a cycle in every entry's)."""
    rng = random.Random(7)
    n = 20
    table = pack_table(np.arange(n), np.arange(n) + 1, np.zeros(n, np.int64))
    taken = []
    dut = TableLoader(8, 16, data_width)
    writes, done = run(dut, table, n, 0, rng, p_ready=1.0, p_offer=1.0, taken=taken)
    beats = n * ENTRY_BYTES * 8 // data_width
    assert len(writes) == n
    assert taken == list(range(taken[0], taken[0] + beats))
    assert done == [taken[-1] + 1]


def test_no_channels_is_done_at_once():
    dut = TableLoader(8, 16, 64)
    writes, done = run(dut, b"", 0, 0, random.Random(1), cycles=20)
    assert writes == []
    assert done == [2]


def test_pack_table_refuses_values_the_format_cannot_hold():
    with pytest.raises(ValueError, match=r"table shift values must be in \[-31, 30\], found 31"):
        pack_table([0], [1 << 30], [31])
    with pytest.raises(ValueError, match="one bias, multiplier and shift per channel"):
        pack_table([0, 1], [1], [0])


def test_a_gemm_problems_table_through_memory_is_what_the_host_writes_today():
    """The memory format carries exactly the entries the host driver writes on cfg (GemmProblem.table_writes)."""
    from int8_systolic.sim.stimulus import random_problem

    rng = np.random.default_rng(4)
    cols = 8
    prob = random_problem(rng, 5, 7, 21)
    n = prob.shape[2]
    want = prob.table_writes(4, cols)[:n]
    _, _, bias, mult, shift = zip(*want, strict=True)
    writes, _ = run(TableLoader(cols, 16, 64), pack_table(bias, mult, shift), n, 0, random.Random(2))
    assert writes == want
