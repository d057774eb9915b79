"""The conformance pack's MAC cases through the cocotb testbench, judged by the conformance harness.

    python -m int8_systolic.sim.conformance_rtl [PACK] [--sim verilator|icarus] [--rounding double|single]
                                 [--rows R --cols C]
                                 [--ops OP ...] [--tags TAG ...]

Runs :mod:`sim.tb_conformance` (every FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D case
of the pack on the exported RTL), then :func:`golden.conformance.harness.run` on the
recorded outputs with the arithmetic the RTL was built for (``--rounding``), and writes
report.{md,html,json} to build/conformance/rtl-<sim>-<R>x<C>-<rounding>/. Exit status 0
when every case matches, 1 otherwise, 2 when the pack is missing or unreadable.
"""

import json
import os
import shutil

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.golden.conformance import harness, report
from int8_systolic.golden.conformance.__main__ import DEFAULT_PACK
from int8_systolic.golden.conformance.duts import RecordedDut
from int8_systolic.golden.conformance.pack import PackError
from int8_systolic.golden.tflite.interpreter import MAC_OPS

from ..paths import build_root
from .runner import build_dir, run_tb


def run_conformance_rtl(pack, *, sim="verilator", rounding="double", rows=8, cols=8, seed=1, waves=False,
                        ops=MAC_OPS, tags=None, out_dir=None):
    """Simulate the pack's MAC cases, then judge them; returns (harness Result, testbench result dict)."""
    loaded = harness.load_pack(pack)     # refuse a missing pack or an empty selection before building anything
    if not harness.select(loaded, ops, tags):
        raise PackError(f"{loaded.root}: no cases of {', '.join(ops)} with tags {', '.join(tags or ['(any)'])}")
    name = f"rtl-{sim}-{rows}x{cols}-{rounding}"
    out = out_dir or build_root() / "conformance" / name
    outputs = out / "outputs"
    shutil.rmtree(outputs, ignore_errors=True)
    outputs.mkdir(parents=True)
    env = {"TB_PACK": str(loaded.root.resolve()), "TB_OUTPUTS": str(outputs.resolve()), "TB_OPS": ",".join(ops),
           "TB_TAGS": ",".join(tags or ()),
           "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")}
    try:
        results = run_tb(sim, rows, cols, rounding, seed=seed, pauses=False, waves=waves,
                         module="int8_systolic.sim.tb_conformance", extra_env=env, tag_suffix="_conformance",
                         max_col_tiles=16)
    except SystemExit:   # cocotb-test raises it when the testbench fails; the recorded outputs still get judged
        path = build_dir(sim, rows, cols, rounding, "_conformance") / "results.jsonl"
        results = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    tb = next((r for r in results if r.get("test") == "conformance_cases"), {})
    result = harness.run(loaded, RecordedDut(outputs, name), expect=rounding, ops=list(ops), tags=tags,
                          progress=False)
    report.write_reports(result, out)
    return result, tb


@command("python -m int8_systolic.sim.conformance_rtl")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pack", nargs="?", default=DEFAULT_PACK)
    parser.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    parser.add_argument("--rounding", choices=("double", "single"), default="double")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--ops", nargs="+", choices=MAC_OPS, default=list(MAC_OPS))
    parser.add_argument("--tags", nargs="+", help="only the cases with any of these tags (e.g. discriminator)")
    args = parser.parse_args(argv)
    result, tb = run_conformance_rtl(args.pack, sim=args.sim, rounding=args.rounding, rows=args.rows,
                                     cols=args.cols, seed=int(os.environ.get("SEED", "1")),
                                     waves=os.environ.get("WAVES", "0") == "1", ops=tuple(args.ops), tags=args.tags)
    print("\n".join(report.summary_lines(result)))
    if tb:
        print(f"testbench: {tb['cases']} cases, {tb['gemms']} GEMMs, {tb['compared']} GEMM outputs compared with "
              f"golden ({tb['failures']} differ), {tb['sim_cycles']} cycles, {tb['seconds']:.0f} s")
    name = f"rtl-{args.sim}-{args.rows}x{args.cols}-{args.rounding}"
    print(f"report: {build_root() / 'conformance' / name / 'report.html'}")
    return 0 if result.passed and tb and not tb["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
