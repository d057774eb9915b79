"""Real-model benchmark (``make bench-models``): every bundled int8 model on the RTL, per layer and model.

    python -m int8_systolic.sim.bench_models [--arrays 8x8,16x16] [--models NAME,...]

Runs the bundled models (the four wake-word models and the five MLPerf Tiny class models) for
one step each, with every MAC layer on Verilator: the core's own streams, every GEMM at full rate,
tables of 64 column tiles (the Accelerator's default; a layer wider than 64 x cols channels is
split into GEMMs), on 8x8 and 16x16. The model testbench (:mod:`sim.tb_model`) compares every GEMM
output with golden, every layer with golden's kernel and every tensor with TFLM; here, every
layer's measured cycles must equal the cycle formula (:meth:`hw.accelerator.Accelerator.cycles`
summed over its GEMMs). Either failing fails the benchmark (exit status 1).

Per layer and per model:

* MACs, cycles (measured), utilization = MACs / (rows * cols * cycles);
* the bound: MACs / (rows * cols * steps), with steps the tiles padded to the shortest period
  (``tiles * max(K, max(rows, cols, 2))``): what the layer's shape allows on the array without the
  pipeline's fill and drain (row fill for small M, column fill for small N, padding for short K);
* activation bytes streamed (``rows`` per GEMM-mode step, ``rows * cols`` per depthwise-mode
  step) against the input tensor's bytes (im2col traffic);
* for DEPTHWISE_CONV_2D, the formula's cycles of the block-diagonal GEMMs, the mapping without
  the depthwise mode.

Then the memory engine (``--ports``, default 8 and 4 bytes a cycle, memory latency 20; 8x8): each model's
MAC layers run from memory on the engine's RTL (:mod:`sim.tb_engine_model`, every output compared with
golden and every tensor with TFLM), beside the AXI top behind the same port: its streams (activations,
weights, every result in a 32-bit lane) cannot move faster than the port, so a layer takes at least its
stream bytes divided by the port's bytes a cycle.

Prints the per-model table, the depthwise layers against the 80% target on 8x8 (each below it
said to be bound by its shape or by the pipeline's fill and drain), the per-model targets and the
engine table; writes build/bench/models.json and build/bench/models.png.
"""

import json
import sys
import time

from int8_systolic.cli_support import ArgumentParser, command

from ..paths import build_root

__all__ = ["MODELS", "main", "summarize"]

WAKE_WORDS = ("okay_nabu", "alexa", "hey_jarvis", "hey_mycroft")
MLPERF = ("image_classification", "keyword_spotting", "visual_wake_words", "anomaly_detection",
          "keyword_spotting_mobilenetv2")
MODELS = WAKE_WORDS + MLPERF
LABELS = {"okay_nabu": "okay_nabu (wake word)", "alexa": "alexa (wake word)", "hey_jarvis": "hey_jarvis (wake word)",
          "hey_mycroft": "hey_mycroft (wake word)", "image_classification": "MLPerf Tiny ResNet-8",
          "keyword_spotting": "MLPerf Tiny DS-CNN", "visual_wake_words": "MLPerf Tiny VWW (MobileNetV1)",
          "anomaly_detection": "MLPerf Tiny FC autoencoder",
          "keyword_spotting_mobilenetv2": "KWS MobileNetV2 (Silicon Labs)"}
# Issue 25's targets on 8x8: whole-model utilization, and every depthwise layer of the MLPerf Tiny
# class models at DEPTHWISE_TARGET unless its shape bounds it lower.
MODEL_TARGETS = {"visual_wake_words": 0.85, "keyword_spotting": 0.85, "keyword_spotting_mobilenetv2": 0.75,
                 "image_classification": 0.99}
DEPTHWISE_TARGET = 0.80
MAX_COL_TILES = 64
OUT = build_root() / "bench"


