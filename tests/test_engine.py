"""hw.engine in Amaranth's simulator, against a Python AXI4 memory with latency and random stalls (sim.axi_model,
which checks the protocol and the windows every cycle): command lists of CONV_2D, DEPTHWISE_CONV_2D and
FULLY_CONNECTED layers run from memory (random layers, and a model's compiled image), every output byte
compared with the golden model (golden.kernels), no byte of memory changed but the
outputs; END, BARRIER and GO again; each error bit stops the list at its command, and the next list runs exactly."""

import itertools
import random
import types

import numpy as np
import pytest

from int8_systolic.golden.tflite.cnn import generated_cnn
from int8_systolic.golden.tflite.inputs import model_inputs
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.host.engine_compiler import compile_model
from int8_systolic.hw import commands
from int8_systolic.hw.depthwise_gen import input_pitch
from int8_systolic.hw.engine import ERRORS, Engine
from int8_systolic.sim.amaranth_bench import simulate
from int8_systolic.sim.axi_model import AxiMemoryModel
from int8_systolic.sim.engine_stimulus import (
    LIST,
    MEMORY,
    RO,
    RW,
    Image,
    Layer,
    check_memory,
    pad_conv_model,
    poke,
    small_dw_layer,
)

VCD = None     # a path: the runs' waveforms (debugging)


def run(dut, image, *, lists=(LIST,), seed=0, latency=20, p_ready=0.8, max_cycles=200000, error_ranges=(),
        windows=(RO, RW), between=None, gap=5):
    """Pulse go with each of ``lists`` as the list address in turn, the next once the list before stops; returns
    the events and the model. ``windows``: the read-only and read-write windows; ``between``: called (with the
    memory) after each stop but the last, as a host would run its ops, ``gap`` cycles before the next go."""
    ro, rw = windows
    model = AxiMemoryModel(dut, image.mem, data_bytes=dut.data_width // 8, read_windows=[ro, rw],
                           write_windows=[rw], latency=latency, p_ready=p_ready, seed=seed,
                           max_burst=dut.max_burst, error_ranges=error_ranges)
    events = []

    async def bench(ctx):
        ctx.set(dut.ro_base, ro[0])
        ctx.set(dut.ro_limit, ro[1])
        ctx.set(dut.rw_base, rw[0])
        ctx.set(dut.rw_limit, rw[1])
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
                go_at = t + gap
                ctx.set(dut.list_addr, left[0])
                if between is not None:
                    between(image.mem)
        raise AssertionError(f"the list did not stop in {max_cycles} cycles: {events}")

    simulate(dut, bench, vcd=VCD)
    return events, model


def engine(**kw):
    return Engine(**{"rows": 4, "cols": 4, "data_width": 64, "in_depth": 1024, "w_depth": 1024, "out_depth": 1024,
                     "max_col_tiles": 8, **kw})


@pytest.mark.parametrize("seed", range(3))
def test_a_list_of_random_layers_is_exact(seed):
    rng = random.Random(seed)
    dut = engine()
    image = Image(seed, dut.cols)
    layers = [Layer(rng, seed * 10 + i, fc=(i == 2)) for i in range(3)] + [small_dw_layer(rng, seed * 10 + 3 + i)
                                                                            for i in range(2)]
    for layer in layers:
        image.add(layer)
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=seed)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs)


def test_a_barrier_stops_the_list_and_go_resumes_after_it():
    """The second go resumes after the BARRIER (its list address is not read). The command after the barrier is
    prepared while the first layer finishes: its table and weights (these once that layer's steps are taken) are
    read before the barrier's stop, its input only after the go (the host writes it in between)."""
    rng = random.Random(4)
    dut = engine()
    image = Image(4, dut.cols)
    image.add(Layer(rng, 40))
    image.raw(commands.pack(op="BARRIER"))
    image.add(Layer(rng, 41, fc=True))
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, lists=(LIST, 0x800))
    assert [e[0] for e in events] == ["barrier", "done"], events
    check_memory(image.mem, before, image.outputs)
    after = commands.unpack(bytes(image.mem[LIST + 128:LIST + 192]))
    stop, go = events[0][1], events[0][1] + 5     # (the first go at cycle 0, the second five cycles after the stop)
    first_read = {name: min(t for a, _, t in model.read_bursts if a == after[name])
                  for name in ("table_addr", "weights_addr", "input_addr")}
    assert first_read["table_addr"] < stop, (first_read, stop)
    assert first_read["weights_addr"] < stop, (first_read, stop)
    assert first_read["input_addr"] > go, (first_read, go)


