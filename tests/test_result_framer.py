"""hw.result_framer alone in Amaranth's simulator, against a Python model of its documented contract.

The scheduler's side pushes each GEMM's counts (as `launched` does) with at most ``depth`` GEMMs
pushed and not done; the core's side offers each GEMM's rows (row tiles of ``n_tiles * rows`` rows)
no earlier than a GEMM's first row can leave the core: GemmScheduler.SETTLE cycles from the push to
its first step, then the core's latency to the last row of its first tile (a tile's rows leave one a
cycle). The source holds ``res_valid`` until a row is taken and idles at random; the sink's
``tready`` is random (phases of always ready and of heavy backpressure). Every cycle is checked:
the stream passes through (``tvalid`` = ``res_valid``, ``res_ready`` = ``tready``) except in the
``idle(rows)`` cycles after a GEMM's last row, ``tlast`` is high with ``tvalid`` exactly on a GEMM's
last row, and ``done`` pulses exactly DONE_LATENCY cycles after that row's transfer.
"""

import random

import pytest
from amaranth import Shape

from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.hw.gemm_scheduler import GemmScheduler
from int8_systolic.hw.result_framer import ResultFramer, counts_layout
from int8_systolic.sim.amaranth_bench import simulate

MAX_COL_TILES = 8
N_WIDTH = Shape.cast(range(MAX_COL_TILES + 1)).width   # as the scheduler's counts.n_tiles
COUNTS = counts_layout(N_WIDTH)


def lead(rows):
    """Cycles from a GEMM's push (the scheduler's `launched`) to its first row, at the earliest: the
    settings SETTLE cycles old at its first step, then a K = 1 tile's first row, the core's latency
    less its later rows after the step. (The framer has no property for what it needs.)"""
    return GemmScheduler.SETTLE + Accelerator.model(rows, 1, max_col_tiles=MAX_COL_TILES).latency - (rows - 1)


def random_shapes(rng, n, rows):
    """``n`` random GEMMs (m_tiles, n_tiles): many of one tile (with one row a tile, GEMMs of one row),
    counts of 1, 2 and 3 (the flags the framer keeps) and some longer ones."""
    return [(rng.choice([1, 1, 1, 2, 3, 4, rng.randint(5, 9)]), rng.choice([1, 1, 2, 3, 4, MAX_COL_TILES]))
            for _ in range(n)]


class Run:
    """One simulation: the per-cycle trace and the model's events."""

    def __init__(self, rows, shapes, seed, depth=4, p_valid=None, p_ready=None, eager=None):
        """``p_valid``/``p_ready``: fixed probabilities of a row offered / tready in a cycle (default:
        random phases); ``eager``: push as soon as allowed (default: random bursts and gaps)."""
        self.rows, self.shapes, self.seed, self.depth = rows, shapes, seed, depth
        self.p_valid, self.p_ready, self.eager = p_valid, p_ready, eager
        self.dut = ResultFramer(rows, n_width=N_WIDTH, depth=depth, max_col_tiles=MAX_COL_TILES)
        # each row: its GEMM and whether it is the GEMM's last
        self.row_gemm = [g for g, (m, n) in enumerate(shapes) for _ in range(m * n * rows)]
        self.push = [None] * len(shapes)
        self.xfer_last = [None] * len(shapes)   # cycle of each GEMM's last row's transfer
        self.trace = {k: [] for k in ("res_valid", "tready", "tvalid", "res_ready", "tlast", "done", "row")}

    def where(self, t=None):
        return f" (seed {self.seed}, rows {self.rows}, depth {self.depth}" + (f", cycle {t})" if t is not None else ")")

    def is_last(self, i):
        return i + 1 == len(self.row_gemm) or self.row_gemm[i + 1] != self.row_gemm[i]

    def simulate(self):
        dut, rng, n = self.dut, random.Random(self.seed), len(self.shapes)
        first_row = lead(self.rows)
        budget = 200 + n * (first_row + 20) + 12 * len(self.row_gemm)
        tr = self.trace

        async def bench(ctx):
            pushed, push_at, eager = 0, 0, True
            done_n = 0           # done pulses seen before this cycle
            row, valid = 0, False
            p_valid, p_ready = 1.0, 1.0
            t, end = 0, None
            while end is None or t <= end:
                assert t < budget, f"timed out: {done_n} of {n} GEMMs done, row {row}" + self.where(t)
                # The scheduler's side: a GEMM's counts, with at most `depth` pushed and not done.
                push = pushed < n and pushed - done_n < self.depth and t >= push_at
                ctx.set(dut.push, push)
                if push:
                    m, nt = self.shapes[pushed]
                    ctx.set(dut.counts, COUNTS.const({"m_m1": m - 1, "m_one": m == 1, "n_tiles": nt}))
                    self.push[pushed] = t
                    pushed += 1
                    if self.eager is None and rng.random() < 0.2:
                        eager = not eager
                    push_at = t + (0 if (self.eager if self.eager is not None else eager) else rng.randint(1, 60))
                # The core's side: the next row once it can have left the core, held until taken.
                if rng.random() < 1 / 40:
                    p_valid, p_ready = rng.choice([1.0, 1.0, 0.6]), rng.choice([1.0, 1.0, 0.7, 0.3])
                pv = self.p_valid if self.p_valid is not None else p_valid
                pr = self.p_ready if self.p_ready is not None else p_ready
                here = row < len(self.row_gemm) and self.push[self.row_gemm[row]] is not None \
                    and t >= self.push[self.row_gemm[row]] + first_row
                valid = here and (valid or rng.random() < pv)
                ready = rng.random() < pr
                ctx.set(dut.res_valid, valid)
                ctx.set(dut.tready, ready)
                got = {k: ctx.get(getattr(dut, k)) for k in ("tvalid", "res_ready", "tlast", "done")}
                for k, v in (("res_valid", valid), ("tready", ready), *got.items(), ("row", row)):
                    tr[k].append(v)
                done_n += got["done"]
                if valid and got["res_ready"]:
                    if self.is_last(row):
                        self.xfer_last[self.row_gemm[row]] = t
                    row, valid = row + 1, False
                if end is None and row == len(self.row_gemm) and done_n >= n:
                    end = t + ResultFramer.DONE_LATENCY + ResultFramer.idle(self.rows) + 1   # (and a cycle more)
                await ctx.tick()
                t += 1

        simulate(dut, bench)
        return self

    def check(self):
        """Every cycle against the contract; returns the cycle of each GEMM's first row's transfer."""
        tr, idle = self.trace, ResultFramer.idle(self.rows)
        held = {x + i for x in self.xfer_last for i in range(1, idle + 1)}
        dones = {x + ResultFramer.DONE_LATENCY for x in self.xfer_last}
        for t in range(len(tr["done"])):
            gate = t not in held
            want = (tr["res_valid"][t] and gate, tr["tready"][t] and gate)
            got = (tr["tvalid"][t], tr["res_ready"][t])
            assert got == want, f"tvalid, res_ready {got}, want {want}" + self.where(t)
            if tr["tvalid"][t]:
                last = self.is_last(tr["row"][t])
                assert tr["tlast"][t] == last, \
                    f"tlast {tr['tlast'][t]} on row {tr['row'][t]}, GEMM {self.row_gemm[tr['row'][t]]}" + self.where(t)
            assert tr["done"][t] == (t in dones), f"done {tr['done'][t]}" + self.where(t)
        assert tr["row"][-1] == len(self.row_gemm), "rows left" + self.where()
        first_xfer = {}
        for t in range(len(tr["done"])):
            if tr["tvalid"][t] and tr["tready"][t]:
                first_xfer.setdefault(self.row_gemm[tr["row"][t]], t)
        return [first_xfer[g] for g in range(len(self.shapes))]

    def back_to_back(self, first_xfer):
        """The GEMMs whose first row was taken right after the last one's and the framer's idle cycles."""
        idle = ResultFramer.idle(self.rows)
        return sum(first_xfer[g + 1] == x + idle + 1 for g, x in enumerate(self.xfer_last[:-1]))