def summarize(res):
    """Per-model figures from a model testbench result (one step)."""
    r, c = res["rows"], res["cols"]
    layers = []
    for L in res["layers"]:
        cycles = L["cycles"][0]
        layers.append({
            "op_index": L["op_index"], "op": L["op"], "input": L["input"], "weights": L["weights"],
            "output": L["output"], "gemm_shapes": L["gemm_shapes"], "modes": L["modes"], "macs": L["macs"],
            "cycles": cycles, "formula_cycles": L["formula_cycles"], "utilization": L["macs"] / (r * c * cycles),
            "bound": L["macs"] / (r * c * L["fill_steps"]), "fill_steps": L["fill_steps"],
            "act_bytes": L["act_bytes"], "input_bytes": L["input_bytes"],
            "gemm_mode_cycles": L.get("gemm_mode_cycles"), "bit_exact": L["first_mismatch"] is None})
    macs = sum(L["macs"] for L in layers)
    cycles = sum(L["cycles"] for L in layers)
    before = sum(L["gemm_mode_cycles"] or L["formula_cycles"] for L in layers)
    return {"model": res["model"].removesuffix(".tflite"), "rows": r, "cols": c, "macs": macs, "cycles": cycles,
            "utilization": macs / (r * c * cycles), "bound": macs / (r * c * sum(L["fill_steps"] for L in layers)),
            "act_bytes": sum(L["act_bytes"] for L in layers), "input_bytes": sum(L["input_bytes"] for L in layers),
            "gemm_mode_cycles": before, "gemm_mode_utilization": macs / (r * c * before),
            "depthwise_share_macs": sum(L["macs"] for L in layers if L["op"] == "DEPTHWISE_CONV_2D") / macs,
            "depthwise_share_cycles": sum(L["cycles"] for L in layers if L["op"] == "DEPTHWISE_CONV_2D") / cycles,
            "compared": res["compared"], "failures": res["failures"], "layers": layers}


def _problems(summary):
    out = []
    for L in summary["layers"]:
        if L["cycles"] != L["formula_cycles"]:
            out.append(f"{summary['model']} {summary['rows']}x{summary['cols']} operator {L['op_index']}: "
                       f"{L['cycles']} cycles measured, the formula gives {L['formula_cycles']}")
        if not L["bit_exact"]:
            out.append(f"{summary['model']} operator {L['op_index']}: not bit-exact")
    if summary["failures"]:
        out.append(f"{summary['model']} {summary['rows']}x{summary['cols']}: {summary['failures']} failures")
    return out


def stream_bytes(layer, rows, cols):
    """Bytes the AXI top's streams carry for a layer of a core run: the activations, a weight word of ``cols``
    bytes a step, and each int8 result in a 32-bit lane."""
    per_step = rows * cols if "depthwise" in layer["modes"] else rows
    steps = layer["act_bytes"] // per_step
    out = 1
    for d in layer["output"].split("x"):
        out *= int(d)
    return layer["act_bytes"] + steps * cols + 4 * out


