"""hw.sequencer alone in Amaranth's simulator, every output in every cycle against a Python model of its contract.

The model (written here, from the docstring of :mod:`hw.sequencer`, not from the RTL), per cycle: the
sequencer is *open* when it is not padding and, for a tile's first step, ``credit`` is high and ``hold``
low; ``step`` = ``act_valid & wts_valid & open``, ``act_ready`` = ``wts_valid & open`` and ``wts_ready`` =
``act_valid & open``; a step ends its tile (``last``) when it is the tile's K-th; that step carries the
tile's ``tag``, ``table_base`` + its column-tile index (counting 0 .. ``n_tiles`` - 1 and wrapping); a tile
of K < ``min_tile_steps`` steps is followed by ``min_tile_steps`` - K cycles closed to steps; ``admit`` and
``tile_end`` are a tile's first and last step :attr:`Sequencer.ADMIT_LATENCY` cycles later.

The stimulus keeps to the contract's side: a GEMM's ``k_steps``/``n_tiles``/``table_base`` are set
:attr:`Sequencer.SETTLE` cycles before its first step (often exactly) and kept until its last ``tile_end``,
with random legal values in between; a GEMM runs whole row tiles; after a GEMM the next GEMM's first step
comes no earlier than keeps its first last step ``min_tile_steps`` after the previous one. Within that, the
two input streams are valid at random and independently, ``credit`` is withheld and ``hold`` raised in
random stretches (and ``hold`` in the cycle after an ``admit``), K takes the corners (1, 2,
``min_tile_steps`` - 1, ``min_tile_steps``, + 1, powers of two) and random values, for ``min_tile_steps``
of 2, 3, 5 and 8 and tables of 1 to 6 column tiles.
"""

import numpy as np
import pytest

from int8_systolic.hw.sequencer import Sequencer
from int8_systolic.sim.amaranth_bench import simulate

AL, SETTLE = Sequencer.ADMIT_LATENCY, Sequencer.SETTLE
# (min_tile_steps, max_col_tiles)
CONFIGS = [(2, 1), (3, 4), (5, 3), (8, 6)]


class SequencerModel:
    """The contract's state: in a tile or before its first step, steps left, idle cycles left, tile index."""

    def __init__(self, min_tile_steps):
        self.c = min_tile_steps
        self.first, self.left, self.k, self.pad, self.tile = True, 0, 0, 0, 0

    def is_open(self, credit, hold):
        return self.pad == 0 and (not self.first or bool(credit and not hold))

    def cycle(self, act_valid, wts_valid, credit, hold, k_steps, n_tiles, table_base):
        """One cycle: returns the contract's ``(open, step, first, last, tag)`` (``last``/``tag`` only with a step)."""
        open_ = self.is_open(credit, hold)
        step = bool(act_valid and wts_valid and open_)
        first, last, tag = step and self.first, None, None
        if self.pad:
            self.pad -= 1
        if step:
            if self.first:
                self.k = self.left = k_steps
            self.left -= 1
            last, tag = self.left == 0, table_base + self.tile
            self.first = last
            if last:
                self.tile = (self.tile + 1) % n_tiles
                self.pad = max(self.c - self.k, 0)
        return open_, step, first, last, tag


def k_choices(rng, c):
    corners = sorted({1, 2, max(c - 1, 1), c, c + 1, 8, 16})
    return int(rng.choice(corners)) if rng.random() < 0.6 else int(rng.integers(1, 3 * c + 12))


def random_gemm(rng, c, max_col_tiles):
    n_tiles = int(rng.integers(1, max_col_tiles + 1))
    base = int(rng.integers(0, max_col_tiles - n_tiles + 1))
    return {"k_steps": k_choices(rng, c), "n_tiles": n_tiles, "table_base": base,
            "row_tiles": int(rng.integers(1, 4))}


def junk_settings(rng, max_col_tiles):
    """Legal but unrelated settings, for the cycles between GEMMs (nothing may read them then)."""
    n = int(rng.integers(1, max_col_tiles + 1))
    return {"k_steps": int(rng.choice([1, 2, 3, int(rng.integers(1, 2**24))])), "n_tiles": n,
            "table_base": int(rng.integers(0, max_col_tiles - n + 1))}


