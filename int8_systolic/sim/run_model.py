"""Run a .tflite model with every MAC layer on the simulated RTL, compared with TFLM layer by layer.

    int8-systolic run-model MODEL.tflite [--sim verilator|icarus] [--steps N] [--rows R --cols C]
                            [--block axi [--no-queue]] [--block engine [--bus-bytes 8] [--mem-latency 20]]

MODEL may also be ``cnn`` (the project's generated CNN), a wake-word model's name
(``alexa``, ``hey_jarvis``, ``hey_mycroft``, ``okay_nabu``) or an MLPerf Tiny class model's
(``image_classification``, ``keyword_spotting``, ``visual_wake_words``,
``anomaly_detection``, ``keyword_spotting_mobilenetv2``). A model the golden interpreter
cannot run (an unsupported op, a broken quantization clause) is refused in one line before
the simulator is built. Prints a progress line per
step, then a per-layer table (op, shapes, MACs, cycles, utilization, bit-exact or the
first mismatch with its golden stages) and the TFLM comparison; writes the figures to
build/models/<model>_<sim>_<R>x<C>.json. Exit status 1 on any mismatch.

``--block engine`` runs the MAC layers on the memory engine (:mod:`hw.engine`) from a command list
the compiler (:mod:`host.engine_compiler`) lays out in memory, the memory being cocotbext-axi's
``AxiRam`` with ``--mem-latency`` cycles of latency on a ``--bus-bytes`` port; the report adds each
layer's bytes over the port and closes with the bytes per step against the MAC layers' tensor bytes.
"""

import json
import os
import time

from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.golden.tflite.interpreter import Interpreter

from ..paths import build_root
from .runner import build_dir, run_tb

__all__ = ["main", "resolve_model", "run_model", "run_models"]


def resolve_model(name):
    """A path, ``cnn`` (written to build/models/cnn.tflite) or a bundled wake-word or MLPerf model's name."""
    from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_model
    from int8_systolic.golden.tflite.wakeword import wakeword_models

    if name == "cnn":
        from int8_systolic.golden.tflite.cnn import generated_cnn

        path = build_root() / "models" / "cnn.tflite"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(generated_cnn())
        return path
    for p in wakeword_models():
        if p.stem == name:
            return p
    if name in MODEL_NAMES:
        return mlperf_model(name)
    return name


def run_model(model, **kwargs):
    """Run the cocotb model testbench on one model; returns its result dict (see :func:`run_models`)."""
    return run_models([model], **kwargs)[0]


def run_models(models, *, sim="verilator", steps=3, rows=8, cols=8, seed=1, waves=False, input_kind="auto",
               build_tag="_model", block="core", queue=True, max_col_tiles=None, optimize=True, bus_bytes=8,
               mem_latency=20):
    """Run the cocotb model testbench on ``models``, one after another in one simulation; returns their
    result dicts in order (raises if a model produced none). ``steps``: one count for all, or one per model.

    ``build_tag`` names the build directory (parallel runs need one each); ``block`` "axi" runs the
    layers on the AXI top, through its descriptor queue unless ``queue`` is False; ``max_col_tiles``
    the tables' depth (default 16 on the core, 64 on the AXI top): wider layers are split into GEMMs;
    ``optimize`` as :func:`int8_systolic.sim.runner.run_tb`."""
    paths = [resolve_model(str(model)) for model in models]
    # Refuse what the golden interpreter cannot run (unreadable file, unsupported op, broken quantization clause)
    # here, with its one-line message, before anything is built.
    for path in paths:
        Interpreter(path)
    steps = [steps] * len(paths) if isinstance(steps, int) else list(steps)
    if len(steps) != len(paths):
        raise ValueError(f"{len(steps)} step counts for {len(paths)} models")
    env = {"TB_MODEL": os.pathsep.join(str(os.path.abspath(p)) for p in paths),
           "TB_STEPS": os.pathsep.join(str(s) for s in steps),
           "TB_INPUT": input_kind,
           "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING"), "TB_BLOCK": block,
           "TB_QUEUE": "1" if queue else "0"}
    if block == "engine":
        from ..host.engine_compiler import compile_model

        for path in paths:      # (the compiler's plan, before anything is built)
            compile_model(Interpreter(path), rows=rows, cols=cols, data_width=8 * bus_bytes)
        return _run_engine(paths, sim, steps, rows, cols, seed, waves, input_kind, bus_bytes, mem_latency, optimize)
    if block == "axi":
        build_tag += "_axi"
    error = None
    try:
        if max_col_tiles is None:
            max_col_tiles = 64 if block == "axi" else 16
        results = run_tb(sim, rows, cols, "double", seed=seed, pauses=False, waves=waves,
                         module="int8_systolic.sim.tb_model", extra_env=env, tag_suffix=build_tag,
                         max_col_tiles=max_col_tiles, block=block, optimize=optimize)
    except SystemExit as exc:  # cocotb-test raises SystemExit when a cocotb test fails; its results still count
        error = exc
        path = build_dir(sim, rows, cols, "double", build_tag) / "results.jsonl"
        results = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    runs = [r for r in results if r.get("test") == "run_model"]
    if len(runs) < len(paths):
        raise RuntimeError(f"the model testbench produced {len(runs)} of {len(paths)} results ({error}); see the "
                           f"simulator log above")
    return runs[-len(paths):]


