"""hw.axi_writer alone in Amaranth's simulator, against a Python AXI4 memory with latency, random ready and
valid gaps, and a protocol monitor.

The memory accepts AW and W at random (W may come before its AW, as AXI4 allows) and answers each burst
``latency`` cycles after its last beat. Every cycle is checked: AW and W payloads hold while their VALIDs
wait, no burst crosses 4 KB or exceeds ``max_burst`` or leaves the window, WLAST is on each burst's last
beat and only there, BREADY is high; at the end the memory holds every command's bytes (strobes honoured:
a length that is not a multiple of the bus leaves the rest of the last beat unwritten) and nothing else.
"""

import random

import pytest

from int8_systolic.hw.axi_writer import ERRORS, AxiWriter
from int8_systolic.sim.amaranth_bench import simulate
from int8_systolic.sim.axi_monitor import burst_violations

MEMORY = 1 << 15


def run(dut, commands, *, seed, latency, p_aw=0.7, p_w=0.7, p_in=0.8, window=(0, MEMORY), good=None,
        max_cycles=20000):
    """Simulate ``commands`` ((addr, length, payload bytes)); ``good``: which of them the producer feeds."""
    rng = random.Random(seed)
    nbytes = dut.bytes
    good = [True] * len(commands) if good is None else good
    mem = bytearray(random.Random(-1).randbytes(MEMORY))   # not zeros: a byte written without its strobe shows
    out = {"errors": [], "bursts": [], "memory": mem}
    beats = []   # the producer's beats: (data, strb) of every good command, in order
    for (_addr, length, payload), ok in zip(commands, good, strict=True):
        if ok:
            for i in range(0, length, nbytes):
                chunk = payload[i:i + nbytes]
                beats.append((int.from_bytes(chunk.ljust(nbytes, b"\0"), "little"), (1 << len(chunk)) - 1))

    async def bench(ctx):
        ctx.set(dut.win_base, window[0])
        ctx.set(dut.win_limit, window[1])
        pending, feed = list(commands), list(beats)
        aws, ws = [], []          # accepted AW bursts [addr, beats]; accepted W beats (data, strb, last)
        responses = []            # cycles at which a B is due
        prev = None
        mid_burst = False         # a burst's first beat is out and its last is not
        unanswered = 0            # bursts whose AW is taken and whose response is not
        for t in range(max_cycles):
            if pending:
                ctx.set(dut.cmd.valid, 1)
                ctx.set(dut.cmd.payload, {"addr": pending[0][0], "length": pending[0][1]})
            else:
                ctx.set(dut.cmd.valid, 0)
            offer = bool(feed) and rng.random() < p_in
            ctx.set(dut.data.valid, offer)
            if offer:
                ctx.set(dut.data.payload, {"data": feed[0][0], "strb": feed[0][1]})
            awready, wready = rng.random() < p_aw, rng.random() < p_w
            ctx.set(dut.m_axi_awready, awready)
            ctx.set(dut.m_axi_wready, wready)
            bvalid = bool(responses) and responses[0] <= t
            ctx.set(dut.m_axi_bvalid, bvalid)
            ctx.set(dut.m_axi_bresp, 0)

            assert ctx.get(dut.m_axi_bready) == 1
            aw = (ctx.get(dut.m_axi_awvalid), ctx.get(dut.m_axi_awaddr), ctx.get(dut.m_axi_awlen),
                  ctx.get(dut.m_axi_awsize), ctx.get(dut.m_axi_awburst))
            w = (ctx.get(dut.m_axi_wvalid), ctx.get(dut.m_axi_wdata), ctx.get(dut.m_axi_wstrb),
                 ctx.get(dut.m_axi_wlast))
            if prev is not None:
                (paw, pawready), (pw, pwready) = prev
                if paw[0] and not pawready:
                    assert aw == paw, f"AW changed while waiting at cycle {t}"
                if pw[0] and not pwready:
                    assert w == pw, f"W changed while waiting at cycle {t}"
            prev = ((aw, awready), (w, wready))
            if mid_burst:
                assert w[0], f"W gap inside a burst at cycle {t}: a burst's beats must all be buffered first"
            if aw[0] and awready:
                _, addr, awlen, awsize, awburst = aw
                n = awlen + 1
                assert burst_violations("write", addr, n, awsize, awburst, data_bytes=nbytes,
                                        max_burst=dut.max_burst, window=window) == []
                aws.append([addr, n])
                out["bursts"].append((addr, n))
                unanswered += 1
                assert unanswered <= dut.max_outstanding, "more bursts awaiting a response than max_outstanding"
            if w[0] and wready:
                ws.append(w[1:])
                mid_burst = not w[3]
            # a burst is complete when its AW and all its beats are in: write it, schedule its response
            while aws and len(ws) >= aws[0][1]:
                addr, n = aws.pop(0)
                for i in range(n):
                    wdata, wstrb, wlast = ws.pop(0)
                    assert wlast == (i == n - 1), f"WLAST wrong on beat {i} of a {n}-beat burst"
                    for b in range(nbytes):
                        if wstrb >> b & 1:
                            mem[addr + i * nbytes + b] = wdata >> (8 * b) & 0xFF
                responses.append(t + latency)
            if bvalid:
                responses.pop(0)
                unanswered -= 1
            if offer and ctx.get(dut.data.ready):
                feed.pop(0)
            if pending and ctx.get(dut.cmd.ready):
                pending.pop(0)
            if ctx.get(dut.error):
                out["errors"].append(ctx.get(dut.error))
            await ctx.tick()
            if not pending and not feed and not responses and not aws and ctx.get(dut.idle):
                assert not ws, "W beats without an AW"
                out["cycles"] = t + 1
                out["bytes_written"] = ctx.get(dut.bytes_written)
                return
        raise AssertionError(f"not idle after {max_cycles} cycles")

    simulate(dut, bench)
    return out


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_random_writes_land_exactly(data_width):
    nbytes = data_width // 8
    rng = random.Random(data_width)
    dut = AxiWriter(data_width, max_burst=8, max_outstanding=3)
    cmds, expect = [], bytearray(random.Random(-1).randbytes(MEMORY))
    cursor = 0
    for _ in range(10):
        length = rng.choice([1, nbytes - 1, nbytes, 3 * nbytes + 5, 64, 200, 517])
        if rng.random() < 0.4:   # at a 4 KB edge
            cursor = (cursor // 4096 + 1) * 4096 - nbytes * rng.randrange(1, 4)
        addr = cursor
        payload = bytes(rng.randrange(256) for _ in range(length))
        cmds.append((addr, length, payload))
        expect[addr:addr + length] = payload
        cursor = addr + ((length + nbytes - 1) // nbytes + rng.randrange(3)) * nbytes
    res = run(dut, cmds, seed=data_width, latency=rng.choice([1, 6, 20]))
    assert res["memory"] == expect
    assert res["bytes_written"] == sum(length for _, length, _ in cmds)
    assert res["errors"] == []


def test_bad_commands_raise_their_error_and_write_nothing():
    dut = AxiWriter(64, max_burst=16, max_outstanding=2)
    window = (0x1000, 0x2000)
    payload = bytes(range(24))
    cmds = [(0x1004, 8, b""), (0x1000, 0, b""), (0x0ff8, 16, b""), (0x1ff8, 16, b""), (0x1100, 24, payload)]
    res = run(dut, cmds, seed=5, latency=3, window=window, good=[False, False, False, False, True])
    bit = {name: 1 << i for name, i in ERRORS.items()}
    assert res["errors"] == [bit["misaligned"], bit["empty"], bit["window"], bit["window"]]
    assert res["bursts"] == [(0x1100, 3)]
    expect = bytearray(random.Random(-1).randbytes(MEMORY))
    expect[0x1100:0x1118] = payload
    assert res["memory"] == expect


def test_full_rate():
    """Always ready: 512 beats in about a cycle each (AW waits for a burst's beats, then W streams)."""
    dut = AxiWriter(64, max_burst=16, max_outstanding=4)
    payload = bytes(random.Random(2).randrange(256) for _ in range(4096))
    res = run(dut, [(0x0f80, 4096, payload)], seed=2, latency=20, p_aw=1.0, p_w=1.0, p_in=1.0)
    assert bytes(res["memory"][0x0f80:0x0f80 + 4096]) == payload
    assert res["cycles"] <= 512 + 16 + 20 + 8, res["cycles"]


def test_parameters_refused():
    with pytest.raises(ValueError, match="data_width must be 32, 64 or 128"):
        AxiWriter(16)
    with pytest.raises(ValueError, match="max_outstanding must be an integer >= 1"):
        AxiWriter(64, max_outstanding=0)
