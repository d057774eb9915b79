"""The whole accelerator (array + tables + requantizers) in Amaranth's simulator vs golden.

Random GEMM problems (shapes that do and do not fill the array, K shorter and longer than
the array, per-channel multipliers and shifts over the legal range, all activations, both
rounding variants, bypass) run with random idle gaps on both input streams and random
backpressure on the result stream; every result element is compared with
golden.requantized_gemm, and a mismatch reports the operands' indices and every golden stage.
"""

import numpy as np
import pytest
from amaranth import ClockDomain, Module, Signal
from amaranth.sim import Simulator

from int8_systolic.golden.fixedpoint import wrap_int32_in_int64
from int8_systolic.hw.accelerator import Accelerator, config_layout
from int8_systolic.hw.multiplier import Multiplier
from int8_systolic.hw.output_fifo import nonempty_flag
from int8_systolic.sim.amaranth_bench import (
    load_layer,
    offer_step,
    run_full_rate,
    set_layer_registers,
    simulate,
    write_tables,
)
from int8_systolic.sim.stimulus import random_problem


def run_accelerator(dut, problems, seed, p_idle=0.2, p_ready=0.7, lead=3):
    """Run problems back to back; return the result rows of each. ``p_ready``: the probability that
    the consumer is ready in a cycle, or a function of the cycle count giving it. ``lead``: cycles
    from setting a layer's registers to its first table write plus one (with one table write and
    no idle cycle, to its first step)."""
    rng = np.random.default_rng(seed)
    R, C = dut.rows, dut.cols
    results = [[] for _ in problems]
    done = [0]

    # Generous budget: every step, table write and result row may wait ~1/(1-p_idle) and 1/p_ready.
    budget = 50 + sum(20 * (p.shape[1] * p.n_result_rows(R, C) // R + p.n_result_rows(R, C) + R * C)
                      for p in problems)

    async def producer(ctx):
        for pi, prob in enumerate(problems):
            while done[0] < pi:  # a new layer's registers/table only after the last one drained
                await ctx.tick()
            set_layer_registers(ctx, dut, prob)
            # (the registers are set three cycles before the first step, as the accelerator needs:
            # this cycle and the next, then at least one table write; problems with one table
            # write test exactly that)
            for _ in range(lead - 1):
                await ctx.tick()
            await write_tables(ctx, dut, prob)
            # The two streams driven independently, as a stream's source may: in each cycle either
            # may idle, and an item is sent when it was presented with ``ready`` high.
            steps = list(prob.steps(R, C))
            sent = [0, 0]
            cycles = 0
            while min(sent) < len(steps):
                cycles += 1
                if cycles > budget:  # (the consumer may have its rows and stopped counting)
                    raise AssertionError(f"timed out after {budget} cycles: problem {pi} sent {sent} of "
                                         f"{len(steps)} steps (seed {seed})")
                for s, port in enumerate((dut.act, dut.wts)):
                    live = sent[s] < len(steps) and rng.random() >= p_idle
                    if live:
                        for lane, v in enumerate(steps[sent[s]][s]):
                            ctx.set(port.payload[lane], v)
                    ctx.set(port.valid, live)
                _, _, a_valid, a_ready, w_valid, w_ready = await ctx.tick().sample(
                    dut.act.valid, dut.act.ready, dut.wts.valid, dut.wts.ready)
                sent[0] += a_valid and a_ready
                sent[1] += w_valid and w_ready
            ctx.set(dut.act.valid, 0)
            ctx.set(dut.wts.valid, 0)

    async def consumer(ctx):
        cycles = 0
        for pi, prob in enumerate(problems):
            want = prob.n_result_rows(R, C)
            while len(results[pi]) < want:
                cycles += 1
                if cycles > budget:
                    raise AssertionError(f"timed out after {budget} cycles: problem {pi} produced "
                                         f"{len(results[pi])} of {want} result rows (seed {seed})")
                ready = bool(rng.random() < (p_ready(cycles) if callable(p_ready) else p_ready))
                ctx.set(dut.res.ready, ready)
                _, _, valid, payload = await ctx.tick().sample(dut.res.valid, dut.res.payload)
                if valid and ready:
                    results[pi].append([int(payload[j]) for j in range(C)])
            done[0] = pi + 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(producer)
    sim.add_testbench(consumer)
    sim.run()
    return results


def check(dut, problems, seed, **kw):
    R, C = dut.rows, dut.cols
    compared = 0
    for prob, rows in zip(problems, run_accelerator(dut, problems, seed, **kw), strict=True):
        got = prob.assemble(rows, R, C)
        want, st = prob.expected()
        if not prob.bypass:
            got = ((got + 128) % 256) - 128  # int8 results arrive sign-extended in 32-bit lanes
        bad = np.argwhere(got != want)
        if bad.size:
            i, j = (int(x) for x in bad[0])
            pytest.fail(f"{len(bad)} of {want.size} results differ (seed {seed}, {R}x{C}, M,K,N={prob.shape}, "
                        f"rounding {prob.rounding}, bypass {prob.bypass}); first at [{i},{j}]: hardware "
                        f"{int(got[i, j])}, golden stages {st.at((i, j))}, multiplier "
                        f"{int(np.asarray(prob.output_multiplier)[j])}, shift {int(np.asarray(prob.output_shift)[j])}")
        compared += want.size
    return compared


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 3), (4, 4)])
def test_accelerator_random_gemms(seed, rows, cols):
    rng = np.random.default_rng(seed + rows * 10 + cols)
    dut = Accelerator(rows, cols, max_col_tiles=8)
    shapes = [(rows, max(rows, cols), cols), (2 * rows + 1, 1, 2 * cols - 1 or 1), (3, 37, 5), (rows, 2, cols)]
    problems = [random_problem(rng, *s) for s in shapes]
    problems.append(random_problem(rng, 3, 9, 4, bypass=True))
    assert check(dut, problems, seed) == sum(p.shape[0] * p.shape[2] for p in problems)


