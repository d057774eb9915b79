"""Quantization parameters, quantize/dequantize, range tracking and activation bounds."""

import math

import numpy as np
import pytest

from int8_systolic import golden
from int8_systolic.golden.tflite.builder import ModelBuilder, schema
from int8_systolic.golden.tflite.runtimes import run_tflm


def test_choose_quantization_params_rounds_the_zero_point():
    # zero point = -128 + 0.35 / (1.35 / 255) = -61.888...: TFLite rounds to -62; int() would give -61.
    scale, zp = golden.choose_quantization_params(-0.35, 1.0)
    assert scale == pytest.approx(1.35 / 255)
    exact = -128 + 0.35 / (1.35 / 255)
    assert zp == -62 == math.floor(exact + 0.5)
    assert int(exact) == -61  # the truncating variant some write-ups use differs here


@pytest.mark.parametrize(("rmin", "rmax"), [(0.5, 2.0), (-3.0, -1.0), (-1.0, 1.0), (-0.001, 1e4), (-7e-3, 3e-5)])
def test_choose_quantization_params_contains_zero_exactly(rmin, rmax):
    scale, zp = golden.choose_quantization_params(rmin, rmax)
    assert -128 <= zp <= 127
    lo, hi = min(rmin, 0.0), max(rmax, 0.0)
    assert scale == pytest.approx((hi - lo) / 255)
    assert golden.dequantize(np.int8(zp), scale, zp) == 0.0  # real 0 exactly representable
    assert golden.quantize(0.0, scale, zp) == zp


def test_choose_quantization_params_degenerate_range():
    assert golden.choose_quantization_params(0.0, 0.0) == (0.0, 0)


def test_quantize_rounds_half_away_and_clamps():
    q = golden.quantize([0.5, -0.5, 1.5, -1.5, 2.5, 1e9, -1e9], 1.0, 0)
    assert q.tolist() == [1, -1, 2, -2, 3, 127, -128]
    assert q.dtype == np.int8


def _quantize_model(shape, scale, zp):
    mb = ModelBuilder()
    x = mb.tensor("x", shape, np.float32)
    y = mb.tensor("y", shape, np.int8, scale=scale, zero_point=zp)
    mb.operator(schema.BuiltinOperator.QUANTIZE, [x], [y])
    return mb.finish([x], [y])


def _dequantize_model(shape, scale, zp):
    mb = ModelBuilder()
    x = mb.tensor("x", shape, np.int8, scale=scale, zero_point=zp)
    y = mb.tensor("y", shape, np.float32)
    mb.operator(schema.BuiltinOperator.DEQUANTIZE, [x], [y])
    return mb.finish([x], [y])


@pytest.mark.tflm
def test_quantize_and_dequantize_match_tflm(seed, record_property):
    rng = np.random.default_rng(seed + 77)
    n_cases = 40
    for _ in range(n_cases):
        scale = float(np.exp(rng.uniform(np.log(1e-3), np.log(1.0))))
        zp = int(rng.integers(-128, 128))
        real = rng.normal(0, 100 * scale, size=64).astype(np.float32)
        real[:8] = (np.arange(8) - 4 + 0.5) * np.float32(scale)  # values near .5 ties
        got = run_tflm(_quantize_model(real.shape, scale, zp), [real])[0]
        assert np.array_equal(got, golden.quantize(real, scale, zp)), (scale, zp)
        q = rng.integers(-128, 128, size=64).astype(np.int8)
        got = run_tflm(_dequantize_model(q.shape, scale, zp), [q])[0]
        assert np.array_equal(got, golden.dequantize(q, scale, zp)), (scale, zp)
    record_property("crosscheck", {"against": "TFLM", "op": "quantize/dequantize", "cases": 2 * n_cases,
                                   "matched": 2 * n_cases, "elements": 2 * n_cases * 64})


