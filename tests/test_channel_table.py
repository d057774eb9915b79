"""hw.channel_table.ChannelTable alone in Amaranth's simulator against a model of its documented contract.

The contract (the class docstring and its latency properties): ``r_data`` is the entry at the ``r_addr``
of ``READ_LATENCY`` cycles earlier; a write with ``w_en`` in cycle t is seen by a read whose ``r_addr``
comes in cycle t + ``WRITE_LATENCY`` or later; ``w_en`` has one bit per bank, the writer decoding the bank
with :meth:`ChannelTable.in_bank`; with ``ram="distributed"`` the banks are 16 entries each, with
``ram="block"`` the table is one memory.

The model is a dictionary of every write and the cycle it came in. A read whose ``r_addr`` comes the
cycle before a write to that entry would be seen is the one case the contract leaves open (with DP16KD
tables it is forbidden), so there either the old or the new entry is accepted; a read one cycle later
must give the new one, a read one cycle earlier the old one. Entries never written are not checked (the
contract says nothing of a table's contents before the host writes it), nor the first
``READ_LATENCY`` cycles' ``r_data``. Every other cycle's ``r_data`` is compared, every field.

Stimulus, per configuration: every entry written once in random order with each one read back the
first cycle the contract promises it; random writes (or none, with junk on ``w_addr``/``w_data``) and
random reads, the reads aimed half the time at an entry written just before, in or just after the
read's cycle, and at the banks' edges; a read sweep of the whole table with no writes; a run of writes
to one entry read every cycle. Entries include the fields' extremes (INT32_MIN/MAX, shift -32/31).

``dsp="ecp5"`` is not simulated here: it instantiates ``DP16KD`` primitives (hw.ecp5_ram), which
Amaranth's simulator cannot run (the cocotb/Verilator flow has a model of them: int8_systolic/sim/ecp5_models.py).
"""

import random

import pytest

from int8_systolic.hw.channel_table import ChannelTable
from int8_systolic.sim.amaranth_bench import simulate

BANK_ENTRIES = 16   # the docstring: with ram="distributed", banks of 16 entries (one ECP5 LUT-RAM cell)
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
SHIFT_MIN, SHIFT_MAX = -32, 31   # ChannelEntry.shift is signed(6)

# depths giving one bank (1, 5, 16) and several, a last bank full or partial (17: its second bank has
# one entry; 40: 16 + 16 + 8; 64: four full banks)
DEPTHS = [1, 5, 16, 17, 40, 64]