def test_a_layer_after_a_barrier_reads_what_the_host_wrote():
    """A layer whose input is the output of the layer before the BARRIER (captured on chip, same place and shape)
    reads it again from memory after the go: the host may have written it in between (here it does, and takes
    long enough for the layer to be prepared before the go)."""
    rng = random.Random(19)
    dut = engine()
    image = Image(19, dut.cols)
    first = Layer(rng, 190, shape=(1, 4, 4, 3), filter_hw=(1, 1), stride=(1, 1), dilation=(1, 1), padding="SAME",
                  out_c=5)
    image.add(first)
    image.raw(commands.pack(op="BARRIER"))
    second = Layer(rng, 191, shape=(1, 4, 4, 5), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1), padding="SAME")
    second.act = [-128, 127]          # (outputs that depend on the input: no clamp to one value)
    out_addr = image.outputs[0][0]
    image.add(second, input_addr=out_addr)
    image.finish()
    before = bytes(image.mem)

    def host(mem):
        mem[out_addr:out_addr + second.x.nbytes] = second.x.tobytes()

    events, _ = run(dut, image, lists=(LIST, LIST), between=host, gap=300)
    assert [e[0] for e in events] == ["barrier", "done"], events
    check_memory(image.mem, before, [(out_addr, second.x.tobytes()), image.outputs[1]])
    assert len(set(image.outputs[1][1])) > 10


