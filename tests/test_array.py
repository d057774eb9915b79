"""hw.array alone in Amaranth's simulator, every output in every cycle against a Python model of its contract.

The model (written here, from the docstrings of :mod:`hw.array`, not from the RTL): a tile is the run of
valid steps up to one with ``last``; cell (i, j) sums ``a[i] * w[j]`` over its steps (on a depthwise step
``a[j * rows + i] * w[j]``) in int32; row i of the tile is presented on ``row_*`` for one cycle,
:attr:`SystolicArray.latency` + i cycles after the tile's last step, carrying the tag presented with that
step, and ``row_valid`` is low in every other cycle. Tiles' last steps are at least
:attr:`SystolicArray.min_tile_steps` cycles apart, as the array requires.

:class:`MACCell` likewise: ``a_out``/``w_out``/``flags_out`` are its inputs :attr:`MACCell.latency` cycles
late (``a_out`` the right-hand neighbour's ``a_dw`` on a depthwise step), and a valid ``last`` step entered in
cycle s presents the sum before its product on ``out`` and that product on ``out_last`` in cycle
s + :attr:`MACCell.result_latency`, both zero in every other cycle.

Stimulus: random tiles with K = 1, K = min_tile_steps - 1, min_tile_steps, + 1 and random K, random idle
gaps (carrying random data, ``last``, ``depthwise`` and tag, which must be ignored), GEMM and depthwise
tiles and depthwise chosen per step, int8 extremes, on 1x1, 2x3, 3x2 and 5x1 arrays (5 rows: two groups
of the read-out's OR tree).
"""

import numpy as np
import pytest
from amaranth.back import rtlil

from int8_systolic.hw.array import MACCell, SystolicArray
from int8_systolic.sim.amaranth_bench import simulate

SHAPES = [(1, 1), (2, 3), (3, 2), (5, 1)]
TAG_WIDTH = 8


def wrap32(v):
    return (int(v) + 2**31) % 2**32 - 2**31


def int8s(rng, n, p_extreme=0.15):
    """``n`` random int8 values, a share of them -128 or 127."""
    v = rng.integers(-128, 128, n)
    return [int(x) for x in np.where(rng.random(n) < p_extreme, rng.choice([-128, 127], n), v)]


def idle_step(rng, rows, cols):
    """A cycle without a step: ``valid`` low, everything else random (the array must ignore it)."""
    return {"valid": 0, "last": int(rng.integers(2)), "depthwise": int(rng.integers(2)),
            "a": int8s(rng, rows * cols), "w": int8s(rng, cols), "tag": int(rng.integers(2**TAG_WIDTH))}


def schedule(rng, rows, cols, min_tile_steps, ks, p_idle, depthwise):
    """Per-cycle inputs for tiles of ``ks`` steps: random idle cycles (probability ``p_idle`` before each
    step), and before a random step of each tile as many as keep last steps ``min_tile_steps`` cycles
    apart (no more). ``depthwise(tile, k)`` gives a step's mode."""
    cycles, prev_last = [], None
    for n, K in enumerate(ks):
        pad_at = int(rng.integers(K))
        for k in range(K):
            while rng.random() < p_idle:
                cycles.append(idle_step(rng, rows, cols))
            if k == pad_at and prev_last is not None:
                while len(cycles) + (K - 1 - k) < prev_last + min_tile_steps:
                    cycles.append(idle_step(rng, rows, cols))
            step = idle_step(rng, rows, cols)
            step.update(valid=1, last=int(k == K - 1), depthwise=int(depthwise(n, k)))
            cycles.append(step)
        prev_last = len(cycles) - 1
    return cycles


def array_model(rows, cols, cycles, latency):
    """The contract: ``{cycle: (tag, row)}`` for every row presented; no entry means ``row_valid`` low."""
    acc = [[0] * cols for _ in range(rows)]
    rows_out = {}
    for t, s in enumerate(cycles):
        if not s["valid"]:
            continue
        for i in range(rows):
            for j in range(cols):
                a = s["a"][j * rows + i] if s["depthwise"] else s["a"][i]
                acc[i][j] += a * s["w"][j]
        if s["last"]:
            for i in range(rows):
                at = t + latency + i
                assert at not in rows_out, "stimulus error: two rows due in one cycle"
                rows_out[at] = (s["tag"], [wrap32(v) for v in acc[i]])
            acc = [[0] * cols for _ in range(rows)]
    return rows_out


