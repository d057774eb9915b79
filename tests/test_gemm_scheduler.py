"""hw.gemm_scheduler alone in Amaranth's simulator, against a Python model of its documented contract.

The core is modelled after hw.sequencer's contract, independently of the RTL: it cuts its steps into
tiles of the settings' K, reports ``admit`` and ``tile_end`` Sequencer.ADMIT_LATENCY cycles after a
tile's first and last step, follows a tile of fewer than ``min_tile_steps`` steps with idle cycles
up to that, and takes a tile's first step only while ``hold`` is low (and, at random, while its input
streams and credit allow: phases at full rate and phases with gaps). The result side is a stand-in
for the framer: each GEMM's ``done`` comes a random drain time after its last ``tile_end``, in order,
as far apart as the framer's pulses can be. ``check_row`` takes a random row each cycle, often one
of a queued or in-flight GEMM.

Descriptors are random (K = 1, K < min_tile_steps, K around and above it, one to nine tiles, table
ranges that overlap, output stages repeated or changed, ``same_output`` filled as
hw.descriptor_check does) and pushed in bursts that fill the queue or one by one after long gaps.
Every cycle is recorded, then checked against the model; timing comes from the scheduler's
properties (SETTLE, GAP, gap(k)), Sequencer.ADMIT_LATENCY and the lags the module docstring states.
"""

import os
import random
from dataclasses import dataclass

import pytest

from int8_systolic.hw.gemm_control import settings_layout
from int8_systolic.hw.gemm_scheduler import GemmScheduler, descriptor_layout
from int8_systolic.hw.result_framer import ResultFramer, counts_layout
from int8_systolic.hw.sequencer import Sequencer
from int8_systolic.sim.amaranth_bench import simulate

SEED = int(os.environ.get("SEED", "1"))  # (tests/conftest.py's seed, for a fixture shared by the module's tests)
MAX_COL_TILES = 8
ADMIT = Sequencer.ADMIT_LATENCY   # the core's admit / tile_end after a tile's first / last step
ROW_BUSY_LAG = GemmScheduler.ROW_BUSY_LAG
# "push queues desc in the next cycle": it is counted in `queued` (and `full`) the cycle after that.
QUEUED_LAG = 2
# `done` is registered on entry ("a GEMM leaves a cycle later"), then counted out of `in_flight`.
LEAVE_LAG = 2
# Push requests no closer than this: `desc` must hold through the cycle after a request, and the
# caller checks `full` before each push, which shows a push QUEUED_LAG cycles after its request.
PUSH_SPACING = QUEUED_LAG
# The framer's `done` pulses are at least this far apart: with one row a tile, a GEMM of one row after
# the framer's idle cycle.
DONE_SPACING = 1 + ResultFramer.idle(1)
OUTPUT_FIELDS = ("output_offset", "act_min", "act_max", "bypass")
# Output stages (offset, act_min, act_max, bypass); the first is the one hw.descriptor_check compares
# the first descriptor after reset with.
STAGES = [(0, 0, 0, 0), (-128, -128, 127, 0), (5, -20, 90, 0), (0, -128, 127, 1)]

SETTINGS = settings_layout(MAX_COL_TILES)
OUTPUT_MASK = sum(((1 << SETTINGS[f].width) - 1) << SETTINGS[f].offset for f in OUTPUT_FIELDS)


@dataclass
class Gemm:
    k: int
    n_tiles: int
    m_tiles: int
    base: int
    depthwise: int
    stage: tuple
    same_output: bool

    @property
    def tiles(self):
        return self.n_tiles * self.m_tiles

    def desc(self):
        """The descriptor, its derived fields filled as hw.descriptor_check fills them."""
        n, m = self.n_tiles, self.m_tiles
        return descriptor_layout(MAX_COL_TILES).const({
            "k": self.k, "n_tiles": n, "base": self.base, "end": self.base + n, "depthwise": self.depthwise,
            "m_m1": m - 1, "n_m1": n - 1, "m_one": m == 1, "n_one": n == 1,
            **dict(zip(OUTPUT_FIELDS, self.stage, strict=True)), "same_output": self.same_output})

    def settings(self):
        """The core's settings while this GEMM runs, as bits."""
        return SETTINGS.const({"k_steps": self.k, "n_tiles": self.n_tiles, "table_base": self.base,
                               "depthwise": self.depthwise,
                               **dict(zip(OUTPUT_FIELDS, self.stage, strict=True))}).as_bits()

    def counts(self, n_width):
        return counts_layout(n_width).const({"m_m1": self.m_tiles - 1, "m_one": self.m_tiles == 1,
                                             "n_tiles": self.n_tiles}).as_bits()