def _run_engine(paths, sim, steps, rows, cols, seed, waves, input_kind, bus_bytes, mem_latency, optimize):
    from ..hw.engine import Engine
    from .runner import run_component

    if bus_bytes not in (4, 8, 16):
        raise ValueError(f"--bus-bytes must be 4, 8 or 16, got {bus_bytes}")
    if mem_latency < 1:
        raise ValueError(f"--mem-latency must be >= 1, got {mem_latency}")
    env = {"TB_MODEL": os.pathsep.join(str(os.path.abspath(p)) for p in paths),
           "TB_STEPS": os.pathsep.join(str(s) for s in steps), "TB_INPUT": input_kind, "TB_SEED": str(seed),
           "TB_LATENCY": str(mem_latency), "TB_ROWS": str(rows), "TB_COLS": str(cols),
           "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")}
    error = None
    try:
        results = run_component(sim, Engine(rows, cols, data_width=8 * bus_bytes), "int8_systolic_engine",
                                "int8_systolic.sim.tb_engine_model", tag=f"engine_model_{rows}x{cols}_{bus_bytes}",
                                extra_env=env, waves=waves, optimize=optimize)
    except SystemExit as exc:
        error, results = exc, []
    runs = [r for r in results if r.get("test") == "run_model"]
    if len(runs) < len(paths):
        raise RuntimeError(f"the engine's model testbench produced {len(runs)} of {len(paths)} results ({error}); "
                           f"see the simulator log above")
    return runs[-len(paths):]


def print_engine_report(res, sim):
    r, c = res["rows"], res["cols"]
    print(f"\n{res['model']} on the memory engine ({r}x{c}, {res['bus_bytes']}-byte port, memory latency "
          f"{res['mem_latency']}; {sim}), {res['steps']} steps, {res['segments']} command-list segments; per step:")
    print(f"{'op':>3} {'type':<18} {'input':>12} {'weights':>12} {'output':>10} {'MACs':>8} {'cycles':>7} "
          f"{'util':>7} {'read':>7} {'written':>7}  result")
    engine = [L for L in res["layers"] if L["where"] == "engine"]
    for L in res["layers"]:
        n = len(L["cycles"])
        cycles, rd, wr = (sum(L[k]) / n for k in ("cycles", "bytes_read", "bytes_written"))
        status = f"bit-exact ({L['exact_steps']}/{n} steps)" if L["first_mismatch"] is None \
            else f"MISMATCH {L['first_mismatch']}"
        if L.get("kept"):
            status = "kept on chip only (checked through the next layer's output)"
        if L.get("commands", 1) > 1:
            status += f", tiled: {L['commands']} commands"
        if L.get("pad_folded") is not None:
            status += f", PAD (op {L['pad_folded']}) folded into its window"
        if L["where"] != "engine":
            print(f"{L['op_index']:>3} {L['op']:<18} {L['input']:>12} {L['weights']:>12} {L['output']:>10} "
                  f"{L['macs']:>8} {'-':>7} {'-':>7} {'-':>7} {'-':>7}  {L['where']}")
            continue
        util = L["macs"] / (r * c * cycles) if cycles else 0.0
        print(f"{L['op_index']:>3} {L['op']:<18} {L['input']:>12} {L['weights']:>12} {L['output']:>10} "
              f"{L['macs']:>8} {cycles:>7.0f} {100 * util:>6.1f}% {rd:>7.0f} {wr:>7.0f}  {status}")
    macs = sum(L["macs"] for L in engine)
    cycles = sum(sum(L["cycles"]) / len(L["cycles"]) for L in engine)
    rd = sum(sum(L["bytes_read"]) / len(L["bytes_read"]) for L in engine)
    wr = sum(sum(L["bytes_written"]) / len(L["bytes_written"]) for L in engine)
    tensor = sum(L["tensor_bytes"] for L in engine)
    host = [L for L in res["layers"] if L["where"] != "engine"]
    print(f"all MAC layers: {macs} MACs in {cycles:.0f} cycles per step "
          f"({100 * macs / (r * c * max(cycles, 1)):.1f}% utilization)"
          + (f" [the engine's {len(engine)}; {len(host)} on the host, {sum(L['macs'] for L in host)} MACs, "
             f"not counted]" if host else ""))
    print(f"memory: {rd:.0f} bytes read, {wr:.0f} bytes written per step, {(rd + wr) / max(tensor, 1):.2f}x the MAC "
          f"layers' tensor bytes")
    print(f"TFLM: {res['tflm_tensors_compared']} tensors compared over {res['steps']} steps, "
          f"{sum(1 for m in res['mismatches'] if 'TFLM' in m)} differ; engine outputs compared with golden: "
          f"{res['compared']} bytes; wall time {res['seconds']:.1f} s")
    for m in res["mismatches"][:10]:
        print("  " + m)