def run_array(dut, cycles):
    """Drive ``cycles`` (then idle cycles until the last row is out); return ``row_*`` of every cycle."""
    tail = dut.latency + dut.rows + 2
    rng = np.random.default_rng(0)
    cycles = cycles + [idle_step(rng, dut.rows, dut.cols) for _ in range(tail)]
    seen = []

    async def bench(ctx):
        for s in cycles:
            ctx.set(dut.flags, {"valid": s["valid"], "last": s["last"], "depthwise": s["depthwise"]})
            ctx.set(dut.a, s["a"])
            ctx.set(dut.w, s["w"])
            ctx.set(dut.tag, s["tag"])
            if ctx.get(dut.row_valid):
                data = ctx.get(dut.row_data)
                seen.append((1, ctx.get(dut.row_tag), [int(data[j]) for j in range(dut.cols)]))
            else:
                seen.append((0, None, None))
            await ctx.tick()

    simulate(dut, bench)
    return cycles, seen


def check_array(dut, cycles):
    """Run ``cycles`` and compare ``row_valid`` in every cycle, ``row_tag``/``row_data`` when valid; returns
    the number of rows compared."""
    cycles, seen = run_array(dut, cycles)
    want = array_model(dut.rows, dut.cols, cycles, dut.latency)
    assert max(want, default=0) < len(cycles), "stimulus error: a row due after the run"
    for t, (valid, tag, row) in enumerate(seen):
        exp = want.get(t)
        assert valid == (exp is not None), (f"{dut.rows}x{dut.cols} cycle {t}: row_valid {valid}, contract "
                                            f"{int(exp is not None)} (rows due at {sorted(want)[:8]}...)")
        if exp is not None:
            assert (tag, row) == exp, f"{dut.rows}x{dut.cols} cycle {t}: row (tag, data) {(tag, row)}, want {exp}"
    return len(want)


def tile_lengths(rng, min_tile_steps, n):
    """K of ``n`` tiles: the corners (1, min_tile_steps - 1, min_tile_steps, min_tile_steps + 1) and random."""
    corners = [k for k in (1, min_tile_steps - 1, min_tile_steps, min_tile_steps + 1) if k >= 1]
    return [int(rng.choice(corners)) if rng.random() < 0.6 else int(rng.integers(1, 3 * min_tile_steps + 4))
            for _ in range(n)]


@pytest.mark.parametrize(("rows", "cols"), SHAPES)
def test_array_rows_match_model_with_gaps(seed, rows, cols):
    """Random K (corners included), random idle gaps carrying junk, tiles GEMM or depthwise at random: every
    row at latency + i after its tile's last step with its sums and tag, row_valid low otherwise."""
    rng = np.random.default_rng(seed + 10 * rows + cols)
    dut = SystolicArray(rows, cols, tag_width=TAG_WIDTH)
    ks = tile_lengths(rng, dut.min_tile_steps, 120)
    modes = [bool(rng.integers(2)) for _ in ks]
    cycles = schedule(rng, rows, cols, dut.min_tile_steps, ks, p_idle=0.3, depthwise=lambda n, k: modes[n])
    assert check_array(dut, cycles) == rows * len(ks)


@pytest.mark.parametrize(("rows", "cols"), SHAPES)
def test_array_back_to_back_at_min_tile_steps(seed, rows, cols):
    """No idle cycle beyond what the array requires: tiles of K = min_tile_steps back to back (rows of
    consecutive tiles leave without a gap), then K = 1 tiles min_tile_steps apart, in both modes, with
    int8 extremes more often."""
    rng = np.random.default_rng(seed + 100 + 10 * rows + cols)
    dut = SystolicArray(rows, cols, tag_width=TAG_WIDTH)
    p = dut.min_tile_steps
    ks = [p] * 30 + [1] * 30 + [p] * 10
    cycles = schedule(rng, rows, cols, p, ks, p_idle=0.0, depthwise=lambda n, k: n % 3 == 1)
    assert check_array(dut, cycles) == rows * len(ks)
    # the full-rate part really was back to back: last steps exactly min_tile_steps apart
    lasts = [t for t, s in enumerate(cycles) if s["valid"] and s["last"]]
    assert set(np.diff(lasts)) == {p}


@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (3, 2)])
def test_array_depthwise_chosen_per_step(seed, rows, cols):
    """``flags.depthwise`` is per step: tiles mixing GEMM and depthwise steps sum each step in its own mode."""
    rng = np.random.default_rng(seed + 200 + 10 * rows + cols)
    dut = SystolicArray(rows, cols, tag_width=TAG_WIDTH)
    ks = tile_lengths(rng, dut.min_tile_steps, 80)
    modes = rng.integers(2, size=(len(ks), max(ks)))
    cycles = schedule(rng, rows, cols, dut.min_tile_steps, ks, p_idle=0.2, depthwise=lambda n, k: modes[n, k])
    assert check_array(dut, cycles) == rows * len(ks)