def test_per_axis_quantize_equals_per_slice(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    scales = np.float32([0.01, 0.02, 0.05, 0.1])
    zps = np.array([-3, 0, 5, 127])
    q = golden.quantize(x, scales, zps, axis=1)
    for c in range(4):
        assert np.array_equal(q[:, c, :], golden.quantize(x[:, c, :], scales[c], int(zps[c])))
    d = golden.dequantize(q, scales, zps, axis=1)
    for c in range(4):
        assert np.array_equal(d[:, c, :], golden.dequantize(q[:, c, :], scales[c], int(zps[c])))


@pytest.mark.parametrize("axis", [None, 0, 3, -1])
def test_symmetric_weights(seed, axis):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(4, 3, 3, 5)).astype(np.float32)
    w[..., 2] = 0.0 if axis in (3, -1) else w[..., 2]
    q, scale = golden.quantize_weights_symmetric(w, axis)
    assert q.dtype == np.int8
    assert q.min() >= -127
    assert q.max() <= 127
    if axis is None:
        assert np.abs(q).max() == 127
        assert scale == np.float32(np.abs(w).max() / np.float32(127))
    else:
        ax = axis % 4
        other = tuple(i for i in range(4) if i != ax)
        peak = np.abs(q).max(axis=other)
        assert scale.shape == (w.shape[ax],)
        for c in range(w.shape[ax]):
            if np.any(np.take(w, c, axis=ax)):
                assert peak[c] == 127
            else:
                assert peak[c] == 0
                assert scale[c] == 1.0
    # Dequantized weights are within half a step of the originals.
    bscale = scale if axis is None else np.expand_dims(scale, tuple(i for i in range(4) if i != axis % 4))
    assert np.all(np.abs(q * bscale - w) <= bscale / 2 + 1e-7)


def test_moving_average_min_max_rules():
    t = golden.MovingAverageMinMax(decay=0.5)
    t.update([1.0, 3.0])                 # first batch initialises: [1, 3]
    assert (t.min, t.max) == (1.0, 3.0)
    assert t.range() == (0.0, 3.0)       # 0 always in range
    t.update([-5.0, 1.0])
    assert (t.min, t.max) == (0.5 * 1 + 0.5 * -5, 0.5 * 3 + 0.5 * 1)
    scale, zp = t.quantization_params()
    assert -128 <= zp <= 127
    assert golden.dequantize(np.int8(zp), scale, zp) == 0.0

    sym = golden.MovingAverageMinMax(decay=0.9, symmetric=True, narrow_range=True).update([-0.5, 2.0])
    assert sym.range() == (-2.0, 2.0)
    scale, zp = sym.quantization_params()
    assert zp == 0
    assert scale == pytest.approx(4.0 / 254)
    with pytest.raises(ValueError, match="update"):
        golden.MovingAverageMinMax().range()


def test_fake_quant_nudge_moves_range_onto_grid():
    nmin, nmax, scale, zp = golden.fake_quant_nudge(-0.35, 1.0)
    assert nmax - nmin == pytest.approx(255 * scale)
    assert -nmin / scale == pytest.approx(round(-nmin / scale))  # 0 on the grid
    assert zp == -128 + round(0.35 / scale)


@pytest.mark.parametrize(("activation", "scale", "zp", "expected"), [
    ("NONE", 0.1, 0, (-128, 127)),
    ("RELU", 0.1, -10, (-10, 127)),
    ("RELU6", 12.0, 0, (0, 1)),          # 6 / 12 = 0.5 exactly: roundf rounds away from zero
    ("RELU6", 4.0, -3, (-3, -1)),        # 1.5 -> 2
    ("RELU6", 0.01, 100, (100, 127)),    # bound above int8: clamped
    ("RELU_N1_TO_1", 2.0, 10, (9, 11)),  # +-0.5 -> +-1
    ("RELU_N1_TO_1", 1e-3, 0, (-128, 127)),
])
def test_activation_range(activation, scale, zp, expected):
    # Expected bounds follow from zero_point + roundf(bound / scale) by hand, as commented.
    assert golden.activation_range(activation, scale, zp) == expected
