"""hw.table_loader alone in Amaranth's simulator: tables packed by pack_table in a Python memory, the read port
served with random delays and gaps; every cfg write is the entry of its channel at lane n % cols, row
base + n // cols."""

import random

import numpy as np
import pytest

from int8_systolic.hw.table_loader import TableLoader, pack_table, table_bytes
from int8_systolic.sim.amaranth_bench import simulate

ADDR = 0x400


def run(dut, table, channels, base, rng, cycles=2000, p_ready=0.7, p_offer=0.8, taken=None, then=(), p_cfg=1.0):
    """``taken``: a list the cycles a beat is taken are appended to; ``then``: more (table, channels, base) loaded
    through the same loader, each started two cycles after the last one's ``done``; ``p_cfg``: how often the core
    takes a ``cfg`` write (the engine's core always does)."""
    nbytes = dut.data_width // 8
    writes, done = [], []
    jobs = [(table, channels, base), *then]

    async def bench(ctx):
        beats = []
        start_at = 2
        for t in range(cycles):
            starting = t == start_at and bool(jobs)
            if starting:
                table, channels, base = jobs.pop(0)
                ctx.set(dut.addr, ADDR)
                ctx.set(dut.channels, channels)
                ctx.set(dut.base, base)
            ctx.set(dut.start, starting)
            ctx.set(dut.rd_cmd.ready, rng.random() < p_ready)
            if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                p = ctx.get(dut.rd_cmd.payload)
                assert (p["addr"], p["length"]) == (ADDR, table_bytes(channels, dut.data_width))
                # (the bytes past the last entry, up to the whole beat, are whatever memory holds)
                chunk = table + bytes(rng.randrange(256) for _ in range(p["length"] - len(table)))
                beats = [chunk[i:i + nbytes] for i in range(0, len(chunk), nbytes)]
            ctx.set(dut.cfg.ready, rng.random() < p_cfg)      # (before rd_data.ready is read: it depends on it)
            offer = bool(beats) and rng.random() < p_offer
            ctx.set(dut.rd_data.valid, offer)
            if offer:
                ctx.set(dut.rd_data.payload, {"data": int.from_bytes(beats[0], "little"), "last": len(beats) == 1})
                if ctx.get(dut.rd_data.ready):
                    beats.pop(0)
                    if taken is not None:
                        taken.append(t)
            if ctx.get(dut.cfg.valid) and ctx.get(dut.cfg.ready):
                p = ctx.get(dut.cfg.payload)
                e = p["entry"]
                writes.append((p["addr"], p["lane"], e["bias"], e["multiplier"], e["shift"]))
            await ctx.tick()
            if ctx.get(dut.done):
                done.append(t)
                start_at = t + 2

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
    for p_cfg in (1.0, 0.5):      # (a core that refuses writes holds the entry, and the beats behind it)
        writes, done = run(dut if p_cfg == 1.0 else TableLoader(cols, 16, data_width), pack_table(bias, mult, shift),
                           n, base, rng, p_cfg=p_cfg)
        assert writes == [(base + c // cols, c % cols, int(bias[c]), int(mult[c]), int(shift[c]))
                          for c in range(n)]
    assert len(done) == 1


@pytest.mark.parametrize(("data_width", "n"), [(32, 20), (64, 20), (64, 7), (128, 20), (128, 1)])
def test_the_loader_keeps_the_ports_rate(data_width, n):
    """Entries straddle beats (12 bytes, 4, 8 or 16 a beat): the loader takes a beat every cycle the port offers one
    while the core takes an entry a cycle, so its last write comes as soon as the slower of the two allows: the
    beats, or at 128 bits the entries (it assembled an entry only once the last was written: a cycle lost in each,
    and the weights' beats behind the table in the reader's buffer waited with them)."""
    rng = random.Random(7)
    table = pack_table(np.arange(n), np.arange(n) + 1, np.zeros(n, np.int64))
    taken = []
    dut = TableLoader(8, 16, data_width)
    writes, done = run(dut, table, n, 0, rng, p_ready=1.0, p_offer=1.0, taken=taken)
    beats = table_bytes(n, data_width) * 8 // data_width
    assert writes == [(c // 8, c % 8, c, c + 1, 0) for c in range(n)]
    assert len(taken) == beats
    if data_width < 128:
        assert taken == list(range(taken[0], taken[0] + beats))
    assert done == [taken[0] + max(beats, n) + 1]


@pytest.mark.parametrize("data_width", [64, 128])
def test_tables_one_after_another(data_width):
    """Tables whose last beat ends in padding (an odd count of 12-byte entries at 64 bits), loaded one after
    another through one loader: each table's entries are its own (the last one's padding is not the next's
    first bytes)."""
    rng = random.Random(3)
    tables = []
    for n in (5, 3, 7):
        v = np.arange(n) + 100 * n
        tables.append((pack_table(v, v + 1, -(v % 31)), n, 0))
    writes, done = run(TableLoader(4, 16, data_width), *tables[0], rng, then=tables[1:])
    want = [(c // 4, c % 4, 100 * n + c, 100 * n + c + 1, -((100 * n + c) % 31)) for _, n, _ in tables
            for c in range(n)]
    assert writes == want
    assert len(done) == 3


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
