"""An AXI4 protocol monitor for cocotb: watches a master port every cycle and records every violation.

Checked, for the channels that exist on the port (prefix ``m_axi_``):

- **handshakes:** once VALID is high it stays high with the same payload until READY (AR, AW, W from the
  master; R and B from the memory);
- **requests:** INCR bursts of the bus width, aligned, never across a 4 KB boundary, at most
  ``max_burst`` beats, and inside the window the test gives for reads and for writes;
- **data:** WLAST on each write burst's last beat and only there (bursts in AW order); R beats and RLAST
  only for issued reads, RLAST on each read burst's last beat;
- **responses:** a B only for a write burst whose AW was taken.

``violations`` lists them with the cycle; a test asserts it is empty. ``reads``/``writes`` count the
bursts, ``read_bytes``/``written_bytes`` the bytes moved.

:class:`AxiLiteMonitor` checks an AXI4-Lite slave port (prefix ``s_axil_``) the same way: handshakes, no X on a
valid payload, an R only for a taken AR, a B only for a write whose AW and W were both taken.
"""

import collections

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

__all__ = ["AxiLiteMonitor", "AxiMonitor", "burst_violations"]

_CHANNELS = {
    "ar": ("arvalid", "arready", ("araddr", "arlen", "arsize", "arburst")),
    "aw": ("awvalid", "awready", ("awaddr", "awlen", "awsize", "awburst")),
    "w": ("wvalid", "wready", ("wdata", "wstrb", "wlast")),
    "r": ("rvalid", "rready", ("rdata", "rresp", "rlast")),
    "b": ("bvalid", "bready", ("bresp",)),
}


def burst_violations(kind, addr, beats, size, burst, *, data_bytes, max_burst, window=None):
    """What is wrong with one AXI4 ``kind`` ("read" or "write") burst request, as texts (none: a good one): not
    INCR, not the bus's size, unaligned, longer than ``max_burst``, across a 4 KB boundary, outside ``window``
    ((base, limit), a list of them the burst must lie in one of, or None). Shared by the cocotb monitor and the
    Amaranth-simulator tests of the masters and the engine."""
    out = []
    if burst != 1:
        out.append(f"{kind} burst type {burst}, not INCR")
    if size != (data_bytes - 1).bit_length():
        out.append(f"{kind} burst size {1 << size} bytes, the bus is {data_bytes}")
    if addr % data_bytes:
        out.append(f"{kind} burst at {addr:#x} not aligned to the bus")
    if beats > max_burst:
        out.append(f"{kind} burst of {beats} beats, more than {max_burst}")
    if addr // 4096 != (addr + beats * data_bytes - 1) // 4096:
        out.append(f"{kind} burst at {addr:#x} of {beats} beats crosses a 4 KB boundary")
    windows = [] if window is None else [window] if isinstance(window[0], int) else list(window)
    end = addr + beats * data_bytes
    if windows and not any(base <= addr and end <= limit for base, limit in windows):
        named = " or ".join(f"[{base:#x}, {limit:#x})" for base, limit in windows)
        out.append(f"{kind} burst at {addr:#x} of {beats} beats outside the {kind} window {named}")
    return out


def _bit(signal):
    value = signal.value
    return int(value) if value.is_resolvable else 0


def _value(signal):
    """A payload's value; an unresolved (X/Z) bit while VALID is high is a violation, reported as None."""
    value = signal.value
    return int(value) if value.is_resolvable else None


def _handshake(fail, c, now, last):
    """Check channel ``c``'s (valid, ready, payload) this cycle against the last: VALID held with its payload
    until READY. True when a transfer with a resolved payload took place (X or Z in it is a violation)."""
    v, r, p = now
    if last is not None and last[0] and not last[1]:
        if not v:
            fail(f"{c.upper()}VALID dropped before {c.upper()}READY")
        elif p != last[2]:
            fail(f"{c.upper()} payload changed while waiting for {c.upper()}READY")
    if not (v and r):
        return False
    if None in p:
        fail(f"{c.upper()} payload has X or Z bits while {c.upper()}VALID is high")
        return False
    return True