def random_gemms(rng, n, p):
    """``n`` random GEMMs for a core of min_tile_steps ``p``."""
    gemms, prev = [], STAGES[0]
    for _ in range(n):
        k = max(1, rng.choice([1, 1, 2, 3, p - 1, p, p + 1, rng.randint(1, 3 * p)]))
        n_tiles, m_tiles = rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2, 3])
        base = rng.randrange(MAX_COL_TILES - n_tiles + 1)
        stage = prev if rng.random() < 0.6 else rng.choice(STAGES)
        gemms.append(Gemm(k, n_tiles, m_tiles, base, rng.randint(0, 1), stage, stage == prev))
        prev = stage
    return gemms


class Run:
    """One simulation: the per-cycle trace of the scheduler's outputs and the events of the model."""

    def __init__(self, cfg, gemms, seed, push_when=None, drain=None, full_rate=False, check_row=None):
        """``push_when(run, g, t)``: whether GEMM ``g`` may be pushed in cycle ``t`` (default: in random
        bursts and gaps); ``drain(g)``: cycles from GEMM ``g``'s last tile_end to its ``done`` (default:
        random); ``full_rate``: the core never idles; ``check_row(t)``: the row to check in cycle ``t``
        (default: random, often one of a queued or in-flight GEMM)."""
        self.cfg, self.gemms, self.seed = cfg, gemms, seed
        self.push_when, self.drain, self.full_rate, self.check_row = push_when, drain, full_rate, check_row
        self.p = cfg["min_tile_steps"]
        self.dut = GemmScheduler(max_col_tiles=MAX_COL_TILES, **cfg)
        n = len(gemms)
        self.push, self.first, self.first_tile_last, self.last = [None] * n, [None] * n, [None] * n, [None] * n
        self.tile_end, self.done, self.last_admit = [None] * n, [None] * n, [None] * n
        self.launched, self.counts = [], []
        self.trace = {name: [] for name in ("hold", "settings", "final_step", "row_busy", "check_row", "full",
                                            "queued", "in_flight", "active", "busy", "ready")}

    def where(self, g=None, t=None):
        at = f" (seed {self.seed}, {self.cfg}"
        at += f", GEMM {g}: {self.gemms[g]}" if g is not None else ""
        return at + (f", cycle {t})" if t is not None else ")")

    def simulate(self):
        dut, gemms, p, rng = self.dut, self.gemms, self.p, random.Random(self.seed)
        n = len(gemms)
        descs = [g.desc() for g in gemms]
        budget = 400 + sum(g.tiles * (max(g.k, p) + 4) * 3 + 150 for g in gemms)
        tr = self.trace

        async def bench(ctx):
            pulses = {}                          # cycle -> (admit, tile_end), from the core model
            in_tile, steps_left, tile_k, open_at = False, 0, 0, 0
            g_core, tiles_seen = 0, [0] * n      # the GEMM the core's tiles belong to
            pushed, last_push, push_at, eager = 0, -PUSH_SPACING, 0, True
            done_due, done_n = [], 0
            rate = 1.0
            t = 0
            while done_n < n or t <= self.done[-1] + ROW_BUSY_LAG + LEAVE_LAG:
                assert t < budget, f"timed out: {done_n} of {n} GEMMs done" + self.where(t=t)
                admit, tile_end = pulses.pop(t, (False, False))
                ctx.set(dut.gemm.admit, admit)
                ctx.set(dut.gemm.tile_end, tile_end)
                # Pushes: in bursts (as soon as the queue has room) or one by one after a gap.
                push = (pushed < n and t - last_push >= PUSH_SPACING and not ctx.get(dut.full)
                        and (self.push_when(self, pushed, t) if self.push_when else t >= push_at))
                ctx.set(dut.push, push)
                if push:
                    ctx.set(dut.desc, descs[pushed])
                    self.push[pushed], last_push = t, t
                    pushed += 1
                    if rng.random() < 0.15:
                        eager = not eager
                    push_at = t if eager else t + rng.randint(PUSH_SPACING, 80)
                # The framer's stand-in: each GEMM's done when due.
                done = done_n < len(done_due) and done_due[done_n] == t
                ctx.set(dut.done, done)
                if done:
                    self.done[done_n] = t
                    done_n += 1
                # A row of a queued or in-flight GEMM, or any row.
                live = [g for g in range(pushed) if self.done[g] is None]
                if self.check_row:
                    row = self.check_row(t)
                elif live and rng.random() < 0.6:
                    g = gemms[rng.choice(live)]
                    row = rng.randrange(g.base, g.base + g.n_tiles)
                    row = rng.choice([row, row, g.base - 1, g.base + g.n_tiles]) % MAX_COL_TILES
                else:
                    row = rng.randrange(MAX_COL_TILES)
                ctx.set(dut.check_row, row)

                hold = ctx.get(dut.gemm.hold)
                for name, sig in (("hold", dut.gemm.hold), ("settings", dut.gemm.settings.as_value()),
                                  ("final_step", dut.final_step), ("row_busy", dut.row_busy), ("full", dut.full),
                                  ("queued", dut.queued), ("in_flight", dut.in_flight), ("active", dut.active),
                                  ("busy", dut.busy)):
                    tr[name].append(ctx.get(sig))
                tr["check_row"].append(row)
                if ctx.get(dut.launched):
                    self.launched.append(t)
                    self.counts.append(ctx.get(dut.counts.as_value()))

                # The core: a step when its streams (and, for a tile's first step, credit) allow, it is
                # not padding a short tile, and for a tile's first step `hold` is low.
                if rng.random() < 1 / 60 and not self.full_rate:
                    rate = 1.0 if rate < 1 else rng.choice([0.3, 0.7])
                ready = rng.random() < rate
                tr["ready"].append(ready)
                if ready and t >= open_at and (in_tile or not hold):
                    if not in_tile:
                        while g_core < n and tiles_seen[g_core] == gemms[g_core].tiles:
                            g_core += 1
                        assert g_core < pushed, "a tile admitted with no GEMM left to run" + self.where(t=t)
                        tile_k = ctx.get(dut.gemm.settings.k_steps)
                        assert tile_k >= 1, "a tile admitted with K = 0" + self.where(g_core, t)
                        if tiles_seen[g_core] == 0:
                            self.first[g_core] = t
                        tiles_seen[g_core] += 1
                        if tiles_seen[g_core] == gemms[g_core].tiles:
                            self.last_admit[g_core] = t + ADMIT
                        in_tile, steps_left = True, tile_k
                        pulses[t + ADMIT] = (True, pulses.get(t + ADMIT, (False, False))[1])
                    steps_left -= 1
                    if steps_left == 0:
                        in_tile, open_at = False, t + 1 + max(0, p - tile_k)
                        pulses[t + ADMIT] = (pulses.get(t + ADMIT, (False, False))[0], True)
                        if tiles_seen[g_core] == 1:
                            self.first_tile_last[g_core] = t
                        if tiles_seen[g_core] == gemms[g_core].tiles:
                            self.last[g_core], self.tile_end[g_core] = t, t + ADMIT
                            after = done_due[-1] + DONE_SPACING if done_due else 0
                            drain = (self.drain(g_core) if self.drain else
                                     rng.choice([1, 2, rng.randint(1, 12), rng.randint(10, 60)]))
                            done_due.append(max(t + ADMIT + drain, after))
                await ctx.tick()
                t += 1

        simulate(dut, bench)
        return self