@pytest.mark.parametrize("case", ["end", "barrier", "bad", "bad_table", "bad_fetch", "bus_before", "bus_input"])
def test_what_follows_a_barrier_waits_for_the_go(case):
    """Past a BARRIER the engine prepares ahead, but what it finds there belongs to the list the next go resumes:
    an END or a second BARRIER right after the barrier, a bad command (its error and index reported after the go,
    not at the barrier), a read error on its table or on the command itself (likewise). An error of a layer before
    the barrier (a write answered SLVERR, or the last word of its input read) is that list's: it stops with BUS at
    that layer's index, no barrier. (The engine prepares past the barrier only once the layers before it have read
    their inputs and weights, so a read error is never taken for the wrong side of it.)"""
    rng = random.Random(18)
    dut = engine(in_depth=8192, out_depth=4096)
    image = Image(18, dut.cols)
    # (a 3 200-byte input: still loading when the next command's table would be read)
    image.add(Layer(rng, 180, shape=(1, 20, 20, 8), filter_hw=(1, 1), stride=(1, 1), dilation=(1, 1),
                    padding="SAME", out_c=4))
    image.raw(commands.pack(op="BARRIER"))
    if case == "end":
        pass
    elif case == "barrier":
        image.raw(commands.pack(op="BARRIER"))
    else:
        image.add(Layer(rng, 181))
        if case == "bad":
            image.list[-1] = BAD["INCONSISTENT"](image.list[-1])
    image.finish()
    before = bytes(image.mem)
    errors = []
    if case == "bad_table":
        table = commands.unpack(bytes(image.mem[LIST + 128:LIST + 192]))["table_addr"]
        errors = [(table, table + 8)]
    elif case == "bad_fetch":
        errors = [(LIST + 128, LIST + 136)]
    elif case == "bus_input":
        addr, size = image.inputs[0]
        errors = [((addr + size - 1) // 8 * 8, (addr + size - 1) // 8 * 8 + 8)]
    elif case == "bus_before":
        addr, out = image.outputs[0]
        errors = [((addr + len(out) - 1) // 8 * 8, (addr + len(out) - 1) // 8 * 8 + 8)]
    lists = {"end": 2, "barrier": 3, "bad": 2, "bad_table": 2, "bad_fetch": 2, "bus_before": 1, "bus_input": 1}[case]
    events, _ = run(dut, image, lists=(LIST,) * lists, error_ranges=errors)
    kinds = [e[0] if e[0] != "error" else e[1:] for e in events]
    assert kinds == {"end": ["barrier", "done"], "barrier": ["barrier", "barrier", "done"],
                     "bad": ["barrier", (1 << ERRORS["INCONSISTENT"], 2)],
                     "bad_table": ["barrier", (1 << ERRORS["BUS"], 2)],
                     "bad_fetch": ["barrier", (1 << ERRORS["BUS"], 2)],
                     "bus_before": [(1 << ERRORS["BUS"], 0)], "bus_input": [(1 << ERRORS["BUS"], 0)]}[case], events
    if case in ("end", "barrier", "bad", "bad_table", "bad_fetch"):
        check_memory(image.mem, before, image.outputs[:1])


# each bad command (a function of the good one) and the error it raises
BAD = {
    "BAD_OP": lambda raw: poke(raw, op=7),
    "BAD_FIELD": lambda raw: poke(raw, in_h=0),
    "INCONSISTENT": lambda raw: poke(raw, act_min=5, act_max=4),
    "UNSUPPORTED": lambda raw: poke(raw, bypass=1),
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
    check_memory(image.mem, before, first + second)


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
    check_memory(image.mem, before, image.outputs)


def run_to_bus_error(dut, image, before, bad, *, index):
    """Run ``image``'s list with the bus word at ``bad`` answered SLVERR: it stops with BUS at ``index``, and the
    third layer's output is never written (no layer is taken after the error)."""
    events, _ = run(dut, image, error_ranges=[(bad, bad + 8)])
    assert events == [("error", 1 << ERRORS["BUS"], index)]
    written = {a for a in range(MEMORY) if image.mem[a] != before[a]}
    third = image.outputs[2]
    assert not written & set(range(third[0], third[0] + len(third[1]))), "a layer taken after the error ran"


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
    run_to_bus_error(dut, image, before, bad, index=1)
    check_memory(image.mem, before, image.outputs[:1] + [(a, bytes(image.mem[a:a + len(e)])) for a, e in
                                                    image.outputs[1:2]])


def test_a_write_error_names_its_layer_and_nothing_is_taken_after_it():
    """The first layer's last output write is answered SLVERR (its response comes as the layer's drain ends): BUS
    at index 0; the second layer, which reads the first one's output on chip and so was taken while the first
    drained, completes; the third is never taken. (The first layer's 648 steps outlast the second's preparation, so
    the second is ready when the first's steps end.)"""
    rng = random.Random(8)
    dut = engine()
    image = Image(8, dut.cols)
    first = Layer(rng, 80, shape=(1, 6, 6, 8), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1), padding="SAME",
                  out_c=4)
    image.add(first)
    image.add(Layer.following(first, rng, 81), chained=True)
    image.add(Layer(rng, 82))
    image.finish()
    addr, out = image.outputs[0]
    bad = (addr + len(out) - 1) // 8 * 8        # the last bus word of the first layer's output
    before = bytes(image.mem)
    run_to_bus_error(dut, image, before, bad, index=0)
    # (the memory model keeps a write's data even when it answers SLVERR: both outputs as computed)
    check_memory(image.mem, before, image.outputs[:2])


def test_row_stacked_layers_are_exact_and_read_after_the_drain():
    """Few-channel CONV_2D layers with their inputs row-stacked (hw.stacker): one read from memory (10x4 over one
    channel, stride 2, as DS-CNN's first); then a plain layer whose output does not fit beside its input (not kept
    on chip), and a stacked one reading that output from memory, only once it is written (its last write burst
    before the stacked layer's first read)."""
    rng = random.Random(12)
    dut = engine()
    image = Image(12, dut.cols)
    first = Layer(rng, 120, shape=(1, 13, 5, 1), filter_hw=(10, 4), stride=(2, 2), dilation=(1, 1), padding="SAME",
                  out_c=5)
    # (its input and output too large to keep both in the 1 KB input buffer: its output is not captured)
    middle = Layer(rng, 121, shape=(1, 10, 10, 6), filter_hw=(2, 2), stride=(1, 1), dilation=(1, 1), padding="SAME",
                   out_c=5)
    last = Layer.following(middle, rng, 122, filter_hw=(2, 2), stride=(2, 1), dilation=(1, 1), padding="SAME",
                           out_c=3)
    for layer, chained in ((first, False), (middle, False), (last, True)):
        if layer is not middle:
            assert layer.stack_if_fits(dut.in_depth, dut.data_width // 8)
        image.add(layer, chained=chained)
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, seed=12)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs)
    (out_addr, out), (in_addr, _) = image.outputs[1], image.inputs[2]
    assert in_addr == out_addr
    last_write = max(t for a, _, t in model.write_bursts if out_addr <= a < out_addr + len(out))
    first_read = min(t for a, _, t in model.read_bursts if out_addr <= a < out_addr + len(out))
    assert first_read > last_write, "the stacked layer read its input before the layer before had written it"


def test_an_output_kept_on_chip_is_never_written():
    """A layer with ``keep``: its output goes to the next layer, which reads it on chip, and nowhere else: that
    layer's output is exact and the kept output's place in memory (and every other byte) is unchanged. A kept
    output that does not fit beside its input is refused with TOO_BIG before anything is read."""
    rng = random.Random(13)
    dut = engine()
    image = Image(13, dut.cols)
    first = Layer(rng, 130, shape=(1, 6, 5, 3), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1), padding="SAME",
                  out_c=6)
    first.keep = True
    image.add(first)
    image.add(Layer.following(first, rng, 131, dw=True, depth_multiplier=2), chained=True)
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, seed=13)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs[1:])
    (out_addr, out) = image.outputs[0]
    assert not [a for a, _, _ in model.write_bursts if out_addr <= a < out_addr + len(out)]
    # (1 KB buffer: 600 bytes of input and 600 of output do not both fit)
    image = Image(14, dut.cols)
    big = Layer(rng, 132, shape=(1, 10, 10, 6), filter_hw=(1, 1), stride=(1, 1), dilation=(1, 1), padding="SAME",
                out_c=6)
    big.keep = True
    image.add(big)
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=14)
    assert events == [("error", 1 << ERRORS["TOO_BIG"], 0)]
    check_memory(image.mem, before, [])