class AxiMonitor:
    def __init__(self, dut, clock, *, data_bytes, max_burst=256, read_window=None, write_window=None,
                 prefix="m_axi_", reset=None):
        self.dut, self.clock, self.prefix, self.bytes, self.max_burst = dut, clock, prefix, data_bytes, max_burst
        self.read_window, self.write_window = read_window, write_window   # (base, limit) or a callable giving it
        self.reset_signal = reset     # active high: the master and its slave reset together, every burst dropped
        self.channels = {c: spec for c, spec in _CHANNELS.items() if hasattr(dut, prefix + spec[0])}
        self.violations = []
        self.reads = self.writes = self.read_bytes = self.written_bytes = 0
        self.read_spans = []                  # (address, bytes) of every read burst
        self._reads = collections.deque()     # beats of each read burst not yet returned
        self._writes = collections.deque()    # beats of each write burst (AW taken) not yet matched to its W beats
        self._w_ahead = 0                     # W beats of the burst in progress
        self._w_done = collections.deque()    # lengths of W bursts ended by WLAST, not yet matched to an AW
        self._unanswered = 0                  # write bursts awaiting B
        self.cycle = 0
        self._task = cocotb.start_soon(self._run())

    def _sig(self, name):
        return getattr(self.dut, self.prefix + name)

    def _fail(self, text):
        self.violations.append(f"cycle {self.cycle}: {text}")

    def _window(self, which):
        w = self.read_window if which == "read" else self.write_window
        return w() if callable(w) else w

    def _request(self, kind, addr, beats, size, burst):
        if kind == "read":
            self.read_spans.append((addr, beats << size))
        for text in burst_violations(kind, addr, beats, size, burst, data_bytes=self.bytes, max_burst=self.max_burst,
                                     window=self._window("read" if kind == "read" else "write")):
            self._fail(text)

    def _match_writes(self):
        while self._writes and self._w_done:
            aw, w = self._writes.popleft(), self._w_done.popleft()
            if aw != w:
                self._fail(f"a write burst of {aw} beats got WLAST after {w}")

    def check_idle(self):
        """At the end of a test: every request answered, every write burst's beats seen."""
        if self._reads or self._writes or self._w_done or self._w_ahead or self._unanswered:
            self._fail(f"not idle: {len(self._reads)} reads unanswered, {len(self._writes)} write bursts without "
                       f"all their beats, {len(self._w_done)} W bursts without an AW, {self._unanswered} without B")

    def reset(self):
        """The master and its slave were reset together: forget every burst in flight (AXI drops them all)."""
        self._reads.clear()
        self._writes.clear()
        self._w_done.clear()
        self._w_ahead = self._unanswered = 0
        self._last = {}

    async def _run(self):
        self._last = {}
        while True:
            await RisingEdge(self.clock)
            await ReadOnly()
            self.cycle += 1
            if self.reset_signal is not None and _bit(self.reset_signal):
                self.reset()
                continue
            now = {}
            for c, (valid, ready, payload) in self.channels.items():
                v, r = _bit(self._sig(valid)), _bit(self._sig(ready))
                p = tuple(_value(self._sig(s)) for s in payload) if v else None   # undriven unless valid
                now[c] = (v, r, p)
                if not _handshake(self._fail, c, now[c], self._last.get(c)):
                    continue
                if c == "ar":
                    addr, arlen, size, burst = p
                    self._request("read", addr, arlen + 1, size, burst)
                    self._reads.append(arlen + 1)
                    self.reads += 1
                elif c == "aw":
                    addr, awlen, size, burst = p
                    self._request("write", addr, awlen + 1, size, burst)
                    self._writes.append(awlen + 1)
                    self.writes += 1
                    self._unanswered += 1
                    self._match_writes()
                elif c == "w":
                    # W may come before its AW (AXI4 allows it): bursts are matched in order once both are known
                    self.written_bytes += bin(p[1]).count("1")
                    self._w_ahead += 1
                    known = len(self._writes) > len(self._w_done)
                    if p[2]:
                        self._w_done.append(self._w_ahead)
                        self._w_ahead = 0
                    elif known and self._w_ahead >= self._writes[len(self._w_done)]:
                        self._fail(f"no WLAST on beat {self._w_ahead} of a {self._writes[len(self._w_done)]}-beat "
                                   f"burst")
                    self._match_writes()
                elif c == "r":
                    if not self._reads:
                        self._fail("R beat with no read burst issued")
                        continue
                    self._reads[0] -= 1
                    self.read_bytes += self.bytes
                    if bool(p[2]) != (self._reads[0] == 0):
                        self._fail(f"RLAST {'early' if p[2] else 'missing'} in a read burst")
                    if self._reads[0] == 0:
                        self._reads.popleft()
                elif c == "b":
                    if self._unanswered == 0:
                        self._fail("B response with no write burst awaiting one")
                    self._unanswered -= 1
            self._last = now