CONFIGS = [
    {"min_tile_steps": 2, "queue_depth": 4, "flight_depth": 4},
    # K < min_tile_steps - 6 makes gap(k) exceed GAP; a short queue and flight ring
    {"min_tile_steps": 12, "queue_depth": 2, "flight_depth": 2},
    {"min_tile_steps": 8, "queue_depth": 3, "flight_depth": 4},
]
N_GEMMS = 80


@pytest.fixture(scope="module", params=range(len(CONFIGS)), ids=[
    "p{min_tile_steps}_q{queue_depth}_f{flight_depth}".format(**c) for c in CONFIGS])
def run(request):
    """One random simulation per configuration, checked by each test below."""
    cfg = CONFIGS[request.param]
    s = SEED * 1000 + request.param
    return Run(cfg, random_gemms(random.Random(s), N_GEMMS, cfg["min_tile_steps"]), s).simulate()


def test_each_gemm_launched_once_in_order_with_its_counts(run):
    """One `launched` pulse per GEMM, in push order, each after its push, with the GEMM's counts for
    the framer (`counts`); every GEMM took its tiles and was done."""
    n_width = len(run.dut.counts.n_tiles)
    assert len(run.launched) == len(run.gemms), f"{len(run.launched)} launches" + run.where()
    for g, gemm in enumerate(run.gemms):
        assert run.launched[g] > run.push[g], "launched before it was pushed" + run.where(g, run.launched[g])
        assert run.counts[g] == gemm.counts(n_width), "counts for the framer" + run.where(g, run.launched[g])
        assert run.done[g] is not None, "never done" + run.where(g)


