"""Time the golden model against TFLite-Micro on whole models and on single layers (``make bench-golden``).

Models: each bundled MLPerf Tiny class model and the wake-word models, one inference in the
golden interpreter (``Interpreter.invoke``, Prepare done beforehand, as TFLM's
``AllocateTensors``) against one TFLM ``invoke()`` on the same input; the two are timed
alternately and each keeps its best, so a busy machine slows both alike. Every output of
every model is compared bit for bit, so the benchmark cannot time a wrong answer.

Layers: each built once as a single-op .tflite model; the golden model's time is one call
of the scale-level op (parameter derivation and argument checks included).

Results are printed and written to build/bench/golden.json.
"""

import functools
import json
import os
import pathlib
import platform
import time

import numpy as np

from int8_systolic import golden
from int8_systolic.cli_support import ArgumentParser, command
from int8_systolic.golden.tflite import builder


def _best_time(fn, repeats, min_seconds=0.2):
    """Best wall time of ``fn()`` over ``repeats`` runs (at least ``min_seconds`` of runs in all)."""
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < repeats or spent < min_seconds:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        spent += dt
        runs += 1
    return best


def _layers(rng):
    def fc(batch, k, n):
        x = rng.integers(-128, 128, (batch, k), dtype=np.int64).astype(np.int8)
        w = rng.integers(-127, 128, (n, k), dtype=np.int64).astype(np.int8)
        b = rng.integers(-(2**16), 2**16, n, dtype=np.int64).astype(np.int32)
        q = {"input_scale": 0.02, "input_zero_point": -3, "weight_scale": 0.004, "output_scale": 0.8,
             "output_zero_point": 5, "activation": "RELU"}
        model = builder.fully_connected_model(w, b, batch=batch, **q)
        return (f"FULLY_CONNECTED {batch}x{k} -> {n}", batch * k * n, model, [x],
                lambda: golden.fully_connected(x, w, b, **q))

    def conv(h, w_, cin, cout, kh, stride, depthwise=False, mult=1):
        x = rng.integers(-128, 128, (1, h, w_, cin), dtype=np.int64).astype(np.int8)
        nout = cin * mult if depthwise else cout
        wshape = (1, kh, kh, nout) if depthwise else (cout, kh, kh, cin)
        wt = rng.integers(-127, 128, wshape, dtype=np.int64).astype(np.int8)
        b = rng.integers(-(2**16), 2**16, nout, dtype=np.int64).astype(np.int32)
        q = {"input_scale": 0.02, "input_zero_point": -3,
             "weight_scale": rng.uniform(0.002, 0.01, nout).astype(np.float32), "output_scale": 0.5,
             "output_zero_point": -7, "activation": "RELU6", "stride": (stride, stride), "padding": "SAME"}
        oh, ow = -(-h // stride), -(-w_ // stride)
        if depthwise:
            q["depth_multiplier"] = mult
            model = builder.depthwise_conv_2d_model(wt, b, input_shape=x.shape, output_shape=(1, oh, ow, nout), **q)
            fn = golden.depthwise_conv_2d
            name = f"DEPTHWISE_CONV_2D {h}x{w_}x{cin} {kh}x{kh} s{stride} m{mult}"
            macs = oh * ow * nout * kh * kh
        else:
            model = builder.conv_2d_model(wt, b, input_shape=x.shape, output_shape=(1, oh, ow, cout), **q)
            fn = golden.conv_2d
            name = f"CONV_2D {h}x{w_}x{cin} -> {cout} {kh}x{kh} s{stride}"
            macs = oh * ow * cout * kh * kh * cin
        return name, macs, model, [x], lambda: fn(x, wt, b, **q)

    return [fc(1, 1024, 1000), fc(16, 256, 256), conv(32, 32, 32, 32, 3, 1), conv(16, 16, 64, 64, 3, 2),
            conv(32, 32, 32, 0, 3, 1, depthwise=True, mult=1), conv(49, 10, 40, 0, 3, 1, depthwise=True, mult=2)]


def _tflm_invoke(tflm, inputs):
    for i, v in enumerate(inputs):
        tflm.set_input(v, i)
    tflm.invoke()


def _tflm_outputs(tflm, inputs, n):
    _tflm_invoke(tflm, inputs)
    return [np.asarray(tflm.get_output(i)).tobytes() for i in range(n)]


def _model_rows(repeats, min_seconds=1.0):
    from tflite_micro.python.tflite_micro import runtime

    from int8_systolic.golden.tflite.inputs import model_inputs
    from int8_systolic.golden.tflite.interpreter import Interpreter
    from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_models
    from int8_systolic.golden.tflite.wakeword import wakeword_models

    rows = []
    for path in [*mlperf_models(), *wakeword_models()]:
        raw = path.read_bytes()
        ours = Interpreter(raw, path.name)
        x = [np.ascontiguousarray(v) for v in model_inputs(ours.model, 1, 0)[0]]
        # bit-exactness on fresh interpreters (the wake-word models carry state from one invoke to the next)
        tflm = runtime.Interpreter.from_bytes(raw, arena_size=8 << 20)
        golden_out = [o.tobytes() for o in Interpreter(raw, path.name).invoke(x)]
        exact = _tflm_outputs(tflm, x, len(golden_out)) == golden_out
        # TFLM reuses the input tensor's arena memory for intermediates: set the input before every invoke
        best = {"golden": float("inf"), "tflm": float("inf")}
        spent, runs = 0.0, 0
        while runs < repeats or spent < min_seconds:
            for name, fn in (("tflm", functools.partial(_tflm_invoke, tflm, x)),
                             ("golden", functools.partial(ours.invoke, x))):
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                best[name] = min(best[name], dt)
                spent += dt
            runs += 1
        rows.append({"model": path.stem, "ops": len(ours.model.subgraphs[0].operators), "tflm_s": best["tflm"],
                     "golden_s": best["golden"], "speedup": best["tflm"] / best["golden"], "bit_exact": exact,
                     "runs": runs, "target": path.stem in MODEL_NAMES})
    return rows


@command("python -m int8_systolic.golden.bench")
def main(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per layer (best is kept)")
    parser.add_argument("--out", default="build/bench/golden.json", help="where to write the JSON figures")
    args = parser.parse_args(argv)

    from tflite_micro.python.tflite_micro import runtime

    from int8_systolic.golden.tflite.runtimes import tflm_arena_size

    models = _model_rows(args.repeats)
    print(f"{'model':<30} {'ops':>4} {'TFLM ms':>9} {'golden ms':>10} {'TFLM/golden':>12}  bit-exact")
    for r in models:
        print(f"{r['model']:<30} {r['ops']:>4} {r['tflm_s'] * 1e3:>9.3f} {r['golden_s'] * 1e3:>10.3f} "
              f"{r['speedup']:>11.2f}x  {'yes' if r['bit_exact'] else 'NO'}")
    met = [r for r in models if r["target"] and r["speedup"] >= 1.0]
    print(f"target (golden at least as fast as TFLM on each MLPerf Tiny class model): "
          f"{len(met)} of {sum(r['target'] for r in models)} models")
    print()
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'layer':<40} {'MACs':>10} {'TFLM ms':>9} {'golden ms':>10} {'speedup':>8}  bit-exact")
    for name, macs, model, inputs, golden_fn in _layers(rng):
        interp = runtime.Interpreter.from_bytes(model, arena_size=tflm_arena_size(model, inputs))
        for i, x in enumerate(inputs):
            interp.set_input(x, i)
        t_tflm = _best_time(interp.invoke, args.repeats)
        t_golden = _best_time(golden_fn, args.repeats)
        exact = bool(np.array_equal(interp.get_output(0), golden_fn()))
        rows.append({"layer": name, "macs": macs, "tflm_s": t_tflm, "golden_s": t_golden,
                     "speedup": t_tflm / t_golden, "bit_exact": exact})
        print(f"{name:<40} {macs:>10} {t_tflm * 1e3:>9.2f} {t_golden * 1e3:>10.2f} {t_tflm / t_golden:>7.1f}x  "
              f"{'yes' if exact else 'NO'}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "models": models,
                               "layers": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    slow = [r["model"] for r in models if r["target"] and r["speedup"] < 1.0] + \
        [r["layer"] for r in rows if r["speedup"] < 1.0]
    bad = [r["model"] for r in models if not r["bit_exact"]] + [r["layer"] for r in rows if not r["bit_exact"]]
    if bad:
        print(f"ERROR: golden differs from TFLM on: {', '.join(bad)}")
    if slow:
        print(f"golden is slower than TFLM on: {', '.join(slow)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
