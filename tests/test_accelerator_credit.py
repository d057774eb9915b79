"""The output FIFO's credit rule, checked at the ports in every cycle a tile's first step is offered.

docs/architecture.md ("Flow control") states it: with ``R`` rows and ``p = min_tile_steps``, a tile's
first step offered in cycle ``t`` is accepted exactly when

    R * (tiles admitted in cycles <= t - 4) - (rows read from res in cycles <= t - 5)
        <= fifo_depth - ceil(4 / p) * R

(the count of reserved rows lags the admits by four cycles and the reads by five; the
``ceil(4 / p) * R`` rows are those of the tiles admitted while it lags); a step that is not a
tile's first is never held off. Three runs per configuration, each with every result compared
with golden (bypass, so every row is distinct and a row lost, repeated or swapped fails):

- ``res`` held off until the inputs stall: the FIFO fills to exactly ``fifo_depth`` rows (a FIFO
  smaller than the rule lets in overflows, one larger holds rows nothing can fill);
- ``res`` always ready at full rate: no tile is held off (the depth sustains full rate), and the
  depth is the smallest that does: some admitted tile saw a count within one tile of the limit;
- ``res`` ready at random: the rule with reads landing at every lag.

Tiles are of ``K = p`` steps, the shortest unpadded tile, so they follow each other as closely as
the array allows; configurations with p = 2, 3, 4 and R = 1, 2, 4 cover both ways the credit
limit's formula rounds (the newest tile being read counted in full or not).
"""

from bisect import bisect_right

import numpy as np
import pytest

from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.sim.amaranth_bench import load_layer, offer_step, simulate
from int8_systolic.sim.stimulus import random_problem

ADMIT_LAG, READ_LAG = 4, 5


def run_traced(dut, prob, res_ready):
    """Stream ``prob`` with both inputs always valid; ``res_ready(cycle)`` drives ``res.ready``.
    Returns ``(offers, reads, rows)``: each cycle a step was offered as ``(cycle, step index,
    accepted)``, the cycles of the transfers on ``res``, and the result rows in order."""
    R, C = dut.rows, dut.cols
    steps = list(prob.steps(R, C))
    want = prob.n_result_rows(R, C)
    offers, reads, rows = [], [], []

    async def bench(ctx):
        await load_layer(ctx, dut, prob)
        budget = 4 * (len(steps) + want) + 2 * dut.latency + 1000
        cycle, i = 0, 0
        while len(rows) < want:
            assert cycle < budget, f"no progress: {len(rows)} of {want} rows after {cycle} cycles"
            live = offer_step(ctx, dut, steps, i)
            ready = bool(res_ready(cycle))
            ctx.set(dut.res.ready, ready)
            _, _, a_ready, w_ready, r_valid, payload = await ctx.tick().sample(
                dut.act.ready, dut.wts.ready, dut.res.valid, dut.res.payload)
            if live:
                assert a_ready == w_ready, f"cycle {cycle}: act.ready {a_ready}, wts.ready {w_ready}"
                offers.append((cycle, i, bool(a_ready)))
                i += bool(a_ready)
            if r_valid and ready:
                rows.append([int(payload[j]) for j in range(C)])
                reads.append(cycle)
            cycle += 1

    simulate(dut, bench)
    return offers, reads, rows


def check_rule(dut, k, offers, reads):
    """Assert the credit rule on every offered step; return the counts the admitted tiles saw."""
    R, p = dut.rows, dut.min_tile_steps
    limit = dut.fifo_depth - -(-ADMIT_LAG // p) * R
    admits, seen = [], []
    for cycle, i, accepted in offers:
        if i % k:
            assert accepted, f"cycle {cycle}: step {i % k} of tile {i // k} held off (only a first step may be)"
            continue
        count = R * bisect_right(admits, cycle - ADMIT_LAG) - bisect_right(reads, cycle - READ_LAG)
        assert accepted == (count <= limit), (
            f"cycle {cycle}: tile {i // k}'s first step {'accepted' if accepted else 'held off'} with "
            f"{count} rows counted, limit {limit} (fifo_depth {dut.fifo_depth}, {R} rows, min_tile_steps {p})")
        if accepted:
            admits.append(cycle)
            seen.append(count)
    return limit, seen


def check_results(prob, rows, R, C):
    got = prob.assemble(rows, R, C)
    want, _ = prob.expected()
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {want.size} results differ"


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 1), (2, 2), (2, 3), (4, 4)])
def test_credit_rule(seed, rows, cols):
    dut = Accelerator(rows, cols, max_col_tiles=8)
    R, C, p = rows, cols, dut.min_tile_steps
    # enough tiles of K = p steps to fill the FIFO with some left over
    n_tiles = dut.fifo_depth // R + 8
    col_tiles = 6
    shape = (R * -(-n_tiles // col_tiles), p, C * col_tiles)
    rng = np.random.default_rng(seed + 61 + 10 * rows + cols)
    prob = random_problem(rng, *shape, bypass=True)
    want, _ = prob.expected()
    assert len({tuple(r) for r in want.reshape(-1, C)}) == want.size // C  # rows all distinct

    # res held off long after the inputs stall (fifo_depth / R tiles of p steps, then the
    # latency): exactly fifo_depth rows are admitted before the first read
    offers, reads, rows_out = run_traced(dut, prob, lambda cycle: cycle >= 400 + dut.fifo_depth * p)
    check_results(prob, rows_out, R, C)
    limit, _ = check_rule(dut, p, offers, reads)
    admitted_before_reads = sum(1 for cycle, i, ok in offers if ok and i % p == 0 and cycle < reads[0])
    assert admitted_before_reads * R == dut.fifo_depth, (
        f"with res held off {admitted_before_reads} tiles ({admitted_before_reads * R} rows) were admitted; "
        f"the FIFO holds {dut.fifo_depth}")

    # res always ready: never held off, and the depth is the smallest that allows that
    offers, reads, rows_out = run_traced(dut, prob, lambda cycle: True)
    check_results(prob, rows_out, R, C)
    _, seen = check_rule(dut, p, offers, reads)
    assert all(ok for _, _, ok in offers), "a tile was held off at full rate with res always ready"
    assert max(seen) > limit - R, (
        f"at full rate the count never came within a tile of the limit (at most {max(seen)} rows, "
        f"limit {limit}): a FIFO of {dut.fifo_depth - R} rows would do")

    # res ready at random, in runs
    ready_rng = np.random.default_rng(seed + 62)
    pattern = ready_rng.random(100_000) < np.repeat(ready_rng.random(1000), 100)
    offers, reads, rows_out = run_traced(dut, prob, lambda cycle: pattern[cycle])
    check_results(prob, rows_out, R, C)
    check_rule(dut, p, offers, reads)