def test_settings_stable_from_settle_before_first_step_to_last_tile_end(run):
    """The core's settings change in the cycle of `launched` and hold from then, at least SETTLE cycles
    before the GEMM's first step, through its last tile_end; the output stage holds through its
    `done` (the core reads it at the end of the pipeline)."""
    s = run.trace["settings"]
    for g, gemm in enumerate(run.gemms):
        want, launched = gemm.settings(), run.launched[g]
        assert run.first[g] - launched >= GemmScheduler.SETTLE, \
            f"first step {run.first[g] - launched} cycles after the settings changed" + run.where(g, launched)
        for t in range(launched, run.tile_end[g] + 1):
            assert s[t] == want, f"settings {s[t]:#x}, want {want:#x}" + run.where(g, t)
        for t in range(launched, run.done[g] + 1):
            assert s[t] & OUTPUT_MASK == want & OUTPUT_MASK, "output stage changed before done" + run.where(g, t)


def test_hold_and_final_step(run):
    """No tile is admitted past a GEMM's last: `hold` is high from the cycle after the last tile's
    admit until the next GEMM's settings are SETTLE cycles old (the model takes a tile whenever hold
    is low, so a tile too many would also show in the settings' check). `final_step` is high exactly
    in the cycles of the core's tile_end for a GEMM's last step."""
    finals = [t for t, v in enumerate(run.trace["final_step"]) if v]
    assert finals == run.tile_end, f"final_step at {finals}, last tile_ends at {run.tile_end}" + run.where()
    hold = run.trace["hold"]
    for g in range(len(run.gemms)):
        end = run.launched[g + 1] + GemmScheduler.SETTLE if g + 1 < len(run.gemms) else len(hold)
        for t in range(run.last_admit[g] + 1, end):
            assert hold[t], "hold low after a GEMM's last admit, before the next may start" + run.where(g, t)


