"""Functional coverage of the RTL regression (cocotb-coverage), sampled from what the RTL saw.

The model (:data:`MODEL`) is four groups of coverpoints, each a list of named bins:

* ``requantizer``: every shift -31..+30, the multiplier classes, the pre-shift wrap (double
  rounding) or the result wrap (single), SRDHM's INT32_MIN x INT32_MIN saturation, every exact
  rounding tie (RoundingDivideByPOT's at each right shift 1..31 and either sign; single
  rounding's at each shift and either sign), the output-offset wrap, the clamp, bypass and
  the two rounding builds;
* ``array``: K classes, raw sums beyond 2^30 and wrapping int32, M and N not multiples of the
  array, one and many column tiles, the tables full, tiles back to back at the shortest period;
  both modes (GEMM and depthwise), the depthwise GEMMs' K classes and partial and many column
  tiles, and a GEMM of either mode following one of the other through the AXI top's queue before
  the first one's results are out (sampled by the AXI top's testbench, :func:`sample_mode_switches`);
* ``engine``: the memory engine's layers as its testbench (:mod:`sim.tb_engine`) checked them: ops,
  geometries, channels, depth multipliers, zero points at both ends, inputs read from memory or kept
  on chip, tensors across 4 KB; each refusal provoked; a reset mid-list
  (:func:`sample_engine_layer`);
* ``flow``: inputs held off by credit (output FIFO full), backpressure on ``res`` while the
  FIFO drains, idle gaps on each input alone, a reset mid-stream.

:class:`Monitor` is fed by the testbench with the handshaken transfers (``act``, ``wts``,
``cfg``: a payload counts only in the cycle its valid and ready were both high), the layer
inputs it set and, per cycle, the ports' flow-control state. At the end of each GEMM it
rebuilds, from those transfers alone, every tile's raw accumulators and the table entry each
result row used, runs the golden model's fixed-point arithmetic on them to find the
intermediate values the requantizer lanes computed, and samples the bins those hit. (The
outputs themselves are checked by the scoreboard; coverage says what was exercised.) A bin's
hit count is the number of GEMMs (or, for ``flow``, events) in which it occurred.

Each simulation writes ``coverage.yml``/``coverage.xml`` (:func:`export`); :func:`merge` adds
several (``cocotb_coverage.coverage.merge_coverage``) and :func:`table` prints bin groups
with hit/total and the bins never hit.
"""

import itertools
import pathlib

import numpy as np