@pytest.mark.parametrize(("keep", "stride", "split", "hw"), [
    (True, (2, 2), (1, 1), (5, 7)), (False, (2, 2), (1, 1), (5, 7)), (False, (2, 1), (1, 0), (5, 7)),
    (False, (1, 1), (1, 1), (4, 6))])
def test_a_stride_2_depthwise_layer_takes_its_input_split_on_chip(keep, stride, split, hw):
    """A layer's output kept (or captured) split by parity, as its command's out_split_h / out_split_w say, is the
    next layer's input on chip when that layer (DEPTHWISE_CONV_2D of stride 2, whole-word pixels) holds its input so
    (hw.depthwise_gen.InputLayout): never read from memory, the output exact. A split the next layer does not hold
    (stride 1; even sizes, so the split takes as many bytes as the plain order) is not taken: that layer reads its
    input from memory, exact too."""
    rng = random.Random(17)
    dut = engine()
    image = Image(17, dut.cols)
    first = Layer(rng, 170, shape=(1, *hw, 3), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1), padding="SAME",
                  out_c=8)
    first.keep = keep
    second = Layer.following(first, rng, 171, dw=True, depth_multiplier=1, filter_hw=(3, 3), stride=stride,
                             dilation=(1, 1), padding="SAME")
    image.add(first, out_split_h=split[0], out_split_w=split[1])
    image.add(second, chained=True)
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, seed=17)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs[1:] if keep else image.outputs)
    in_addr = image.outputs[0][0]
    reads = [a for a, _, _ in model.read_bursts if in_addr <= a < in_addr + 64]
    assert bool(reads) == (stride == (1, 1)), reads


def test_a_layer_loads_beside_a_capture_only_where_it_does_not_wrap():
    """A layer that does not read the captured output may load its input while the last layer's output is still
    being captured, if its input ends before the capture's place. Here that capture (the second layer's, after its
    input, which is the first layer's output kept after the first's input) runs past the 2 KB buffer's end and on
    from byte 0, late (a slow memory holds the writes it follows): the third layer, whose input is a tensor of its
    own from byte 0, must wait for it. (Without that wait the capture's last bytes overwrite its first.)"""
    rng = random.Random(16)
    dut = engine(in_depth=2048, out_depth=2048)
    image = Image(16, dut.cols)
    one = {"filter_hw": (1, 1), "stride": (1, 1), "dilation": (1, 1), "padding": "SAME"}
    first = Layer(rng, 160, shape=(1, 8, 8, 9), out_c=4, **one)           # 576 bytes in, 256 out
    second = Layer.following(first, rng, 161, out_c=20, **one)             # 1 280 bytes captured from byte 832
    third = Layer(rng, 162, shape=(1, 10, 10, 7), out_c=3, filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1),
                  padding="SAME")                                         # 700 bytes from byte 0
    image.add(first)
    image.add(second, chained=True)
    image.add(third)
    image.finish()
    before = bytes(image.mem)
    events, _ = run(dut, image, seed=16, p_ready=0.3)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs)


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
    check_memory(image.mem, before, image.outputs)


