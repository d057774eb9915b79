"""cocotb: the memory engine (``hw.engine.Engine``) against ``LatencyAxiRam`` (cocotbext-axi, overlapping latency)
with random stalls on every channel, under the AXI4 protocol monitor (windows included).

- ``layers``: a list of random CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED layers (sim.engine_stimulus) run
  from memory, each depthwise layer and the CONV_2D after it reading the layer before's output (which the engine
  keeps on chip when it fits); every output byte equals golden and no other byte changed. Figures (cycles from
  GO to done, bytes over the port, MACs) go to ``TB_RESULTS``.
- ``errors``: each refused command stops its list at its index with its error bit, nothing of it or after it is
  written, and the next list runs exactly.
- ``reset_mid_list``: the engine and the memory reset together in the middle of a layer; the list then runs
  exactly from the start.

Each test samples the ``engine`` coverage group (sim.coverage) from what it checked, and exports it to
``TB_COVERAGE`` if set.

Environment: ``TB_SEED``, ``TB_LATENCY``, ``TB_LAYERS``, ``TB_COLS``, ``TB_SMALL``, ``TB_IN_DEPTH``, ``TB_MAX_CYCLES``
(a list's cycles before the test fails as hung; 2 000 000), ``TB_COVERAGE`` (path stem).
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus

from ..hw.depthwise_gen import input_split
from ..hw.engine import ERRORS
from . import coverage
from .axi_memory import LatencyAxiRam
from .axi_monitor import AxiMonitor
from .engine_stimulus import LIST, MEMORY, RO, RW, Image, Layer, check_memory, poke

SEED = int(os.environ.get("TB_SEED", "1"))
LATENCY = int(os.environ.get("TB_LATENCY", "20"))
LAYERS = int(os.environ.get("TB_LAYERS", "6"))
MAX_CYCLES = int(os.environ.get("TB_MAX_CYCLES", "2000000"))
COLS = int(os.environ.get("TB_COLS", "8"))
SMALL = os.environ.get("TB_SMALL", "0") == "1"     # the Amaranth tests' small layers (for Icarus)
# the engine's input buffer (sim.regress.engine_for's: small on Icarus), for the row-stacked layers
IN_DEPTH = int(os.environ.get("TB_IN_DEPTH", "2048" if SMALL else "32768"))
COVERAGE = os.environ.get("TB_COVERAGE")


def pauses(rng, p):
    while True:
        yield rng.random() < p


async def setup(dut, rng, stall=0.2):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    nbytes = len(dut.m_axi_rdata) // 8
    ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=MEMORY, latency=LATENCY)
    for ch in (ram.read_if.r_channel, ram.read_if.ar_channel, ram.write_if.aw_channel, ram.write_if.w_channel):
        ch.set_pause_generator(pauses(rng, stall))
    dut.go.value = 0
    dut.ro_base.value, dut.ro_limit.value, dut.rw_base.value, dut.rw_limit.value = *RO, *RW
    dut.list_addr.value = LIST
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    monitor = AxiMonitor(dut, dut.clk, data_bytes=nbytes, max_burst=16, read_window=[RO, RW], write_window=RW,
                         reset=dut.rst)
    return ram, monitor


async def run_list(dut, list_addr, max_cycles=MAX_CYCLES):
    """GO with ``list_addr``; returns ("done" | "barrier" | "error", cycles from GO, error bits, error index)."""
    await FallingEdge(dut.clk)
    dut.list_addr.value = list_addr
    dut.go.value = 1
    await FallingEdge(dut.clk)
    dut.go.value = 0
    for t in range(max_cycles):
        await RisingEdge(dut.clk)
        await ReadOnly()
        if int(dut.done.value):
            return "done", t + 1, 0, 0
        if int(dut.barrier.value):
            return "barrier", t + 1, 0, 0
        if not int(dut.busy.value) and int(dut.error.value):
            return "error", t + 1, int(dut.error.value), int(dut.error_index.value)
    raise AssertionError(f"the list did not stop in {max_cycles} cycles")


def write_result(result):
    with open(os.environ["TB_RESULTS"], "a") as f:
        f.write(json.dumps(result) + "\n")
    if COVERAGE:
        coverage.export(COVERAGE)


def big_layer(rng, seed, fc=False, max_out_c=40, out_c=None, few=False):
    """A layer larger than the Amaranth tests' (several row and column tiles), within the default buffers (with
    ``TB_SMALL``, one of the Amaranth tests' size); a CONV_2D's output channels at most ``max_out_c`` (``out_c``
    if given); ``few``: 1, 3 or 4 input channels (a row-stacked pixel is at most a bus word)."""
    if SMALL:
        few = few and not fc
        shape = (rng.choice([1, 1, 2]), rng.randint(1, 7), rng.randint(1, 7), rng.choice([1, 3, 4])) if few else None
        return Layer(rng, seed, fc=fc, shape=shape, out_c=out_c or rng.randint(1, min(11, max_out_c)),
                     **({"dilation": (1, rng.randint(1, 2))} if few else {}))
    if fc:
        return Layer(rng, seed, fc=True, shape=(rng.randint(1, 20), rng.randint(1, 200)), out_c=rng.randint(1, 40))
    return Layer(rng, seed, shape=(rng.choice([1, 2]), rng.randint(1, 12), rng.randint(1, 12),
                                   rng.choice([1, 3, 4] if few else [1, 3, 8, 16, 17, 32])),
                 out_c=out_c or rng.randint(1, max_out_c), **({"dilation": (1, rng.randint(1, 2))} if few else {}))


@cocotb.test()
async def layers(dut):
    rng = random.Random(SEED)
    ram, monitor = await setup(dut, rng)
    nbytes = len(dut.m_axi_rdata) // 8
    # (the list's weights one after another, each command's weights_ahead the rest: the engine reads them as one run,
    # as the compiler lays them out; the other tests' lists read each command's weights alone)
    image = Image(SEED, COLS, run=True)
    # a CONV_2D, a DEPTHWISE_CONV_2D and a CONV_2D each reading the layer before's output, a FULLY_CONNECTED; the
    # depthwise layers' multipliers cols + 1, 2 and 1 in turn (from the seed on), within 8 column tiles
    layers = []
    for i in range(LAYERS):
        seed = SEED * 100 + i
        mult = (COLS + 1, 2, 1)[(i // 4 + SEED + 1) % 3]
        # on alternate seeds the depthwise layer is of stride 2 over whole bus words a pixel: its input split by
        # parity (hw.depthwise_gen.InputLayout), the layer before keeping its output so (out_split_h/_w)
        parity = (i // 4 + SEED) % 2
        words = 8 * COLS // mult // nbytes if parity == 0 else 0
        if i % 4 == 0:
            # (the row-stacked candidate, below: the first layer, few channels; or the one after the depthwise
            # layer, whose input is then at most a bus word a pixel where the multiplier allows)
            layer = big_layer(rng, seed, max_out_c=8 * COLS // mult, few=parity == 0,
                              out_c=nbytes * rng.randint(1, words) if words
                              else rng.randint(1, max(1, nbytes // mult)) if parity else None)
        elif i % 4 == 1:
            layer = Layer.following(layers[-1], rng, seed, dw=True, depth_multiplier=mult,
                                    **({"stride": (2, 2)} if words else {}))
        elif i % 4 == 2:
            layer = Layer.following(layers[-1], rng, seed, out_c=rng.randint(1, 11 if SMALL else 40),
                                    **({"dilation": (1, rng.randint(1, 2))} if parity else {}))
        else:
            layer = big_layer(rng, seed, fc=True)
        # a CONV_2D row-stacked on alternate seeds: the first of each four (read from memory), or the one reading
        # the depthwise layer's output (then from memory too, once the depthwise layer's drain has written it)
        if layer.op == "CONV_2D" and i % 4 == (0, 2)[(i // 4 + SEED) % 2]:
            layer.stack_if_fits(IN_DEPTH, nbytes)
        split = input_split(layer.g.in_c, layer.g.stride_h, layer.g.stride_w, nbytes)
        if i % 4 == 1 and any(split):
            # a stride-2 depthwise layer holds its input split by parity: the layer before keeps its output so
            image.list[-1] = poke(image.list[-1], out_split_h=int(split[0]), out_split_w=int(split[1]))
        image.add(layer, chained=i % 4 in (1, 2))
        layers.append(layer)
    image.finish()
    ram.write(0, bytes(image.mem))
    before = bytes(image.mem)
    kind, cycles, error, index = await run_list(dut, LIST)
    assert (kind, error) == ("done", 0), (kind, error, index)
    await ClockCycles(dut.clk, LATENCY + 10)
    mem = bytearray(ram.read(0, MEMORY))
    check_memory(mem, before, image.outputs)
    monitor.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    assert int(dut.bytes_read.value) == monitor.read_bytes
    for i, (layer, tensor_in, (out_addr, out)) in enumerate(zip(layers, image.inputs, image.outputs, strict=True)):
        coverage.sample_engine_layer(layer.op, layer.g, layer.out_c, COLS, layer.depth_multiplier, layer.zp_in,
                                     layer.zp_out, layer.act, [tensor_in, (out_addr, len(out))], monitor.read_spans,
                                     stack=layer.stack, chained=i % 4 in (1, 2), beat=nbytes)
    coverage.sample("engine", "weights", ["read ahead as one run (weights_ahead)"])
    macs = sum(layer.macs for layer in layers)
    write_result({"test": "layers", "layers": len(layers), "cycles": cycles, "macs": macs,
                  "compared": sum(len(e) for _, e in image.outputs),
                  "bytes_read": monitor.read_bytes, "bytes_written": monitor.written_bytes,
                  "outputs": sum(len(e) for _, e in image.outputs), "violations": 0})


# each refused command (from a good one) and its error bit
BAD = {
    "BAD_OP": lambda raw: poke(raw, op=7),
    "BAD_FIELD": lambda raw: poke(raw, kernel_w=0),
    "INCONSISTENT": lambda raw: poke(raw, act_min=5, act_max=4),
    "UNSUPPORTED": lambda raw: poke(raw, bypass=1),
    "TOO_BIG": lambda raw: poke(raw, in_h=65535, out_h=65535, stride_h=1),   # 64 KB or more: past any buffer
    "MISALIGNED": lambda raw: poke(raw, output_addr=RW[0] + 2),
    "WINDOW": lambda raw: poke(raw, weights_addr=RW[0]),
}


@cocotb.test()
async def errors(dut):
    rng = random.Random(SEED + 1)
    ram, monitor = await setup(dut, rng)
    seen, compared = [], 0
    for n, (name, bad) in enumerate(sorted(BAD.items())):
        image = Image(SEED + n, COLS)
        image.add(Layer(rng, 1000 + n))
        image.add(Layer(rng, 2000 + n))
        image.list[-1] = bad(image.list[-1])
        image.add(Layer(rng, 3000 + n, fc=True))
        image.finish()
        image.add(Layer(rng, 4000 + n))
        image.finish(at=0x800)
        ram.write(0, bytes(image.mem))
        before = bytes(image.mem)
        stop = await run_list(dut, LIST)
        assert stop[0] == "error", (name, stop)
        assert stop[2:] == (1 << ERRORS[name], 1), (name, stop)
        again = await run_list(dut, 0x800)
        assert again[0] == "done", (name, again)
        await ClockCycles(dut.clk, LATENCY + 10)
        check_memory(bytearray(ram.read(0, MEMORY)), before, [image.outputs[0], image.outputs[3]])
        seen.append(name)
        coverage.sample("engine", "refusal", [name])
        compared += len(image.outputs[0][1]) + len(image.outputs[3][1])
    monitor.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    write_result({"test": "errors", "errors": seen, "compared": compared, "violations": 0})


@cocotb.test()
async def reset_mid_list(dut):
    rng = random.Random(SEED + 2)
    ram, monitor = await setup(dut, rng)
    image = Image(SEED + 2, COLS)
    for i in range(3):
        image.add(big_layer(rng, 5000 + i))
    image.finish()
    ram.write(0, bytes(image.mem))
    before = bytes(image.mem)
    # the first run, timed, then a run reset at a random point inside it (engine and memory together)
    _, cycles, _, _ = await run_list(dut, LIST)
    ram.write(0, before)
    resets = []
    for _ in range(3):
        when = rng.randint(10, cycles - 10)
        await FallingEdge(dut.clk)
        dut.list_addr.value = LIST
        dut.go.value = 1
        await FallingEdge(dut.clk)
        dut.go.value = 0
        await ClockCycles(dut.clk, when)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 3)
        await FallingEdge(dut.clk)
        dut.rst.value = 0
        resets.append(when)
    ram.write(0, before)
    kind, _, error, index = await run_list(dut, LIST)
    assert (kind, error) == ("done", 0), (kind, error, index)
    await ClockCycles(dut.clk, LATENCY + 10)
    check_memory(bytearray(ram.read(0, MEMORY)), before, image.outputs)
    monitor.check_idle()
    assert monitor.violations == [], monitor.violations[:5]
    coverage.sample("engine", "reset", ["mid-list"])
    write_result({"test": "reset_mid_list", "resets_at": resets, "compared": sum(len(e) for _, e in image.outputs),
                  "violations": 0})
