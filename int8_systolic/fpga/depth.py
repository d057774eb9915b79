"""Register-to-register paths of a synthesized ECP5 netlist, estimated before placement: which paths are long, and
which parts of the design each one crosses.

``python -m int8_systolic.fpga.depth [--block engine] [--netlist top.json] [--target-mhz 175]`` (``make
synth-depth``) runs ``make synth``'s Yosys flow (or reads a netlist it wrote), then:

- every path from a flip-flop, a block RAM's or a multiplier's output (a register on the ECP5) through LUTs,
  carry chains and wide multiplexers to a flip-flop's or a block's input gets an estimated delay: ``LUT_NS`` a LUT,
  ``ROUTE_NS`` plus ``FANOUT_NS`` times the square root of its fanout a net, a carry chain's ripple at
  ``CARRY_NS`` a cell with no routing (its dedicated wires);
- prints how many endpoints exceed the target's period, the worst endpoints, and the *chains*: the parts (the
  hierarchy's first levels of the nets' names) the worst path into each endpoint crosses, grouped;
- writes ``depth.json`` beside the netlist.

Why: ``make synth-parts`` places each part of the engine alone, out of context, where a path from one of its ports
is not timed; inside the engine those ports are other parts' logic (docs/engine.md, Synthesis). Placing the whole
engine takes half an hour; this takes seconds. The figures are a ranking, not a sign-off: the constants are
nextpnr's ECP5 speed grade 6 delays for a LUT and a carry, and a typical local route, so an estimate runs a
little above what nextpnr reports for the same path placed well and far below it placed across the die.
"""

import argparse
import json
import math
import pathlib
import re
import sys
from collections import Counter

__all__ = ["CARRY_NS", "FANOUT_NS", "LUT_NS", "ROUTE_NS", "analyse", "format_report"]

LUT_NS = 0.25       # a LUT4 (and a PFUMX/L6MUX21 stage, a little less)
MUX_NS = 0.15
CARRY_NS = 0.06     # CIN -> COUT of a CCU2C (two bits)
ROUTE_NS = 0.6      # a net between two cells
FANOUT_NS = 0.1     # times sqrt(fanout), capped at 64 loads
CLK_TO_Q_NS = 0.5

# combinational cells: output port -> the delay from an input pin
_COMB = {"LUT4", "PFUMX", "L6MUX21", "CCU2C"}
_CLOCKS = {"CLK", "CLKA", "CLKB", "WCK"}


def _cell_delay(kind, pin, out):
    if kind == "LUT4":
        return LUT_NS
    if kind in ("PFUMX", "L6MUX21"):
        return MUX_NS
    if kind == "CCU2C":
        if pin == "CIN":
            return CARRY_NS if out == "COUT" else LUT_NS
        return LUT_NS + (0.1 if out == "COUT" else 0)
    if kind == "TRELLIS_DPR16X4":     # a distributed RAM's read: combinational from its read address
        return 2 * LUT_NS
    raise AssertionError(kind)


def _net_delay(fanout):
    return ROUTE_NS + FANOUT_NS * math.sqrt(min(max(fanout, 1), 64))


def _part(name, levels):
    """The part a net belongs to: the first ``levels`` parts of its hierarchical name, without Yosys' and Amaranth's
    suffixes."""
    name = re.split(r"_(?:LUT4|CCU2C|PFUMX|L6MUX21|TRELLIS|DP16KD|MULT18)", name)[0]
    name = re.sub(r"\$\d+", "", name).lstrip("\\")
    return ".".join(name.split(".")[:levels])