N_GEMMS = 60


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_random_stream(seed, rows):
    """Random GEMM shapes, pushes in bursts and gaps, random gaps on res_valid and backpressure on
    tready: pass-through bar the idle(rows) cycles after each GEMM's last row, TLAST exactly on each
    GEMM's last row, done exactly DONE_LATENCY cycles after its transfer; and some GEMMs follow
    each other with no cycle between but the framer's idle ones."""
    seed = seed * 100 + rows
    run = Run(rows, random_shapes(random.Random(seed), N_GEMMS, rows), seed).simulate()
    assert run.back_to_back(run.check()) >= 5, "too few GEMMs back to back: the stimulus misses it" + run.where()


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_back_to_back_at_full_rate(seed, rows):
    """Rows always offered (once they can have left the core) and always taken, pushes as soon as
    `depth` allows: each GEMM's rows in consecutive cycles, its first right after the last GEMM's last
    row and the framer's idle(rows) cycles unless its rows come later (with one row a tile, GEMMs of
    one row: TLAST on every row, done after each, a held cycle between them), at depths 4 and 2."""
    rng = random.Random(seed + rows)
    shapes = [(1, 1)] * 4 + [(rng.randint(1, 3), rng.randint(1, 3)) for _ in range(10)] + [(1, 1), (2, 1), (1, 2)]
    for depth in (4, 2):
        run = Run(rows, shapes, seed, depth=depth, p_valid=1.0, p_ready=1.0, eager=True).simulate()
        first_xfer, first_row, idle = run.check(), lead(rows), ResultFramer.idle(rows)
        for g, (m, n) in enumerate(shapes):
            want = run.push[g] + first_row if g == 0 else max(run.xfer_last[g - 1] + idle + 1,
                                                              run.push[g] + first_row)
            assert first_xfer[g] == want, f"GEMM {g}'s first row in cycle {first_xfer[g]}, want {want}" + run.where()
            assert run.xfer_last[g] - first_xfer[g] == m * n * rows - 1, f"GEMM {g}'s rows with gaps" + run.where()
        # (the first `depth` GEMMs, of one tile, are pushed together: they follow each other)
        assert run.back_to_back(first_xfer) >= depth - 1, "too few GEMMs back to back" + run.where()


def test_stalled_last_row_keeps_tlast(seed):
    """With one row a tile and tready low for long stretches: TLAST holds while a GEMM's last row
    waits (checked with tvalid in every cycle), and the held cycle comes after its transfer only."""
    seed = seed + 7
    run = Run(1, [(1, 1), (2, 1), (1, 3), (1, 1)] * 5, seed, p_valid=1.0, p_ready=0.25, eager=True).simulate()
    run.check()
    tr = run.trace
    waits = sum(1 for t, v in enumerate(tr["tvalid"]) if v and tr["tlast"][t] and not tr["tready"][t])
    assert waits, "no last row waited for tready" + run.where()
