"""An AXI4 memory for Amaranth-simulator testbenches: a Python slave on a component's ``m_axi_*`` ports, with a
protocol check on every cycle.

The memory model of docs/engine.md's verification plan, for the engine's fast tests: each AR or AW is
accepted with probability ``p_ready`` a cycle; a read burst's beats come in order, no earlier than
``latency`` cycles after its AR (bursts in flight overlap), one beat a cycle at most, with random
gaps (``p_beat``); a write burst lands when its AW and all its beats are in, and its response comes
``latency`` cycles later. Reads and writes in ``error_ranges`` are answered SLVERR (the data still
moves). The cocotb tests use cocotbext-axi instead (:mod:`sim.axi_memory`).

Checked every cycle (a violation raises AssertionError naming the cycle): AR/AW/W payloads stable
while VALID waits for READY, every burst within 4 KB, INCR, full-width and inside one of the
windows it may use (:func:`sim.axi_monitor.burst_violations`), WLAST on a burst's last beat, RREADY
and BREADY high (the masters' contract), at most ``max_outstanding`` bursts of each kind open.
"""

import random

from .axi_monitor import burst_violations

__all__ = ["AxiMemoryModel"]


class AxiMemoryModel:
    """``memory``: a bytearray, address 0 at byte 0. ``read_windows``/``write_windows``: (base, limit) pairs a
    burst must lie in one of. Call :meth:`cycle` once per clock cycle, before ``ctx.tick()``."""

    def __init__(self, dut, memory, *, data_bytes, read_windows, write_windows, latency=20, p_ready=0.8,
                 p_beat=0.9, seed=0, max_burst=256, max_outstanding=None, error_ranges=()):
        self.dut, self.memory, self.nbytes = dut, memory, data_bytes
        self.read_windows, self.write_windows = list(read_windows), list(write_windows)
        self.latency, self.p_ready, self.p_beat = latency, p_ready, p_beat
        self.rng = random.Random(seed)
        self.max_burst, self.max_outstanding = max_burst, max_outstanding
        self.error_ranges = list(error_ranges)   # (base, limit): reads and writes there answered SLVERR
        self.reads = []        # [addr, beats, due cycle, beats sent]
        self.aws, self.ws = [], []
        self.responses = []    # due cycles of write responses
        self.prev = None
        self.t = 0
        self.bytes_read = self.bytes_written = 0
        self.read_bursts, self.write_bursts = [], []   # (address, beats, cycle) of each, in order

    def _p(self, name):
        return getattr(self.dut, f"m_axi_{name}")

    def _check_burst(self, kind, addr, beats, size, burst, windows):
        problems = burst_violations(kind, addr, beats, size, burst, data_bytes=self.nbytes, max_burst=self.max_burst,
                                    window=windows)
        assert not problems, f"cycle {self.t}: {problems}"

    def cycle(self, ctx):
        p, t, nb = self._p, self.t, self.nbytes
        arready, awready = self.rng.random() < self.p_ready, self.rng.random() < self.p_ready
        wready = self.rng.random() < self.p_ready
        ctx.set(p("arready"), arready)
        ctx.set(p("awready"), awready)
        ctx.set(p("wready"), wready)
        head = self.reads[0] if self.reads else None
        rvalid = head is not None and t >= head[2] and self.rng.random() < self.p_beat
        ctx.set(p("rvalid"), rvalid)
        if rvalid:
            a = head[0] + head[3] * nb
            ctx.set(p("rdata"), int.from_bytes(self.memory[a:a + nb], "little"))
            ctx.set(p("rlast"), head[3] == head[1] - 1)
            ctx.set(p("rresp"), 2 if self._erroneous(a) else 0)
            ctx.set(p("rid"), 0)
        bvalid = bool(self.responses) and self.responses[0][0] <= t
        ctx.set(p("bvalid"), bvalid)
        ctx.set(p("bresp"), 2 if bvalid and self.responses[0][1] else 0)
        ctx.set(p("bid"), 0)

        assert ctx.get(p("rready")), f"cycle {t}: RREADY low"
        assert ctx.get(p("bready")), f"cycle {t}: BREADY low"
        ar = tuple(ctx.get(p(n)) for n in ("arvalid", "araddr", "arlen", "arsize", "arburst"))
        aw = tuple(ctx.get(p(n)) for n in ("awvalid", "awaddr", "awlen", "awsize", "awburst"))
        w = tuple(ctx.get(p(n)) for n in ("wvalid", "wdata", "wstrb", "wlast"))
        if self.prev is not None:
            for name, now, (before, was_ready) in zip(("AR", "AW", "W"), (ar, aw, w), self.prev, strict=True):
                if before[0] and not was_ready:
                    assert now == before, f"cycle {t}: {name} changed while VALID waited for READY"
        self.prev = ((ar, arready), (aw, awready), (w, wready))
        if ar[0] and arready:
            _, addr, arlen, size, burst = ar
            self._check_burst("read", addr, arlen + 1, size, burst, self.read_windows)
            self.reads.append([addr, arlen + 1, t + self.latency, 0])
            self.read_bursts.append((addr, arlen + 1, t))
        if self.max_outstanding is not None:
            assert len(self.reads) <= self.max_outstanding, f"cycle {t}: more reads open than allowed"
        if rvalid:
            head[3] += 1
            self.bytes_read += nb
            if head[3] == head[1]:
                self.reads.pop(0)
        if aw[0] and awready:
            _, addr, awlen, size, burst = aw
            self._check_burst("write", addr, awlen + 1, size, burst, self.write_windows)
            self.aws.append([addr, awlen + 1])
            self.write_bursts.append((addr, awlen + 1, t))
        if w[0] and wready:
            self.ws.append(w[1:])
        while self.aws and len(self.ws) >= self.aws[0][1]:
            addr, n = self.aws.pop(0)
            for i in range(n):
                data, strb, last = self.ws.pop(0)
                assert last == (i == n - 1), f"cycle {t}: WLAST wrong on beat {i} of a {n}-beat burst"
                for b in range(nb):
                    if strb >> b & 1:
                        self.memory[addr + i * nb + b] = data >> (8 * b) & 0xFF
                        self.bytes_written += 1
            self.responses.append((t + self.latency, any(self._erroneous(addr + i * nb) for i in range(n))))
        if bvalid:
            self.responses.pop(0)
        self.t += 1

    def _erroneous(self, addr):
        return any(base <= addr < limit for base, limit in self.error_ranges)

    @property
    def idle(self):
        """No read or write burst open and no write beat waiting for its AW."""
        return not (self.reads or self.aws or self.ws or self.responses)
