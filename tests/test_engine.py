"""hw.engine in Amaranth's simulator, against a Python AXI4 memory with latency and random stalls (sim.axi_model,
which checks the protocol and the windows every cycle): command lists of CONV_2D and FULLY_CONNECTED layers run
from memory, every output byte compared with the golden model (golden.kernels), no byte of memory changed but the
outputs; END, BARRIER and GO again; each error bit stops the list at its command, and the next list runs exactly."""

import random

import numpy as np
import pytest

from int8_systolic.golden.fixedpoint import quantize_multiplier
from int8_systolic.golden.kernels import conv_2d_kernel
from int8_systolic.host.engine_layout import mac_command, table_image, weights_image
from int8_systolic.host.windows import Geometry
from int8_systolic.hw import commands
from int8_systolic.hw.engine import ERRORS, Engine
from int8_systolic.sim.amaranth_bench import simulate
from int8_systolic.sim.axi_model import AxiMemoryModel

RO = (0x0000, 0x10000)      # commands, weights, tables
RW = (0x10000, 0x20000)     # activations
MEMORY = 0x20000
LIST = 0x0


class Layer:
    """A random CONV_2D (or FULLY_CONNECTED) layer, its parameters and its golden output."""

    def __init__(self, rng, seed, *, fc=False, shape=None, filter_hw=None, stride=None, dilation=None,
                 padding=None, out_c=None):
        nrng = np.random.default_rng(seed)
        if fc:
            batch, k = shape or (rng.randint(1, 6), rng.randint(1, 40))
            shape, filter_hw, stride, dilation, padding = (batch, 1, 1, k), (1, 1), (1, 1), (1, 1), "VALID"
        else:
            shape = shape or (rng.choice([1, 1, 2]), rng.randint(1, 7), rng.randint(1, 7), rng.choice([1, 3, 4, 8, 9]))
            filter_hw = filter_hw or (rng.randint(1, 3), rng.randint(1, 3))
            stride = stride or (rng.randint(1, 2), rng.randint(1, 2))
            dilation = dilation or (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
            padding = padding or rng.choice(["SAME", "VALID"])
            if padding == "VALID" and any((k - 1) * d + 1 > s for k, d, s in zip(filter_hw, dilation, shape[1:3],
                                                                                  strict=True)):
                padding = "SAME"
        self.op = "FULLY_CONNECTED" if fc else "CONV_2D"
        self.g = Geometry.of(shape, filter_hw, stride, dilation, padding)
        self.out_c = out_c or rng.randint(1, 11)
        self.x = nrng.integers(-128, 128, shape).astype(np.int8)
        self.w = nrng.integers(-127, 128, (self.out_c, *filter_hw, shape[3])).astype(np.int8)
        self.bias = nrng.integers(-(2**16), 2**16, self.out_c).astype(np.int32)
        k = self.g.k
        # outputs spread over the int8 range (an accumulator's spread is about 5000 * sqrt(K))
        real = np.exp(nrng.uniform(np.log(2.0**-4), np.log(2.0), self.out_c)) / (np.sqrt(k) * 128)
        self.mult, shift = quantize_multiplier(real, "double")
        self.shift = np.minimum(shift, 30)
        self.zp_in = rng.choice([-128, 127, rng.randint(-128, 127)])
        self.zp_out = rng.choice([-128, 127, rng.randint(-128, 127)])
        self.act = sorted(rng.sample(range(-128, 128), 2)) if rng.random() < 0.3 else [-128, 127]
        self.stride, self.dilation, self.padding = stride, dilation, padding

    def expected(self):
        out = conv_2d_kernel(self.x, self.w, self.bias, input_offset=-self.zp_in, output_multiplier=self.mult,
                             output_shift=self.shift, output_offset=self.zp_out, stride=self.stride,
                             dilation=self.dilation, padding=self.padding, quantized_activation_min=self.act[0],
                             quantized_activation_max=self.act[1])
        return out.astype(np.int8).tobytes()


class Image:
    """A memory image: command list at LIST, weights and tables after it (read-only window), inputs and outputs in
    the read-write window; every tensor aligned to 64 bytes."""

    def __init__(self, seed, cols):
        self.cols = cols
        self.mem = bytearray(random.Random(seed).randbytes(MEMORY))   # not zeros: a stray write shows
        self.ro, self.rw = 0x1000, RW[0]
        self.list = []
        self.outputs = []        # (addr, expected bytes)

    def _put(self, region, data):
        addr = getattr(self, region)
        self.mem[addr:addr + len(data)] = data
        setattr(self, region, addr + -(-max(len(data), 1) // 64) * 64)
        return addr

    def _reserve(self, n):
        addr = self.rw
        self.rw += -(-n // 64) * 64
        return addr

    def add(self, layer, **override):
        w_addr = self._put("ro", weights_image(layer.w, self.cols))
        t_addr = self._put("ro", table_image(layer.bias, layer.w, layer.zp_in, layer.mult, layer.shift))
        in_addr = self._put("rw", layer.x.tobytes())
        expected = layer.expected()
        out_addr = self._reserve(len(expected))
        fields = {"input_addr": in_addr, "weights_addr": w_addr, "table_addr": t_addr, "output_addr": out_addr,
                      "input_zero_point": layer.zp_in, "output_zero_point": layer.zp_out, "act_min": layer.act[0],
                      "act_max": layer.act[1]}
        raw = mac_command(layer.op, layer.g, layer.out_c, **fields)
        if override:
            raw = commands.pack(**{**commands.unpack(raw), **override})
        self.list.append(raw)
        self.outputs.append((out_addr, expected))

    def raw(self, raw):
        self.list.append(raw)

    def finish(self, at=LIST):
        """Write the list so far, with END, at ``at``; the next list starts empty."""
        data = b"".join(self.list) + commands.pack(op="END")
        assert at + len(data) <= 0x1000
        self.mem[at:at + len(data)] = data
        self.list = []


def run(dut, image, *, lists=(LIST,), seed=0, latency=20, p_ready=0.8, max_cycles=200000, error_ranges=()):
    """Pulse go with each of ``lists`` as the list address in turn, the next once the list before stops; returns
    the events and the model."""
    model = AxiMemoryModel(dut, image.mem, data_bytes=dut.data_width // 8, read_windows=[RO, RW],
                           write_windows=[RW], latency=latency, p_ready=p_ready, seed=seed,
                           max_burst=dut.max_burst, error_ranges=error_ranges)
    events = []

    async def bench(ctx):
        ctx.set(dut.ro_base, RO[0])
        ctx.set(dut.ro_limit, RO[1])
        ctx.set(dut.rw_base, RW[0])
        ctx.set(dut.rw_limit, RW[1])
        left = list(lists)
        ctx.set(dut.list_addr, left[0])
        go_at = 0
        for t in range(max_cycles):
            ctx.set(dut.go, t == go_at)
            model.cycle(ctx)
            await ctx.tick()
            if t > go_at:
                if ctx.get(dut.done):
                    events.append(("done", t - go_at))
                elif ctx.get(dut.barrier):
                    events.append(("barrier", t - go_at))
                elif not ctx.get(dut.busy) and ctx.get(dut.error):
                    events.append(("error", ctx.get(dut.error), ctx.get(dut.error_index)))
                else:
                    continue
                assert not ctx.get(dut.busy)
                left.pop(0)
                if not left:
                    for _ in range(40):    # nothing moves after the stop
                        model.cycle(ctx)
                        await ctx.tick()
                    assert model.idle, "a burst open after the list stopped"
                    return
                go_at = t + 5
                ctx.set(dut.list_addr, left[0])
        raise AssertionError(f"the list did not stop in {max_cycles} cycles: {events}")

    simulate(dut, bench)
    return events, model


def check_memory(image, before, written):
    """Every expected output equals golden, and no other byte changed."""
    mem = image.mem
    allowed = bytearray(before)
    for addr, want in written:
        got = bytes(mem[addr:addr + len(want)])
        assert got == want, f"output at {addr:#x}: {np.frombuffer(got, np.int8)} != {np.frombuffer(want, np.int8)}"
        allowed[addr:addr + len(want)] = want
    changed = [a for a in range(MEMORY) if mem[a] != allowed[a]]
    assert not changed, f"bytes written outside the outputs: {changed[:8]}"


def engine(**kw):
    return Engine(**{"rows": 4, "cols": 4, "data_width": 64, "in_depth": 1024, "w_depth": 1024, "out_depth": 1024,
                     "max_col_tiles": 8, **kw})


@pytest.mark.parametrize("seed", range(3))
def test_a_list_of_random_layers_is_exact(seed):
    rng = random.Random(seed)
    dut = engine()
    image = Image(seed, dut.cols)
    layers = [Layer(rng, seed * 10 + i, fc=(i == 2)) for i in range(3)]
    for layer in layers:
        image.add(layer)
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=seed)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image, before, image.outputs)


def test_a_barrier_stops_the_list_and_go_resumes_after_it():
    rng = random.Random(4)
    dut = engine()
    image = Image(4, dut.cols)
    image.add(Layer(rng, 40))
    image.raw(commands.pack(op="BARRIER"))
    image.add(Layer(rng, 41, fc=True))
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, lists=(LIST, 0x800))      # the second go resumes: its list address is not read
    assert [e[0] for e in events] == ["barrier", "done"], events
    check_memory(image, before, image.outputs)


def poke(raw, **fields):
    """A descriptor with fields set to any bits (pack refuses what the engine must refuse too)."""
    bits = int.from_bytes(raw, "little")
    for name, value in fields.items():
        f = next(f for f in commands.FIELDS if f.name == name)
        bits = bits & ~(((1 << f.width) - 1) << f.bit) | (value & ((1 << f.width) - 1)) << f.bit
    return bits.to_bytes(len(raw), "little")


# each bad command (a function of the good one) and the error it raises
BAD = {
    "BAD_OP": lambda raw: poke(raw, op=7),
    "BAD_FIELD": lambda raw: poke(raw, in_h=0),
    "SHAPE": lambda raw: poke(raw, act_min=5, act_max=4),
    "UNSUPPORTED": lambda raw: poke(raw, op=commands.OPS["DEPTHWISE_CONV_2D"]),
    "TOO_BIG": lambda raw: poke(raw, out_c=100),
    "MISALIGNED": lambda raw: poke(raw, input_addr=commands.unpack(raw)["input_addr"] + 4),
    "WINDOW": lambda raw: poke(raw, output_addr=RO[0] + 0x8000),
}


@pytest.mark.parametrize("error", sorted(BAD))
def test_a_bad_command_stops_the_list_at_its_index_and_the_next_list_is_exact(error):
    """List 1: a good layer, the bad command, a good layer: the first is written, the list stops with the error
    bit and index 1, nothing of the third is written. List 2 (the next GO) runs exactly."""
    rng = random.Random(5)
    dut = engine()
    image = Image(5, dut.cols)
    image.add(Layer(rng, 50))
    first = image.outputs[:]
    image.add(Layer(rng, 51))
    image.list[-1] = BAD[error](image.list[-1])
    image.add(Layer(rng, 52, fc=True))
    image.finish()
    image.add(Layer(rng, 53))
    image.finish(at=0x800)
    second = image.outputs[-1:]
    before = bytes(image.mem)
    events, _ = run(dut, image, lists=(LIST, 0x800))
    assert events == [("error", 1 << ERRORS[error], 1), ("done", events[1][1])]
    check_memory(image, before, first + second)


def test_a_list_outside_the_read_only_window_reads_nothing():
    rng = random.Random(6)
    dut = engine()
    image = Image(6, dut.cols)
    image.add(Layer(rng, 60))
    image.finish(at=0x800)
    before = bytes(image.mem)
    events, _ = run(dut, image, lists=(RW[0], 0x800))
    assert events[0] == ("error", 1 << ERRORS["LIST"], 0)
    assert events[1][0] == "done"
    check_memory(image, before, image.outputs)


def test_an_error_response_sets_bus_after_the_layer():
    """The second layer's input is answered SLVERR: that layer completes, the list stops with BUS at index 1."""
    rng = random.Random(7)
    dut = engine()
    image = Image(7, dut.cols)
    image.add(Layer(rng, 70))
    image.add(Layer(rng, 71))
    image.add(Layer(rng, 72))
    image.finish()
    bad = commands.unpack(bytes(image.mem[LIST + 64:LIST + 128]))["input_addr"]
    before = bytes(image.mem)
    events, _ = run(dut, image, error_ranges=[(bad, bad + 8)])
    assert events == [("error", 1 << ERRORS["BUS"], 1)]
    written = {a for a in range(MEMORY) if image.mem[a] != before[a]}
    third = image.outputs[2]
    assert not written & set(range(third[0], third[0] + len(third[1]))), "the layer after the error ran"
    check_memory(image, before, image.outputs[:1] + [(a, bytes(image.mem[a:a + len(e)])) for a, e in
                                                    image.outputs[1:2]])


@pytest.mark.parametrize("data_width", [32, 128])
def test_other_bus_widths(data_width):
    rng = random.Random(data_width)
    dut = engine(data_width=data_width)
    image = Image(data_width, dut.cols)
    for i in range(2):
        image.add(Layer(rng, data_width + i, fc=(i == 1)))
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=data_width, latency=30)
    assert [e[0] for e in events] == ["done"]
    check_memory(image, before, image.outputs)


def test_the_default_engine_runs_a_layer_of_several_tiles():
    """8x8, 64-bit, the default buffers: a 3x3 convolution of 16 channels to 20 (three column tiles), exact."""
    rng = random.Random(9)
    dut = Engine()
    image = Image(9, dut.cols)
    image.add(Layer(rng, 90, shape=(1, 6, 6, 16), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1),
                    padding="SAME", out_c=20))
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=9)
    assert [e[0] for e in events] == ["done"]
    check_memory(image, before, image.outputs)


def test_parameters_refused():
    with pytest.raises(ValueError, match="in_depth must be a power of two"):
        Engine(in_depth=1000)
    with pytest.raises(ValueError, match="data_width must be 32, 64 or 128"):
        Engine(data_width=16)
