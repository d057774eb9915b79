"""The engine's read arbiter: several clients (commands, tables, inputs, weights) share one read port.

Each client has a command stream out and a data stream in, as an :class:`hw.axi_reader.AxiReader`
offers them. Commands are granted round-robin among the clients that offer one, those whose ``low`` bit is
set only when no other offers (the engine's weights read ahead of the layers that need them yield to every
read a layer waits for); each granted
command's client goes into a queue (``depth`` commands in flight), and since the reader returns
beats in command order, the beats go to the client at the queue's head until a beat with
``last``. A client whose data stream is not ready holds the port's data (the reader's buffer absorbs
it); the others' commands still go out while the queue has room.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .axi_reader import command_layout

__all__ = ["ReadArbiter"]


class ReadArbiter(wiring.Component):
    def __init__(self, clients, data_width=64, depth=4):
        if not (isinstance(clients, int) and clients >= 1 and data_width in (32, 64, 128) and depth >= 1):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"clients must be >= 1, data_width 32, 64 or 128 bits and depth >= 1, got {clients!r}, "
                             f"{data_width!r}, {depth!r}")
        self.clients, self.data_width, self.depth = clients, data_width, depth
        beat = data.StructLayout({"data": data_width, "last": 1})
        members = {}
        for c in range(clients):
            members[f"cmd{c}"] = In(stream.Signature(command_layout()))
            members[f"data{c}"] = Out(stream.Signature(beat))
        members["low"] = In(clients)
        members["cmd"] = Out(stream.Signature(command_layout()))
        members["data"] = In(stream.Signature(beat))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.clients
        cmds = [getattr(self, f"cmd{c}") for c in range(n)]
        outs = [getattr(self, f"data{c}") for c in range(n)]
        owners = m.submodules.owners = fifo.SyncFIFO(width=max(1, (n - 1).bit_length()), depth=self.depth)

        # round-robin: the first client offering a command at or after `turn`, among those not low if any offers
        turn = Signal(range(n))
        grant = Signal(range(n))
        any_offer, any_high = Signal(), Signal()
        m.d.comb += any_high.eq(Cat(cmds[c].valid & ~self.low[c] for c in range(n)).any())
        order = [[(t + k) % n for k in range(n)] for t in range(n)]
        with m.Switch(turn):
            for t in range(n):
                with m.Case(t):
                    for c in reversed(order[t]):
                        with m.If(cmds[c].valid & (~self.low[c] | ~any_high)):
                            m.d.comb += [grant.eq(c), any_offer.eq(1)]
        m.d.comb += self.cmd.valid.eq(any_offer & owners.w_rdy)
        for c in range(n):
            with m.If(grant == c):
                m.d.comb += self.cmd.payload.eq(cmds[c].payload)
            m.d.comb += cmds[c].ready.eq((grant == c) & any_offer & owners.w_rdy & self.cmd.ready)
        granted = Signal()
        m.d.comb += [granted.eq(self.cmd.valid & self.cmd.ready), owners.w_en.eq(granted), owners.w_data.eq(grant)]
        with m.If(granted):
            m.d.sync += turn.eq(Mux(grant == n - 1, 0, grant + 1))

        # data to the owner of the oldest command
        head = owners.r_data
        for c in range(n):
            m.d.comb += [outs[c].valid.eq(self.data.valid & owners.r_rdy & (head == c)),
                         outs[c].payload.eq(self.data.payload)]
        m.d.comb += self.data.ready.eq(_ready_of(outs, head, owners.r_rdy))
        m.d.comb += owners.r_en.eq(self.data.valid & self.data.ready & self.data.payload.last)
        return m


def _ready_of(outs, head, any_owner):
    ready = 0
    for c, out in enumerate(outs):
        ready = ready | ((head == c) & out.ready)
    return any_owner & ready