def run_sequencer(dut, gemms, rng, *, p_valid=0.7, p_credit=0.8, p_hold=0.1, p_hold_after_admit=0.3,
                  p_gap=0.5):
    """Drive ``gemms`` through ``dut`` cycle by cycle and compare every output with :class:`SequencerModel`
    in every cycle. ``p_*``: the chances that a stream is valid while steps are due, that ``credit`` is
    high, that ``hold`` is raised (``p_hold``, in stretches; ``p_hold_after_admit``, in the cycle after an
    ``admit``), and that the settings change later than the earliest cycle allowed. Returns a summary."""
    c, max_col_tiles = dut.min_tile_steps, dut.max_col_tiles
    model = SequencerModel(c)
    stats = {"cycles": 0, "steps": 0, "tiles": 0, "held_first": 0, "no_credit_first": 0, "padded": 0,
             "steps_under_hold": 0}

    async def bench(ctx):
        firsts, lasts = [], []   # the model's first and last steps of every cycle so far
        prev_last = None         # cycle of the previous GEMM's last step
        settings = None          # the GEMM's settings (kept to its last tile_end)
        hold_stretch = credit_stretch = 0
        hold, credit, admit_seen = 0, 1, 0
        t = 0
        for gi, g in enumerate(gemms):
            steps_due = g["k_steps"] * g["n_tiles"] * g["row_tiles"]
            previous, settings = settings, {k: g[k] for k in ("k_steps", "n_tiles", "table_base")}
            # the settings change in the cycle after the previous GEMM's last tile_end (or later), the
            # first step comes SETTLE cycles after that (or later), and late enough that the first tile's
            # last step is min_tile_steps after the previous GEMM's last step
            set_at = 0 if prev_last is None else prev_last + AL + 1
            while rng.random() < p_gap:
                set_at += 1
            start = set_at + SETTLE
            if prev_last is not None:
                start = max(start, prev_last + c - (g["k_steps"] - 1))
            while rng.random() < p_gap:
                start += 1
            while steps_due:
                live = t >= start
                if t >= set_at:
                    cur = settings
                elif prev_last is not None and t <= prev_last + AL:  # to the previous GEMM's last tile_end
                    cur = previous
                else:
                    cur = junk_settings(rng, max_col_tiles)
                # hold: random stretches, and raised in the cycle after an admit at random
                if hold_stretch:
                    hold_stretch -= 1
                else:
                    hold = int(rng.random() < p_hold)
                    hold_stretch = int(rng.integers(0, 6)) if hold else 0
                if admit_seen and rng.random() < p_hold_after_admit:
                    hold, hold_stretch = 1, int(rng.integers(0, 4))
                if credit_stretch:
                    credit_stretch -= 1
                else:
                    credit = int(rng.random() < p_credit)
                    credit_stretch = int(rng.integers(0, 8))
                act_valid = int(live and rng.random() < p_valid)
                wts_valid = int(live and rng.random() < p_valid)
                for name, v in (*cur.items(), ("act_valid", act_valid), ("wts_valid", wts_valid),
                                ("credit", credit), ("credit_r", credit), ("hold", hold)):
                    ctx.set(getattr(dut, name), v)
                got = {n: ctx.get(getattr(dut, n)) for n in ("step", "last", "tag", "admit", "tile_end",
                                                             "act_ready", "wts_ready")}
                padding = model.pad != 0
                open_, step, first, last, tag = model.cycle(act_valid, wts_valid, credit, hold, **cur)
                where = f"cycle {t}, GEMM {gi} {g}"
                assert got["step"] == step, f"{where}: step {got['step']}, contract {int(step)}"
                assert got["act_ready"] == (wts_valid and open_), f"{where}: act_ready {got['act_ready']}"
                assert got["wts_ready"] == (act_valid and open_), f"{where}: wts_ready {got['wts_ready']}"
                if step:
                    assert got["last"] == last, f"{where}: last {got['last']}, contract {int(last)}"
                    if last:
                        assert got["tag"] == tag, f"{where}: tag {got['tag']} with the last step, contract {tag}"
                firsts.append(first)
                lasts.append(step and last)
                want_admit = t >= AL and firsts[t - AL]
                want_end = t >= AL and lasts[t - AL]
                assert got["admit"] == want_admit, f"{where}: admit {got['admit']}, contract {int(want_admit)}"
                assert got["tile_end"] == want_end, f"{where}: tile_end {got['tile_end']}, contract {int(want_end)}"
                admit_seen = got["admit"]
                stats["steps"] += step
                stats["steps_under_hold"] += bool(step and hold)
                stats["tiles"] += bool(step and last)
                stats["held_first"] += bool(model.first and act_valid and wts_valid and hold and not padding)
                stats["no_credit_first"] += bool(model.first and act_valid and wts_valid and not credit
                                                 and not padding)
                stats["padded"] += bool(padding and act_valid and wts_valid)
                if step:
                    steps_due -= 1
                    if not steps_due:
                        prev_last = t
                t += 1
                await ctx.tick()
        # drain: the last tile_end, nothing more
        for _ in range(AL + 3):
            for name, v in (("act_valid", 0), ("wts_valid", 0)):
                ctx.set(getattr(dut, name), v)
            lasts.append(False)
            firsts.append(False)
            assert ctx.get(dut.admit) == firsts[t - AL], f"cycle {t}: admit"
            assert ctx.get(dut.tile_end) == lasts[t - AL], f"cycle {t}: tile_end"
            assert not ctx.get(dut.step)
            t += 1
            await ctx.tick()
        stats["cycles"] = t

    simulate(dut, bench)
    assert stats["tiles"] == sum(g["n_tiles"] * g["row_tiles"] for g in gemms)
    return stats


