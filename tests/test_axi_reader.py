"""hw.axi_reader alone in Amaranth's simulator, against a Python AXI4 memory with latency, random ready and
valid gaps, and a protocol monitor.

The memory accepts AR at random, returns each burst's beats in order no earlier than ``latency`` cycles after
its AR was taken (bursts overlap: several are in flight), with random gaps. Every cycle is checked: the AR
payload holds while ARVALID waits, no burst crosses 4 KB or exceeds ``max_burst``, every burst lies inside
the window, RREADY is high, no more than ``max_outstanding`` bursts are in flight; every command's beats come
out in order, equal to the memory, ``last`` on its final beat; a bad command raises its error bit and issues
nothing. A full-rate run checks the beat rate: one beat per cycle once the latency is covered.
"""

import random

import pytest

from int8_systolic.hw.axi_reader import ERRORS, AxiReader
from int8_systolic.sim.amaranth_bench import simulate
from int8_systolic.sim.axi_monitor import burst_violations

MEMORY = 1 << 16


class Memory:
    def __init__(self, seed):
        self.data = bytes(random.Random(seed).randrange(256) for _ in range(MEMORY))

    def beat(self, addr, nbytes):
        return int.from_bytes(self.data[addr:addr + nbytes], "little")


def run(dut, commands, *, seed, latency, p_ar=0.7, p_r=0.8, p_out=0.8, window=(0, MEMORY), max_cycles=20000):
    """Simulate ``commands`` ((addr, length) each); returns (beats per command, errors, trace stats)."""
    rng = random.Random(seed)
    mem = Memory(seed)
    nbytes = dut.bytes
    out = {"beats": [], "errors": [], "bursts": [], "max_in_flight": 0, "cycles": 0, "first_beat": None}

    async def bench(ctx):
        ctx.set(dut.win_base, window[0])
        ctx.set(dut.win_limit, window[1])
        pending = list(commands)
        bursts = []          # [addr, beats, ready cycle, beats sent]
        prev_ar = None       # (valid, ready, payload) last cycle
        current = []
        for t in range(max_cycles):
            # drive: a command, AR ready, an R beat, the sink
            if pending:
                ctx.set(dut.cmd.valid, 1)
                ctx.set(dut.cmd.payload, {"addr": pending[0][0], "length": pending[0][1]})
            else:
                ctx.set(dut.cmd.valid, 0)
            arready = rng.random() < p_ar
            ctx.set(dut.m_axi_arready, arready)
            head = bursts[0] if bursts else None
            rvalid = head is not None and t >= head[2] and rng.random() < p_r
            ctx.set(dut.m_axi_rvalid, rvalid)
            if rvalid:
                ctx.set(dut.m_axi_rdata, mem.beat(head[0] + head[3] * nbytes, nbytes))
                ctx.set(dut.m_axi_rlast, head[3] == head[1] - 1)
                ctx.set(dut.m_axi_rresp, 0)
            ready = rng.random() < p_out
            ctx.set(dut.data.ready, ready)

            # observe
            assert ctx.get(dut.m_axi_rready) == 1, f"RREADY low at cycle {t}"
            arvalid = ctx.get(dut.m_axi_arvalid)
            payload = (ctx.get(dut.m_axi_araddr), ctx.get(dut.m_axi_arlen), ctx.get(dut.m_axi_arsize),
                       ctx.get(dut.m_axi_arburst))
            if prev_ar is not None and prev_ar[0] and not prev_ar[1]:
                assert arvalid, f"ARVALID dropped while waiting for ARREADY at cycle {t}"
                assert payload == prev_ar[2], f"AR changed while waiting for ARREADY at cycle {t}"
            prev_ar = (arvalid, arready, payload)
            if arvalid and arready:
                addr, arlen, arsize, arburst = payload
                beats = arlen + 1
                assert burst_violations("read", addr, beats, arsize, arburst, data_bytes=nbytes,
                                        max_burst=dut.max_burst, window=window) == []
                bursts.append([addr, beats, t + latency, 0])
                out["bursts"].append((addr, beats))
            out["max_in_flight"] = max(out["max_in_flight"], len(bursts))
            assert len(bursts) <= dut.max_outstanding
            if rvalid:
                head[3] += 1
                if head[3] == head[1]:
                    bursts.pop(0)
            if ctx.get(dut.data.valid) and ready:
                if out["first_beat"] is None:
                    out["first_beat"] = t
                p = ctx.get(dut.data.payload)
                current.append(p["data"])
                if p["last"]:
                    out["beats"].append(current)
                    current = []
            if pending and ctx.get(dut.cmd.ready):
                pending.pop(0)
            if ctx.get(dut.error):
                out["errors"].append(ctx.get(dut.error))
            await ctx.tick()
            if not pending and not bursts and ctx.get(dut.idle):
                if ctx.get(dut.error):          # (a bad command's pulse comes as the reader falls idle)
                    out["errors"].append(ctx.get(dut.error))
                out["cycles"] = t + 1
                out["bytes_read"] = ctx.get(dut.bytes_read)
                return
        raise AssertionError(f"not idle after {max_cycles} cycles")

    simulate(dut, bench)
    out["memory"] = mem
    return out


