"""hw.register_block in Amaranth's simulator: every register of hw.registers written and read over
AXI4-Lite, each kind's behaviour, and the documented latencies (the block's properties, not numbers).

The bindings are the test's own signals: a free-running cycle count for STATUS (so a read tells which
cycle's value it returned), increments and set bits it drives."""

import random

import pytest
from amaranth import Elaboratable, Module, Signal, Value
from amaranth.sim import Simulator

from int8_systolic.hw.register_block import RegisterBlock
from int8_systolic.hw.registers import REGISTERS, reg

WL, RL, RS = RegisterBlock.WRITE_LATENCY, RegisterBlock.READ_LATENCY, RegisterBlock.READ_SAMPLE
CONSTANTS = {r.name: 0x1000 + i * 0x111 for i, r in enumerate(REGISTERS) if r.kind == "const"}
OKAY, SLVERR = 0, 2


class Bench(Elaboratable):
    """The block bound to signals the testbench drives or reads."""

    def __init__(self, bind=True):
        self.regs = RegisterBlock(REGISTERS)
        self.tick = Signal(32)
        self.inc = {r.name: Signal(name=f"inc_{r.name.lower()}") for r in REGISTERS
                    if r.kind == "counter" and r.name != "CYCLES"}
        self.set = {r.name: Signal(r.width, name=f"set_{r.name.lower()}") for r in REGISTERS if r.kind == "w1c"}
        self._bind = bind

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = self.regs
        m.d.sync += self.tick.eq(self.tick + 1)
        if self._bind:
            self.regs.bind(m, **CONSTANTS, STATUS=self.tick[:reg("STATUS").width], CYCLES=1, **self.inc,
                           **self.set)
        return m


class Master:
    """One AXI4-Lite access at a time; returns the response and when each thing happened, in cycles
    counted from the one in which the slave accepted the address (and data)."""

    def __init__(self, ctx, bench):
        self.ctx, self.bench, self.regs = ctx, bench, bench.regs

    def p(self, name):
        return getattr(self.regs, f"s_axil_{name}")

    async def write(self, offset, value, strb=0xF, watch=()):
        ctx, p = self.ctx, self.p
        for name, v in (("awaddr", offset), ("awvalid", 1), ("wdata", value), ("wstrb", strb), ("wvalid", 1),
                        ("bready", 1)):
            ctx.set(p(name), v)
        while not ctx.get(p("awready")):
            await ctx.tick()
        seen = {name: [] for name in watch}
        n = 0
        while True:
            for name in watch:
                seen[name].append(ctx.get(Value.cast(getattr(self.regs, name))))
            if n and ctx.get(p("bvalid")):
                break
            await ctx.tick()
            n += 1
            ctx.set(p("awvalid"), 0)
            ctx.set(p("wvalid"), 0)
        resp = ctx.get(p("bresp"))
        await ctx.tick()
        return resp, n, seen

    async def read(self, offset):
        ctx, p = self.ctx, self.p
        ctx.set(p("araddr"), offset)
        ctx.set(p("arvalid"), 1)
        ctx.set(p("rready"), 1)
        while not ctx.get(p("arready")):
            await ctx.tick()
        accepted = ctx.get(self.bench.tick)
        n = 0
        while True:
            if n and ctx.get(p("rvalid")):
                break
            await ctx.tick()
            n += 1
            ctx.set(p("arvalid"), 0)
        data, resp = ctx.get(p("rdata")), ctx.get(p("rresp"))
        await ctx.tick()
        return data, resp, n, accepted


def simulate(body, bench=None):
    bench = bench or Bench()
    sim = Simulator(bench)
    sim.add_clock(1e-8)

    async def testbench(ctx):
        await body(ctx, bench, Master(ctx, bench))

    sim.add_testbench(testbench)
    sim.run()


def test_every_register_written_and_read():
    rng = random.Random(1)

    async def body(ctx, bench, bus):
        for r in REGISTERS:
            value = rng.getrandbits(32)
            if r.kind == "stored":
                resp, n, seen = await bus.write(r.offset, value, watch=[r.name.lower()])
                assert (resp, n) == (OKAY, WL + 1), r.name
                # the new value from the cycle after the strobe (the previous register's write went
                # to another register, so this one held 0 before)
                port = seen[r.name.lower()]
                assert port[:WL + 1] == [0] * (WL + 1), r.name
                assert port[WL + 1] == value & r.mask, r.name
            elif r.kind == "strobe":
                stb = f"{r.name.lower()}_stb"
                resp, n, seen = await bus.write(r.offset, value, watch=[stb, "w_data", "bad_access"])
                assert (resp, n) == (OKAY, WL + 1), r.name
                assert [i for i, v in enumerate(seen[stb]) if v] == [WL], r.name
                assert seen["w_data"][WL] == value
                assert not any(seen["bad_access"])
            elif r.kind in ("const", "status", "counter"):
                resp, n, seen = await bus.write(r.offset, value, watch=["bad_access"])
                assert (resp, n) == (SLVERR, WL + 1), f"a write to read-only {r.name} answered {resp}"
                assert [i for i, v in enumerate(seen["bad_access"]) if v] == [WL], r.name
            data, resp, n, accepted = await bus.read(r.offset)
            assert (resp, n) == (OKAY, RL + 2), r.name
            want = {"const": CONSTANTS.get(r.name), "strobe": 0, "status": (accepted + RS) & r.mask,
                    "stored": value & r.mask}.get(r.kind)
            if want is not None:
                assert data == want, f"{r.name} read {data:#x}, want {want:#x}"

    simulate(body)