_LITE_CHANNELS = {
    "ar": ("arvalid", "arready", ("araddr",)),
    "aw": ("awvalid", "awready", ("awaddr",)),
    "w": ("wvalid", "wready", ("wdata", "wstrb")),
    "r": ("rvalid", "rready", ("rdata", "rresp")),
    "b": ("bvalid", "bready", ("bresp",)),
}


class AxiLiteMonitor:
    """An AXI4-Lite protocol monitor on a slave port (the register block's): once VALID is high it stays high with
    the same payload until READY (AR, AW, W from the master; R and B from the slave); no X or Z on a valid
    payload; an R only for a taken AR, a B only for a write whose AW and W were both taken. ``violations`` lists
    them with the cycle; ``reads`` and ``writes`` count the transfers answered. ``reset``: an active-low reset
    signal (its cycles skipped, every transfer in flight dropped)."""

    def __init__(self, dut, clock, *, prefix="s_axil_", reset=None):
        self.dut, self.clock, self.prefix, self.reset_signal = dut, clock, prefix, reset
        self.violations = []
        self.reads = self.writes = 0
        self.cycle = 0
        self._open = {"ar": 0, "aw": 0, "w": 0}       # taken and not yet answered
        self._task = cocotb.start_soon(self._run())

    def _fail(self, text):
        self.violations.append(f"cycle {self.cycle}: {text}")

    async def _run(self):
        last = {}
        while True:
            await RisingEdge(self.clock)
            await ReadOnly()
            self.cycle += 1
            if self.reset_signal is not None and not _bit(self.reset_signal):
                last, self._open = {}, dict.fromkeys(self._open, 0)
                continue
            now = {}
            for c, (valid, ready, payload) in _LITE_CHANNELS.items():
                v = _bit(getattr(self.dut, self.prefix + valid))
                r = _bit(getattr(self.dut, self.prefix + ready))
                p = tuple(_value(getattr(self.dut, self.prefix + name)) for name in payload) if v else None
                now[c] = (v, r, p)
                if not _handshake(self._fail, c, now[c], last.get(c)):
                    continue
                if c in self._open:
                    self._open[c] += 1
                elif c == "r":
                    if self._open["ar"] == 0:
                        self._fail("R with no AR taken")
                    else:
                        self._open["ar"] -= 1
                        self.reads += 1
                elif self._open["aw"] == 0 or self._open["w"] == 0:
                    self._fail("B before the write's AW and W were both taken")
                else:
                    self._open["aw"] -= 1
                    self._open["w"] -= 1
                    self.writes += 1
            last = now

    def check_idle(self):
        """At the end of a test: every AR answered by an R and every AW and W by a B."""
        if any(self._open.values()):
            self._fail(f"not idle: {self._open['ar']} reads and {max(self._open['aw'], self._open['w'])} writes "
                       f"unanswered")