@pytest.mark.parametrize(("rows", "cols"), [(4, 4), (3, 5)])
def test_accelerator_with_ring_delays(seed, rows, cols):
    """``ring_delays`` (the engine's build): the array's, the lanes' and the lookup's long delay lines in LUT-RAM
    rings. GEMMs and depthwise GEMMs, bypass among them, with gaps and backpressure, all exact."""
    rng = np.random.default_rng(seed + 11 + rows * 10 + cols)
    dut = Accelerator(rows, cols, max_col_tiles=8, ring_delays=True)
    problems = [random_problem(rng, 2 * rows + 1, 9, 2 * cols + 1, depthwise=True),
                random_problem(rng, rows, 37, cols), random_problem(rng, 3, 5, 2 * cols - 1, bypass=True),
                random_problem(rng, rows + 1, 2, cols, depthwise=True, bypass=True),
                random_problem(rng, 2 * rows, 2 * rows, 2 * cols)]
    assert check(dut, problems, seed) == sum(p.shape[0] * p.shape[2] for p in problems)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 3), (3, 2)])
def test_accelerator_depthwise_mode(seed, rows, cols):
    """Depthwise-mode GEMMs (each cell its own activation) between GEMM-mode ones, with gaps and
    backpressure: a GEMM after a depthwise one leaves the act lanes past ``rows`` holding stale
    values, which it must ignore. K from 1 to 25, M and N not multiples of the array."""
    rng = np.random.default_rng(seed + 7 + rows * 10 + cols)
    dut = Accelerator(rows, cols, max_col_tiles=8)
    shapes = [(2 * rows + 1, 9, 2 * cols + 1), (rows, 1, cols), (3, 25, 5), (rows + 1, 2, 1)]
    problems = []
    for n, shape in enumerate(shapes):
        # (every other GEMM in bypass: its raw accumulators show any activation taken from the wrong lane)
        problems += [random_problem(rng, *shape, depthwise=True), random_problem(rng, rows, 3, cols, bypass=n % 2 == 0)]
    problems.append(random_problem(rng, 3, 4, 4, bypass=True, depthwise=True))
    assert check(dut, problems, seed) == sum(p.shape[0] * p.shape[2] for p in problems)


