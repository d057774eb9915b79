"""Export the accelerator as Verilog: ``int8-systolic export --rows 8 --cols 8 --rounding double``.

Writes ``build/verilog/int8_systolic_<R>x<C>_<rounding>.v`` (module name = file name, no
machine paths inside) and prints the path. ``--block axi`` writes the AXI top instead,
``int8_systolic_axi_<R>x<C>_<rounding>.v``, with ports ``aclk`` and ``aresetn`` (synchronous,
active low) and the AMBA-named buses of :mod:`hw.axi_top`, and its register map beside it in
``--regs-dir`` (``build/regs``): ``registers.md`` and the C header ``int8_systolic_regs.h``.
``--block engine`` writes the memory engine's top (:mod:`hw.engine_top`, ``--bus-bytes`` wide),
``int8_systolic_engine_<R>x<C>_<bits>.v``, likewise with ``aclk``/``aresetn``, and its register map
(``engine_registers.md``, ``int8_systolic_engine_regs.h``) and command header
(``int8_systolic_commands.h``).
"""

import pathlib

from amaranth import ClockDomain, Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from int8_systolic.cli_support import ArgumentParser, command

from .accelerator import Accelerator
from .axi_top import AxiAccelerator


def export(rows, cols, rounding, out_dir="build/verilog", max_col_tiles=64, dsp="generic"):
    dut = Accelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, dsp=dsp)
    text = verilog.convert(dut, name=dut.name, emit_src=False)
    path = pathlib.Path(out_dir) / f"{dut.name}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class AxiPorts(wiring.Component):
    """The AXI top with its clock and reset as ports ``aclk`` and ``aresetn`` (active low)."""

    def __init__(self, top):
        self.top = top
        super().__init__({"aclk": In(1), "aresetn": In(1), **top.signature.members})

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync")
        m.d.comb += [cd.clk.eq(self.aclk), cd.rst.eq(~self.aresetn)]
        m.submodules.top = self.top
        for name, member in self.top.signature.members.items():
            outer, inner = getattr(self, name), getattr(self.top, name)
            m.d.comb += inner.eq(outer) if member.flow == In else outer.eq(inner)
        return m


def export_axi(rows, cols, rounding, out_dir="build/verilog", max_col_tiles=64, dsp="generic"):
    top = AxiAccelerator(rows, cols, rounding=rounding, max_col_tiles=max_col_tiles, dsp=dsp)
    text = verilog.convert(AxiPorts(top), name=top.name, emit_src=False)
    path = pathlib.Path(out_dir) / f"{top.name}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def export_engine(rows, cols, rounding, out_dir="build/verilog", max_col_tiles=64, dsp="generic", bus_bytes=8):
    from .engine_top import EngineTop

    top = EngineTop(rows, cols, data_width=8 * bus_bytes, rounding=rounding, max_col_tiles=max_col_tiles, dsp=dsp)
    text = verilog.convert(AxiPorts(top), name=top.name, emit_src=False)
    path = pathlib.Path(out_dir) / f"{top.name}.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@command()
def main(argv=None, prog="int8-systolic export"):
    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--rounding", choices=["double", "single"], default="double")
    parser.add_argument("--max-col-tiles", type=int, default=64, help="per-channel table depth (N <= this * cols)")
    parser.add_argument("--dsp", choices=["generic", "ecp5"], default="generic",
                        help="portable (default) or the ECP5 build: MULT18X18D multipliers and DP16KD tables")
    parser.add_argument("--block", choices=["core", "axi", "engine"], default="core",
                        help="the core's own streams (default), the AXI top (AXI4-Lite registers, AXI4-Stream data) "
                             "or the memory engine (AXI4-Lite registers, an AXI4 master)")
    parser.add_argument("--bus-bytes", type=int, choices=(4, 8, 16), default=8,
                        help="with --block engine: the AXI4 master's data width in bytes")
    parser.add_argument("--out-dir", default="build/verilog")
    parser.add_argument("--regs-dir", default="build/regs", help="where --block axi writes the register map")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.cols < 1:
        parser.error("--rows and --cols must be >= 1")
    if args.block == "engine":
        print(export_engine(args.rows, args.cols, args.rounding, args.out_dir, args.max_col_tiles, args.dsp,
                            args.bus_bytes))
        from . import commands, engine_registers
        engine_registers.main(["--markdown", f"{args.regs_dir}/engine_registers.md",
                               "--header", f"{args.regs_dir}/int8_systolic_engine_regs.h"])
        commands.main(["--markdown", f"{args.regs_dir}/commands.md",
                       "--header", f"{args.regs_dir}/int8_systolic_commands.h"])
        return 0
    fn = export_axi if args.block == "axi" else export
    print(fn(args.rows, args.cols, args.rounding, args.out_dir, args.max_col_tiles, args.dsp))
    if args.block == "axi":
        from . import registers
        registers.main(["--markdown", f"{args.regs_dir}/registers.md",
                        "--header", f"{args.regs_dir}/int8_systolic_regs.h"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
