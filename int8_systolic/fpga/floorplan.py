"""Floorplan for the LFE5U-85F: where each MAC cell's and each lane's MULT18X18D goes, and each
lane's block RAMs (table and output FIFO).

The LFE5U-85F has its 156 MULT18X18D sites in three rows across the die (Y = 10, 34 and 58,
52 sites each, at the X positions below; read from nextpnr's placement of a design using all
156). Left to itself, nextpnr's placer scattered the 8x8 accelerator's 96 multipliers over the
three rows with no order (array columns split between rows, neighbours 60 columns apart, a
lane's four partial products on two rows), and the routed design lost most of its cycle to
the long routes between them.

The floorplan follows the dataflow instead:

* array column j takes ``rows`` consecutive sites, cell (i, j) at site ``i``: weights move down
  a column between neighbouring sites, and the column's read-out OR stays local;
* columns fill the middle row (Y = 34) left to right, then the top row (Y = 58) right to left,
  so the activations crossing from one row to the next go straight up at the right edge;
* each requantizer lane takes four consecutive sites of the bottom row (Y = 10), as close to
  below its column as the free sites allow;
* each lane's per-channel table (four DP16KDs) on consecutive block RAM sites of the row above
  the lanes (Y = 22), as close to above its lane as the free sites allow; the output FIFOs'
  block RAMs (two per lane) side by side in the middle of the row between the array's rows
  (Y = 46), so that the FIFOs' queues, which ``res.ready`` reaches, are near each other (left to
  the placer, they followed their lanes across 110 columns).

It applies when the array fits in two rows and the lanes in the third (``rows * cols <= 104``
with whole columns per row, ``4 * cols <= 52``: every ECP5 configuration of the scaling set);
otherwise :func:`ecp5_floorplan` returns None and nextpnr places the multipliers itself. The
block RAMs are placed when the tables and the FIFOs fit their rows (they do up to 10x10).
Constraints are nextpnr ``BEL`` attributes on the synthesized netlist's cells.
"""

import json
import pathlib

__all__ = ["apply", "ecp5_floorplan"]