def check_gaps(run):
    """Each GEMM's first step at least gap(k) after the previous GEMM's last step, and its first tile's
    last step min_tile_steps after it (the array's need); exactly at the later of gap(k) and the core's
    padding after a short last tile when the GEMM was queued in time (its push request before the
    previous GEMM's `launched`), its output stage matches, the flight ring had room and the core ran
    at full rate.
    Returns the gaps checked exactly and how many of those had gap(k) > GAP."""
    sched, p, tr = run.dut, run.p, run.trace
    exact = short = 0
    for g in range(1, len(run.gemms)):
        gemm, prev = run.gemms[g], run.gemms[g - 1]
        gap = run.first[g] - run.last[g - 1]
        assert gap >= sched.gap(gemm.k), f"gap {gap}, gap(k) {sched.gap(gemm.k)}" + run.where(g, run.first[g])
        assert run.first_tile_last[g] - run.last[g - 1] >= p, "two tiles' last steps too close" + run.where(g)
        in_time = run.push[g] < run.launched[g - 1]
        room = tr["in_flight"][run.tile_end[g - 1]] < run.cfg["flight_depth"]
        full_rate = all(tr["ready"][run.last[g - 1] + 1:run.first[g] + 1])
        if gemm.same_output and in_time and room and full_rate:
            want = max(sched.gap(gemm.k), max(0, p - prev.k) + 1)
            assert gap == want, f"gap {gap}, want {want}" + run.where(g, run.first[g])
            exact += 1
            short += sched.gap(gemm.k) > sched.GAP
    return exact, short


def test_gap_between_gemms(run):
    """check_gaps on the random runs (which must check some gaps exactly, and with a min_tile_steps
    that makes gap(k) > GAP for a short K, some of those)."""
    exact, short = check_gaps(run)
    assert exact >= 5, f"only {exact} gaps checked exactly: the stimulus misses the case" + run.where()
    if run.dut.gap(1) > run.dut.GAP:
        assert short, "no gap(k) > GAP checked" + run.where()


@pytest.mark.parametrize("p", [2, 12])
def test_full_rate_gaps_exact(seed, p):
    """GEMMs of one output stage, all queued early, at full rate: every gap exactly as gap(k) (or the
    core's padding) says, K = 1, K < min_tile_steps, K = min_tile_steps +- 1, in both directions."""
    rng = random.Random(seed + p)
    ks = [p + 1, 1, 5, 1, 2, p, 3, 1, 1, p - 1, 6, 7, 1, 2 * p, 2, p + 1, 1]
    gemms = []
    for k in ks:
        n_tiles = rng.randint(1, 3)
        gemms.append(Gemm(k, n_tiles, rng.randint(1, 2), rng.randrange(MAX_COL_TILES - n_tiles + 1),
                          rng.randint(0, 1), STAGES[0], True))
    cfg = {"min_tile_steps": p, "queue_depth": 4, "flight_depth": 4}
    run = Run(cfg, gemms, seed, push_when=lambda run, g, t: True, drain=lambda g: 1, full_rate=True).simulate()
    exact, _ = check_gaps(run)
    assert exact == len(gemms) - 1, f"{exact} of {len(gemms) - 1} gaps checked exactly" + run.where()


def test_new_output_stage_waits_for_every_gemm_done(run):
    """A GEMM whose output stage differs from the last one's is launched only after every earlier
    GEMM's `done`."""
    changes = 0
    for g, gemm in enumerate(run.gemms):
        if not gemm.same_output:
            late = [h for h in range(g) if run.done[h] >= run.launched[g]]
            assert not late, f"launched before GEMMs {late} were done" + run.where(g, run.launched[g])
            changes += g > 0
    assert changes, "no change of output stage" + run.where()


def test_new_output_stage_pushed_into_an_empty_queue_waits():
    """Directed: queue_depth + 1 GEMMs of one output stage (so the ring's slots hold same_output = 1),
    the last still in flight (its results draining) when a GEMM of another output stage is pushed
    into the empty queue: that GEMM must wait for the last one's `done`."""
    q = 2
    cfg = {"min_tile_steps": 2, "queue_depth": q, "flight_depth": 4}
    gemms = [Gemm(3, 1, 1, 0, 0, STAGES[0], True) for _ in range(q + 1)]
    gemms.append(Gemm(3, 1, 1, 1, 0, STAGES[1], False))

    def push_when(run, g, t):  # the last GEMM once the one before has taken all its steps
        return g < q + 1 or (run.tile_end[g - 1] is not None and t > run.tile_end[g - 1] + GemmScheduler.GAP)

    drain = 10 * GemmScheduler.GAP
    run = Run(cfg, gemms, 1, push_when=push_when, drain=lambda g: drain if g == q else 1, full_rate=True).simulate()
    assert run.launched[-1] > run.done[q], \
        f"launched in cycle {run.launched[-1]}, GEMM {q} done in cycle {run.done[q]}" + run.where(q + 1)


