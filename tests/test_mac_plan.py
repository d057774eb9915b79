"""The golden interpreter's fast MAC path (int8_systolic/golden/reference_ops/mac_plan.py) against the staged kernels.

The staged kernels are what the RTL is checked against and what tests/test_staged_vs_reference.py
ties to TFLite's reference loops; the fast path must equal them bit for bit on every layer
kind, including per-channel shifts that mix left shifts, no shift and right shifts, int32
accumulator wrap-around, every activation and padding, strides, dilations and depth
multipliers. Also the fast MultiplyByQuantizedMultiplier of int8_systolic/golden/reference_ops/_fast.py.
"""

import numpy as np
import pytest

from int8_systolic.golden import kernels
from int8_systolic.golden.fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier
from int8_systolic.golden.reference_ops import _fast, mac_plan


def _params(rng, n, scalar=False, moderate=False):
    # effective scales from 2**-25 to 2**5: right shifts, no shift and left shifts in one layer; or (moderate) only
    # right shifts up to 22, which the one-shift form of mac_plan.requantize handles
    real = np.exp2(rng.uniform(-21, -1, 1 if scalar else n) if moderate else rng.uniform(-25, 5, 1 if scalar else n))
    real[rng.random(real.shape) < 0.2] = 1.0           # shift exactly 0 (M = 2**30, shift 1... or 0)
    mult, shift = quantize_multiplier(real)
    act = sorted(int(v) for v in rng.integers(-128, 128, 2))
    p = {"input_offset": -int(rng.integers(-128, 128)), "output_offset": int(rng.integers(-128, 128)),
         "output_multiplier": mult[0] if scalar else mult, "output_shift": int(shift[0]) if scalar else shift,
         "quantized_activation_min": act[0], "quantized_activation_max": act[1], "rounding": "double"}
    return p


