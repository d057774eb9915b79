"""`verilator --lint-only -Wall` on exported Verilog with the reasoned waivers in verilator_waivers.vlt.

``python -m int8_systolic.sim.lint build/verilog/X.v ...``: exits non-zero on any warning or error.
"""

import pathlib
import subprocess
import sys

from .tools import simulator_env, verilator_bin_dir

WAIVERS = pathlib.Path(__file__).with_name("verilator_waivers.vlt")


def lint(path):
    cmd = [str(verilator_bin_dir() / "verilator"), "--lint-only", "-Wall", str(WAIVERS), str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=simulator_env())
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def main(argv=None):
    paths = (argv if argv is not None else sys.argv[1:])
    if not paths:
        print("usage: python -m int8_systolic.sim.lint FILE.v ...", file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        rc, out = lint(path)
        status = "clean" if rc == 0 and "%Warning" not in out else "FAILED"
        failed += status != "clean"
        print(f"verilator --lint-only -Wall {path}: {status}")
        if out:
            print(out)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