def test_accelerator_depthwise_full_rate_cycles(seed):
    """At full rate a depthwise-mode GEMM takes exactly Accelerator.cycles(), as a GEMM does."""
    rng = np.random.default_rng(seed + 8)
    dut = Accelerator(2, 3, max_col_tiles=8)
    for m, k, n in ((5, 9, 7), (2, 1, 3)):
        prob = random_problem(rng, m, k, n, depthwise=True)
        rows, cycles, _, _ = run_full_rate(prob, dut)
        want, _ = prob.expected()
        got = ((prob.assemble(rows, 2, 3) + 128) % 256) - 128
        assert np.array_equal(got, want), f"M,K,N={prob.shape}: results differ from golden (seed {seed})"
        assert cycles == dut.cycles(m, k, n), f"M,K,N={prob.shape}: {cycles} cycles, formula {dut.cycles(m, k, n)}"


def test_accelerator_short_tiles_with_gaps(seed):
    """K = 1 .. 6 with idle cycles on half the steps: the sequencer's step count (which runs a
    cycle behind the steps, with flags for K <= 4 and for a count of 1 or 2) meets gaps at every
    position within a tile, the tile index wraps after every column tile."""
    rng = np.random.default_rng(seed + 5)
    dut = Accelerator(2, 2, max_col_tiles=4)
    problems = [random_problem(rng, 4, k, 5) for k in range(1, 7)]
    assert check(dut, problems, seed, p_idle=0.5) == sum(p.shape[0] * p.shape[2] for p in problems)


def test_accelerator_layer_registers_three_cycles_ahead(seed):
    """Layers of one table write each (one column, N = 1) back to back with no idle cycle: the
    first step comes exactly three cycles after the layer registers change (the accelerator's
    contract), and K (1, 2 and longer), hence every flag made from it, differs from the last
    layer's each time."""
    rng = np.random.default_rng(seed + 21)
    dut = Accelerator(2, 1, max_col_tiles=2)
    problems = [random_problem(rng, 3, k, 1) for k in (1, 5, 2, 1, 3, 2, 9, 1)]
    assert all(len(list(p.table_writes(2, 1))) == 1 for p in problems)
    assert check(dut, problems, seed, p_idle=0.0, p_ready=1.0) == sum(p.shape[0] for p in problems)


def test_accelerator_tile_index_at_full_rate(seed):
    """Tiles of one and two steps (padded to two) at full rate over 1 .. 7 column tiles and three
    row tiles: the column tile index moves every other cycle, so its wrap flag must come from
    the flags kept for the tiles left (no compare cycle in between), through each wrap and each
    change of n_tiles between layers."""
    rng = np.random.default_rng(seed + 31)
    dut = Accelerator(2, 1, max_col_tiles=8)
    problems = [random_problem(rng, 5, k, n) for n, k in ((7, 1), (1, 2), (5, 2), (2, 1), (6, 1), (3, 2),
                                                            (4, 1), (7, 2))]
    assert check(dut, problems, seed, p_idle=0.0, p_ready=1.0) == sum(5 * p.shape[2] for p in problems)


def test_accelerator_single_rounding(seed):
    rng = np.random.default_rng(seed + 99)
    dut = Accelerator(2, 3, rounding="single", max_col_tiles=8)
    check(dut, [random_problem(rng, 5, 11, 7, rounding="single")], seed)