@pytest.mark.parametrize("kind", ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"])
def test_fast_path_equals_staged_kernels(kind, seed):
    rng = np.random.default_rng([seed, ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"].index(kind)])
    paths = set()
    for case in range(40):
        big_bias = case % 4 == 0   # biases near the int32 limits: the accumulator wraps
        if kind == "FULLY_CONNECTED":
            n, k = int(rng.integers(1, 40)), int(rng.integers(1, 2100))
            x = rng.integers(-128, 128, (int(rng.integers(1, 5)), k)).astype(np.int8)
            w = rng.integers(-127, 128, (n, k)).astype(np.int8)
            geometry = {}
        else:
            b, h, wd, cin = 1 + case % 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
            kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
            geometry = {"stride": tuple(int(v) for v in rng.integers(1, 3, 2)),
                        "dilation": tuple(int(v) for v in rng.integers(1, 3, 2)),
                        "padding": "SAME" if case % 3 else "VALID"}
            if geometry["padding"] == "VALID" and ((kh - 1) * geometry["dilation"][0] + 1 > h
                                                   or (kw - 1) * geometry["dilation"][1] + 1 > wd):
                geometry["padding"] = "SAME"
            x = rng.integers(-128, 128, (b, h, wd, cin)).astype(np.int8)
            if kind == "CONV_2D":
                n = int(rng.integers(1, 20))
                w = rng.integers(-127, 128, (n, kh, kw, cin)).astype(np.int8)
            else:
                geometry["depth_multiplier"] = m = int(rng.integers(1, 4))
                n = cin * m
                w = rng.integers(-127, 128, (1, kh, kw, n)).astype(np.int8)
        bias = rng.integers(-(2**31) if big_bias else -(2**20), 2**31 if big_bias else 2**20, n).astype(np.int32) \
            if case % 5 else None
        params = _params(rng, n, scalar=kind == "FULLY_CONNECTED" and case % 2 == 0, moderate=case % 3 == 1)
        if kind == "FULLY_CONNECTED":
            want = kernels.fully_connected_kernel(x, w, bias, **params)
        elif kind == "CONV_2D":
            want = kernels.conv_2d_kernel(x, w, bias, **geometry, **params)
        else:
            want = kernels.depthwise_conv_2d_kernel(x, w, bias, **geometry, **params)
        plan = mac_plan.plan(kind, w, bias, params, geometry, x.shape)
        paths.add("one shift" if plan["fused"] is not None else "two roundings")
        got = mac_plan.run(plan, x, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} case {case} (SEED={seed})")
    assert paths == {"one shift", "two roundings"}, paths


def test_fast_mbqm_equals_reference(seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.integers(-(2**31), 2**31, 20000), [-(2**31), 2**31 - 1, 0, 1, -1]]).astype(np.int64)
    for _ in range(60):
        m, shift = quantize_multiplier(float(np.exp2(rng.uniform(-31, 8))))
        if shift > 30 or m == 0:
            continue
        np.testing.assert_array_equal(_fast.mbqm(x, m, shift), multiply_by_quantized_multiplier(x, m, shift),
                                      err_msg=f"M {m} shift {shift}")


@pytest.mark.parametrize("right", [0, 1, 2, 7, 15, 22])
def test_requantize_paths_equal_the_reference(right, seed):
    """mac_plan.requantize, both the one-shift form and the two-rounding form, against MultiplyByQuantizedMultiplier
    + offset + clamp on accumulators spread over the whole output range, per tensor and per channel, including
    M = 2**30 (every odd product a tie of the first rounding) and exact ties of the second."""
    rng = np.random.default_rng([seed, right])
    n = 6
    mult = rng.integers(1 << 30, 1 << 31, n)
    mult[0] = 1 << 30
    shift = np.full(n, -right)
    offset = int(rng.integers(-128, 128))
    params = {"input_offset": 0, "output_offset": offset, "output_multiplier": mult, "output_shift": shift,
              "quantized_activation_min": -128, "quantized_activation_max": 127, "rounding": "double"}
    w = np.ones((n, 1), np.int8)
    for folded_wrap in (False, True):
        bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
        plan = mac_plan.plan("FULLY_CONNECTED", w, bias, params, {})
        plan["needs_wrap"] = folded_wrap                # the wrapping path computes the same on these values
        if folded_wrap:
            plan["fused"] = None
        span = (200 << right) + 4
        acc = rng.integers(-span, span, (4000, n)) - bias
        acc[:64] = ((np.arange(64) - 32) << max(right - 1, 0))[:, None] - bias   # exact ties of the second rounding
        want = np.clip(multiply_by_quantized_multiplier(acc + bias, mult, shift).astype(np.int64) + offset,
                       -128, 127).astype(np.int8)
        got = mac_plan.requantize(acc.astype(np.int64), plan)
        np.testing.assert_array_equal(got, want, err_msg=f"right shift {right}, fused {plan['fused'] is not None}")


def test_compiled_fully_connected_step_equals_run(seed):
    """The interpreter's closure for a one-chunk, one-shift FULLY_CONNECTED equals mac_plan.run."""
    rng = np.random.default_rng(seed)
    seen = 0
    for _ in range(30):
        n, k = int(rng.integers(1, 50)), int(rng.integers(1, 1025))
        w = rng.integers(-127, 128, (n, k)).astype(np.int8)
        bias = rng.integers(-5000, 5000, n).astype(np.int32)
        params = _params(rng, n, scalar=bool(rng.random() < 0.5), moderate=True)
        p = mac_plan.plan("FULLY_CONNECTED", w, bias, params, {})
        x = rng.integers(-128, 128, (int(rng.integers(1, 4)), k)).astype(np.int8)
        want = kernels.fully_connected_kernel(x, w, bias, **params)
        np.testing.assert_array_equal(mac_plan.compile_step(p, want.shape, k)(x), want)
        seen += p["fused"] is not None
    assert seen
