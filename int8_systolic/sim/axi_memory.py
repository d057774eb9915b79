"""An AXI4 memory for cocotb testbenches: cocotbext-axi's ``AxiRam`` with a latency that overlaps across bursts.

cocotbext-axi's ``AxiRam`` serves one read burst at a time and answers at once: its read
coroutine takes an AR and sends the burst's beats before it takes the next AR. A memory
controller instead pipelines requests: several bursts are in flight, each answered a fixed
latency after its request. :class:`LatencyAxiRam` keeps ``AxiRam``'s memory, channels and
checks (4 KB crossing asserted, bursts decoded by its own code) and changes only the timing:

- **reads:** an AR is taken as soon as it comes (up to ``outstanding`` requests waiting) and
  stamped; its beats go out no earlier than ``latency`` cycles after it, in order, one a cycle
  at most, so consecutive bursts' latencies overlap (the read side is built on cocotbext-axi's
  AR/R channel classes and memory; its burst loop is ours, INCR only);
- **writes:** each burst's response is delayed by ``latency`` cycles without holding the next
  burst.

Random stalls come from cocotbext-axi's pause generators on any channel
(``ram.read_if.r_channel.set_pause_generator``...).
"""

import collections

import cocotb
from cocotb.triggers import Event, RisingEdge
from cocotbext.axi import AxiBurstType, AxiRam, AxiResp
from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.memory import Memory

__all__ = ["LatencyAxiRam"]


async def _room(channel):
    """Wait until ``channel`` (a cocotbext-axi stream source) can take an item without waiting."""
    while channel.full():
        channel.dequeue_event.clear()
        await channel.dequeue_event.wait()


class _LatencyRead(AxiRamRead):
    def __init__(self, bus, clock, reset=None, *, latency, outstanding, **kwargs):
        self.latency, self.outstanding = latency, outstanding
        self._pending = collections.deque()
        self._arrived = Event()
        self._cycle = 0
        self._clock = clock
        self._epoch = 0      # resets so far: a burst being answered when one comes is dropped
        super().__init__(bus, clock, reset, **kwargs)
        cocotb.start_soon(self._count())
        cocotb.start_soon(self._answer())   # one for the model's life; a reset empties its queue

    def _handle_reset(self, state):
        super()._handle_reset(state)
        if state:
            self._pending.clear()
            self._epoch += 1

    async def _count(self):
        while True:
            await RisingEdge(self._clock)
            self._cycle += 1

    async def _process_read(self):
        """Take ARs as they come, stamped with their cycle; :meth:`_answer` serves them in order."""
        while True:
            while len(self._pending) >= self.outstanding:
                await RisingEdge(self._clock)
            ar = await self.ar_channel.recv()
            self._pending.append((self._cycle, ar))
            self._arrived.set()

    async def _answer(self):
        while True:
            while not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            stamp, ar = self._pending[0]
            while self._cycle < stamp + self.latency:
                await RisingEdge(self._clock)
            if not self._pending or self._pending[0][1] is not ar:   # a reset emptied the queue meanwhile
                continue
            epoch = self._epoch
            addr, beats, size = int(ar.araddr), int(ar.arlen) + 1, int(ar.arsize)
            assert int(ar.arburst) == AxiBurstType.INCR, "only INCR bursts are modelled"
            assert 0x1000 - (addr & 0xFFF) >= beats << size, f"read burst at {addr:#x} crosses 4 KB"
            for n in range(beats):
                word = ((addr + (n << size)) // self.byte_lanes) * self.byte_lanes
                r = self.r_channel._transaction_obj()
                r.rid, r.rlast, r.rresp = int(getattr(ar, "arid", 0)), n == beats - 1, AxiResp.OKAY
                r.rdata = int.from_bytes(await self._read(word, self.byte_lanes), "little")
                await _room(self.r_channel)
                if self._epoch != epoch:       # reset mid-burst: its other beats are never sent
                    break
                self.r_channel.send_nowait(r)  # (no await between the check and the queue)
            if self._pending and self._pending[0][1] is ar:
                self._pending.popleft()


class _LatencyWrite(AxiRamWrite):
    def __init__(self, bus, clock, reset=None, *, latency, **kwargs):
        self.latency = latency
        self._epoch = 0      # resets so far: a response due when one comes is dropped
        super().__init__(bus, clock, reset, **kwargs)
        self._clock = clock
        self._b_source = self.b_channel
        self.b_channel = _DelayedB(self._b_source, clock, latency, self)

    def _handle_reset(self, state):
        super()._handle_reset(state)
        if state:
            self._epoch += 1


class _DelayedB:
    """Stands in for the B channel: each response goes out ``latency`` cycles after the burst's last beat."""

    def __init__(self, source, clock, latency, owner):
        self.source, self.clock, self.latency, self.owner = source, clock, latency, owner
        self.bus = source.bus

    def _transaction_obj(self):
        return self.source._transaction_obj()

    async def send(self, b):
        cocotb.start_soon(self._later(b))

    async def _later(self, b):
        epoch = self.owner._epoch
        for _ in range(self.latency):
            await RisingEdge(self.clock)
        await _room(self.source)
        if self.owner._epoch == epoch:    # (a reset meanwhile drops the response)
            self.source.send_nowait(b)

    def clear(self):
        self.source.clear()

    def __getattr__(self, name):
        return getattr(self.source, name)


class LatencyAxiRam(AxiRam):
    """``AxiRam`` whose reads and write responses come ``latency`` cycles after their request, several requests
    in flight (``outstanding`` reads waiting at most)."""

    def __init__(self, bus, clock, reset=None, *, size, latency=20, outstanding=8, reset_active_level=True):
        self.latency = latency
        Memory.__init__(self, size)   # AxiRam's own __init__ builds undelayed interfaces
        self.write_if = _LatencyWrite(bus.write, clock, reset, latency=latency, reset_active_level=reset_active_level,
                                      mem=self.mem)
        self.read_if = _LatencyRead(bus.read, clock, reset, latency=latency, outstanding=outstanding,
                                    reset_active_level=reset_active_level, mem=self.mem)