def test_accelerator_extreme_accumulators(seed):
    """All -128 activations with +-127 weights: the raw sums reach +-16256 * K."""
    rng = np.random.default_rng(seed + 7)
    prob = random_problem(rng, 4, 300, 4)
    prob.lhs[:] = -128
    prob.rhs[:] = np.where(rng.random(prob.rhs.shape) < 0.5, -127, 127)
    check(Accelerator(2, 2, max_col_tiles=4), [prob], seed)


@pytest.mark.parametrize(("max_col_tiles", "ram"), [(40, "distributed"), (20, "distributed"), (40, "block")])
def test_accelerator_banked_tables(seed, max_col_tiles, ram):
    """More than 16 column tiles: each lane's LUT-RAM table is three banks of 16 (a partial last
    bank) or two, so every bank and the bank select are exercised, or one block RAM whose
    entries past 16 are written like the rest; two layers, the second rewriting the tables, in
    bypass (every bit of each bias reaches the result: a bank that was not read must add zeros)."""
    rng = np.random.default_rng(seed + 11)
    dut = Accelerator(2, 2, max_col_tiles=max_col_tiles, ram=ram)
    n = 2 * max_col_tiles
    check(dut, [random_problem(rng, 3, 5, n), random_problem(rng, 2, 4, n - 1, bypass=True)], seed)


def test_accelerator_full_rate(seed):
    """No gaps, always ready: the array accepts one step per cycle (checked by cycle count elsewhere)."""
    rng = np.random.default_rng(seed + 3)
    check(Accelerator(3, 2, max_col_tiles=4), [random_problem(rng, 6, 12, 4)], seed, p_idle=0.0, p_ready=1.0)


@pytest.mark.parametrize("ram", ["distributed", "block"])
def test_accelerator_output_fifo_full(seed, ram):
    """A consumer that is rarely ready fills the output FIFO and its queue: the credit counters must
    then hold the inputs off and the memory's rows back (a row written into a full FIFO or queue
    would be lost or overwritten, and the comparison would fail: in bypass every result row is
    distinct, so not even a row swapped with another passes)."""
    rng = np.random.default_rng(seed + 5)
    dut = Accelerator(2, 2, max_col_tiles=4, ram=ram)
    prob = random_problem(rng, 40, 2, 8, bypass=True)  # 80 tiles of 2 rows; credits let fifo_depth rows in
    assert prob.shape[0] * prob.shape[2] // 2 > dut.fifo_depth + 1
    want, _ = prob.expected()
    assert len({tuple(row) for row in want.reshape(-1, 2)}) == want.size // 2
    check(dut, [prob], seed, p_idle=0.0, p_ready=0.05)