def row_busy_model(run, s):
    """Whether check_row of cycle ``s`` is in the table range of a GEMM pushed (from its push request)
    and not done (up to the cycle of its `done`) in cycle ``s``."""
    row = run.trace["check_row"][s]
    return any(run.push[g] is not None and run.push[g] <= s and (run.done[g] is None or s <= run.done[g])
               and gemm.base <= row < gemm.base + gemm.n_tiles for g, gemm in enumerate(run.gemms))


def test_row_busy_four_cycles_late(run):
    """`row_busy` says, ROW_BUSY_LAG cycles late, whether `check_row` was in the table range of a
    queued or in-flight GEMM (row_busy_model), in every cycle, launches included."""
    tr, seen = run.trace, 0
    for t in range(len(tr["row_busy"])):
        s = t - ROW_BUSY_LAG
        want = s >= 0 and row_busy_model(run, s)
        assert tr["row_busy"][t] == want, \
            f"row_busy {tr['row_busy'][t]} for row {tr['check_row'][s]} of cycle {s}" + run.where(t=t)
        seen += want
    assert seen, "row_busy never high" + run.where()


def test_row_busy_high_through_a_launch():
    """Directed: one GEMM's first table row checked in every cycle: `row_busy` rises ROW_BUSY_LAG
    cycles after the push request and stays high, through the GEMM's launch, up to ROW_BUSY_LAG cycles
    after its `done` (the rows are freed a cycle after `done`)."""
    gemm = Gemm(2, 2, 1, 3, 0, STAGES[0], True)
    cfg = {"min_tile_steps": 2, "queue_depth": 4, "flight_depth": 4}
    run = Run(cfg, [gemm], 1, push_when=lambda run, g, t: t >= ROW_BUSY_LAG, drain=lambda g: 1, full_rate=True,
              check_row=lambda t: gemm.base).simulate()
    busy = [t for t, v in enumerate(run.trace["row_busy"]) if v]
    want = list(range(run.push[0] + ROW_BUSY_LAG, run.done[0] + ROW_BUSY_LAG + 1))
    assert busy == want, f"row_busy in cycles {busy}, want {want[0]}..{want[-1]} (launched {run.launched[0]})"


def test_queue_and_flight_status(run):
    """`queued` counts the descriptors pushed (QUEUED_LAG cycles after the request) and not launched,
    `full` is `queued` == queue_depth (the stimulus fills the queue), `in_flight` the GEMMs launched
    and not done (LEAVE_LAG cycles after `done`), at most flight_depth; `active` is high from each
    launch through its last tile_end (with a cycle's slack either side) and `busy` is any of them."""
    tr, q_depth = run.trace, run.cfg["queue_depth"]
    spans = list(zip(run.launched, run.tile_end, strict=True))
    for t in range(len(tr["queued"])):
        queued = sum(p <= t - QUEUED_LAG for p in run.push) - sum(lt <= t for lt in run.launched)
        in_flight = sum(lt <= t for lt in run.launched) - sum(d <= t - LEAVE_LAG for d in run.done)
        got = (tr["queued"][t], tr["full"][t], tr["in_flight"][t])
        assert got == (queued, queued == q_depth, in_flight), f"queued, full, in_flight {got}" + run.where(t=t)
        assert in_flight <= run.cfg["flight_depth"], f"{in_flight} GEMMs in flight" + run.where(t=t)
        if any(lt <= t <= te for lt, te in spans):
            assert tr["active"][t], "not active while a GEMM takes steps" + run.where(t=t)
        if not any(lt - 1 <= t <= te + 1 for lt, te in spans):
            assert not tr["active"][t], "active with no GEMM taking steps" + run.where(t=t)
        assert tr["busy"][t] == (queued > 0 or tr["active"][t] or in_flight > 0), "busy" + run.where(t=t)
    assert any(tr["full"]), "the queue never filled" + run.where()