@pytest.mark.parametrize("data_width", [64, pytest.param(32, marks=pytest.mark.slow)])
def test_the_next_layer_is_prepared_while_one_runs(data_width):
    """Four 3x3 layers of growing weights (432 to 4 608 bytes) through an 8 KB weight ring: each layer's table and
    weights are read while the layer before runs (its weight reads start before that layer's last output write),
    the ring wraps, and every output is exact."""
    rng = random.Random(11)
    dut = engine(data_width=data_width, in_depth=4096, w_depth=8192, out_depth=4096, max_col_tiles=16)
    image = Image(11, dut.cols)
    for i, (c, n) in enumerate([(3, 16), (16, 16), (16, 16), (16, 32)]):
        image.add(Layer(rng, 110 + i, shape=(1, 3, 3, c), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1),
                        padding="SAME", out_c=n))
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, seed=11, max_cycles=60000)
    assert [e[0] for e in events] == ["done"]
    check_memory(image.mem, before, image.outputs)
    cmds = [commands.unpack(bytes(image.mem[LIST + 64 * i:LIST + 64 * (i + 1)])) for i in range(4)]
    for prev, nxt in itertools.pairwise(cmds):
        first_weights = min(t for a, _, t in model.read_bursts if a == nxt["weights_addr"])
        out_end = prev["output_addr"] + prev["batch"] * prev["out_h"] * prev["out_w"] * prev["out_c"]
        last_output = max(t for a, _, t in model.write_bursts if prev["output_addr"] <= a < out_end)
        assert first_weights < last_output, "the next layer's weights were not read while the layer before ran"


def _ahead_layers(seed):
    """A 3x3 layer with many MACs for its weights, then three batch-1 FULLY_CONNECTED layers whose weights (1 to 2
    KB) are most of what they read: the case for reading weights ahead."""
    rng = random.Random(seed)
    first = Layer(rng, seed, shape=(1, 8, 8, 8), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1), padding="SAME",
                  out_c=8)
    return [first] + [Layer(rng, seed + 1 + i, fc=True, shape=(1, 64), out_c=n) for i, n in enumerate((16, 32, 24))]


def _weights_reads(image, model, lo, hi):
    return [(a, n, t) for a, n, t in model.read_bursts if lo <= a < hi]