def test_accelerator_output_fifo_fill_and_drain(seed):
    """A consumer that stops for 150 cycles, then takes a row every cycle for 150, and so on: the
    output FIFO's memory fills, then drains back to back with no row written (its row count and
    the flags that say when it reaches zero go through every value), and the queue fills and
    empties; in bypass every result row is distinct, so a row lost, repeated or swapped fails."""
    rng = np.random.default_rng(seed + 6)
    dut = Accelerator(2, 2, max_col_tiles=4)
    prob = random_problem(rng, 40, 3, 8, bypass=True)
    want, _ = prob.expected()
    assert len({tuple(row) for row in want.reshape(-1, 2)}) == want.size // 2
    check(dut, [prob], seed, p_idle=0.0, p_ready=lambda cycle: float((cycle // 150) % 2))


@pytest.mark.parametrize("limit", [3, 16])
def test_nonempty_flag(seed, limit):
    """The FIFOs' nonempty register (its count a cycle behind, whether it is 1 from flags) against
    a plain count, every cycle of random adds and removes that walk the count over 0..limit,
    with runs of adds, runs of removes and alternations."""
    rng = np.random.default_rng(seed + limit)
    m = Module()
    add, remove = Signal(), Signal()
    nonempty = nonempty_flag(m, add, remove, limit, "count")
    count, checked = 0, [0]

    async def bench(ctx):
        nonlocal count
        for n in range(3000):
            bias = (0.8, 0.2, 0.5)[(n // 100) % 3]  # mostly adds, mostly removes, either
            a = count < limit and rng.random() < bias
            r = count > 0 and rng.random() < 1 - bias
            ctx.set(add, a)
            ctx.set(remove, r)
            await ctx.tick()
            count += int(a) - int(r)
            assert ctx.get(nonempty) == (count != 0), f"cycle {n}: count {count}"
            checked[0] += 1

    simulate(m, bench)
    assert checked[0] == 3000


def test_accelerator_rejects_bad_ram_and_dsp():
    with pytest.raises(ValueError, match=r"ram must be 'distributed' or 'block', got 'lut'"):
        Accelerator(2, 2, ram="lut")
    with pytest.raises(ValueError, match=r"dsp must be one of \('generic', 'ecp5'\), got 'xilinx'"):
        Accelerator(2, 2, dsp="xilinx")
    # the ECP5 build's tables are one DP16KD (1024 x 18) deep
    with pytest.raises(ValueError, match=r"max_col_tiles must be <= 1024 with dsp='ecp5' "
                                         r"\(one DP16KD deep\), got 1025$"):
        Accelerator(2, 2, dsp="ecp5", max_col_tiles=1025)
    Accelerator.model(2, 2, dsp="ecp5", max_col_tiles=1024)
    # and its output FIFO's rows too (about 4 * rows + 46: past 1024 for arrays of ~245 rows)
    depth = Accelerator.model(300, 300).fifo_depth
    assert depth > 1024
    with pytest.raises(ValueError, match=rf"a 300x300 array needs an output FIFO of {depth} rows, more than one "
                                         r"DP16KD \(1024\) holds with dsp='ecp5'$"):
        Accelerator(300, 300, dsp="ecp5")


def test_multiplier_rejects_bad_parameters():
    with pytest.raises(ValueError, match=r"copies must be 1 or 2, got 3"):
        Multiplier(8, 8, copies=3)
    with pytest.raises(ValueError, match=r"fabric_stages must be 1 or 2, got 3"):
        Multiplier(8, 8, fabric_stages=3)
    with pytest.raises(ValueError, match=r"a_width must be 2..18, got 19"):
        Multiplier(19, 8)


def test_host_refuses_problem_larger_than_tables(seed):
    prob = random_problem(np.random.default_rng(seed), 2, 3, 17)
    with pytest.raises(ValueError, match=r"N = 17 needs 9 column tiles of 2, but the tables hold max_col_tiles = 8"):
        prob.check_fits(2, 2, 8)


@pytest.mark.parametrize(("rows", "cols", "shape"), [
    (4, 4, (8, 16, 8)),      # K > max(R, C): tiles overlap completely
    (3, 2, (7, 3, 5)),       # K = max(R, C)
    (2, 5, (4, 2, 11)),      # K < max(R, C): every tile padded to 5 steps
    (1, 1, (3, 1, 2)),       # K = 1 on one cell
    # K's low three bits 1 .. 4 and a higher bit set (the sequencer decodes K == 1 .. 4 from
    # the low bits and a flag for the rest being zero)
    (2, 2, (3, 9, 3)), (2, 2, (2, 10, 3)), (2, 2, (3, 11, 2)), (2, 2, (2, 12, 2)),
    # tiles of 6 steps: K = 1 .. 5 padded with 5 .. 1 idle cycles (the padding count runs down
    # from K's complement only when there are four or more)
    *((1, 6, (2, k, 7)) for k in range(1, 6)),
])
def test_accelerator_full_rate_cycles(seed, rows, cols, shape):
    """At full rate a GEMM takes exactly Accelerator.cycles(): no bubble between tiles, and the
    throughput figures in `make bench` follow from it (256^3 on 8x8: 262144 + latency cycles)."""
    dut = Accelerator(rows, cols, max_col_tiles=4)
    prob = random_problem(np.random.default_rng(seed + 17), *shape)
    result_rows, cycles, _, _ = run_full_rate(prob, dut)
    got = prob.assemble(result_rows, rows, cols)
    want, _ = prob.expected()
    np.testing.assert_array_equal(((got + 128) % 256) - 128, want)
    assert cycles == dut.cycles(*shape)
    m, k, n = shape
    tiles = -(-m // rows) * -(-n // cols)
    # (tiles at least 2 steps apart) input register 1, array read-out cols + 8, later rows
    # rows - 1, table lookup 5, requantizer 25, transit to the FIFO 2, FIFO 5 (issue 1, memory
    # read 2, hop to the queue 1, queue 1)
    assert dut.cycles(*shape) == ((tiles - 1) * max(k, rows, cols, 2) + k
                                  + 1 + (cols + 8) + (rows - 1) + 5 + 25 + 2 + 5)


@pytest.mark.parametrize("lead", [3, 2])
def test_accelerator_column_tiles_shrink_three_cycles_ahead(seed, lead):
    """A K = 1 layer of one column tile right after a layer of two: n_tiles reaches the column-tile
    wrap flag through three registers, so with the registers set three cycles ahead (the
    contract) every layer reads its own table entries, and with two the third layer reads the
    second column tile's entry (found by `make sim`'s coverage corners). The lead-2 run must
    fail, or the contract is looser than documented and this test no longer guards it."""
    rng = np.random.default_rng(seed + 41)
    dut = Accelerator(1, 1, max_col_tiles=4)
    problems = [random_problem(rng, 1, 1, n) for n in (2, 1, 1)]
    for p in problems:
        p.bias = np.arange(1, p.shape[2] + 1, dtype=np.int32) * 2**20    # a wrong entry changes the result
        p.output_multiplier, p.output_shift = np.full(p.shape[2], 2**30), np.full(p.shape[2], -15)
        p.act_min, p.act_max = -128, 127
    if lead == 3:
        assert check(dut, problems, seed, p_idle=0.0, p_ready=1.0, lead=lead) == 4
    else:
        with pytest.raises(pytest.fail.Exception, match="results differ"):
            check(dut, problems, seed, p_idle=0.0, p_ready=1.0, lead=lead)


def test_accelerator_weights_of_minus_128_in_bypass(seed):
    """The ports take any int8, and -128 x -128 = 16384 is the one product that needs all 16 bits of
    the cells' `out_last` and the read-out's product half (the spec's weights, -127..127, never
    reach it): in bypass the accumulators must equal numpy's exact matmul plus the bias (golden
    refuses weights of -128, so the expected values come from numpy here)."""
    rng = np.random.default_rng(seed + 51)
    dut = Accelerator(2, 2, max_col_tiles=2)
    problems = []
    for k in (1, 3, 7):
        p = random_problem(rng, 3, k, 3, bypass=True)
        p.lhs[:] = np.where(rng.random(p.lhs.shape) < 0.7, -128, p.lhs)
        p.rhs = np.where(rng.random(p.rhs.shape) < 0.7, -128, p.rhs).astype(np.int8)
        p.input_offset = 0
        problems.append(p)
    for p, rows in zip(problems, run_accelerator(dut, problems, seed), strict=True):
        got = p.assemble(rows, 2, 2)
        exact = p.lhs.astype(np.int64) @ p.rhs.astype(np.int64) + p.bias.astype(np.int64)
        want = wrap_int32_in_int64(exact)
        assert ((p.lhs == -128).astype(int) @ (p.rhs == -128).astype(int)).any()   # a 16384 product is in it
        assert np.array_equal(got, want), f"k={p.shape[1]}: hardware {got.tolist()}, numpy {want.tolist()}"


def test_accelerator_first_step_three_cycles_after_reset(seed):
    """A reset counts as a change of the layer registers (docs/architecture.md, programming model):
    a layer is interrupted with steps in flight and rows in the FIFO, the next layer's registers
    are set during the reset, its table written after it and its first step comes exactly three
    cycles after ``rst`` falls. The layers after a reset change K (1 and longer) and n_tiles, so
    every flag the sequencer derives from them restarts; their results must be exact."""
    rng = np.random.default_rng(seed + 71)
    dut = Accelerator(1, 1, max_col_tiles=4)
    top = Module()
    top.domains.sync = cd = ClockDomain()
    top.submodules.dut = dut
    pairs = [(random_problem(rng, 4, 5, 3), random_problem(rng, 3, 1, 2)),
             (random_problem(rng, 3, 1, 3), random_problem(rng, 2, 6, 2)),
             (random_problem(rng, 2, 2, 2), random_problem(rng, 3, 3, 1))]
    results = []

    async def bench(ctx):
        async def stream(prob, stop=None):
            steps, rows, i, cycle = list(prob.steps(1, 1)), [], 0, 0
            ctx.set(dut.res.ready, 1)
            while len(rows) < prob.n_result_rows(1, 1) and cycle != stop:
                assert cycle < 1000, f"{len(rows)} result rows after {cycle} cycles"
                live = offer_step(ctx, dut, steps, i)
                _, _, ready, valid, payload = await ctx.tick().sample(dut.act.ready, dut.res.valid, dut.res.payload)
                i += live and ready
                if valid:
                    rows.append([int(payload[0])])
                cycle += 1
            ctx.set(dut.act.valid, 0)
            ctx.set(dut.wts.valid, 0)
            return rows

        for interrupted, after in pairs:
            await load_layer(ctx, dut, interrupted)
            await stream(interrupted, stop=int(rng.integers(8, 3 * interrupted.shape[1] + 40)))
            ctx.set(cd.rst, 1)
            set_layer_registers(ctx, dut, after)
            for _ in range(2):
                await ctx.posedge(cd.clk)            # (a tick would raise DomainReset)
            ctx.set(cd.rst, 0)
            await ctx.tick()                         # the first cycle out of reset
            writes = len(after.table_writes(1, 1))
            assert writes <= 2
            for _ in range(2 - writes):
                await ctx.tick()
            await write_tables(ctx, dut, after)      # the table, in the cycles before the first step
            results.append(await stream(after))      # the first step, three cycles after rst fell

    simulate(top, bench)
    for (_, prob), rows in zip(pairs, results, strict=True):
        got = prob.assemble(rows, 1, 1)
        want, _ = prob.expected()
        assert np.array_equal(((got + 128) % 256) - 128, want), (
            f"M,K,N={prob.shape}: hardware {got.tolist()}, golden {want.tolist()}")


@pytest.mark.parametrize(("cols", "max_col_tiles"), [(1, 4), (2, 20), (3, 8), (4, 40), (8, 64)])
def test_cfg_payload_bits_are_the_documented_ones(cols, max_col_tiles):
    """The cfg payload is an interface (a host packs its bits): docs/architecture.md's layout, field by
    field (the testbenches pack through config_layout and would not notice a field moving)."""
    addr = (max_col_tiles - 1).bit_length()
    lane = (max(cols, 2) - 1).bit_length()
    documented = [("addr", 0, addr), ("lane", addr, lane), ("bias", addr + lane, 32),
                  ("multiplier", addr + lane + 32, 32), ("shift", addr + lane + 64, 6)]
    layout = config_layout(cols, max_col_tiles)
    entry = layout["entry"]
    got = [("addr", layout["addr"].offset, layout["addr"].width), ("lane", layout["lane"].offset, layout["lane"].width)]
    got += [(name, entry.offset + entry.shape[name].offset, entry.shape[name].width)
            for name in ("bias", "multiplier", "shift")]
    assert got == documented
    assert layout.size == addr + lane + 70
    assert all(entry.shape[name].shape.signed for name in ("bias", "multiplier", "shift"))
