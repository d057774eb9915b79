"""golden.variants: each requantization arithmetic equals the runtime that implements it, on tie cases.

FULLY_CONNECTED layers with zero weights and consecutive biases put the accumulator on every
value of a range, so acc * scale lands on exact .5 ties of each rounding step: at scales 1/4 and
1/8 the five variants give five different results. Each runtime must match its own variant and
no other (docs/runtimes.md): TFLM = double, LiteRT BUILTIN_REF's FULLY_CONNECTED = float64,
LiteRT's optimized kernels (ruy) = upward, LiteRT's default interpreter (XNNPACK) = xnnpack_fp32.
"""

import numpy as np
import pytest

from int8_systolic import golden
from int8_systolic.golden import variants
from int8_systolic.golden.tflite.builder import fully_connected_model
from int8_systolic.golden.tflite.runtimes import run_tflm

DISCRIMINATORS = (4.0, 8.0, 1 / 0.3000000119)   # output scales (input and weight scales 1)


def _tie_layer(output_scale):
    bias = np.arange(-256, 256, dtype=np.int32)
    q = {"input_scale": 1.0, "input_zero_point": 0, "weight_scale": 1.0, "output_scale": output_scale,
         "output_zero_point": 0}
    return np.zeros((1, 1), np.int8), np.zeros((bias.size, 1), np.int8), bias, q


def _litert(model, x, resolver):
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=model, **({} if resolver is None else
                                                  {"experimental_op_resolver_type": resolver}))
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def test_variants_are_told_apart_by_the_discriminator_cases():
    for out_s in DISCRIMINATORS[:2]:
        x, w, b, q = _tie_layer(out_s)
        outs = {v: variants.fully_connected(x, w, b, variant=v, **q).tobytes() for v in variants.VARIANTS}
        assert len(set(outs.values())) == len(variants.VARIANTS), out_s


@pytest.mark.parametrize("variant", ["double", "single"])
def test_fixed_point_variants_equal_the_golden_kernels(variant, seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n, k = int(rng.integers(1, 20)), int(rng.integers(1, 60))
        x = rng.integers(-128, 128, (3, k)).astype(np.int8)
        w = rng.integers(-127, 128, (n, k)).astype(np.int8)
        b = rng.integers(-5000, 5000, n).astype(np.int32)
        ws = float(np.exp(rng.uniform(-8, -3))) if rng.random() < 0.5 else np.exp(rng.uniform(-8, -3, n))
        q = {"input_scale": 0.05, "input_zero_point": int(rng.integers(-128, 128)), "weight_scale": ws,
             "output_scale": float(np.exp(rng.uniform(-4, 1))), "output_zero_point": int(rng.integers(-128, 128))}
        np.testing.assert_array_equal(variants.fully_connected(x, w, b, variant=variant, **q),
                                      golden.fully_connected(x, w, b, rounding=variant, **q))


def _runtimes():
    from ai_edge_litert.interpreter import OpResolverType

    return {"TFLM": ("double", lambda m, x: run_tflm(m, [x])[0]),
            "LiteRT BUILTIN_REF": ("float64", lambda m, x: _litert(m, x, OpResolverType.BUILTIN_REF)),
            "LiteRT optimized (ruy)": ("upward", lambda m, x: _litert(
                m, x, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)),
            "LiteRT default (XNNPACK)": ("xnnpack_fp32", lambda m, x: _litert(m, x, None))}


@pytest.mark.litert
@pytest.mark.parametrize("runtime", ["TFLM", "LiteRT BUILTIN_REF", "LiteRT optimized (ruy)",
                                     "LiteRT default (XNNPACK)"])
def test_each_runtime_matches_its_variant_and_no_other(runtime):
    variant, run = _runtimes()[runtime]
    matched = dict.fromkeys(variants.VARIANTS, 0)
    for out_s in DISCRIMINATORS:
        x, w, b, q = _tie_layer(out_s)
        got = np.asarray(run(fully_connected_model(w, b, batch=1, **q), x))
        for v in variants.VARIANTS:
            matched[v] += bool(np.array_equal(got, variants.fully_connected(x, w, b, variant=v, **q)))
    assert matched[variant] == len(DISCRIMINATORS), matched
    assert all(matched[v] < len(DISCRIMINATORS) for v in variants.VARIANTS if v != variant), matched


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant must be one of double, single, upward, float64, xnnpack_fp32"):
        variants.requantize(np.zeros(2, np.int32), "nearest", input_scale=1.0, weight_scale=1.0, output_scale=2.0)
