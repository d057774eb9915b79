"""Where the memory engine's cycles go: a model's command-list segments run one by one on :class:`hw.engine.Engine`
in Amaranth's simulator, each cycle put in one category.

Each segment runs alone from the compiled image (:func:`host.engine_compiler.compile_model`), its inputs the golden
interpreter's tensors, memory a :class:`sim.axi_model.AxiMemoryModel` with a fixed latency and no stalls; every
output the segment writes is compared with the interpreter's tensor. A cycle is, in this order:

- ``step``: the array takes a step;
- ``launch``: the next layer's GEMM waits for the last one's results to leave the core (a queued GEMM while
  another is in flight: their output stages differ);
- ``gen_wait``: a window generator or the weight streamer is busy and offers no step (input or weights not yet in
  the buffer, a depthwise step's second cycle, a generator's set-up);
- ``core_wait``: they offer a step and the core does not take it;
- ``loading``: only the input's loader is busy;
- ``idle``: none of them is busy (the back waits for a prepared command: a fetch, a check, a table, weights).

``python -m int8_systolic.sim.engine_profile MODEL`` prints a table and writes ``build/profile/MODEL.json``. Slower
than ``run-model`` (Amaranth's simulator, the engine built again for each segment: 7.5 minutes for KWS
MobileNetV2's 14 segments) and not the model's figure, which ``run-model --block engine`` measures on Verilator
with cocotbext-axi's memory (KWS MobileNetV2: 49 009 cycles here, 48 135 there).
"""

import argparse
import inspect
import json
import sys
import types
from pathlib import Path

import numpy as np

from ..golden.tflite.inputs import model_inputs
from ..golden.tflite.interpreter import Interpreter
from ..host.engine_compiler import compile_model
from ..hw.engine import Engine
from ..paths import build_root
from .amaranth_bench import simulate
from .axi_model import AxiMemoryModel
from .engine_stimulus import check_memory

__all__ = ["CATEGORIES", "profile"]

CATEGORIES = ("step", "launch", "gen_wait", "core_wait", "loading", "idle")