def print_report(res, sim):
    if res.get("block") == "engine":
        print_engine_report(res, sim)
        return
    r, c = res["rows"], res["cols"]
    where = {"core": "", "axi": " behind the AXI top"}.get(res.get("block", "core"), "")
    if res.get("block") == "axi":
        where += ", GEMMs queued" if res.get("queue") else ", one GEMM at a time (no queue)"
    print(f"\n{res['model']} on a {r}x{c} array{where} ({sim}), {res['steps']} steps; per step:")
    print(f"{'op':>3} {'type':<18} {'input':>12} {'weights':>12} {'output':>10} {'MACs':>7} {'GEMMs':>5} "
          f"{'cycles':>7} {'util':>7}  result")
    for L in res["layers"]:
        cycles = sum(L["cycles"]) / len(L["cycles"])
        util = L["macs"] / (r * c * cycles) if cycles else 0.0
        status = f"bit-exact ({L['exact_steps']}/{len(L['cycles'])} steps)" if L["first_mismatch"] is None \
            else f"MISMATCH {L['first_mismatch']}"
        print(f"{L['op_index']:>3} {L['op']:<18} {L['input']:>12} {L['weights']:>12} {L['output']:>10} "
              f"{L['macs']:>7} {L['gemms']:>5} {cycles:>7.0f} {100 * util:>6.1f}%  {status}")
    total_macs = sum(L["macs"] for L in res["layers"])
    total_cycles = sum(sum(L["cycles"]) / len(L["cycles"]) for L in res["layers"])
    print(f"all MAC layers: {total_macs} MACs in {total_cycles:.0f} cycles per step "
          f"({100 * total_macs / (r * c * max(total_cycles, 1)):.1f}% utilization)")
    print(f"TFLM: {res['tflm_tensors_compared']} tensors compared over {res['steps']} steps, "
          f"{sum(1 for m in res['mismatches'] if 'TFLM' in m)} differ; GEMM outputs compared with golden: "
          f"{res['compared']}; wall time {res['seconds']:.1f} s")
    for m in res["mismatches"][:10]:
        print("  " + m)


@command()
def main(argv=None, prog="int8-systolic run-model"):
    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .tflite path, 'cnn', a wake-word model (e.g. okay_nabu) or an MLPerf Tiny "
                                      "class model (e.g. image_classification)")
    parser.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--cols", type=int, default=8)
    parser.add_argument("--input", choices=("auto", "features", "random"), default="auto")
    parser.add_argument("--block", choices=("core", "axi", "engine"), default="core",
                        help="the core's own streams (default), the AXI top through the register-level driver, or "
                             "the memory engine running the compiled command list")
    parser.add_argument("--bus-bytes", type=int, choices=(4, 8, 16), default=8,
                        help="with --block engine: the AXI4 port's width in bytes")
    parser.add_argument("--mem-latency", type=int, default=20,
                        help="with --block engine: the memory's latency in cycles (bursts overlap)")
    parser.add_argument("--no-queue", action="store_true",
                        help="with --block axi: one GEMM at a time, each waiting for the previous one's results")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rows < 1 or args.cols < 1:
        parser.error("--steps, --rows and --cols must be >= 1")
    if args.mem_latency < 1:
        parser.error("--mem-latency must be >= 1")
    seed = int(os.environ.get("SEED", "1"))
    t0 = time.monotonic()
    res = run_model(args.model, sim=args.sim, steps=args.steps, rows=args.rows, cols=args.cols, seed=seed,
                    waves=os.environ.get("WAVES", "0") == "1", input_kind=args.input, block=args.block,
                    queue=not args.no_queue, bus_bytes=args.bus_bytes, mem_latency=args.mem_latency)
    print_report(res, args.sim)
    tag = {"core": "", "axi": "_axi_noqueue" if args.no_queue else "_axi",
           "engine": f"_engine_{args.bus_bytes}B_lat{args.mem_latency}"}[args.block]
    out = (build_root() / "models"
           / f"{res['model'].removesuffix('.tflite')}_{args.sim}_{args.rows}x{args.cols}{tag}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"written to {out} ({time.monotonic() - t0:.0f} s in all)")
    return 1 if res["mismatches"] or res["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