# MULT18X18D sites of the LFE5U-85F: X position -> bel name (the same in each DSP row).
_X_BELS = {base + offset: bel
           for base in (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
           for offset, bel in ((0, "MULT18_0"), (1, "MULT18_1"), (4, "MULT18_4"), (5, "MULT18_5"))}
_XS = sorted(_X_BELS)
_ARRAY_ROWS = (34, 58)   # the array: middle row left to right, then top row right to left
_LANE_ROW = 10
_PARTIALS = ("ll", "lh", "hl", "hh")


def _site(x, y):
    return f"X{x}/Y{y}/{_X_BELS[x]}"


def ecp5_floorplan(rows, cols, block="accelerator"):
    """``{cell name: bel}`` for the MULT18X18D (and, for the accelerator, DP16KD) cells of a ``block``
    (see :mod:`fpga.synth`), or None."""
    per_row = len(_XS) // rows
    # (the AXI top and the engine hold the accelerator as their submodule `core`: the same plan one level down)
    top = "core.core." if block in ("axi", "engine") else "core."
    # (the engine never asks for the int32 bypass, so synthesis keeps 8 bits of each output FIFO lane: one block RAM)
    fifo_brams = 1 if block == "engine" else 2
    block = "accelerator" if block in ("axi", "engine") else block
    has_array, has_lanes = block in ("accelerator", "array"), block in ("accelerator", "lane")
    if has_array and (per_row == 0 or cols > per_row * len(_ARRAY_ROWS)):
        return None
    if block == "accelerator" and 4 * cols > len(_XS):
        return None
    plan, column_x, lane_x = {}, [], []
    if has_array:
        prefix = f"{top}array." if block == "accelerator" else top
        for j in range(cols):
            dsp_row, k = divmod(j, per_row)
            slots = [k * rows + i for i in range(rows)]
            if dsp_row == 1:  # snake: the top row runs right to left
                slots = [len(_XS) - 1 - s for s in slots]
            y = _ARRAY_ROWS[dsp_row]
            for i, s in enumerate(slots):
                plan[f"{prefix}pe_{i}_{j}.mul.dsp"] = _site(_XS[s], y)
            column_x.append(sum(_XS[s] for s in slots) / rows)
    if has_lanes:
        lanes = [f"{top}requant{j}." for j in range(cols)] if block == "accelerator" else [f"{top}rq."]
        free = [True] * len(_XS)
        for j, prefix in enumerate(lanes):
            want = column_x[j] if column_x else _XS[4 * j]
            starts = [s for s in range(len(_XS) - 3) if all(free[s:s + 4])]
            start = min(starts, key=lambda s: abs(sum(_XS[s:s + 4]) / 4 - want))
            for n, name in enumerate(_PARTIALS):
                free[start + n] = False
                plan[f"{prefix}mul_{name}.dsp"] = _site(_XS[start + n], _LANE_ROW)
            lane_x.append(sum(_XS[start:start + len(_PARTIALS)]) / len(_PARTIALS))
    if block == "accelerator":
        plan.update(_bram_plan(lane_x, top, fifo_brams))
    return plan


# DP16KD sites of the LFE5U-85F in a block RAM row (rows of 52, Y = 22 and 46 among them, at the
# X positions of the multiplier sites' groups; read from nextpnr's placement of the 8x8, which
# used 48): X position -> bel name.
_EBR_BELS = {base + offset: f"EBR{n}" for base in (4, 13, 22, 31, 40, 49, 58, 69, 78, 87, 96, 105, 114)
             for n, offset in enumerate((0, 2, 4, 6))}
_EBR_XS = sorted(_EBR_BELS)
_TABLE_ROW, _FIFO_ROW = 22, 46
_TABLE_BRAMS = 4


def _bram_plan(lane_x, top="core.", fifo_brams=2):
    """Block RAM sites: each lane's table (four DP16KDs) on consecutive sites of the row above the
    lanes, as close to above the lane as free sites allow; the output FIFOs (``fifo_brams`` per lane) on
    consecutive sites in the middle of the row between the array's two rows, in the lanes' order, so
    every lane's queue, and with them the ``res.ready`` net, sits in a band a few dozen columns
    wide."""
    plan = {}
    free = [True] * len(_EBR_XS)
    for j, want in enumerate(lane_x):
        starts = [s for s in range(len(_EBR_XS) - _TABLE_BRAMS + 1) if all(free[s:s + _TABLE_BRAMS])]
        if not starts:
            return {}
        start = min(starts, key=lambda s: abs(sum(_EBR_XS[s:s + _TABLE_BRAMS]) / _TABLE_BRAMS - want))
        for k in range(_TABLE_BRAMS):
            free[start + k] = False
            x = _EBR_XS[start + k]
            plan[f"{top}table{j}.bram{k}"] = f"X{x}/Y{_TABLE_ROW}/{_EBR_BELS[x]}"
    count = fifo_brams * len(lane_x)
    if count > len(_EBR_XS):
        return {}
    start = (len(_EBR_XS) - count) // 2
    xs = _EBR_XS[start:start + count]
    for n, j in enumerate(sorted(range(len(lane_x)), key=lambda j: lane_x[j])):  # in the lanes' order
        for k in range(fifo_brams):
            x = xs[fifo_brams * n + k]
            plan[f"{top}fifo{j}.bram{k}"] = f"X{x}/Y{_FIFO_ROW}/{_EBR_BELS[x]}"
    return plan


def apply(netlist_path, plan):
    """Write ``plan`` as nextpnr ``BEL`` attributes into a Yosys JSON netlist; return the count placed.

    Raises ValueError if a planned cell is not in the netlist (a renamed cell would otherwise be
    left to the placer silently)."""
    path = pathlib.Path(netlist_path)
    netlist = json.loads(path.read_text())
    cells = netlist["modules"]["top"]["cells"]
    missing = sorted(set(plan) - set(cells))
    if missing:
        raise ValueError(f"floorplan names {len(missing)} cells missing from {path}: {missing[:3]}")
    for name, bel in plan.items():
        cells[name].setdefault("attributes", {})["BEL"] = bel
    path.write_text(json.dumps(netlist))
    return len(plan)