@pytest.mark.parametrize("data_width", [64, pytest.param(32, marks=pytest.mark.slow)])
def test_weights_are_read_ahead_as_one_run(data_width):
    """Four layers with their weights one after another, each command's weights_ahead the bytes of the run after its
    own (as the compiler lays them out): exact; the weights read once, in order, every byte of the run and nothing of
    it twice (the bytes read are the commands', tables', inputs' and the run's exactly), and the last layer's while
    the first one runs."""
    dut = engine(data_width=data_width, in_depth=4096, w_depth=8192, out_depth=4096, max_col_tiles=16)
    image = Image(21, dut.cols, run=True)
    for layer in _ahead_layers(210):
        image.add(layer)
    image.finish()
    before = bytes(image.mem)
    events, model = run(dut, image, seed=21, max_cycles=60000)
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs)
    cmds = [commands.unpack(bytes(image.mem[LIST + 64 * i:LIST + 64 * (i + 1)])) for i in range(4)]
    nb = data_width // 8
    run_end = image.wr
    reads = _weights_reads(image, model, Image.WEIGHTS_RUN, RO[1])
    assert reads[0][0] == Image.WEIGHTS_RUN
    for (a, n, _), (b, _, _) in itertools.pairwise(reads):
        assert b == a + n * nb, "the run not read in order, once"
    assert reads[-1][0] + reads[-1][1] * nb == run_end
    tables = sum(-(-c["out_c"] * 12 // nb) * nb for c in cmds)
    inputs = sum(-(-size // nb) * nb for _, size in image.inputs)
    assert model.bytes_read == 64 * 5 + tables + inputs + run_end - Image.WEIGHTS_RUN
    last_weights = min(t for a, _, t in reads if a + 256 > cmds[3]["weights_addr"])
    out0 = cmds[0]["output_addr"]
    first_done = max(t for a, _, t in model.write_bursts if out0 <= a < out0 + 8 * 8 * 8)
    assert last_weights < first_done, "the last layer's weights not read while the first layer ran"


@pytest.mark.slow
def test_tables_wrap_around_their_rows():
    """Layers of 2, 4, 3 and 2 column tiles through tables of eight rows (a power of two: a ring): the third layer's
    table goes after the second's, wrapping past the last row (rows 6, 7, 0), the fourth's after it (1, 2), each read
    while the layer before runs, so the list takes exactly as many cycles as with 16 rows, where none wraps; every
    output exact."""
    cycles = {}
    for rows in (8, 16):
        rng = random.Random(23)
        dut = engine(in_depth=4096, w_depth=8192, out_depth=4096, max_col_tiles=rows)
        image = Image(23, dut.cols)
        for i, n in enumerate((8, 16, 12, 8)):
            image.add(Layer(rng, 230 + i, shape=(1, 6, 6, 8), filter_hw=(3, 3), stride=(1, 1), dilation=(1, 1),
                            padding="SAME", out_c=n))
        image.finish()
        before = bytes(image.mem)
        events, _ = run(dut, image, seed=23, max_cycles=60000)
        assert [e[0] for e in events] == ["done"], events
        check_memory(image.mem, before, image.outputs)
        cycles[rows] = events[0][1]
    assert cycles[8] == cycles[16], cycles


def test_the_run_goes_on_past_a_barrier():
    """A list's weights one run across its BARRIER: the weights of the layer after the barrier are read before the
    GO that resumes (while the host runs its ops), each byte of the run once (no restart at the GO), every output
    exact."""
    dut = engine(in_depth=4096, w_depth=8192, out_depth=4096, max_col_tiles=16)
    image = Image(24, dut.cols, run=True)
    layers = _ahead_layers(240)
    image.add(layers[0])
    image.add(layers[1])
    image.raw(commands.pack(op="BARRIER"))
    image.add(layers[2])
    image.add(layers[3])
    image.finish()
    before = bytes(image.mem)
    gap = 2000
    events, model = run(dut, image, lists=(LIST, LIST), seed=24, max_cycles=60000, gap=gap)
    assert [e[0] for e in events] == ["barrier", "done"], events
    check_memory(image.mem, before, image.outputs)
    cmds = [commands.unpack(bytes(image.mem[LIST + 64 * i:LIST + 64 * (i + 1)])) for i in range(5)]
    after = cmds[4]["weights_addr"]
    resumed = events[0][1] + gap
    assert min(t for a, _, t in _weights_reads(image, model, after, RO[1])) < resumed
    reads = _weights_reads(image, model, Image.WEIGHTS_RUN, RO[1])
    assert sum(8 * n for _, n, _ in reads) == image.wr - Image.WEIGHTS_RUN


@pytest.mark.slow
def test_a_read_error_in_the_run_stops_the_list_and_the_next_runs():
    """A read of the weights' run answered SLVERR (the last layer's, read ahead): the list stops with BUS, nothing
    left open on the bus, and the next list (its own run) is exact."""
    dut = engine(in_depth=4096, w_depth=8192, out_depth=4096, max_col_tiles=16)
    image = Image(25, dut.cols, run=True)
    for layer in _ahead_layers(250):
        image.add(layer)
    image.finish()
    bad = commands.unpack(bytes(image.mem[LIST + 192:LIST + 256]))["weights_addr"]
    image.add(Layer(random.Random(25), 255))
    image.finish(at=LIST + 0x400)
    before = bytes(image.mem)
    events, _ = run(dut, image, lists=(LIST, LIST + 0x400), seed=25, max_cycles=60000,
                    error_ranges=[(bad, bad + 8)])
    assert [e[:2] for e in events] == [("error", 1 << ERRORS["BUS"]), ("done", events[1][1])], events
    # (the layers taken before the error complete; the next list's output is exact)
    out, want = image.outputs[4]
    assert bytes(image.mem[out:out + len(want)]) == want
    assert bytes(image.mem[out:out + len(want)]) != before[out:out + len(want)]


@pytest.mark.parametrize("case", [pytest.param("huge", marks=pytest.mark.slow),
                                  pytest.param("elsewhere", marks=pytest.mark.slow), "small_ring"])
def test_a_run_that_does_not_hold_the_next_weights(case):
    """A weights_ahead past the read-only window reads to the window's end and no further; a command whose weights are
    not in the run (a copy elsewhere) restarts the run there; a ring smaller than the run holds back the reads until
    the layers before free it. Every output exact; no read outside the read-only window but the inputs."""
    dut = engine(in_depth=4096, w_depth=2048 if case == "small_ring" else 8192, out_depth=4096, max_col_tiles=16)
    image = Image(22, dut.cols, run=True)
    layers = _ahead_layers(220)
    for i, layer in enumerate(layers):
        image.add(layer, **({"weights_ahead": 0xFFFFFFF8} if case == "huge" and i == 0 else {}))
    if case == "elsewhere":
        cmd = commands.unpack(image.list[2])
        size = len(layers[2].w.tobytes()) + 64
        copy = image._put("ro", bytes(image.mem[cmd["weights_addr"]:cmd["weights_addr"] + size]))
        image.list[2] = poke(image.list[2], weights_addr=copy)
    image.finish()
    before = bytes(image.mem)
    # (the read-only window ends a little past the run: the huge run reaches that end while the first layer runs)
    ro = (RO[0], image.wr + 256)
    events, model = run(dut, image, seed=22, max_cycles=60000, windows=(ro, RW))
    assert [e[0] for e in events] == ["done"], events
    check_memory(image.mem, before, image.outputs)
    inputs = [(a, a + size) for a, size in image.inputs]
    for a, n, _ in model.read_bursts:
        assert a + 8 * n <= ro[1] or any(lo <= a < hi for lo, hi in inputs), hex(a)
    if case == "huge":
        assert max(a + 8 * n for a, n, _ in model.read_bursts if a < ro[1]) == ro[1]
    if case == "small_ring":
        # nothing of the run read twice, though it does not fit the ring
        reads = _weights_reads(image, model, Image.WEIGHTS_RUN, RO[1])
        assert sum(8 * n for _, n, _ in reads) == image.wr - Image.WEIGHTS_RUN
        assert image.wr - Image.WEIGHTS_RUN > 2048


def _run_compiled_cnn(seed, sizes, **run_kw):
    """The generated CNN compiled for an engine of ``sizes``, its first segment (CONV_2D 3x3 stride 2,
    DEPTHWISE_CONV_2D, CONV_2D 1x1) run from the compiled image to its BARRIER or END; each output checked equal to
    the golden interpreter's tensor and nothing else written. Returns (engine, program, image, model)."""
    dut, program, image, model = _run_compiled(generated_cnn(seed), seed, sizes, **run_kw)
    first = program.segments[0]
    assert [program.layers[op].kind for op in first] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D"]
    return dut, program, image, model


def _run_compiled(raw, seed, sizes, **run_kw):
    """The model ``raw`` compiled for an engine of ``sizes``, its first segment run from the compiled image to its
    BARRIER or END, each output checked equal to the golden interpreter's tensor and nothing else written."""
    interp = Interpreter(raw, "model")
    x = model_inputs(interp.model, 1, seed)[0]
    interp.invoke(x)
    dut = engine(**sizes)
    program = compile_model(interp, cols=dut.cols, data_width=dut.data_width, **sizes)
    first = program.segments[0]
    image = types.SimpleNamespace(mem=bytearray(program.memory))
    for ti in program.segment_inputs(0):
        data = np.ascontiguousarray(interp.tensors[ti]).tobytes()
        image.mem[program.tensor_addr[ti]:program.tensor_addr[ti] + len(data)] = data
    before = bytes(image.mem)
    events, model = run(dut, image, lists=(program.list_addr,), seed=seed, windows=(program.ro, program.rw),
                        **run_kw)
    assert [e[0] for e in events] == ["barrier" if len(program.segments) > 1 else "done"], events
    # (an output kept on chip is never written: its place in memory unchanged, the next layer's output checked)
    check_memory(image.mem, before, [(program.layers[op].output_addr,
                                      np.ascontiguousarray(interp.tensors[program.layers[op].output_tensor]).tobytes())
                                     for op in first if not program.layers[op].kept])
    return dut, program, image, model


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_a_model_runs_from_its_compiled_image(seed):
    """The generated CNN (random weights, calibrated quantization) through host.engine_compiler: its first segment
    (CONV_2D 3x3 stride 2, DEPTHWISE_CONV_2D dilation 2 with multiplier 2, CONV_2D 1x1) runs from the compiled
    image to its BARRIER or END, each output equal to the golden interpreter's tensor, nothing else written; an
    output the next layer reads on chip and nothing else reads is kept there only, never written."""
    sizes = {"in_depth": 4096, "w_depth": 8192, "out_depth": 4096, "max_col_tiles": 16}
    dut, program, image, model = _run_compiled_cnn(seed, sizes)
    first = program.segments[0]
    # a layer's output kept in the input buffer beside its input (when both fit) is the next layer's input: never
    # read from memory
    cmds = [commands.unpack(bytes(image.mem[program.list_addr + 64 * i:program.list_addr + 64 * (i + 1)]))
            for i in range(len(first))]
    lanes, nb = dut.banks * dut.bank_bytes, dut.data_width // 8

    def at_pitch(pixels, c):
        return pixels * input_pitch(c, dut.bank_bytes, nb)

    forwarded = 0
    for prev, cmd in itertools.pairwise(cmds):
        fits = at_pitch(prev["batch"] * prev["in_h"] * prev["in_w"], prev["in_c"]) + \
            at_pitch(prev["batch"] * prev["out_h"] * prev["out_w"], prev["out_c"]) + lanes <= sizes["in_depth"]
        reads = [a for a, _, _ in model.read_bursts if cmd["input_addr"] <= a < cmd["input_addr"] + 64]
        assert bool(reads) != (fits and cmd["input_addr"] == prev["output_addr"]), (prev, cmd, reads)
        forwarded += not reads
    assert forwarded, "no layer took its input from the layer before on chip"
    # and such an output, read by nothing else, is kept on chip only (never written)
    kept = [op for op in first if program.layers[op].kept]
    assert kept, "no output kept on chip only"
    for op in kept:
        out = program.layers[op].output_addr
        assert not [a for a, _, _ in model.write_bursts if out <= a < out + 64], op


@pytest.mark.parametrize(("seed", "paddings", "kw"), [
    (0, ((0, 0), (0, 1), (1, 1), (0, 0)), {}),                                           # MobileNetV2's, stride 2
    (1, ((0, 0), (2, 0), (0, 1), (0, 0)), {"depthwise": False, "stride": (1, 1)}),       # no SAME gives this one
])
def test_a_pad_folded_into_the_window_is_exact(seed, paddings, kw):
    """PAD then a convolution, compiled: one command reading the PAD's input, the PAD's rows and columns the window
    generator's padding; the output equals golden's (which pads, then convolves) and nothing else is written."""
    sizes = {"in_depth": 1024, "w_depth": 1024, "out_depth": 1024, "max_col_tiles": 8}
    _, program, _, _ = _run_compiled(pad_conv_model(seed, paddings, **kw), seed, sizes)
    assert (program.layers[1].pad_folded, program.layers[1].input_tensor) == (0, 0)


@pytest.mark.slow
def test_a_model_runs_tiled_in_row_bands():
    """The generated CNN compiled for 1 KB input and output buffers: each layer of its first segment (a 2 KB input
    or output) is several row bands, each a command (halo rows read again); every output equals golden's tensor
    and nothing else is written. (About a minute: `make sim`'s models_engine job runs the bundled models' tiled
    layers on Verilator; tests/test_engine_compiler.py checks the bands' windows in make test.)"""
    sizes = {"in_depth": 1024, "w_depth": 4096, "out_depth": 1024, "max_col_tiles": 8}
    _, program, _, _ = _run_compiled_cnn(0, sizes, max_cycles=400000)
    assert all(program.layers[op].commands > 1 for op in program.segments[0])


@pytest.mark.slow
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
    check_memory(image.mem, before, image.outputs)


def test_parameters_refused():
    with pytest.raises(ValueError, match="in_depth must be a power of two"):
        Engine(in_depth=1000)
    with pytest.raises(ValueError, match="data_width must be 32, 64 or 128"):
        Engine(data_width=16)
