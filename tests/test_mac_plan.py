"""The golden interpreter's fast MAC path (golden/reference_ops/mac_plan.py) against the staged kernels.

The staged kernels are what the RTL is checked against and what tests/test_staged_vs_reference.py
ties to TFLite's reference loops; the fast path must equal them bit for bit on every layer
kind, including per-channel shifts that mix left shifts, no shift and right shifts, int32
accumulator wrap-around, every activation and padding, strides, dilations and depth
multipliers. Also the fast MultiplyByQuantizedMultiplier of golden/reference_ops/_fast.py.
"""

import numpy as np
import pytest

from golden import kernels
from golden.fixedpoint import multiply_by_quantized_multiplier, quantize_multiplier
from golden.reference_ops import _fast, mac_plan


def _params(rng, n, scalar=False):
    # effective scales from 2**-25 to 2**5: right shifts, no shift and left shifts in one layer
    real = np.exp2(rng.uniform(-25, 5, 1 if scalar else n))
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
        params = _params(rng, n, scalar=kind == "FULLY_CONNECTED" and case % 2 == 0)
        if kind == "FULLY_CONNECTED":
            want = kernels.fully_connected_kernel(x, w, bias, **params)
        elif kind == "CONV_2D":
            want = kernels.conv_2d_kernel(x, w, bias, **geometry, **params)
        else:
            want = kernels.depthwise_conv_2d_kernel(x, w, bias, **geometry, **params)
        plan = mac_plan.plan(kind, w, bias, params, geometry, x.shape)
        got = mac_plan.run(plan, x, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} case {case} (SEED={seed})")


def test_fast_mbqm_equals_reference(seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.integers(-(2**31), 2**31, 20000), [-(2**31), 2**31 - 1, 0, 1, -1]]).astype(np.int64)
    for _ in range(60):
        m, shift = quantize_multiplier(float(np.exp2(rng.uniform(-31, 8))))
        if shift > 30 or m == 0:
            continue
        np.testing.assert_array_equal(_fast.mbqm(x, m, shift), multiply_by_quantized_multiplier(x, m, shift),
                                      err_msg=f"M {m} shift {shift}")