def test_unmapped_and_partial_accesses_refused():
    async def body(ctx, bench, bus):
        unmapped = next(o for o in range(0, 1 << 12, 4) if o not in {r.offset for r in REGISTERS})
        data, resp, _, _ = await bus.read(unmapped)
        assert (data, resp) == (0, SLVERR)
        resp, _, seen = await bus.write(unmapped, 5, watch=["bad_access"])
        assert resp == SLVERR
        assert [i for i, v in enumerate(seen["bad_access"]) if v] == [WL]
        k = reg("DESC_K")
        await bus.write(k.offset, 7)
        resp, _, seen = await bus.write(k.offset, 9, strb=0b0111, watch=["bad_access", "desc_push_stb"])
        assert resp == SLVERR
        assert any(seen["bad_access"])
        assert (await bus.read(k.offset))[0] == 7, "a partial write changed the register"
        resp, _, seen = await bus.write(reg("DESC_PUSH").offset, 1, strb=0b1110, watch=["desc_push_stb"])
        assert resp == SLVERR
        assert not any(seen["desc_push_stb"]), "a partial write strobed"

    simulate(body)


def test_counters_count_and_clear():
    async def body(ctx, bench, bus):
        cycles = reg("CYCLES")
        a, _, _, t_a = await bus.read(cycles.offset)
        b, _, _, t_b = await bus.read(cycles.offset)
        assert b - a == t_b - t_a > 0, "CYCLES does not count every cycle"
        steps = reg("STEPS")
        ctx.set(bench.inc["STEPS"], 1)
        for _ in range(5):
            await ctx.tick()
        ctx.set(bench.inc["STEPS"], 0)
        assert (await bus.read(steps.offset))[0] == 5
        clear = reg("CONTROL").field("CLEAR_COUNTERS")
        await bus.write(reg("CONTROL").offset, 1 << clear.lsb)
        assert (await bus.read(steps.offset))[0] == 0
        c, _, _, t_c = await bus.read(cycles.offset)
        assert c < t_c - t_b, "CONTROL.CLEAR_COUNTERS did not zero CYCLES"

    simulate(body)


def test_w1c_sticky_bits_and_live_fields():
    async def body(ctx, bench, bus):
        error, irq = reg("ERROR"), reg("IRQ")
        ctx.set(bench.set["ERROR"], 0b101)
        await ctx.tick()
        ctx.set(bench.set["ERROR"], 0)
        assert (await bus.read(error.offset))[0] == 0b101, "ERROR's bits are not sticky"
        await bus.write(error.offset, 0b001)
        assert (await bus.read(error.offset))[0] == 0b100, "write 1 to clear"
        # IRQ.ERROR is live: it reads its bound bit and a write does not clear it
        live = irq.field("ERROR")
        ctx.set(bench.set["IRQ"], 1 << live.lsb)
        assert (await bus.read(irq.offset))[0] == 1 << live.lsb
        await bus.write(irq.offset, 1 << live.lsb)
        assert (await bus.read(irq.offset))[0] == 1 << live.lsb
        ctx.set(bench.set["IRQ"], 0)
        assert (await bus.read(irq.offset))[0] == 0
        # a set in the cycle of the clearing write wins
        done = irq.field("DONE")
        ctx.set(bench.set["IRQ"], 1 << done.lsb)
        await bus.write(irq.offset, 1 << done.lsb)
        ctx.set(bench.set["IRQ"], 0)
        assert (await bus.read(irq.offset))[0] == 1 << done.lsb

    simulate(body)


def test_updated_register_loads_from_the_design():
    async def body(ctx, bench, bus):
        index = reg("TABLE_INDEX")
        await bus.write(index.offset, 0x0305)
        regs = bench.regs
        ctx.set(regs.table_index_next.as_value(), 0x0A07)
        ctx.set(regs.table_index_load, 1)
        await ctx.tick()
        ctx.set(regs.table_index_load, 0)
        assert (await bus.read(index.offset))[0] == 0x0A07

    simulate(body)


def test_bindings_checked():
    def module():
        m = Module()
        m._MustUse__silence = True
        return m

    def block():
        b = RegisterBlock(REGISTERS)
        b._MustUse__silence = True  # bound, never elaborated
        return b

    every = {**CONSTANTS, "STATUS": 0, "ERROR": 0, "IRQ": 0,
             **{r.name: 0 for r in REGISTERS if r.kind == "counter"}}
    block().bind(module(), **every)
    with pytest.raises(ValueError, match=r"no binding for STATUS \(status\), .*CYCLES \(counter\)"):
        block().bind(module(), **CONSTANTS, ERROR=0, IRQ=0)
    with pytest.raises(ValueError, match=r"DESC_K is not a register that reads a value"):
        block().bind(module(), **every, DESC_K=1)
    with pytest.raises(ValueError, match=r"register ID is a constant: bind a 32-bit unsigned int"):
        block().bind(module(), **{**every, "ID": Signal()})
    with pytest.raises(ValueError, match=r"register STATUS: the bound value has 13 bits, more than its 12"):
        block().bind(module(), **{**every, "STATUS": Signal(13)})
    bench = Bench(bind=False)
    bench._MustUse__silence = bench.regs._MustUse__silence = True
    with pytest.raises(RuntimeError, match=r"bind\(\) was not called: registers ID, .*GEMMS_DONE have no binding"):
        simulate(lambda *a: None, bench)