class _ProbedEngine(Engine):
    """The engine with handles on the parts the categories read (its submodules, found by name once elaborated)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        self.probe = {name: m.submodules[name] for name in ("gen", "dwgen", "streamer", "in_loader", "sched")}
        return m


def profile(raw, *, segments=None, latency=20, seed=1, max_cycles=200000, **sizes):
    """``raw``: a .tflite model's bytes (or a path); returns one dict per segment run: ``segment``, ``ops`` (its MAC
    layers' op indices), ``cycles`` (from GO to the stop) and a count per category (they sum to ``cycles``).
    ``sizes``: :class:`hw.engine.Engine`'s parameters (the defaults: the 8x8 engine)."""
    interp = Interpreter(raw, "model")
    x = model_inputs(interp.model, 1, seed)[0]
    interp.invoke(x)
    # (the engine's parameters with its defaults, read from its signature: an Engine built only to read them would
    # be an elaboratable never elaborated)
    params = {name: p.default for name, p in inspect.signature(Engine).parameters.items()
              if p.default is not inspect.Parameter.empty} | sizes
    program = compile_model(interp, rows=params["rows"], cols=params["cols"], data_width=params["data_width"],
                            **{k: params[k] for k in ("in_depth", "w_depth", "out_depth", "max_col_tiles")})
    segments = range(len(program.segments)) if segments is None else list(segments)
    for seg in segments:
        if not 0 <= seg < len(program.segments):
            raise ValueError(f"segment {seg} is not one of the model's {len(program.segments)} (0 to "
                             f"{len(program.segments) - 1})")
    results = []
    for seg in segments:
        dut = _ProbedEngine(**sizes)
        first = sum(len(program.command_ops[s]) + 1 for s in range(seg))    # (each segment ends in BARRIER or END)
        image = bytearray(program.memory)
        for ti in program.segment_inputs(seg):
            data = np.ascontiguousarray(interp.tensors[ti]).tobytes()
            image[program.tensor_addr[ti]:program.tensor_addr[ti] + len(data)] = data
        before = bytes(image)
        counts = dict.fromkeys(CATEGORIES, 0)
        stop = types.SimpleNamespace(cycles=None, error=0)
        model = AxiMemoryModel(dut, image, data_bytes=dut.data_width // 8, read_windows=[program.ro, program.rw],
                               write_windows=[program.rw], latency=latency, p_ready=1.0, seed=seed,
                               max_burst=dut.max_burst)

        async def bench(ctx, dut=dut, model=model, counts=counts, stop=stop, first=first, seg=seg):
            ctx.set(dut.ro_base, program.ro[0])
            ctx.set(dut.ro_limit, program.ro[1])
            ctx.set(dut.rw_base, program.rw[0])
            ctx.set(dut.rw_limit, program.rw[1])
            ctx.set(dut.list_addr, program.list_addr + 64 * first)
            p = dut.probe
            for t in range(max_cycles):
                ctx.set(dut.go, t == 0)
                model.cycle(ctx)
                await ctx.tick()
                gens = ctx.get(p["gen"].busy) | ctx.get(p["dwgen"].busy) | ctx.get(p["streamer"].busy)
                if ctx.get(dut.step):
                    kind = "step"
                elif ctx.get(p["sched"].queued) and ctx.get(p["sched"].in_flight):
                    kind = "launch"
                elif ctx.get(dut.mem_wait):
                    kind = "gen_wait"
                elif gens:
                    kind = "core_wait"
                elif ctx.get(p["in_loader"].busy):
                    kind = "loading"
                else:
                    kind = "idle"
                counts[kind] += 1
                if t > 0 and not ctx.get(dut.busy):
                    stop.cycles, stop.error = t + 1, ctx.get(dut.error)
                    return
            raise RuntimeError(f"segment {seg} did not stop in {max_cycles} cycles")

        simulate(dut, bench)
        if stop.error:
            raise RuntimeError(f"segment {seg} stopped with error bits {stop.error:#x}")
        ops = program.segments[seg]
        check_memory(image, before, [(program.layers[op].output_addr,
                                      np.ascontiguousarray(interp.tensors[program.layers[op].output_tensor]).tobytes())
                                     for op in ops if not program.layers[op].kept])
        results.append({"segment": seg, "ops": list(ops), "cycles": stop.cycles, **counts})
    return results


def _table(results):
    lines = [f"{'segment':>7} {'ops':>9} {'cycles':>7} " + " ".join(f"{c:>9}" for c in CATEGORIES)]
    total = dict.fromkeys(("cycles", *CATEGORIES), 0)
    for r in results:
        ops = f"{r['ops'][0]}-{r['ops'][-1]}"
        lines.append(f"{r['segment']:>7} {ops:>9} {r['cycles']:>7} " + " ".join(f"{r[c]:>9}" for c in CATEGORIES))
        for k in total:
            total[k] += r[k]
    lines.append(f"{'all':>7} {'':>9} {total['cycles']:>7} " + " ".join(f"{total[c]:>9}" for c in CATEGORIES))
    share = " ".join(f"{100 * total[c] / max(total['cycles'], 1):>8.1f}%" for c in CATEGORIES)
    lines.append(f"{'':>7} {'':>9} {'':>7} " + share)
    return "\n".join(lines)


def main(argv=None):
    from .run_model import resolve_model

    parser = argparse.ArgumentParser(description="Where the memory engine's cycles go, segment by segment "
                                                 "(8x8 engine, Amaranth's simulator, every output checked)")
    parser.add_argument("model", help="a bundled model's name or a .tflite path")
    parser.add_argument("--segments", help="comma-separated segment indices (default: all)")
    parser.add_argument("--latency", type=int, default=20, help="memory latency in cycles (default 20)")
    args = parser.parse_args(argv)
    try:
        path = resolve_model(args.model)
        segments = None if args.segments is None else [int(s) for s in args.segments.split(",")]
        results = profile(path, segments=segments, latency=args.latency)
    except (ValueError, OSError) as exc:
        print(f"engine_profile: {exc}", file=sys.stderr)
        return 2
    print(_table(results))
    out = build_root() / "profile" / f"{Path(path).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
