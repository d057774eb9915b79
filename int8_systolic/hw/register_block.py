"""The register block: an AXI4-Lite register map built from a register table (:mod:`hw.registers`).

Each register's *kind* (see :mod:`hw.registers`) says what the block builds for it:

- ``stored``: storage of the register's fields, an output port named after the register (lower
  case) whose shape is a layout of its fields (``regs.desc_output.act_min``); an ``updated`` one
  also loads ``<name>_next`` when ``<name>_load`` is high (after any write in that cycle);
- ``strobe``: an output ``<name>_stb``, high for one cycle per write, with the written word on
  ``w_data``; a counter's ``clear`` field zeroes it;
- ``w1c``: sticky bits, an output port like a stored register's, set by the bound signal's bits
  (``<name>_set``) and cleared by writing 1; a ``live`` field reads its bound bit instead;
- ``status``: the bound value, read as it is;
- ``counter``: a 32-bit counter of the cycles its bound signal is high, zeroed by its ``clear``
  strobe field (a register a cycle later) and by reset;
- ``const``: the bound integer.

What a register reads or counts is *bound* by the design that instantiates the block, in its
``elaborate``: :meth:`RegisterBlock.bind` takes one value per register that needs one and refuses
a missing, unknown or ill-typed one; elaborating a block that was never bound fails. So a register
added to the table cannot be silently decoded as mapped and read 0: it must say its kind, and what
it reads must be bound.

Writes: a write to an unmapped or read-only (``const``, ``status``, ``counter``) offset answers
SLVERR, as does a write whose WSTRB is not all ones; ``bad_access`` pulses for each (the design
sets ERROR.BAD_ACCESS from it). Reads: an unmapped offset answers SLVERR and 0; a ``strobe`` reads 0.

Latency (cycles counted from the one in which the slave accepts AW and W, or AR):

- a write's strobe (``<name>_stb``, ``bad_access``) is high :attr:`WRITE_LATENCY` cycles after,
  a stored or w1c register holds the new value from the cycle after that, and BVALID rises
  ``WRITE_LATENCY + 1`` cycles after; writes are at least ``WRITE_LATENCY + 2`` cycles apart;
- RDATA is the value the register held :attr:`READ_SAMPLE` cycles after AR was accepted, and
  RVALID rises ``READ_LATENCY + 2`` cycles after it.

The read path is seven register stages deep and the write decode two, each about one LUT level:
the address copied per group of four registers, each offset compared in two six-bit halves, the
one-hot selects, each value ANDed with its select beside it, then two OR stages. The copies that
keep a decoder near its loads carry :data:`hw.pipeline.KEEP_APART`.
"""

import operator
from functools import reduce

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .axi_lite import AxiLiteSlave, axi_lite_members
from .pipeline import KEEP_APART, delayed

__all__ = ["RegisterBlock", "register_layout"]


def register_layout(register):
    """The register's fields as a layout (a register without fields: 32 bits)."""
    if not register.fields:
        return unsigned(32)
    return data.FlexibleLayout(register.width, {
        f.name.lower(): data.Field(signed(f.width) if f.signed else unsigned(f.width), f.lsb) for f in register.fields})


