"""hw.credit alone in Amaranth's simulator: ``credit`` and ``credit_r`` in every cycle against the contract.

The contract (from the docstring of :mod:`hw.credit`, modelled here, not taken from the RTL): the counter
counts ``rows`` for each tile admitted and -1 for each row read, and in cycle t ``credit`` (and its copy
``credit_r``) is high exactly when

    rows * (tiles admitted in cycles <= t - LAG) - (reads in cycles <= t - (RETURN + LAG - 1)) <= limit.

A tile is *admitted* in the cycle of its first step; the ``admit`` port carries the sequencer's register
pulse one cycle later (:attr:`hw.sequencer.Sequencer.ADMIT_LATENCY`), so the test drives ``admit``
``ADMIT_LATENCY`` cycles after each tile it admits (``LAG`` counts that register, see
:attr:`CreditCounter.LAG` and docs/architecture.md's "tiles admitted in cycles <= t - 4"). ``read`` is the
``res`` transfer, counted in its own cycle.

Stimulus: tiles admitted only with ``credit`` (as the sequencer does) or, with a deep enough counter,
regardless of it; admits back to back, at a tile period and at random; reads at random rates in phases
(none for a while, so credit is withheld, then every cycle, so it comes back), only of rows admitted;
admits and reads in the same cycle; rows 1, 2, 3 and 8 and limits 0, below, at and above whole tiles.
"""

import numpy as np
import pytest

from int8_systolic.hw.credit import CreditCounter
from int8_systolic.hw.sequencer import Sequencer
from int8_systolic.sim.amaranth_bench import simulate

ADMIT_LAG = CreditCounter.LAG                              # from a tile's first step
READ_LAG = CreditCounter.RETURN + CreditCounter.LAG - 1    # from a read on res
PORT_DELAY = Sequencer.ADMIT_LATENCY                       # a tile's first step to its `admit` pulse

# (rows, limit): limit 0 (one tile at a time), not a whole number of tiles, whole tiles, a larger array
CONFIGS = [(1, 0), (2, 3), (3, 9), (8, 40), (4, 0)]


def run_credit(dut, rng, n_cycles, *, gated=True, tile_period=None, p_admit=0.5, read_phases=(0.0, 1.0, 0.5)):
    """Drive ``dut`` for ``n_cycles`` and compare ``credit``/``credit_r`` with the contract in every cycle.

    Tiles are admitted (first step) with probability ``p_admit`` in a cycle, or every ``tile_period``
    cycles when given; ``gated``: only while ``credit`` is high. Rows are read with a probability taken
    in turn from ``read_phases``, a phase lasting a random 20-120 cycles. Returns counts of what happened."""
    R, limit, depth = dut.rows, dut.limit, dut.depth
    admitted = [0]   # tiles admitted in cycles <= t, index t + 1
    read_n = [0]     # rows read in cycles <= t, index t + 1
    stats = {"admits": 0, "reads": 0, "credit_low": 0, "credit_high": 0, "refused": 0, "both": 0}

    def upto(cum, t):
        return cum[max(t + 1, 0)]

    async def bench(ctx):
        phase, phase_left = 0, int(rng.integers(20, 120))
        since = 0
        for t in range(n_cycles):
            want = R * upto(admitted, t - ADMIT_LAG) - upto(read_n, t - READ_LAG) <= limit
            credit, credit_r = ctx.get(dut.credit), ctx.get(dut.credit_r)
            assert credit == want, (f"cycle {t}: credit {credit}, contract {int(want)} ({R} x "
                                    f"{upto(admitted, t - ADMIT_LAG)} tiles - {upto(read_n, t - READ_LAG)} reads "
                                    f"vs limit {limit})")
            assert credit_r == want, f"cycle {t}: credit_r {credit_r}, contract {int(want)}"
            stats["credit_high" if want else "credit_low"] += 1
            # a tile admitted now (its first step), if credit allows and the counter cannot overflow
            since += 1
            offer = since >= tile_period if tile_period else rng.random() < p_admit
            admit_now = offer and (credit or not gated)
            if admit_now and R * (admitted[-1] + 1) - upto(read_n, t - READ_LAG) > depth:
                assert not gated, "stimulus error: the counter's depth is too small for the tiles credit lets in"
                admit_now = False
            stats["refused"] += bool(offer and not admit_now)
            if admit_now:
                since = 0
            admitted.append(admitted[-1] + admit_now)
            # a row read now: only rows of tiles whose admit pulse came before this cycle
            if phase_left == 0:
                phase, phase_left = (phase + 1) % len(read_phases), int(rng.integers(20, 120))
            phase_left -= 1
            available = R * upto(admitted, t - PORT_DELAY - 1) - read_n[-1]
            read = available > 0 and rng.random() < read_phases[phase]
            read_n.append(read_n[-1] + read)
            pulse = t >= PORT_DELAY and admitted[t + 1 - PORT_DELAY] != admitted[t - PORT_DELAY]
            ctx.set(dut.admit, pulse)
            ctx.set(dut.read, read)
            stats["admits"] += pulse
            stats["reads"] += read
            stats["both"] += bool(pulse and read)
            await ctx.tick()

    simulate(dut, bench)
    return stats


def counter(rows, limit, depth=None):
    # deep enough for the tiles credit lets in while its count lags: LAG tiles beyond the limit
    return CreditCounter(rows=rows, limit=limit, depth=limit + rows * ADMIT_LAG if depth is None else depth)


@pytest.mark.parametrize(("rows", "limit"), CONFIGS)
def test_credit_random_admits_gated_by_credit(seed, rows, limit):
    """Tiles admitted at random while credit is high (back to back too), rows read in phases of none, every
    cycle and at random: credit and credit_r are the lagged count's compare with the limit in every cycle."""
    rng = np.random.default_rng(seed + 10 * rows + limit)
    stats = run_credit(counter(rows, limit), rng, 2500)
    assert min(stats["credit_low"], stats["credit_high"], stats["refused"], stats["both"]) > 0, stats


@pytest.mark.parametrize(("rows", "limit"), CONFIGS)
@pytest.mark.parametrize("period", [1, 2, 3])
def test_credit_tiles_at_a_fixed_period(seed, rows, limit, period):
    """A tile offered every ``period`` cycles (admitted only with credit), rows read at full rate or in
    phases: the admits of one tile period all land at the contract's lag."""
    rng = np.random.default_rng(seed + 100 + 10 * rows + limit + period)
    stats = run_credit(counter(rows, limit), rng, 800, tile_period=period, read_phases=(1.0, 0.0, 0.7))
    assert stats["admits"] > 10, stats


@pytest.mark.parametrize(("rows", "limit"), [(1, 0), (2, 5), (3, 4)])
def test_credit_admits_regardless_of_credit(seed, rows, limit):
    """Admits that ignore credit (the counter alone may see them) in a counter with room for them: the count
    goes far above the limit and back, credit still the contract's compare in every cycle."""
    rng = np.random.default_rng(seed + 200 + 10 * rows + limit)
    dut = counter(rows, limit, depth=limit + 12 * rows)
    stats = run_credit(dut, rng, 2000, gated=False, p_admit=0.4 / rows, read_phases=(0.1, 1.0))
    assert min(stats["credit_low"], stats["credit_high"]) > 100, stats
