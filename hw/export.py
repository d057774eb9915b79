"""Export the accelerator as Verilog: ``python -m hw.export --rows 8 --cols 8 --rounding double``.

Writes ``build/verilog/int8_systolic_<R>x<C>_<rounding>.v`` (module name = file name, no
machine paths inside) and prints the path.
"""

import argparse
import pathlib

from amaranth.back import verilog

from .accelerator import Accelerator


def export(rows, cols, rounding, out_dir="build/verilog", max_col_tiles=64, dsp="generic"):
    dut = Accelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, dsp=dsp)
    text = verilog.convert(dut, name=dut.name, emit_src=False)
    path = pathlib.Path(out_dir) / f"{dut.name}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--rounding", choices=["double", "single"], default="double")
    parser.add_argument("--max-col-tiles", type=int, default=64, help="per-channel table depth (N <= this * cols)")
    parser.add_argument("--dsp", choices=["generic", "ecp5"], default="generic",
                        help="portable (default) or the ECP5 build: MULT18X18D multipliers and DP16KD tables")
    parser.add_argument("--out-dir", default="build/verilog")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.cols < 1:
        parser.error("--rows and --cols must be >= 1")
    print(export(args.rows, args.cols, args.rounding, args.out_dir, args.max_col_tiles, args.dsp))


if __name__ == "__main__":
    main()
