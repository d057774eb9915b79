"""Conformance pack command line.

    int8-systolic conformance make [--out DIR] [--per-op 30] [--seed 1] [--ops OP ...]
    int8-systolic conformance run PACK --dut DUT [--expect VARIANT] [--ops OP ...] [--tags TAG ...]
                                   [--report-dir DIR]

``make`` writes the pack (default build/conformance/int8-conformance-v1; every case
checked against TFLite-Micro as it is written).
``run`` runs a design under test on it (``--dut``: golden[:VARIANT], litert-ref,
litert-optimized, litert-default, outputs:DIR or module:callable; see
:mod:`golden.conformance.duts`), prints the summary and the variant verdict, and writes
report.{md,html,json}. Exit status: 0 every case matches, 1 some do not, 2 bad arguments or
an unreadable pack.
"""

import pathlib

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.paths import build_root

from ..variants import VARIANTS
from . import duts, harness, report
from .pack import FORMAT_VERSION, write_pack

DEFAULT_PACK = build_root() / "conformance" / f"int8-conformance-v{FORMAT_VERSION}"


@command()
def main(argv=None, prog="int8-systolic conformance"):
    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    mk = sub.add_parser("make", help="write the conformance pack")
    mk.add_argument("--out", type=pathlib.Path, default=DEFAULT_PACK)
    mk.add_argument("--per-op", type=int, default=30, help="random cases per op (the directed ones come on top)")
    mk.add_argument("--seed", type=int, default=1)
    mk.add_argument("--ops", nargs="+", help="only these ops")
    rn = sub.add_parser("run", help="run a design under test on a pack")
    rn.add_argument("pack", type=pathlib.Path, nargs="?", default=DEFAULT_PACK)
    rn.add_argument("--dut", required=True)
    rn.add_argument("--expect", choices=VARIANTS, default="double",
                    help="the arithmetic the DUT's MAC ops are meant to implement (default: TFLite's reference)")
    rn.add_argument("--ops", nargs="+", help="only these ops")
    rn.add_argument("--tags", nargs="+", help="only the cases with any of these tags (e.g. discriminator)")
    rn.add_argument("--report-dir", type=pathlib.Path,
                    help="where report.{md,html,json} go (default: next to the pack, report-<dut>)")
    args = parser.parse_args(argv)
    if args.command == "make":
        if args.per_op < 1:
            parser.error("--per-op must be >= 1")
        m = write_pack(args.out, per_op=args.per_op, seed=args.seed, ops=args.ops)
        print(f"wrote {len(m['cases'])} cases of {len(m['counts'])} ops to {args.out}, every one identical to "
              f"its reference runtime")
        for op, n in m["counts"].items():
            print(f"  {op:<20} {n:>4} cases")
        return 0
    dut = duts.resolve(args.dut)
    result = harness.run(args.pack, dut, expect=args.expect, ops=args.ops, tags=args.tags, name=args.dut)
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in args.dut)
    out = args.report_dir or args.pack.parent / f"report-{safe}"
    html_path = report.write_reports(result, out)
    print("\n".join(report.summary_lines(result)))
    print(f"report: {html_path} (and report.md, report.json)")
    return 0 if result.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