class RegisterBlock(wiring.Component):
    """The register map of ``registers`` behind an AXI4-Lite slave (see the module docstring).

    Ports: the AXI4-Lite slave's (``s_axil_*``), ``w_data``, ``bad_access``, and per register as its
    kind says. Call :meth:`bind` from the enclosing design's ``elaborate``.
    """

    WRITE_LATENCY = 3   # the AXI-Lite slave's: strobes decoded in two register stages
    READ_LATENCY = 7    # register stages from the slave's r_stb to RDATA
    READ_SAMPLE = 5     # the cycle after AR whose register values a read returns

    def __init__(self, registers, *, addr_width=12):
        self.registers, self.addr_width = tuple(registers), addr_width
        if len({r.name for r in self.registers}) != len(self.registers):
            raise ValueError("register names must be distinct")
        for r in self.registers:
            if r.offset >= 1 << addr_width:
                raise ValueError(f"register {r.name} at 0x{r.offset:X} is outside a {addr_width}-bit address space")
        members = {**axi_lite_members(addr_width), "w_data": Out(32), "bad_access": Out(1)}
        for r in self.registers:
            name = r.name.lower()
            if r.kind in ("stored", "w1c"):
                members[name] = Out(register_layout(r))
            if r.kind == "stored" and r.updated:
                members[f"{name}_next"] = In(register_layout(r))
                members[f"{name}_load"] = In(1)
            if r.kind == "strobe":
                members[f"{name}_stb"] = Out(1)
            if r.kind in ("status", "w1c"):
                members[f"{name}_set" if r.kind == "w1c" else name] = In(r.width)
            if r.kind == "counter":
                members[f"{name}_inc"] = In(1)
        self._constants = None
        super().__init__(members)

    def needs_binding(self):
        """The registers :meth:`bind` must be given a value for, by kind."""
        return {r.name: r.kind for r in self.registers if r.kind in ("const", "status", "counter", "w1c")}

    def bind(self, m, **values):
        """Bind what the registers read: an ``int`` for each ``const``, a value for each ``status``
        (what it reads), ``counter`` (counted while high) and ``w1c`` (the bits that set it; a live
        field's bit is what it reads). Drives the block's inputs from ``m``'s comb domain."""
        needed = self.needs_binding()
        missing = [f"{n} ({needed[n]})" for n in needed if n not in values]
        unknown = [n for n in values if n not in needed]
        if missing or unknown:
            self._MustUse__silence = True
            raise ValueError("register block bindings: " + "; ".join(
                ([f"no binding for {', '.join(missing)}"] if missing else []) +
                ([f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a register that reads a value"]
                 if unknown else [])))
        constants = {}
        for r in self.registers:
            if r.name not in needed:
                continue
            v = values[r.name]
            if r.kind == "const":
                if not isinstance(v, int) or not 0 <= v < 1 << 32:
                    self._MustUse__silence = True
                    raise ValueError(f"register {r.name} is a constant: bind a 32-bit unsigned int, got {v!r}")
                constants[r.name] = v
                continue
            port = getattr(self, f"{r.name.lower()}_set" if r.kind == "w1c" else
                           f"{r.name.lower()}_inc" if r.kind == "counter" else r.name.lower())
            value = Value.cast(v)
            if len(value) > len(port):
                self._MustUse__silence = True
                raise ValueError(f"register {r.name}: the bound value has {len(value)} bits, more than its "
                                 f"{len(port)}")
            m.d.comb += port.eq(value)
        self._constants = constants

    def elaborate(self, platform):
        if self._constants is None:
            raise RuntimeError("RegisterBlock.bind() was not called: registers "
                               f"{', '.join(self.needs_binding())} have no binding")
        m = Module()
        m.submodules.axil = axil = AxiLiteSlave(self.addr_width, read_latency=self.READ_LATENCY,
                                                write_latency=self.WRITE_LATENCY)
        for name, member in axi_lite_members(self.addr_width).items():
            port, inner = getattr(self, name), getattr(axil, name)
            m.d.comb += inner.eq(port) if member.flow == In else port.eq(inner)
        m.d.comb += self.w_data.eq(axil.w_data)
        half = self.addr_width // 2

        def half_matches(addr, offsets, name, keep=False):
            """Each offset's compare with ``addr``'s low and high halves, from registers: one per distinct
            half (offsets that share a half share its register)."""
            mask = (1 << half) - 1
            halves = {"lo": [o & mask for o in offsets], "hi": [o >> half for o in offsets]}
            out = []
            for part, values in halves.items():
                distinct = sorted(set(values))
                reg_ = Signal(len(distinct), name=f"{name}_{part}", attrs=KEEP_APART if keep else None)
                bits = addr[:half] if part == "lo" else addr[half:]
                m.d.sync += reg_.eq(Cat(bits == v for v in distinct))
                out.append(Cat(reg_[distinct.index(v)] for v in values))
            return out

        # Writes: a strobe register per writable register, decoded from the slave's address (valid
        # from two cycles before its w_stb) in two stages; and one for the offsets nothing takes.
        writable = [r for r in self.registers if r.access != "ro"]
        we = {r.name: Signal(attrs=KEEP_APART, name=f"dup_we_{r.name.lower()}") for r in writable}
        w_lo, w_hi = half_matches(axil.w_addr, [r.offset for r in writable], "w_match")
        w_bad = Signal()
        m.d.sync += [sig.eq(axil.w_pre & w_lo[n] & w_hi[n]) for n, sig in enumerate(we.values())]
        m.d.sync += w_bad.eq(axil.w_pre & ~(w_lo & w_hi).any())
        m.d.comb += [axil.w_err.eq(w_bad), self.bad_access.eq(w_bad | axil.w_partial)]

        values = {}
        for r in self.registers:
            name = r.name.lower()
            if r.kind == "const":
                values[r.name] = Const(self._constants[r.name], 32)
            elif r.kind == "status":  # (bits outside its fields read 0)
                values[r.name] = getattr(self, name) & r.mask
            elif r.kind == "strobe":
                m.d.comb += getattr(self, f"{name}_stb").eq(we[r.name])
            elif r.kind == "stored":
                storage = Signal(r.width, name=f"staged_{name}")
                with m.If(we[r.name]):
                    m.d.sync += storage.eq(axil.w_data[:r.width] & r.mask)
                if r.updated:
                    with m.If(getattr(self, f"{name}_load")):
                        m.d.sync += storage.eq(getattr(self, f"{name}_next"))
                m.d.comb += getattr(self, name).eq(storage)
                values[r.name] = storage
            elif r.kind == "w1c":
                sticky = [f for f in r.fields if not f.live]
                bits = Signal(r.width, name=f"{name}_bits")
                cleared = Mux(we[r.name], axil.w_data[:r.width], 0)
                set_ = getattr(self, f"{name}_set")
                for f in sticky:
                    s = slice(f.lsb, f.lsb + f.width)
                    m.d.sync += bits[s].eq((bits[s] & ~cleared[s]) | set_[s])
                value = Signal(r.width, name=f"{name}_value")
                for f in r.fields:
                    s = slice(f.lsb, f.lsb + f.width)
                    m.d.comb += value[s].eq(set_[s] if f.live else bits[s])
                m.d.comb += getattr(self, name).eq(value)
                values[r.name] = value
            elif r.kind == "counter":
                counter = Signal(32, name=f"count_{name}", reset_less=True)
                # zeroed a cycle after its clear strobe, or in reset: a register beside each counter
                clear = Signal(init=1, attrs=KEEP_APART, name=f"dup_clear_{name}")
                strobe, fname = r.clear
                bit = next(x for x in self.registers if x.name == strobe).field(fname).lsb
                m.d.sync += clear.eq(we[strobe] & axil.w_data[bit])
                with m.If(clear):
                    m.d.sync += counter.eq(0)
                with m.Elif(getattr(self, f"{name}_inc")):
                    m.d.sync += counter.eq(counter + 1)
                values[r.name] = counter

        # Reads, in seven register stages: the address copied into a register per group of four
        # values and one for the error (each near its decoder); each offset's compare in two
        # halves; their AND, the one-hot selects; each select, inverted, in a register beside its
        # value (`clear`: the value register's synchronous reset is then a flip-flop); each value
        # or 0 in a register of its own; each group's OR; the OR of the groups. The address
        # registers hold from one r_stb to the next, so the stages after them need no enable.
        readable = [r for r in self.registers if r.name in values]
        read_values = [Value.cast(values[r.name]) for r in readable]
        groups = [list(range(k, min(k + 4, len(read_values)))) for k in range(0, len(read_values), 4)]
        addrs = [Signal(self.addr_width, attrs=KEEP_APART, name=f"dup_r_addr{k}", reset_less=True)
                 for k in range(len(groups) + 1)]
        with m.If(axil.r_stb):
            m.d.sync += [a.eq(axil.r_addr) for a in addrs]

        def matches(addr, offsets, name):
            """Registers: each offset's match with ``addr``, from its two halves' compares a stage before."""
            lo, hi = half_matches(addr, offsets, name, keep=True)
            both = Signal(len(offsets), name=f"{name}_sel", attrs=KEEP_APART)
            m.d.sync += both.eq(lo & hi)
            return both

        onehots = [matches(addrs[k], [readable[n].offset for n in g], f"dup_r_match{k}") for k, g in enumerate(groups)]
        mapped = matches(addrs[-1], [r.offset for r in self.registers], "dup_r_mapped")
        mapped_groups = Signal(-(-len(self.registers) // 4))
        m.d.sync += mapped_groups.eq(Cat(mapped[k:k + 4].any() for k in range(0, len(self.registers), 4)))
        r_err = Signal()
        m.d.sync += r_err.eq(~mapped_groups.any())
        clears = [Signal(init=1, attrs=KEEP_APART, name=f"dup_r_clear{n}") for n in range(len(read_values))]
        for k, g in enumerate(groups):
            m.d.sync += [clears[n].eq(~onehots[k][i]) for i, n in enumerate(g)]
        selected = [Signal(32, name=f"r_value{n}", reset_less=True) for n in range(len(read_values))]
        m.d.sync += [selected[n].eq(Mux(clears[n], 0, read_values[n])) for n in range(len(read_values))]
        group_regs = [Signal(32, name=f"r_group{k}", reset_less=True) for k in range(len(groups))]
        m.d.sync += [reg_.eq(reduce(operator.or_, (selected[n] for n in g))) for reg_, g in
                     zip(group_regs, groups, strict=True)]
        r_data = Signal(32, reset_less=True)
        m.d.sync += r_data.eq(reduce(operator.or_, group_regs))
        m.d.comb += [axil.r_data.eq(r_data), axil.r_err.eq(delayed(m, r_err, 2, "r_err_d"))]
        return m