@pytest.mark.parametrize(("rows", "cols", "rings"), [(4, 4, 7), (2, 6, 8)])
def test_array_with_ring_delays_matches_model(seed, rows, cols, rings):
    """``ring_delays``: the delay lines of three cycles and more in LUT-RAM rings (``rings`` of them: the
    depthwise lines with i + j - 1 >= 3 and the deskew lines with cols - 1 - j >= 3, counted in the netlist) give
    the same rows in the same cycles: random K and gaps in both modes, then tiles back to back."""
    rng = np.random.default_rng(seed + 400 + 10 * rows + cols)
    dut = SystolicArray(rows, cols, tag_width=TAG_WIDTH, ring_delays=True)
    assert rtlil.convert(dut).count("\n  memory ") == rings
    ks = tile_lengths(rng, dut.min_tile_steps, 60) + [dut.min_tile_steps] * 20
    modes = rng.integers(2, size=(len(ks), max(ks)))
    cycles = schedule(rng, rows, cols, dut.min_tile_steps, ks, p_idle=0.2,
                      depthwise=lambda n, k: modes[n, k] if n < 60 else n % 2)
    assert check_array(dut, cycles) == rows * len(ks)


def test_array_first_tile_after_reset_and_extreme_sums():
    """The first tile after reset starts from zero; the largest and smallest sums a few steps reach
    (-128 * -128 and -128 * 127 throughout) come out exact in both modes."""
    dut = SystolicArray(2, 3, tag_width=TAG_WIDTH)
    rng = np.random.default_rng(5)
    cycles = []
    for a, w, dw in ((-128, -128, 0), (-128, 127, 0), (127, 127, 1), (-128, -128, 1)):
        for k in range(dut.min_tile_steps + 3):
            step = idle_step(rng, 2, 3)
            step.update(valid=1, last=int(k == dut.min_tile_steps + 2), depthwise=dw, a=[a] * 6, w=[w] * 3)
            cycles.append(step)
    assert check_array(dut, cycles) == 2 * 4


def run_cell(cell, steps):
    seen = []

    async def bench(ctx):
        for s in steps:
            ctx.set(cell.a, s["a"])
            ctx.set(cell.a_dw, s["a_dw"])
            ctx.set(cell.w, s["w"])
            ctx.set(cell.flags, {"valid": s["valid"], "last": s["last"], "depthwise": s["depthwise"]})
            flags = ctx.get(cell.flags_out)
            seen.append({"a_out": ctx.get(cell.a_out), "w_out": ctx.get(cell.w_out),
                         "flags_out": (flags.valid, flags.last, flags.depthwise),
                         "out": ctx.get(cell.out), "out_last": ctx.get(cell.out_last)})
            await ctx.tick()

    simulate(cell, bench)
    return seen


def cell_model(steps):
    """The cell's contract, per cycle: the forwarded values (``None`` before any input reached them) and
    ``(out, out_last)``."""
    L, RL = MACCell.latency, MACCell.result_latency
    n = len(steps)
    want = [{"a_out": None, "w_out": None, "flags_out": None, "out": 0, "out_last": 0} for _ in range(n)]
    acc = 0
    for s, x in enumerate(steps):
        if s + L < n:
            want[s + L].update(a_out=x["a_dw"] if x["depthwise"] else x["a"], w_out=x["w"],
                               flags_out=(x["valid"], x["last"], x["depthwise"]))
        if x["valid"]:
            product = x["a"] * x["w"]
            if x["last"]:
                if s + RL < n:
                    want[s + RL].update(out=wrap32(acc), out_last=product)
                acc = 0
            else:
                acc += product
    return want


def test_mac_cell_contract(seed):
    """MACCell alone: forwarded a/w/flags (a_dw on depthwise steps) latency cycles late; a valid last step's
    sum before its product on ``out`` and the product on ``out_last`` result_latency cycles after it entered,
    both zero in every other cycle; tiles of any length, one-step tiles back to back included."""
    rng = np.random.default_rng(seed + 300)
    steps = []
    for _ in range(1500):
        valid = int(rng.random() < 0.75)
        last = int(rng.random() < (0.5 if rng.random() < 0.2 else 0.15))
        a, a_dw, w = int8s(rng, 3)
        steps.append({"valid": valid, "last": last, "depthwise": int(rng.integers(2)), "a": a, "a_dw": a_dw, "w": w})
    # a long tile of -128 * -128 products (sums far beyond int16)
    steps += [{"valid": 1, "last": int(k == 99), "depthwise": 0, "a": -128, "a_dw": 0, "w": -128} for k in range(100)]
    steps += [{"valid": 0, "last": 0, "depthwise": 0, "a": 0, "a_dw": 0, "w": 0}] * (MACCell.result_latency + 2)
    cell = MACCell()
    got, want = run_cell(cell, steps), cell_model(steps)
    results = 0
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        for name, v in w.items():
            if v is not None:
                assert g[name] == v, f"cycle {t}: {name} {g[name]}, contract {v}"
        results += w["out"] != 0 or w["out_last"] != 0
    assert results > 100