def analyse(netlist, *, top="top", levels=2):
    """Estimate the arrival time of every endpoint (a register's or a block's input) of module ``top`` of a Yosys
    JSON ``netlist`` (a dict) synthesized for the ECP5; returns ``[(ns, endpoint, [parts crossed, endpoint
    first])]``, worst first. ``levels``: how many levels of the hierarchy name a part."""
    module = netlist["modules"][top]
    names = {}
    for net, v in module["netnames"].items():
        for b in v["bits"]:
            if isinstance(b, int) and (b not in names or (names[b][1] and not v["hide_name"])):
                names[b] = (net, v["hide_name"])
    cells = module["cells"]
    driver, fanout = {}, Counter()
    for cname, cell in cells.items():
        for port, bits in cell["connections"].items():
            out = cell["port_directions"].get(port) == "output"
            for b in bits:
                if isinstance(b, int):
                    if out:
                        driver[b] = (cname, port)
                    else:
                        fanout[b] += 1

    def comb_inputs(cell):
        kind = cell["type"]
        for pin, bits in cell["connections"].items():
            ram_write = kind == "TRELLIS_DPR16X4" and not pin.startswith("RAD")
            if cell["port_directions"].get(pin) == "output" or ram_write:
                continue
            for b in bits:
                if isinstance(b, int):
                    yield pin, b

    def is_comb(b):
        d = driver.get(b)
        return d is not None and (cells[d[0]]["type"] in _COMB or cells[d[0]]["type"] == "TRELLIS_DPR16X4")

    # arrival times in topological order (iterative: the carry chains are thousands of cells deep)
    arrival, pred, visiting = {}, {}, set()
    for start in driver:
        stack = [(start, False)]
        while stack:
            b, expanded = stack.pop()
            if b in arrival:
                continue
            if not is_comb(b):
                arrival[b] = CLK_TO_Q_NS if b in driver else 0.0
                continue
            cell = cells[driver[b][0]]
            inputs = list(comb_inputs(cell))
            if not expanded:
                if b in visiting:
                    raise ValueError(f"a combinational loop through {names.get(b, ('?',))[0]}")
                visiting.add(b)
                stack.append((b, True))
                stack.extend((ib, False) for _, ib in inputs if ib not in arrival)
                continue
            visiting.discard(b)
            best, best_in = 0.0, None
            for pin, ib in inputs:
                if ib not in arrival:
                    raise ValueError(f"a combinational loop through {names.get(b, ('?',))[0]}")
                t = arrival[ib] + (0.0 if pin == "CIN" else _net_delay(fanout[ib])) + \
                    _cell_delay(cell["type"], pin, driver[b][1])
                if t > best:
                    best, best_in = t, ib
            arrival[b], pred[b] = best, best_in

    ends = []
    for cname, cell in cells.items():
        if cell["type"] in _COMB:
            continue
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "output" or port in _CLOCKS:
                continue
            for b in bits:
                if isinstance(b, int) and b in arrival:
                    ends.append((arrival[b] + _net_delay(fanout[b]), f"{cname}.{port}", b))
    ends.sort(key=lambda e: -e[0])
    result = []
    for ns, end, b in ends:
        parts, x = [], b
        while x is not None:
            p = _part(names.get(x, ("?", True))[0], levels)
            if not parts or parts[-1] != p:
                parts.append(p)
            x = pred.get(x)
        result.append((ns, end, parts))
    return result


def format_report(paths, target_mhz, *, show=30):
    """A readable report of :func:`analyse`'s ``paths``: endpoints over the target's period, the distribution, the
    worst chains of parts."""
    period = 1000.0 / target_mhz
    over = [p for p in paths if p[0] > period]
    lines = [f"{len(paths)} endpoints; {len(over)} estimated above {period:.2f} ns ({target_mhz:g} MHz); worst "
             f"{paths[0][0]:.1f} ns (~{1000 / paths[0][0]:.0f} MHz)" if paths else "no endpoints", "",
             "| estimated ns | endpoints |", "|---|---:|"]
    buckets = Counter(int(p[0] // 2) * 2 for p in paths if p[0] > period)
    for b in sorted(buckets, reverse=True):
        lines.append(f"| {b}-{b + 2} | {buckets[b]} |")
    chains = _chains(over)
    lines += ["", f"Worst chains (parts crossed, endpoint first; the {show} worst of {len(chains)}):", "",
              "| worst ns | endpoints | parts |", "|---:|---:|---|"]
    for key, (ns, n) in chains[:show]:
        lines.append(f"| {ns:.1f} | {n} | {key} |")
    return "\n".join(lines)


def _chains(over):
    """The chains of parts of the paths ``over`` (worst first): ``[(parts, [worst ns, endpoints])]``, worst first."""
    chains = {}
    for ns, _, parts in over:
        c = chains.setdefault(" <- ".join(parts), [ns, 0])
        c[1] += 1
    return sorted(chains.items(), key=lambda kv: -kv[1][0])


def _summary(paths, target_mhz, show):
    period = 1000.0 / target_mhz
    over = [p for p in paths if p[0] > period]
    return {"target_mhz": target_mhz, "endpoints": len(paths), "over": len(over),
            "worst_ns": paths[0][0] if paths else None,
            "worst": [{"ns": round(ns, 2), "endpoint": end, "parts": parts} for ns, end, parts in paths[:show]],
            "chains": [{"ns": round(ns, 2), "endpoints": n, "parts": k} for k, (ns, n) in _chains(over)]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="python -m int8_systolic.fpga.depth")
    ap.add_argument("--netlist", help="a Yosys JSON netlist make synth wrote (default: synthesize --block first)")
    ap.add_argument("--block", default="engine", choices=["accelerator", "axi", "engine"])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--cols", type=int, default=8)
    ap.add_argument("--out-dir", default="build/synth/depth")
    ap.add_argument("--target-mhz", type=float, default=175.0)
    ap.add_argument("--levels", type=int, default=2, help="levels of the hierarchy that name a part (default 2)")
    ap.add_argument("--show", type=int, default=30)
    args = ap.parse_args(argv)
    if args.netlist:
        path = pathlib.Path(args.netlist)
        if not path.is_file():
            sys.exit(f"error: no netlist at {path}")
    else:
        from .synth import _netlist
        _, work = _netlist("ecp5", args.rows, args.cols, "double", freq=None, max_col_tiles=None, router=None,
                           out_dir=args.out_dir, block=args.block, floorplan=False, log=print)
        path = work / "top.json"
    paths = analyse(json.loads(path.read_text()), levels=args.levels)
    print(format_report(paths, args.target_mhz, show=args.show))
    out = path.parent / "depth.json"
    out.write_text(json.dumps(_summary(paths, args.target_mhz, args.show), indent=1))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