def expected(mem, addr, length, nbytes):
    return [mem.beat(a, nbytes) for a in range(addr, addr + length, nbytes)]


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_random_reads_equal_memory_and_keep_the_protocol(data_width):
    nbytes = data_width // 8
    rng = random.Random(data_width)
    dut = AxiReader(data_width, max_burst=8, max_outstanding=3)
    cmds = []
    for _ in range(12):
        length = nbytes * rng.choice([1, 2, 7, 8, 9, 31, 64, 130])
        addr = nbytes * rng.randrange((MEMORY - length) // nbytes)
        if rng.random() < 0.4:   # at a 4 KB edge
            addr = max(0, (rng.randrange(1, MEMORY // 4096) * 4096) - nbytes * rng.randrange(1, 6))
        cmds.append((addr, length))
    res = run(dut, cmds, seed=data_width, latency=rng.choice([1, 5, 20]))
    assert len(res["beats"]) == len(cmds)
    for (addr, length), got in zip(cmds, res["beats"], strict=True):
        assert got == expected(res["memory"], addr, length, nbytes), (addr, length)
    assert res["bytes_read"] == sum(length for _, length in cmds)
    assert res["errors"] == []


def test_bad_commands_raise_their_error_and_read_nothing():
    dut = AxiReader(64, max_burst=16, max_outstanding=4)
    window = (0x1000, 0x3000)
    good = (0x1000, 64)
    cmds = [(0x1004, 64), (0x1000, 12), (0x1000, 0), (0x0ff8, 16), (0x2ff8, 16), good, (0x3000, 8)]
    res = run(dut, cmds, seed=3, latency=4, window=window)
    bit = {name: 1 << i for name, i in ERRORS.items()}
    assert res["errors"] == [bit["misaligned"], bit["misaligned"], bit["empty"], bit["window"], bit["window"],
                             bit["window"]]
    assert res["bursts"] == [(0x1000, 8)]
    assert res["beats"] == [expected(res["memory"], *good, 8)]


def test_the_window_edge_is_exact():
    """A command whose last byte is the window's last is read; one byte further is refused."""
    bit = {name: 1 << i for name, i in ERRORS.items()}
    dut = AxiReader(64, max_burst=16, max_outstanding=4)
    res = run(dut, [(0x2ff8, 8)], seed=4, latency=4, window=(0x1000, 0x3000))
    assert res["errors"] == []
    assert res["bursts"] == [(0x2ff8, 1)]
    dut = AxiReader(64, max_burst=16, max_outstanding=4)
    res = run(dut, [(0x2ff8, 8)], seed=4, latency=4, window=(0x1000, 0x2fff))
    assert res["errors"] == [bit["window"]]
    assert res["bursts"] == []


@pytest.mark.parametrize(("latency", "max_outstanding"), [(20, 4), (40, 4)])
def test_full_rate_hides_the_latency(latency, max_outstanding):
    """Always ready, no gaps: a 4 KB-crossing read of 512 beats takes the latency plus one cycle a beat (plus the
    command's and the first AR's cycles), because up to ``max_outstanding`` bursts of 16 are in flight."""
    dut = AxiReader(64, max_burst=16, max_outstanding=max_outstanding)
    beats = 512
    res = run(dut, [(0x0f80, beats * 8)], seed=1, latency=latency, p_ar=1.0, p_r=1.0, p_out=1.0)
    assert res["beats"][0] == expected(res["memory"], 0x0f80, beats * 8, 8)
    # the bursts: 16 up to the 4 KB edge at 0x1000, then 16 each
    assert res["bursts"][0] == (0x0f80, 16)
    assert all(b == 16 for _, b in res["bursts"])
    assert res["cycles"] <= beats + latency + 8, res["cycles"]
    if latency > 16:
        assert res["max_in_flight"] >= 2



def test_arvalid_rises_six_cycles_after_the_command():
    """The module docstring's latency: the command checked in three registered stages, then split."""
    dut = AxiReader(64)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.win_base, 0)
        ctx.set(dut.win_limit, MEMORY)
        ctx.set(dut.cmd.payload, {"addr": 0x100, "length": 64})
        ctx.set(dut.cmd.valid, 1)
        for t in range(12):
            taken = ctx.get(dut.cmd.valid) and ctx.get(dut.cmd.ready)
            if taken:
                seen.setdefault("taken", t)
            if ctx.get(dut.m_axi_arvalid):
                seen.setdefault("ar", t)
            await ctx.tick()
            if taken:
                ctx.set(dut.cmd.valid, 0)

    simulate(dut, bench)
    assert seen["ar"] - seen["taken"] == 6


def test_parameters_refused():
    with pytest.raises(ValueError, match="data_width must be 32, 64 or 128"):
        AxiReader(48)
    with pytest.raises(ValueError, match=r"max_burst must be an integer in \[1, 256\]"):
        AxiReader(64, max_burst=300)
    with pytest.raises(ValueError, match="max_outstanding must be an integer >= 1"):
        AxiReader(64, max_outstanding=0)
