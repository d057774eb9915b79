"""The Requantizer in Amaranth's simulator against the golden model, every output compared.

Random vectors cover the whole int32 accumulator/bias range, multipliers from
QuantizeMultiplier (plus any int32 multiplier in double rounding, INT32_MIN included),
every shift in -31..30, and random per-layer offsets and activation ranges; directed
vectors add the SRDHM overflow, RoundingDivideByPOT ties at every shift, and wraps of
the pre-shift and the output offset. Random idle gaps on the input and random
backpressure on the output are always on.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from int8_systolic.golden import staged
from int8_systolic.hw.requantizer import Requantizer

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def golden_requantize(vec, cfg, rounding):
    acc, bias, mult, shift = (np.asarray(vec[k]) for k in ("acc", "bias", "multiplier", "shift"))
    total = staged.add_bias(acc, bias)
    if cfg["bypass"]:
        return total.astype(np.int64)
    scaled = staged.requantize(total, mult, shift, rounding)
    return staged.clamp(staged.add_output_offset(scaled, cfg["output_offset"]),
                        cfg["act_min"], cfg["act_max"]).astype(np.int64)


def random_vectors(rng, n, rounding):
    acc = rng.integers(I32_MIN, I32_MAX, n, endpoint=True)
    small = rng.random(n) < 0.5  # half realistic accumulator sizes, half anywhere in int32
    acc = np.where(small, rng.integers(-(2**20), 2**20, n), acc)
    bias = np.where(rng.random(n) < 0.2, rng.integers(I32_MIN, I32_MAX, n, endpoint=True),
                    rng.integers(-(2**16), 2**16, n))
    mult = rng.integers(2**30, 2**31, n)
    if rounding == "double":  # any int32 multiplier is legal in double rounding
        mult = np.where(rng.random(n) < 0.1, rng.integers(I32_MIN, I32_MAX, n, endpoint=True), mult)
    shift = rng.integers(-31, 31, n)
    return {"acc": acc, "bias": bias, "multiplier": mult, "shift": shift}


def directed_vectors(rounding):
    rows = []
    for shift in range(-31, 31):  # ties of RoundingDivideByPOT around 0 and far out
        for k in (-3, -1, 1, 3):
            acc = k << max(-shift - 1, 0)
            rows.append((acc, 0, 2**30, shift))
            rows.append((acc + 1, -1, 2**30, shift))
    for acc in (I32_MIN, I32_MIN + 1, -1, 0, 1, I32_MAX - 1, I32_MAX):
        for mult in ((I32_MIN, 2**30, I32_MAX, 0) if rounding == "double" else (2**30, I32_MAX, 0)):
            for shift in (-31, -1, 0, 1, 30):
                rows.append((acc, 0, mult, shift))
                rows.append((acc, I32_MAX, mult, shift))   # bias add wraps
    rows.append((I32_MIN, 0, I32_MIN, 0))                  # SRDHM overflow case (double only)
    for shift in range(1, 31):  # left shifts that land on INT32_MIN (the overflow), or one bit off it
        for acc in (-(1 << (31 - shift)), 1 << (31 - shift), (1 << (31 - shift)) + 1, -(1 << (30 - shift)),
                    (1 << (31 - shift)) | (1 << (31 - shift) >> 1), I32_MIN + (1 << (31 - shift))):
            rows.append((acc, 0, I32_MIN, shift))
    for bit in range(31):  # one bit off the saturating pair, in either operand (the compares with
        # INT32_MIN look at each bit: a compare blind to some bits saturates these; `make mutate` found one)
        rows.append((I32_MIN | (1 << bit), 0, I32_MIN, 0))
        rows.append((I32_MIN, 0, I32_MIN | (1 << bit), 0))
    # Multipliers below 2^24 at shift 0: SRDHM's result lands in int8 unclamped while both operands'
    # low halves are wide, so every bit of the low partial product (its carries into the rounding)
    # reaches the output; random vectors almost never do (a carry-save bit taken from the wrong bit
    # of it passed the directed ones, `make mutate` found).
    rng = np.random.default_rng(23)
    for _ in range(400):
        mult = int(rng.integers(2**16, 2**24))
        bound = (2**38) // mult
        rows.append((int(rng.integers(-bound, bound)), 0, mult, 0))
    for shift in range(1, 31):   # and at every left shift (single rounding's small total shifts)
        for _ in range(10):
            acc = int(rng.integers(-(2 ** (30 - shift)), 2 ** (30 - shift)))
            rows.append((acc, 0, int(rng.integers(2**7, 2**8)), shift))
    acc, bias, mult, shift = (np.array(c) for c in zip(*rows, strict=True))
    if rounding == "single":
        mult = np.where(mult < 0, 2**30, mult)
    return {"acc": acc, "bias": bias, "multiplier": mult, "shift": shift}


def run_requantizer(vectors, cfg, rounding, seed, p_idle=0.3, p_ready=0.7, ring_delays=False):
    dut = Requantizer(rounding, ring_delays=ring_delays)
    n = len(vectors["acc"])
    out = []
    cycles = [0]
    rng = np.random.default_rng(seed)
    # (a stuck pipeline fails instead of hanging: every element may wait ~1/(1-p_idle) and 1/p_ready)
    budget = 20 * n + 200

    async def producer(ctx):
        for name in ("output_offset", "act_min", "act_max", "bypass"):
            ctx.set(getattr(dut, name), int(cfg[name]))
        for i in range(n):
            while rng.random() < p_idle:
                ctx.set(dut.i.valid, 0)
                await ctx.tick()
            for k in ("acc", "bias", "multiplier", "shift"):
                ctx.set(getattr(dut.i.payload, k), int(vectors[k][i]))
            ctx.set(dut.i.valid, 1)
            for _ in range(budget):
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                if ready:
                    break
            else:
                raise AssertionError(f"input {i} not accepted within {budget} cycles (seed {seed})")
        ctx.set(dut.i.valid, 0)

    async def consumer(ctx):
        while len(out) < n:
            if cycles[0] > budget:
                raise AssertionError(f"timed out after {budget} cycles with {len(out)} of {n} outputs (seed {seed})")
            ready = bool(rng.random() < p_ready)
            ctx.set(dut.o.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles[0] += 1
            if valid and ready:
                out.append(payload)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    return np.array(out, dtype=np.int64), cycles[0], dut.latency


def check(vectors, cfg, rounding, seed, **kw):
    """Compare every output with golden; return (outputs compared, cycles run, pipeline latency)."""
    got, cycles, latency = run_requantizer(vectors, cfg, rounding, seed, **kw)
    want = golden_requantize(vectors, cfg, rounding)
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        # (directed acc values beyond int32 stand for their 32-bit wrap, as the hardware port takes them)
        operands = {k: int(np.asarray(v[i], dtype=np.int64).astype(np.int32)) for k, v in vectors.items()}
        total = int(staged.add_bias(operands["acc"], operands["bias"]))
        scaled = int(staged.requantize(total, operands["multiplier"], operands["shift"], rounding))
        pytest.fail(f"{bad.size} of {got.size} outputs differ (seed {seed}); first at {i}: operands {operands}, "
                    f"config {cfg}, golden stages acc+bias={total} scaled={scaled} "
                    f"out={int(want[i])}, hardware {int(got[i])}")
    return got.size, cycles, latency


def random_config(rng):
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    if rng.random() < 0.5:
        lo, hi = -128, 127
    return {"output_offset": int(rng.integers(-128, 128)), "act_min": lo, "act_max": hi, "bypass": 0}


# (rounding, ring_delays): both variants, and the double rounding's delay lines in LUT-RAM rings (the engine's build)
VARIANTS = [("double", False), ("single", False), ("double", True)]


@pytest.mark.parametrize(("rounding", "ring_delays"), VARIANTS)
@pytest.mark.parametrize("blocks", [2, pytest.param(10, marks=pytest.mark.slow)])
def test_requantizer_random(seed, rounding, ring_delays, blocks, record_property):
    """10 000 random vectors a block, each block with its own layer config: 20 000 per variant in make test,
    100 000 in make test-all (make sim's GEMMs put far more through the same lanes)."""
    rng = np.random.default_rng(seed + 5)
    compared = 0
    # (the rings change two delay lines that every vector passes through: half the blocks)
    blocks = max(1, blocks // 2) if ring_delays else blocks
    for block in range(blocks):
        vectors = random_vectors(rng, 10_000, rounding)
        compared += check(vectors, random_config(rng), rounding, seed + block, ring_delays=ring_delays)[0]
    assert compared == blocks * 10_000
    record_property("rtl_outputs", compared)


@pytest.mark.parametrize(("rounding", "ring_delays"), VARIANTS)
def test_requantizer_directed(seed, rounding, ring_delays):
    # (offset 0 as well: with +-127/128 the int32 wrap of the offset add sends INT32_MIN and the
    # saturated INT32_MAX to the same clamped value, so a missed SRDHM saturation would pass; and 1,
    # the one offset that wraps INT32_MAX and not INT32_MAX - 1: a saturation to 2**31 - 2 would pass
    # every other, `make mutate` found)
    for cfg in ({"output_offset": 0, "act_min": -128, "act_max": 127, "bypass": 0},
                {"output_offset": 1, "act_min": -128, "act_max": 127, "bypass": 0},
                {"output_offset": 127, "act_min": -128, "act_max": 127, "bypass": 0},
                {"output_offset": -128, "act_min": -5, "act_max": 6, "bypass": 0},
                {"output_offset": 0, "act_min": -128, "act_max": 127, "bypass": 1}):
        check(directed_vectors(rounding), cfg, rounding, seed, ring_delays=ring_delays)


def test_requantizer_full_rate_without_stalls(seed):
    """No idle input, output always ready: one result per cycle after the pipeline latency."""
    rng = np.random.default_rng(seed)
    for rounding, ring_delays in VARIANTS:
        n, cycles, latency = check(random_vectors(rng, 500, rounding), random_config(rng), rounding, seed,
                                   p_idle=0.0, p_ready=1.0, ring_delays=ring_delays)
        # The consumer samples at every edge: the last result appears latency edges after the last input.
        assert cycles == n + latency