from int8_systolic.golden.fixedpoint import (
    INT32_MAX,
    INT32_MIN,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from int8_systolic.golden.fixedpoint import wrap_int32_in_int64 as _wrap32
from int8_systolic.hw.depthwise_gen import input_split

__all__ = ["MODEL", "Monitor", "classify", "export", "merge", "sample", "sample_engine_layer", "sample_mode_switches",
           "table", "unhit"]


def _tie_labels_double():
    return [f"{sign}>>{e}" for sign in ("pos", "neg") for e in range(1, 32)]


def _tie_labels_single():
    # A positive tie at shift -31 would need acc * m = 2**61 with |acc|, m < 2**31: impossible.
    return [f"{sign}@{s}" for sign in ("pos", "neg") for s in range(-31, 31) if (sign, s) != ("pos", -31)]


# group -> coverpoint -> bins. Names must not contain "bin" (cocotb-coverage's XML merge treats
# any element whose tag contains "bin" as a bin).
MODEL = {
    "requantizer": {
        "build": ["double", "single"],
        "bypass": ["off", "on"],
        "shift": list(range(-31, 31)),
        "multiplier": ["zero", "below 2^-20", "[2^30, 2^31)"],
        "double_pre_shift": ["wraps"],
        "double_srdhm": ["saturates"],
        "double_rdbpot_tie": _tie_labels_double(),
        "single_result": ["wraps"],
        "single_tie": _tie_labels_single(),
        "output_offset": ["wraps"],
        "clamp": ["low", "high", "inside"],
    },
    "array": {
        "k_steps": ["1", "1 < K < max(rows, cols)", "K = max(rows, cols)", "max(rows, cols) < K < 4096", "K >= 4096"],
        "raw_sum": ["|sum| >= 2^30", "wraps int32"],
        "partial_tiles": ["M not a multiple of rows", "N not a multiple of cols"],
        "column_tiles": ["one", "many", "tables full (max_col_tiles)"],
        "tile_period": ["back to back at the shortest period"],
        "mode": ["GEMM", "depthwise"],
        "depthwise_shape": ["K = 1", "1 < K < max(rows, cols)", "K >= max(rows, cols)", "N not a multiple of cols",
                            "many column tiles"],
        "mode_switch": ["GEMM then depthwise, not drained", "depthwise then GEMM, not drained"],
    },
    "engine": {
        "op": ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"],
        "geometry": ["stride 2", "dilation 2", "SAME with padding taps", "VALID", "1x1 kernel", "batch > 1",
                     "depthwise input split by parity (stride 2)"],
        "channels": ["1 input channel", "outputs not a multiple of cols", "several column tiles"],
        "depth_multiplier": ["1", "2 to cols", "above cols"],
        "zero_points": ["input -128", "input 127", "output -128", "output 127"],
        "activation": ["clamped inside int8"],
        "input": ["read from memory", "kept on chip (the last layer's output)", "row-stacked (few channels)",
                  "the last layer's output read from memory (after its drain)", "kept on chip split by parity"],
        "addresses": ["a tensor across a 4 KB boundary"],
        "weights": ["read ahead as one run (weights_ahead)"],
        "refusal": ["BAD_OP", "BAD_FIELD", "INCONSISTENT", "UNSUPPORTED", "TOO_BIG", "MISALIGNED", "WINDOW"],
        "reset": ["mid-list"],
    },
    "flow": {
        "holdoff": ["inputs held off by credit (output FIFO full)"],
        "res_backpressure": ["during drain"],
        "input_gaps": ["act idle alone", "wts idle alone"],
        "reset": ["mid-stream"],
    },
}

_points = {}


def _define():
    """Register every coverpoint with cocotb-coverage (a sampling function per point, called with
    the set of labels a GEMM or event produced)."""
    from cocotb_coverage.coverage import CoverPoint

    for group, points in MODEL.items():
        for point, bins in points.items():
            name = f"top.{group}.{point}"
            assert "bin" not in name, name

            @CoverPoint(name, xf=lambda labels: labels, rel=lambda labels, b: b in labels, bins=bins, inj=False)
            def sample(labels):
                pass

            _points[(group, point)] = sample


def sample(group, point, labels):
    """Sample ``labels`` (an iterable of bin names) into one coverpoint."""
    if not _points:
        _define()
    labels = set(labels)
    if labels:
        _points[(group, point)](labels)


def classify(acc, multiplier, shift, output_offset, act_min, act_max, rounding):
    """Bins of the ``requantizer`` group hit by elements ``acc`` (int32 accumulators, bias included)
    with per-element ``multiplier`` and ``shift`` (broadcast). Returns {point: set of labels}."""
    acc = _wrap32(acc)
    m = np.broadcast_to(np.asarray(multiplier, np.int64), acc.shape)
    s = np.broadcast_to(np.asarray(shift, np.int64), acc.shape)
    hits = {"shift": {int(v) for v in np.unique(s) if -31 <= v <= 30}}
    valid = (s >= -31) & (s <= 30)
    acc, m, s = acc[valid], m[valid], s[valid]
    real_small = (m > 0) & (m * np.exp2(s.astype(np.float64) - 31) < 2.0**-20)
    hits["multiplier"] = {label for label, hit in (("zero", (m == 0).any()), ("below 2^-20", real_small.any()),
                                                   ("[2^30, 2^31)", ((m >= 2**30) & (m < 2**31)).any())) if hit}
    if rounding == "double":
        left = np.maximum(s, 0)
        exact = acc << left
        pre = _wrap32(exact)
        hits["double_pre_shift"] = {"wraps"} if (pre != exact).any() else set()
        hits["double_srdhm"] = {"saturates"} if ((pre == INT32_MIN) & (m == INT32_MIN)).any() else set()
        # the multiplier's low 32 bits, as the RTL's signed(32) table field holds them
        x = saturating_rounding_doubling_high_mul(pre, _wrap32(m)).astype(np.int64)
        e = np.maximum(-s, 0)
        tie = (e > 0) & ((x & ((np.int64(1) << e) - 1)) == (np.int64(1) << np.maximum(e - 1, 0)))
        hits["double_rdbpot_tie"] = {f"{'pos' if xv >= 0 else 'neg'}>>{ev}"
                                     for xv, ev in zip(x[tie], e[tie], strict=True)}
        scaled = rounding_divide_by_pot(x, e).astype(np.int64)
    else:
        m = m & 0x7FFFFFFF if (m < 0).any() else m   # (golden refuses negative multipliers in this build)
        prod = acc * m
        total = 31 - s
        half = np.int64(1) << (total - 1)
        tie = (prod & ((np.int64(1) << total) - 1)) == half
        hits["single_tie"] = {f"{'pos' if pv >= 0 else 'neg'}@{sv}" for pv, sv in zip(prod[tie], s[tie], strict=True)}
        full = (prod + half) >> total
        hits["single_result"] = {"wraps"} if ((full < INT32_MIN) | (full > INT32_MAX)).any() else set()
        scaled = _wrap32(full)
    out = scaled + int(output_offset)
    hits["output_offset"] = {"wraps"} if ((out < INT32_MIN) | (out > INT32_MAX)).any() else set()
    out = _wrap32(out)
    hits["clamp"] = {label for label, hit in (("low", (out < act_min).any()), ("high", (out > act_max).any()),
                                              ("inside", ((out >= act_min) & (out <= act_max)).any())) if hit}
    return hits


def _lanes(words, n):
    """Packed payloads (lane 0 in the low byte) -> int8 array [len(words), n]."""
    raw = b"".join(int(w).to_bytes(n, "little") for w in words)
    return np.frombuffer(raw, np.int8).reshape(len(words), n)


class Monitor:
    """Collects what the RTL saw and samples the coverage model (see module docstring)."""

    def __init__(self, rows, cols, rounding, max_col_tiles, min_tile_steps, cfg_layout):
        self.rows, self.cols, self.rounding = rows, cols, rounding
        self.max_col_tiles, self.min_tile_steps, self.cfg_layout = max_col_tiles, min_tile_steps, cfg_layout
        self.entries = {}          # (addr, lane) -> (bias, multiplier, shift): the tables' contents
        self.stalled = 0
        sample("requantizer", "build", {rounding})
        self.begin({})

    def begin(self, registers):
        """A GEMM starts: the layer inputs set on the ports."""
        self.regs = dict(registers)
        self.acts, self.wts, self.step_cycles = [], [], []
        self.stalled = 0

    def cfg(self, word):
        c = self.cfg_layout.from_bits(word)
        self.entries[(int(c.addr), int(c.lane))] = (int(c.entry.bias), int(c.entry.multiplier), int(c.entry.shift))

    def step(self, act_word, wts_word, cycle):
        self.acts.append(act_word)
        self.wts.append(wts_word)
        self.step_cycles.append(cycle)

    def cycle(self, act, wts, draining):
        """Once per cycle, after the handshakes are known. ``act``/``wts``: (pending, valid, transferred);
        ``draining``: every step sent, ``res`` valid and not ready."""
        (a_pend, a_valid, a_xfer), (w_pend, w_valid, _) = act, wts
        if a_pend and w_pend:
            if w_valid and not a_valid:
                sample("flow", "input_gaps", {"act idle alone"})
            elif a_valid and not w_valid:
                sample("flow", "input_gaps", {"wts idle alone"})
        # Both inputs offered and not taken for longer than any padding after a short tile lasts
        # (min_tile_steps - 1 cycles): only the credit check holds a step off that long.
        if a_valid and w_valid and not a_xfer:
            self.stalled += 1
            if self.stalled == self.min_tile_steps:
                sample("flow", "holdoff", {"inputs held off by credit (output FIFO full)"})
        else:
            self.stalled = 0
        if draining:
            sample("flow", "res_backpressure", {"during drain"})

    def reset(self, mid_stream):
        if mid_stream:
            sample("flow", "reset", {"mid-stream"})
        self.begin({})

    def end(self, m, n):
        """The GEMM's last result arrived: sample the array and requantizer groups. ``m``, ``n``: the
        problem's (unpadded) shape, used only for the partial-tile bins."""
        R, C, regs = self.rows, self.cols, self.regs
        k = int(regs["k_steps"])
        n_tiles = int(regs["n_tiles"])
        if not self.acts or len(self.acts) % k:
            return
        labels = set()
        big = max(R, C)
        for label, hit in (("1", k == 1), ("1 < K < max(rows, cols)", 1 < k < big), ("K = max(rows, cols)", k == big),
                           ("max(rows, cols) < K < 4096", big < k < 4096), ("K >= 4096", k >= 4096)):
            if hit:
                labels.add(label)
        sample("array", "k_steps", labels)
        tiles = len(self.acts) // k
        depthwise = bool(regs.get("depthwise"))
        sample("array", "mode", {"depthwise" if depthwise else "GEMM"})
        if depthwise:
            sample("array", "depthwise_shape", {label for label, hit in (
                ("K = 1", k == 1), ("1 < K < max(rows, cols)", 1 < k < big), ("K >= max(rows, cols)", k >= big),
                ("N not a multiple of cols", n % C != 0), ("many column tiles", n_tiles > 1)) if hit})
        # (act carries rows * cols bytes: a GEMM's rows activations, then bytes the core ignores)
        a = _lanes(self.acts, R * C).astype(np.int64)
        w = _lanes(self.wts, C).astype(np.int64).reshape(tiles, k, C)
        # exact: int64 holds any 24-bit K of int8 products
        if depthwise:                                # cell (i, j)'s activation in byte j * rows + i
            raw = np.einsum("tkcr,tkc->trc", a.reshape(tiles, k, C, R), w)
        else:
            raw = np.einsum("tkr,tkc->trc", a[:, :R].reshape(tiles, k, R), w)
        wraps = ((raw < INT32_MIN) | (raw > INT32_MAX)).any()
        sample("array", "raw_sum", {label for label, hit in (("|sum| >= 2^30", (np.abs(raw) >= 2**30).any()),
                                                             ("wraps int32", wraps)) if hit})
        sample("array", "partial_tiles", {label for label, hit in (("M not a multiple of rows", m % R != 0),
                                                                   ("N not a multiple of cols", n % C != 0)) if hit})
        sample("array", "column_tiles", {label for label, hit in (("one", n_tiles == 1), ("many", n_tiles > 1),
                                                                  ("tables full (max_col_tiles)",
                                                                   n_tiles == self.max_col_tiles)) if hit})
        starts = self.step_cycles[::k]
        if any(b - a_ == self.min_tile_steps for a_, b in itertools.pairwise(starts)):
            sample("array", "tile_period", {"back to back at the shortest period"})
        # The table entry each tile's row read: column tile t % n_tiles, lane j.
        ent = np.array([[self.entries.get((t % n_tiles, j), (0, 0, 0)) for j in range(C)] for t in range(tiles)],
                       np.int64)                     # [tiles, C, 3]
        bias, mult, shift = (ent[:, None, :, i] for i in range(3))
        if regs["bypass"]:
            sample("requantizer", "bypass", {"on"})
            return
        sample("requantizer", "bypass", {"off"})
        acc = _wrap32(_wrap32(raw) + bias)
        hits = classify(acc, mult, np.broadcast_to(shift, acc.shape), regs["output_offset"], regs["act_min"],
                        regs["act_max"], self.rounding)
        for point, point_labels in hits.items():
            sample("requantizer", point, point_labels)


def sample_mode_switches(modes, first_steps, last_results):
    """The ``mode_switch`` bins from a run of GEMMs in stream order: each one's mode (True for
    depthwise), the cycle of its first step and of its last result. A switch counts when a GEMM's
    first step comes before the previous GEMM's last result (the pipeline not drained)."""
    labels = set()
    for i in range(1, len(modes)):
        if modes[i] != modes[i - 1] and first_steps[i] < last_results[i - 1]:
            labels.add("depthwise then GEMM, not drained" if modes[i - 1] else "GEMM then depthwise, not drained")
    sample("array", "mode_switch", labels)
    return labels


def sample_engine_layer(op, g, out_c, cols, depth_multiplier, zp_in, zp_out, act, tensors, read_spans, *,
                        stack=False, chained=False, beat=8):
    """Sample the ``engine`` group for one layer the engine ran and the testbench checked: ``g`` its
    :class:`host.windows.Geometry`, ``tensors`` the (address, bytes) of its input and output, ``read_spans`` the
    (address, bytes) of every read burst the AXI monitor saw in its list (an input none of them touched was
    read on chip); ``stack``: its input row-stacked; ``chained``: its input the last layer's output; ``beat``: the
    bus's bytes (a depthwise input of whole bus words a pixel is split at stride 2)."""
    split = op == "DEPTHWISE_CONV_2D" and any(input_split(g.in_c, g.stride_h, g.stride_w, beat))
    sample("engine", "op", [op])
    padded_h = (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h - g.pad_top >= g.in_h
    padded_w = (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w - g.pad_left >= g.in_w
    taps = g.pad_top > 0 or g.pad_left > 0 or padded_h or padded_w
    sample("engine", "geometry", [label for label, hit in (
        ("stride 2", 2 in (g.stride_h, g.stride_w)), ("dilation 2", 2 in (g.dilation_h, g.dilation_w)),
        ("SAME with padding taps", op != "FULLY_CONNECTED" and taps), ("VALID", op != "FULLY_CONNECTED" and not taps),
        ("1x1 kernel", g.kernel_h == g.kernel_w == 1), ("batch > 1", g.batch > 1),
        ("depthwise input split by parity (stride 2)", split)) if hit])
    sample("engine", "channels", [label for label, hit in (
        ("1 input channel", g.in_c == 1), ("outputs not a multiple of cols", out_c % cols != 0),
        ("several column tiles", out_c > cols)) if hit])
    if op == "DEPTHWISE_CONV_2D":
        sample("engine", "depth_multiplier",
               ["1" if depth_multiplier == 1 else "2 to cols" if depth_multiplier <= cols else "above cols"])
    sample("engine", "zero_points", [label for label, hit in (
        ("input -128", zp_in == -128), ("input 127", zp_in == 127), ("output -128", zp_out == -128),
        ("output 127", zp_out == 127)) if hit])
    if tuple(act) != (-128, 127):
        sample("engine", "activation", ["clamped inside int8"])
    (in_addr, in_bytes), _ = tensors
    read = any(a < in_addr + in_bytes and in_addr < a + n for a, n in read_spans)
    sample("engine", "input", ["read from memory" if read else "kept on chip (the last layer's output)"])
    if split and not read:
        sample("engine", "input", ["kept on chip split by parity"])
    if stack:
        sample("engine", "input", ["row-stacked (few channels)"])
    if chained and read:
        sample("engine", "input", ["the last layer's output read from memory (after its drain)"])
    if any(a // 4096 != (a + n - 1) // 4096 for a, n in tensors):
        sample("engine", "addresses", ["a tensor across a 4 KB boundary"])


def export(stem):
    """Write the coverage collected in this process to ``stem``.yml and ``stem``.xml."""
    from cocotb_coverage.coverage import coverage_db

    if not _points:
        _define()
    stem = pathlib.Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    coverage_db.export_to_yaml(str(stem.with_suffix(".yml")))
    coverage_db.export_to_xml(str(stem.with_suffix(".xml")))


def merge(stems, out_stem):
    """Add the coverage of several runs (their ``.yml`` and ``.xml``) into ``out_stem``.yml/.xml."""
    from cocotb_coverage.coverage import merge_coverage

    stems = [pathlib.Path(s) for s in stems]
    out_stem = pathlib.Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".yml", ".xml"):
        merge_coverage(lambda *_: None, str(out_stem.with_suffix(suffix)), *(str(s.with_suffix(suffix)) for s in stems))
    return out_stem.with_suffix(".yml")


def _load(yml):
    import yaml

    db = yaml.safe_load(pathlib.Path(yml).read_text())
    points = {}
    for name, item in db.items():
        if "bins:_hits" in item:
            _, group, point = name.split(".", 2)
            points[(group, point)] = item["bins:_hits"]
    return points


def unhit(yml):
    """[(group, point, bin)] never hit in a coverage YAML."""
    points = _load(yml)
    out = []
    for group, pts in MODEL.items():
        for point, bins in pts.items():
            hits = points.get((group, point), {})
            out += [(group, point, b) for b in bins if not hits.get(b)]
    return out


def totals(yml):
    """(bins hit, bins in the model) of a coverage YAML."""
    total = sum(len(b) for pts in MODEL.values() for b in pts.values())
    return total - len(unhit(yml)), total


def table(yml):
    """The coverage table (lines): per coverpoint its bins hit/total, per group a subtotal, the
    bins never hit listed under their point."""
    points = _load(yml)
    lines = [f"{'group':<12} {'coverpoint':<20} {'bins hit':>9} {'total':>6}  missing"]
    all_hit = all_total = 0
    for group, pts in MODEL.items():
        g_hit = g_total = 0
        for point, bins in pts.items():
            hits = points.get((group, point), {})
            missing = [str(b) for b in bins if not hits.get(b)]
            n_hit = len(bins) - len(missing)
            g_hit, g_total = g_hit + n_hit, g_total + len(bins)
            more = f" (+{len(missing) - 8} more)" if len(missing) > 8 else ""
            lines.append(f"{group:<12} {point:<20} {n_hit:>9} {len(bins):>6}  {', '.join(missing[:8])}{more}")
        lines.append(f"{group:<12} {'(group)':<20} {g_hit:>9} {g_total:>6}")
        all_hit, all_total = all_hit + g_hit, all_total + g_total
    lines.append(f"{'total':<33} {all_hit:>9} {all_total:>6}  ({100 * all_hit / all_total:.1f}%)")
    return lines
