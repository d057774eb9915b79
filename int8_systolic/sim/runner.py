"""Launch the cocotb testbench on Icarus or Verilator through cocotb-test.

Used by tests/test_cocotb.py and the ``make sim`` regression. Each (simulator,
configuration, xdist worker) gets its own build directory under build/sim/, so parallel
runs never share a Verilator build.
"""

import json
import os

from int8_systolic.hw.export import export, export_axi

from .ecp5_models import write_ecp5_models
from .tools import simulator_env

__all__ = ["build_dir", "run_component", "run_tb"]

from ..paths import PACKAGE, SOURCE, build_root


def build_dir(simulator, rows, cols, rounding, tag_suffix=""):
    """The build directory of one (simulator, configuration, xdist worker); results.jsonl lives there."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return build_root() / "sim" / f"{simulator}_{rows}x{cols}_{rounding}{tag_suffix}_{worker}"


def run_tb(simulator, rows, cols, rounding, *, seed=1, problems=4, max_dim=20, pauses=True, waves=False,
           max_col_tiles=None, testcase=None, module="int8_systolic.sim.tb_accelerator", extra_env=None, tag_suffix="",
           dsp="generic", long_k=False, block="core", optimize=True):
    """Export the configuration, run int8_systolic/sim/tb_accelerator.py on it; return the per-test result dicts.

    The per-channel tables are sized for the largest N the testbench generates (max_dim). The
    functional coverage goes to <build>/coverage.yml and .xml (sim.coverage); ``long_k`` adds the
    K = 132 105 GEMM whose accumulators wrap int32. ``optimize`` False builds a Verilator model with
    less C++ optimization: a regression's short runs spend most of their time compiling (the 16x16
    model compiles in well under half the time, and simulates as fast).
    """
    if max_col_tiles is None:
        max_col_tiles = max(4, -(-max(max_dim, 16) // cols))
    if dsp != "generic":
        tag_suffix = f"_{dsp}{tag_suffix}"
    build = build_dir(simulator, rows, cols, rounding, tag_suffix)
    build.mkdir(parents=True, exist_ok=True)
    verilog = (export_axi if block == "axi" else export)(rows, cols, rounding, out_dir=build,
                                                          max_col_tiles=max_col_tiles, dsp=dsp)
    sources = [str(verilog)]
    if dsp == "ecp5":
        sources += [str(path) for path in write_ecp5_models(build)]
    results = build / "results.jsonl"
    results.unlink(missing_ok=True)
    for suffix in (".yml", ".xml"):
        (build / "coverage").with_suffix(suffix).unlink(missing_ok=True)
    env = {
        "TB_ROWS": str(rows), "TB_COLS": str(cols), "TB_ROUNDING": rounding, "TB_SEED": str(seed),
        "TB_PROBLEMS": str(problems), "TB_MAX_DIM": str(max_dim), "TB_PAUSES": "1" if pauses else "0",
        "TB_MAX_COL_TILES": str(max_col_tiles), "TB_RESULTS": str(results),
        "TB_COVERAGE": str(build / "coverage"), "TB_LONG_K": "1" if long_k else "0",
        "PYTHONPATH": os.pathsep.join([str(SOURCE), os.environ.get("PYTHONPATH", "")]),
        **(extra_env or {}),
    }
    _run_cocotb(simulator, sources, verilog.stem, module, build, env, waves=waves, testcase=testcase,
                optimize=optimize)
    return [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []


def _run_cocotb(simulator, sources, toplevel, module, build, env, *, waves=False, testcase=None, optimize=True):
    """cocotb-test on ``sources`` with the project's simulator set-up (ports public on Verilator, the lint
    waivers, trusted inertial writes, the optimisation level)."""
    from cocotb_test.simulator import run

    sim_env = simulator_env()
    os.environ["PATH"] = sim_env["PATH"]
    os.environ["MAKEFLAGS"] = sim_env["MAKEFLAGS"]
    os.environ.pop("VERILATOR_ROOT", None)
    kwargs = {}
    if simulator == "verilator":
        # cocotb-test passes --public-flat-rw, which keeps every internal signal and stops
        # Verilator from optimising the model (the 8x8 array evaluates ~2x slower). The
        # testbench only touches the top-level ports, so only those are made public.
        public = build / "public_ports.vlt"
        public.write_text(f'`verilator_config\npublic_flat_rw -module "{toplevel}" -var "*"\n')
        waivers = PACKAGE / "sim" / "verilator_waivers.vlt"  # the reasoned lint waivers keep the build log quiet
        kwargs["compile_args"] = (["-Wno-fatal", "-O2", "--no-public-flat-rw", str(public), str(waivers)]
                                  + (["--trace-fst", "--trace-structs"] if waves else []))
        # cocotb's own Makefile and runner default to trusting inertial writes on Verilator
        # (cocotb 2.0 implemented them in its Verilator loop); cocotb-test does not, and
        # without it every cycle pays an extra ReadWrite callback (~2.5x slower).
        env["COCOTB_TRUST_INERTIAL_WRITES"] = "1"
        kwargs["make_args"] = (["OPT_FAST=-O2", "OPT_GLOBAL=-O2"] if optimize else
                               ["OPT_FAST=-O1", "OPT_GLOBAL=-O1", "OPT_SLOW=-O0"])
    else:
        kwargs["timescale"] = "1ns/1ps"
    run(simulator=simulator, verilog_sources=sources, toplevel=toplevel, module=module,
        sim_build=str(build), work_dir=str(build), extra_env=env, waves=waves, testcase=testcase,
        python_search=[str(SOURCE)], **kwargs)


def component_dir(simulator, tag):
    """The build directory of :func:`run_component`'s run with this ``tag``."""
    return build_root() / "sim" / f"{simulator}_{tag}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


def run_component(simulator, component, name, module, *, tag, extra_env=None, waves=False, optimize=True,
                  ecp5=False):
    """Export an Amaranth ``component`` as module ``name`` into its own build directory and run the cocotb
    ``module`` on it; returns the result dicts the testbench wrote to ``TB_RESULTS`` (one JSON line each).
    ``ecp5``: the component instantiates ECP5 primitives (``dsp="ecp5"``): their models join the sources."""
    from amaranth.back import verilog as amaranth_verilog

    build = component_dir(simulator, tag)
    build.mkdir(parents=True, exist_ok=True)
    source = build / f"{name}.v"
    source.write_text(amaranth_verilog.convert(component, name=name, emit_src=False))
    results = build / "results.jsonl"
    results.unlink(missing_ok=True)
    env = {"TB_RESULTS": str(results),
           "PYTHONPATH": os.pathsep.join([str(SOURCE), os.environ.get("PYTHONPATH", "")]), **(extra_env or {})}
    sources = [str(source)] + ([str(path) for path in write_ecp5_models(build)] if ecp5 else [])
    _run_cocotb(simulator, sources, name, module, build, env, waves=waves, optimize=optimize)
    return [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
