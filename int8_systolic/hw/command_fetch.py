"""The engine's command fetcher: reads a command list from memory, checks each command, hands MAC commands on.

On ``go`` the fetcher reads the 64-byte command at ``list_addr`` through a read port (``rd_cmd``
out, ``rd_data`` in: an :class:`hw.axi_reader.AxiReader`'s ``cmd`` and ``data``), decodes it with
:func:`hw.commands.layout` and checks it:

- its op is one of :data:`hw.commands.OPS`; otherwise ``error`` sets ``BAD_OP``;
- for a MAC op, every field with a minimum in :data:`hw.commands.FIELDS` is at least that
  minimum (zero shapes, strides, dilations are refused); otherwise ``error`` sets ``BAD_FIELD``.

Before it reads a command it checks the command's 64 bytes lie in the read window (``win_base``,
``win_limit``: the engine's read-only window) at an address aligned to the bus; otherwise ``error``
sets ``LIST`` with the command's index, and nothing is read (the read port would refuse it).

A good MAC command goes out on ``desc`` with its index in the list, and the next command is read
once it is taken. ``END`` stops the list (``done`` pulses); ``BARRIER`` stops it too (``barrier``
pulses) and the next ``go`` resumes after it, at ``next_addr``, rather than at ``list_addr``. A bad
command stops the list with its error bit and its index in ``error_index`` (both held until the
next ``go``); nothing after it is read. ``busy`` is high from ``go`` to the stop. ``stop`` (held
until ``busy`` falls) ends the list early, for the engine when a later stage refuses a command: a
read in progress is completed (its beats are the read port's) and dropped, nothing is handed on. Commands are
read one at a time (a command is 64 bytes, a few beats, against a layer of thousands of cycles).
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from . import commands
from .axi_reader import command_layout

__all__ = ["ERRORS", "CommandFetch"]

ERRORS = {"BAD_OP": 0, "BAD_FIELD": 1, "LIST": 2}
MAC_OPS = ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D")
COMMAND_BYTES = 4 * commands.WORDS


class CommandFetch(wiring.Component):
    def __init__(self, data_width=64):
        if data_width not in (32, 64, 128):
            self._MustUse__silence = True  # a refused object is not an unused design
            raise ValueError(f"data_width must be 32, 64 or 128 bits, got {data_width!r}")
        self.data_width = data_width
        super().__init__({
            "go": In(1), "stop": In(1), "list_addr": In(32), "win_base": In(32), "win_limit": In(33),
            "rd_cmd": Out(stream.Signature(command_layout())),
            "rd_data": In(stream.Signature(data.StructLayout({"data": data_width, "last": 1}))),
            "desc": Out(stream.Signature(data.StructLayout({"command": commands.layout(), "index": 16}))),
            "busy": Out(1), "done": Out(1), "barrier": Out(1),
            "error": Out(len(ERRORS)), "error_index": Out(16), "next_addr": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        beats = COMMAND_BYTES * 8 // self.data_width
        addr = Signal(32)
        index = Signal(16)
        word = Signal(COMMAND_BYTES * 8)
        beat = Signal(range(beats + 1))
        barrier_pending = Signal()   # the list stopped at a BARRIER: the next go resumes after it
        view = data.View(commands.layout(), word)
        op = view.op

        # (ORs of the comparisons: a sum of them would build a chain of adders; each registered in DECODE, so that
        # no comparison feeds the error bits in the cycle it is made)
        known = Signal()
        m.d.comb += known.eq(Cat(op == code for code in commands.OPS.values()).any())
        is_mac = Signal()
        m.d.comb += is_mac.eq(Cat(op == commands.OPS[name] for name in MAC_OPS).any())
        short = Signal()   # a field below its minimum
        m.d.comb += short.eq(Cat(getattr(view, f.name) < f.minimum for f in commands.FIELDS
                                 if f.minimum is not None).any())

        outside = Signal()           # the command at addr is outside the read-only window or misaligned
        known_r, mac_short, is_end, is_barrier = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [self.done.eq(0), self.barrier.eq(0)]
        m.d.comb += [self.rd_cmd.payload.addr.eq(addr), self.rd_cmd.payload.length.eq(COMMAND_BYTES),
                     self.desc.payload.command.eq(word), self.desc.payload.index.eq(index),
                     self.next_addr.eq(addr)]

        with m.FSM():
            with m.State("IDLE"), m.If(self.go):
                m.d.sync += [self.busy.eq(1), self.error.eq(0)]
                with m.If(~barrier_pending):
                    m.d.sync += [addr.eq(self.list_addr), index.eq(0)]
                m.d.sync += barrier_pending.eq(0)
                m.next = "WINDOW"
            with m.State("WINDOW"):
                # the command's place checked against the read-only window, registered
                m.d.sync += outside.eq((addr < self.win_base) | (addr + COMMAND_BYTES > self.win_limit)
                                       | (addr[:(self.data_width // 8 - 1).bit_length()] != 0))
                m.next = "READ"
            with m.State("READ"):
                m.d.comb += self.rd_cmd.valid.eq(~outside & ~self.stop)
                with m.If(self.stop):
                    m.d.sync += self.busy.eq(0)
                    m.next = "IDLE"
                with m.Elif(outside):
                    m.d.sync += [self.error.eq(1 << ERRORS["LIST"]), self.error_index.eq(index), self.busy.eq(0)]
                    m.next = "IDLE"
                with m.Elif(self.rd_cmd.ready):
                    m.d.sync += beat.eq(0)
                    m.next = "COLLECT"
            with m.State("COLLECT"):
                m.d.comb += self.rd_data.ready.eq(1)
                with m.If(self.rd_data.valid):
                    # beats arrive lowest address first: each one shifts in from the top
                    m.d.sync += [word.eq((word >> self.data_width) | (self.rd_data.payload.data
                                                                      << (COMMAND_BYTES * 8 - self.data_width))),
                                 beat.eq(beat + 1)]
                    with m.If(beat == beats - 1):
                        m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [known_r.eq(known), mac_short.eq(is_mac & short), is_end.eq(op == commands.OPS["END"]),
                             is_barrier.eq(op == commands.OPS["BARRIER"])]
                m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(self.stop):
                    m.d.sync += self.busy.eq(0)
                    m.next = "IDLE"
                with m.Elif(~known_r):
                    m.d.sync += [self.error.eq(1 << ERRORS["BAD_OP"]), self.error_index.eq(index),
                                 self.busy.eq(0)]
                    m.next = "IDLE"
                with m.Elif(mac_short):
                    m.d.sync += [self.error.eq(1 << ERRORS["BAD_FIELD"]), self.error_index.eq(index),
                                 self.busy.eq(0)]
                    m.next = "IDLE"
                with m.Elif(is_end):
                    m.d.sync += [self.done.eq(1), self.busy.eq(0)]
                    m.next = "IDLE"
                with m.Elif(is_barrier):
                    m.d.sync += [self.barrier.eq(1), self.busy.eq(0), barrier_pending.eq(1),
                                 addr.eq(addr + COMMAND_BYTES), index.eq(index + 1)]
                    m.next = "IDLE"
                with m.Else():
                    m.next = "HAND"
            with m.State("HAND"):
                m.d.comb += self.desc.valid.eq(~self.stop)
                with m.If(self.stop):
                    m.d.sync += self.busy.eq(0)
                    m.next = "IDLE"
                with m.Elif(self.desc.ready):
                    m.d.sync += [addr.eq(addr + COMMAND_BYTES), index.eq(index + 1)]
                    m.next = "WINDOW"
        return m