@pytest.mark.parametrize(("min_tile_steps", "max_col_tiles"), CONFIGS)
def test_sequencer_matches_model_random(seed, min_tile_steps, max_col_tiles):
    """Random GEMMs, streams valid at random, credit withheld and hold raised at random (also in the cycle
    after an admit): step/ready/last/tag/admit/tile_end as the contract gives them in every cycle."""
    rng = np.random.default_rng(seed + 10 * min_tile_steps + max_col_tiles)
    dut = Sequencer(min_tile_steps=min_tile_steps, max_col_tiles=max_col_tiles)
    gemms = [random_gemm(rng, min_tile_steps, max_col_tiles) for _ in range(30)]
    for i in (2, 6, 11, 16, 21, 26):  # GEMMs of K = 1, the shortest tiles (padded: min_tile_steps - 1 cycles)
        gemms[i].update(k_steps=1, row_tiles=4)
    stats = run_sequencer(dut, gemms, rng)
    # the corners were reached: first steps held off by hold and by credit, steps offered while padding
    assert min(stats["held_first"], stats["no_credit_first"], stats["padded"]) > 0, stats


@pytest.mark.parametrize(("min_tile_steps", "max_col_tiles"), CONFIGS)
def test_sequencer_full_rate_tight_settings(seed, min_tile_steps, max_col_tiles):
    """Both streams always valid, credit always high, hold never: steps at full rate, short tiles padded to
    min_tile_steps exactly, each GEMM's settings changed in the cycle after the previous one's last tile_end
    and its first step exactly SETTLE cycles later (every K from 1 to min_tile_steps + 2, in falling and
    rising order, so K also gets smaller between GEMMs)."""
    rng = np.random.default_rng(seed + 100 + 10 * min_tile_steps + max_col_tiles)
    dut = Sequencer(min_tile_steps=min_tile_steps, max_col_tiles=max_col_tiles)
    ks = list(range(1, min_tile_steps + 3))
    gemms = []
    for k in [*ks, *reversed(ks), *ks]:
        g = random_gemm(rng, min_tile_steps, max_col_tiles)
        g["k_steps"], g["row_tiles"] = k, int(rng.integers(2, 4))  # (a short tile inside a GEMM is padded)
        gemms.append(g)
    stats = run_sequencer(dut, gemms, rng, p_valid=1.0, p_credit=1.0, p_hold=0.0, p_hold_after_admit=0.0,
                          p_gap=0.0)
    assert stats["padded"] > 0, stats


def test_sequencer_hold_stops_next_tile_not_current(seed):
    """hold raised in the cycle after every admit (and kept a few cycles) stops the next tile's first step,
    never the steps of the tile in progress; K = 1 with min_tile_steps = 2 is the tightest case (the next
    first step could come in that very cycle)."""
    for c, k in ((2, 1), (2, 2), (3, 4), (5, 1)):
        rng = np.random.default_rng(seed + 200 + 10 * c + k)
        dut = Sequencer(min_tile_steps=c, max_col_tiles=3)
        gemms = [{"k_steps": k, "n_tiles": 3, "table_base": 0, "row_tiles": 4}]
        stats = run_sequencer(dut, gemms, rng, p_valid=1.0, p_credit=1.0, p_hold=0.0, p_hold_after_admit=1.0,
                              p_gap=0.0)
        # every tile after the first was held off at least a cycle where the contract says hold reaches it
        # first (c = 2), and the tiles with steps after that cycle ran on under hold
        if c == 2:
            assert stats["held_first"] >= stats["tiles"] - 1, stats
        if k > AL + 1:
            assert stats["steps_under_hold"] > 0, stats