def engine_summary(res, core=None):
    """Per-model figures of an engine run (one step), and the AXI top behind the same port from ``core`` (the same
    model's :func:`summarize` on 8x8), if given."""
    nb, r, c = res["bus_bytes"], res["rows"], res["cols"]
    on = [L for L in res["layers"] if L["where"] == "engine"]
    macs = sum(L["macs"] for L in on)
    cycles = sum(L["cycles"][0] for L in on)
    moved = sum(L["bytes_read"][0] + L["bytes_written"][0] for L in on)
    tensor = sum(L["tensor_bytes"] for L in on)
    out = {"model": res["model"].removesuffix(".tflite"), "bus_bytes": nb, "mem_latency": res["mem_latency"],
           "macs": macs, "cycles": cycles, "utilization": macs / (r * c * cycles) if cycles else 0.0,
           "bytes": moved, "tensor_bytes": tensor, "bytes_ratio": moved / tensor if tensor else 0.0,
           "host_mac_layers": len(res["layers"]) - len(on), "failures": res["failures"]}
    if core is not None:
        by_op = {L["op_index"]: L for L in core["layers"]}
        bound = [max(by_op[L["op_index"]]["cycles"], -(-stream_bytes(by_op[L["op_index"]], r, c) // nb))
                 for L in on]
        out["axi_cycles"] = sum(bound)
        out["axi_utilization"] = macs / (r * c * out["axi_cycles"]) if bound else 0.0
    return out


def engine_table(summaries):
    lines = [f"{'model':<32} {'port':>4} {'MACs':>10} {'cycles':>9} {'util':>6} {'bytes/tensor':>12} "
             f"{'AXI top behind the port':>23}  host MAC layers"]
    for s in summaries:
        axi = f"{100 * s['axi_utilization']:.1f}%" if "axi_utilization" in s else "-"
        lines.append(f"{LABELS.get(s['model'], s['model']):<32} {s['bus_bytes']:>2} B {s['macs']:>10,} "
                     f"{s['cycles']:>9,} {100 * s['utilization']:>5.1f}% {s['bytes_ratio']:>11.2f}x {axi:>23}  "
                     f"{s['host_mac_layers']}")
    return lines


def model_table(summaries):
    lines = [f"{'model':<32} {'array':>5} {'MACs':>10} {'cycles':>9} {'util':>6} {'bound':>6} "
             f"{'GEMM mode only':>14} {'act bytes / input':>17}  depthwise MACs / cycles"]
    for s in summaries:
        dw = (f"{100 * s['depthwise_share_macs']:.0f}% / {100 * s['depthwise_share_cycles']:.0f}%"
              if s["depthwise_share_macs"] else "-")
        lines.append(f"{LABELS.get(s['model'], s['model']):<32} {s['rows']}x{s['cols']:<3} {s['macs']:>10,} "
                     f"{s['cycles']:>9,} {100 * s['utilization']:>5.1f}% {100 * s['bound']:>5.1f}% "
                     f"{100 * s['gemm_mode_utilization']:>13.1f}% {s['act_bytes'] / s['input_bytes']:>16.1f}x  {dw}")
    return lines


def depthwise_table(summaries):
    """The depthwise layers of the MLPerf Tiny class models on 8x8 against DEPTHWISE_TARGET."""
    lines = [f"{'model':<30} {'op':>3} {'input':>12} {'GEMM M,K,N':>12} {'cycles':>7} {'util':>6} {'bound':>6}  "
             f"verdict"]
    for s in summaries:
        if s["model"] not in MLPERF or (s["rows"], s["cols"]) != (8, 8):
            continue
        for L in s["layers"]:
            if L["op"] != "DEPTHWISE_CONV_2D":
                continue
            if L["utilization"] >= DEPTHWISE_TARGET:
                verdict = "meets 80%"
            elif L["bound"] < DEPTHWISE_TARGET:
                verdict = f"below 80%: its shape bounds it at {100 * L['bound']:.1f}%"
            else:
                verdict = (f"below 80%: the pipeline's fill and drain ({L['cycles'] - L['fill_steps']} cycles) "
                           f"against {L['fill_steps']} steps")
            lines.append(f"{s['model']:<30} {L['op_index']:>3} {L['input']:>12} {L['gemm_shapes'][0]:>12} "
                         f"{L['cycles']:>7} {100 * L['utilization']:>5.1f}% {100 * L['bound']:>5.1f}%  {verdict}")
    return lines


def target_lines(summaries):
    lines = []
    for s in summaries:
        want = MODEL_TARGETS.get(s["model"])
        if want is not None and (s["rows"], s["cols"]) == (8, 8):
            verdict = "meets" if s["utilization"] >= want else "MISSES"
            lines.append(f"{LABELS[s['model']]}: {100 * s['utilization']:.1f}% on 8x8, target {100 * want:.0f}%: "
                         f"{verdict}")
    return lines


def plot(summaries, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [m for m in MODELS if any(s["model"] == m for s in summaries)]
    arrays = sorted({(s["rows"], s["cols"]) for s in summaries})
    by = {(s["model"], s["rows"], s["cols"]): s for s in summaries}
    fig, ax = plt.subplots(figsize=(11, 4.8))
    series = [("GEMM mode only (formula)", lambda s: s["gemm_mode_utilization"], (8, 8), "0.75")]
    series += [(f"{r}x{c} (measured)", lambda s: s["utilization"], (r, c), None) for r, c in arrays]
    width = 0.8 / len(series)
    for n, (label, value, (r, c), color) in enumerate(series):
        xs = [i + (n - (len(series) - 1) / 2) * width for i in range(len(names))]
        ys = [100 * value(by[(m, r, c)]) if (m, r, c) in by else 0 for m in names]
        ax.bar(xs, ys, width, label=label, color=color)
        if color is None:
            ax.scatter(xs, [100 * by[(m, r, c)]["bound"] if (m, r, c) in by else 0 for m in names], marker="_",
                       s=200, color="black", zorder=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([LABELS[m].replace(" (", "\n(") for m in names], fontsize=7)
    ax.set_ylabel("array utilization (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Bundled int8 models, every MAC layer on the RTL (black: the shape's bound)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@command("python -m int8_systolic.sim.bench_models")
def main(argv=None):
    from .run_model import run_models

    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrays", default="8x8,16x16", help="comma-separated RxC (default 8x8,16x16)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated bundled model names")
    parser.add_argument("--ports", default="8,4", help="the memory engine's port widths in bytes, comma-separated "
                                                      "(8x8, memory latency 20; empty: no engine runs)")
    args = parser.parse_args(argv)
    try:
        ports = [int(p) for p in args.ports.split(",") if p]
        if any(p not in (4, 8, 16) for p in ports):
            raise ValueError
    except ValueError:
        parser.error(f"--ports must be comma-separated 4, 8 or 16, got {args.ports!r}")
    try:
        arrays = [tuple(int(v) for v in a.split("x")) for a in args.arrays.split(",")]
        if any(len(a) != 2 or min(a) < 1 for a in arrays):
            raise ValueError
    except ValueError:
        parser.error(f"--arrays must be comma-separated RxC with R, C >= 1, got {args.arrays!r}")
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the bundled models are {', '.join(MODELS)}")
    t0 = time.monotonic()
    summaries, problems = [], []
    for r, c in arrays:
        print(f"[bench-models] {r}x{c}: {len(models)} models on Verilator ({time.monotonic() - t0:.0f} s)", flush=True)
        results = run_models(models, steps=1, rows=r, cols=c, build_tag="_bench_models", max_col_tiles=MAX_COL_TILES)
        for res in results:
            summaries.append(summarize(res))
            problems += _problems(summaries[-1])
    engine = []
    core8 = {s["model"]: s for s in summaries if (s["rows"], s["cols"]) == (8, 8)}
    for nb in ports:
        print(f"[bench-models] the engine, {nb}-byte port: {len(models)} models on Verilator "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        for res in run_models(models, steps=1, rows=8, cols=8, block="engine", bus_bytes=nb, mem_latency=20):
            engine.append(engine_summary(res, core8.get(res["model"].removesuffix(".tflite"))))
            if engine[-1]["failures"]:
                problems.append(f"{engine[-1]['model']} on the engine ({nb}-byte port): "
                                f"{engine[-1]['failures']} failures")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "models.json").write_text(json.dumps({"max_col_tiles": MAX_COL_TILES, "models": summaries,
                                                 "engine": engine}, indent=1) + "\n")
    plot(summaries, OUT / "models.png")
    print("\nper model (one step, every MAC layer on the RTL; util = MACs / (rows x cols x cycles)):")
    print("\n".join(model_table(summaries)))
    lines = depthwise_table(summaries)
    if len(lines) > 1:
        print("\nDEPTHWISE_CONV_2D layers of the MLPerf Tiny class models on 8x8:")
        print("\n".join(lines))
    if target_lines(summaries):
        print("\n" + "\n".join(target_lines(summaries)))
    if engine:
        print("\nthe memory engine (8x8, memory latency 20; its MAC layers, from memory; util = MACs / (64 x "
              "cycles)), and the AXI top behind the same port:")
        print("\n".join(engine_table(engine)))
    print(f"\nwritten to {OUT / 'models.json'} and {OUT / 'models.png'} ({time.monotonic() - t0:.0f} s)")
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