def expected_banks(depth, ram):
    return -(-depth // BANK_ENTRIES) if ram == "distributed" else 1


def random_entry(rng):
    def int32():
        return rng.choice((I32_MIN, I32_MAX, 0, -1, 1)) if rng.random() < 0.15 else rng.randint(I32_MIN, I32_MAX)

    shift = rng.choice((SHIFT_MIN, SHIFT_MAX, 0, -1)) if rng.random() < 0.2 else rng.randint(SHIFT_MIN, SHIFT_MAX)
    return (int32(), int32(), shift)


def stimulus(rng, depth, write_latency):
    """Per cycle: (write entry or None, w_addr, w_data, r_addr). w_addr/w_data are junk in cycles without a write."""
    cycles = []

    def junk():
        return rng.randrange(depth), random_entry(rng)

    # 1. every entry written once, in random order, each read the first cycle the contract promises it
    order = list(range(depth))
    rng.shuffle(order)
    for i, a in enumerate(order):
        r = order[i - write_latency] if i >= write_latency else rng.randrange(depth)
        cycles.append((True, a, random_entry(rng), r))
    # 2. random writes and reads; first the writes, then reads aimed at them (lookahead included)
    n = 40 * depth + 200
    edges = sorted({a for b in range(0, depth, BANK_ENTRIES) for a in (b, b + BANK_ENTRIES - 1, b + BANK_ENTRIES)
                    if a < depth} | {depth - 1})
    writes = []
    for _ in range(n):
        if rng.random() < 0.6:
            a = rng.choice(edges) if rng.random() < 0.3 else rng.randrange(depth)
            writes.append((True, a, random_entry(rng)))
        else:
            writes.append((False, *junk()))
    for s, (we, a, d) in enumerate(writes):
        pick = rng.random()
        if pick < 0.5:
            # an entry written in cycle s - write_latency (the first cycle the read must see it),
            # s - write_latency + 1 (the open case) or s - write_latency + 2 (must not see it yet)
            k = s - write_latency + rng.choice((0, 1, 1, 2))
            r = writes[k][1] if 0 <= k < n and writes[k][0] else rng.randrange(depth)
        elif pick < 0.6:
            r = rng.choice(edges)
        elif pick < 0.7 and cycles:
            r = cycles[-1][3]   # the same entry two cycles running
        else:
            r = rng.randrange(depth)
        cycles.append((we, a, d, r))
    # 3. a read sweep, no writes
    for r in [*range(depth), *reversed(range(depth))]:
        cycles.append((False, *junk(), r))
    # 4. writes back to back to one entry, read every cycle
    a = rng.randrange(depth)
    for _ in range(12):
        cycles.append((True, a, random_entry(rng), a))
    return cycles   # (the caller adds READ_LATENCY cycles for the last reads to come out)


def run_table(dut, seed):
    """Simulate ``dut`` (a ChannelTable, or anything with its ports and properties) on random stimulus;
    return (cycles driven, r_data per cycle as (bias, multiplier, shift))."""
    rng = random.Random(seed)
    cycles = stimulus(rng, dut.depth, dut.WRITE_LATENCY)
    cycles += [(False, rng.randrange(dut.depth), random_entry(rng), rng.randrange(dut.depth))
               for _ in range(dut.READ_LATENCY)]
    out = []

    async def bench(ctx):
        for we, a, (bias, mult, shift), r in cycles:
            # the writer decodes the bank with in_bank, one w_en bit per bank
            en = sum(int(bool(dut.in_bank(a, b))) << b for b in range(dut.banks)) if we else 0
            ctx.set(dut.w_addr, a)
            ctx.set(dut.w_data, {"bias": bias, "multiplier": mult, "shift": shift})
            ctx.set(dut.w_en, en)
            ctx.set(dut.r_addr, r)
            got = ctx.get(dut.r_data)
            out.append((got.bias, got.multiplier, got.shift))
            await ctx.tick()

    simulate(dut, bench)
    return cycles, out


def check_table(cycles, out, read_latency, write_latency):
    """Compare every defined cycle's r_data with the model; return (strict checks, open-case checks, of those
    how many gave the new entry)."""
    history = {}   # addr -> [(cycle of the write, entry)]
    for c, (we, a, d, _) in enumerate(cycles):
        if we:
            history.setdefault(a, []).append((c, d))
    strict = open_case = open_new = 0
    for t in range(read_latency, len(out)):
        s = t - read_latency   # the cycle of the r_addr this r_data answers
        a = cycles[s][3]
        seen = [d for c, d in history.get(a, ()) if c + write_latency <= s]   # landed by the read's cycle
        landing = [d for c, d in history.get(a, ()) if c + write_latency == s + 1]   # lands the cycle after
        if not seen:
            continue   # never written before: the contract says nothing of it
        old = seen[-1]
        if landing:
            open_case += 1
            new = landing[-1]
            assert out[t] in (old, new), (f"cycle {t}: r_data {out[t]} for entry {a} read in cycle {s}, "
                                          f"want {old} (before the write of cycle {s - write_latency + 1}) or {new}")
            open_new += out[t] == new != old
        else:
            strict += 1
            assert out[t] == old, (f"cycle {t}: r_data {out[t]} for entry {a} read in cycle {s}, want {old} "
                                   f"(written in cycle {max(c for c, d in history[a] if c + write_latency <= s)})")
    return strict, open_case, open_new


@pytest.mark.parametrize("ram", ["distributed", "block"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_banks_and_in_bank_decode(ram, depth):
    """One bank per 16 entries with ram="distributed", one with "block"; w_en has a bit per bank and
    in_bank puts every address in exactly its own bank."""
    dut = ChannelTable(depth, ram)
    dut._MustUse__silence = True   # only its properties are looked at
    assert dut.banks == expected_banks(depth, ram)
    assert len(dut.w_en) == dut.banks
    for a in range(depth):
        inside = [b for b in range(dut.banks) if bool(dut.in_bank(a, b))]
        assert inside == [a // BANK_ENTRIES if dut.banks > 1 else 0], f"address {a} in banks {inside}"


@pytest.mark.parametrize("ram", ["distributed", "block"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_reads_return_entry_at_address_of_read_latency_before(seed, ram, depth):
    """r_data is the entry at r_addr of READ_LATENCY cycles earlier, with every write landing
    WRITE_LATENCY cycles after its w_en (per-bank w_en decoded with in_bank), every field intact,
    and w_en low writing nothing whatever w_addr/w_data carry."""
    dut = ChannelTable(depth, ram)   # dsp="generic": see the module docstring for "ecp5"
    cycles, out = run_table(dut, seed * 1000 + depth)
    strict, open_case, _ = check_table(cycles, out, dut.READ_LATENCY, dut.WRITE_LATENCY)
    # every entry's first read back, most of the random reads, the sweep and the run are strict checks
    assert strict >= 3 * depth + 12
    assert open_case > 0
