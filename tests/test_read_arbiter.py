"""hw.read_arbiter alone in Amaranth's simulator, in front of a Python read port that returns each command's beats
in order after a random delay: every client gets exactly its own commands' beats, in order, under random
offers and readies; commands are granted round-robin (no client waits behind another's second command), a low
client only when no other offers."""

import random

import pytest

from int8_systolic.hw.read_arbiter import ReadArbiter
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize("clients", [1, 2, 4])
def test_each_client_gets_its_own_beats_in_order(clients):
    rng = random.Random(clients)
    dut = ReadArbiter(clients, 64, depth=3)
    # each client's commands: (addr, length in beats); a beat's data encodes (client's addr, beat)
    wanted = {c: [(0x1000 * (c + 1) + 0x40 * k, rng.randint(1, 5)) for k in range(12)] for c in range(clients)}
    got = {c: [] for c in range(clients)}
    grants = []

    async def bench(ctx):
        pending = {c: list(wanted[c]) for c in range(clients)}
        port = []             # commands taken by the port, in order: [addr, beats, sent]
        delay = 0
        for _ in range(3000):
            for c in range(clients):
                offer = bool(pending[c]) and rng.random() < 0.6
                ctx.set(getattr(dut, f"cmd{c}").valid, offer)
                if offer:
                    ctx.set(getattr(dut, f"cmd{c}").payload, {"addr": pending[c][0][0], "length": 8 * pending[c][0][1]})
                ctx.set(getattr(dut, f"data{c}").ready, rng.random() < 0.6)
            ctx.set(dut.cmd.ready, rng.random() < 0.7)
            beat_ready = bool(port) and delay == 0 and rng.random() < 0.8
            ctx.set(dut.data.valid, beat_ready)
            if beat_ready:
                addr, beats, sent = port[0]
                ctx.set(dut.data.payload, {"data": addr * 16 + sent, "last": sent == beats - 1})
            # observe
            for c in range(clients):
                cmd = getattr(dut, f"cmd{c}")
                if ctx.get(cmd.valid) and ctx.get(cmd.ready):
                    pending[c].pop(0)
                    grants.append(c)
                out = getattr(dut, f"data{c}")
                if ctx.get(out.valid) and ctx.get(out.ready):
                    got[c].append(ctx.get(out.payload)["data"])
            if ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready):
                p = ctx.get(dut.cmd.payload)
                port.append([p["addr"], p["length"] // 8, 0])
                delay = rng.randint(0, 4) if len(port) == 1 else delay
            if beat_ready and ctx.get(dut.data.ready):
                port[0][2] += 1
                if port[0][2] == port[0][1]:
                    port.pop(0)
                    delay = rng.randint(0, 4)
            delay = max(0, delay - 1)
            await ctx.tick()

    simulate(dut, bench)
    for c in range(clients):
        assert got[c] == [addr * 16 + b for addr, beats in wanted[c] for b in range(beats)], f"client {c}"
    assert len(grants) == clients * 12


def test_round_robin_when_everyone_offers():
    dut = ReadArbiter(3, 64, depth=8)
    grants = []

    async def bench(ctx):
        for c in range(3):
            ctx.set(getattr(dut, f"cmd{c}").valid, 1)
            ctx.set(getattr(dut, f"cmd{c}").payload, {"addr": 0x100 * c, "length": 8})
        ctx.set(dut.cmd.ready, 1)
        for _ in range(6):
            for c in range(3):
                if ctx.get(getattr(dut, f"cmd{c}").ready):
                    grants.append(c)
            await ctx.tick()

    simulate(dut, bench)
    assert grants == [0, 1, 2, 0, 1, 2]


def test_a_low_client_waits_for_the_others():
    """A client whose ``low`` bit is set is granted only in cycles no other client offers: with everyone offering,
    the others take turns and it waits; once they stop, it is granted; cleared, it takes its turn again."""
    dut = ReadArbiter(3, 64, depth=16)
    grants = []

    async def bench(ctx):
        ctx.set(dut.cmd.ready, 1)
        for c in range(3):
            ctx.set(getattr(dut, f"cmd{c}").payload, {"addr": 0x100 * c, "length": 8})
        for t in range(14):
            ctx.set(dut.low, 0b010 if t < 9 else 0)
            for c in range(3):
                ctx.set(getattr(dut, f"cmd{c}").valid, c == 1 or t < 6 or t >= 11)
            grants.append([c for c in range(3) if ctx.get(getattr(dut, f"cmd{c}").ready)
                           and ctx.get(getattr(dut, f"cmd{c}").valid)])
            await ctx.tick()

    simulate(dut, bench)
    assert all(g in ([0], [2]) for g in grants[:6]), grants
    assert grants[6:11] == [[1]] * 5, grants
    assert [1] in grants[11:], grants


def test_parameters_refused():
    with pytest.raises(ValueError, match="clients must be >= 1"):
        ReadArbiter(0)
