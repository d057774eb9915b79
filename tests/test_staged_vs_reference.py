"""The staged, vectorised golden model equals line-for-line ports of TFLite's loops.

The staged form (raw int8 GEMM, folded bias, requantize, + zero point, clamp; conv via
im2col with zero-point padding) is the contract the RTL implements; these tests pin it
to TFLite's own loop nests on random and corner inputs, in both rounding variants.
"""

import numpy as np
import pytest

from int8_systolic import golden
from int8_systolic.golden import reference as ref
from int8_systolic.golden.conformance import mac_cases as cases
from int8_systolic.golden.ops import add_params, conv_params, fully_connected_params
from int8_systolic.golden.quantization import activation_range

ROUNDINGS = ["double", "single"]


def _kernel_params(case, rounding):
    p = case.params
    common = {"input_scale": p["input_scale"], "input_zero_point": p["input_zero_point"],
              "output_scale": p["output_scale"], "output_zero_point": p["output_zero_point"],
              "activation": p.get("activation", "NONE"), "rounding": rounding}
    if case.op == "fully_connected":
        return fully_connected_params(case.tensors["weights"].shape, weight_scale=p["weight_scale"], **common)
    channels = case.tensors["weights"].shape[0 if case.op == "conv_2d" else 3]
    return conv_params(weight_scale=p["weight_scale"], channels=channels, **common)


def _ref_args(kp):
    mult, shift = kp["output_multiplier"], kp["output_shift"]
    return {"input_offset": kp["input_offset"], "output_offset": kp["output_offset"],
            "output_multiplier": np.asarray(mult).tolist(), "output_shift": np.asarray(shift).tolist(),
            "quantized_activation_min": kp["quantized_activation_min"],
            "quantized_activation_max": kp["quantized_activation_max"], "rounding": kp["rounding"]}


def _bias_list(bias):
    return None if bias is None else bias.tolist()


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_fully_connected_staged_equals_loop(seed, rounding):
    for case in cases.random_cases("fully_connected", 40, seed + 11):
        kp = _kernel_params(case, rounding)
        t = case.tensors
        want = ref.fully_connected(t["input"].tolist(), t["weights"].tolist(), _bias_list(t["bias"]), **_ref_args(kp))
        assert case.golden(rounding=rounding).tolist() == want, case.describe()


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_conv_2d_staged_equals_loop(seed, rounding):
    for case in cases.random_cases("conv_2d", 12, seed + 12):
        kp = _kernel_params(case, rounding)
        t, p = case.tensors, case.params
        want = ref.conv_per_channel(t["input"].tolist(), t["weights"].tolist(), _bias_list(t["bias"]),
                                    stride=p["stride"], dilation=p["dilation"], padding=p["padding"],
                                    **_ref_args(kp))
        assert case.golden(rounding=rounding).tolist() == want, case.describe()


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_depthwise_staged_equals_loop(seed, rounding):
    for case in cases.random_cases("depthwise_conv_2d", 12, seed + 13):
        kp = _kernel_params(case, rounding)
        t, p = case.tensors, case.params
        want = ref.depthwise_conv_per_channel(t["input"].tolist(), t["weights"].tolist(), _bias_list(t["bias"]),
                                              stride=p["stride"], dilation=p["dilation"], padding=p["padding"],
                                              depth_multiplier=p["depth_multiplier"], **_ref_args(kp))
        assert case.golden(rounding=rounding).tolist() == want, case.describe()


@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_add_equals_loop(seed, rounding):
    for case in cases.random_cases("add", 30, seed + 14):
        p = dict(case.params, rounding=rounding)
        a, b = np.broadcast_arrays(case.tensors["input1"], case.tensors["input2"])
        want = ref.add_elementwise(a.ravel().tolist(), b.ravel().tolist(), **add_params(**p))
        assert case.golden(rounding=rounding).ravel().tolist() == want, case.describe()


@pytest.mark.parametrize("kind", ["average", "max"])
def test_pools_equal_loop(seed, kind):
    for case in cases.random_cases(f"{kind}_pool_2d", 25, seed + 15):
        p = case.params
        lo, hi = activation_range(p["activation"], p["scale"], p["zero_point"])
        fn = ref.average_pool if kind == "average" else ref.max_pool
        want = fn(case.tensors["input"].tolist(), filter_size=p["filter_size"], stride=p["stride"],
                  padding=p["padding"], quantized_activation_min=lo, quantized_activation_max=hi)
        assert case.golden().tolist() == want, case.describe()


def test_directed_fully_connected_cases_equal_loop():
    """Every directed corner (ties, int32 limits, wraps, shifts) agrees with the loop port, both roundings."""
    for case in cases.directed_cases():
        if case.op != "fully_connected" or case.tensors["input"].shape[1] > 4096:
            continue
        for rounding in ROUNDINGS:
            if rounding == "single" and np.max(_kernel_params(case, "double")["output_shift"]) > 30:
                continue
            kp = _kernel_params(case, rounding)
            t = case.tensors
            want = ref.fully_connected(t["input"].tolist(), t["weights"].tolist(), _bias_list(t["bias"]),
                                       **_ref_args(kp))
            assert case.golden(rounding=rounding).tolist() == want, case.describe()


def test_int32_wraparound_matches_loop_for_huge_k():
    """K = 66 400 taps of (-128 - 127) * -127 overflows int32 in the loop; the staged sum wraps identically."""
    k = 66400
    x = np.full((1, k), -128, np.int8)
    w = np.full((2, k), -127, np.int8)
    bias = np.array([0, 2**31 - 1], np.int32)
    kw = {"input_offset": -127, "output_multiplier": 2**30, "output_shift": -23, "output_offset": 0}
    stages = golden.fully_connected_kernel(x, w, bias, return_stages=True, **kw)
    loop_acc = 0
    for _ in range(k):
        loop_acc = ((loop_acc + 32385 + 2**31) % 2**32) - 2**31
    assert int(stages.acc[0, 0]) == loop_acc
    assert k * 32385 > 2**31 - 1
    assert loop_acc < 0
    want = ref.fully_connected(x.tolist(), w.tolist(), bias.tolist(), output_offset=0, output_multiplier=2**30,
                               output_shift=-23, input_offset=-127, quantized_activation_min=-128,
                               quantized_activation_max=127)
    assert stages.output.tolist() == want


def test_directed_cases_reach_their_corners():
    """Guard against the directed set silently losing the corners it exists for."""
    reached = set()
    for case in cases.directed_cases():
        if case.op != "fully_connected":
            continue
        kp = _kernel_params(case, "double")
        st = golden.fully_connected_kernel(case.tensors["input"], case.tensors["weights"], case.tensors["bias"],
                                           return_stages=True, **dict(kp.items()))
        shift = np.asarray(kp["output_shift"])
        mult = np.asarray(kp["output_multiplier"])
        if np.any(shift > 0):
            reached.add("positive shift")
            pre = st.acc.astype(np.int64) << np.maximum(shift, 0)
            if np.any((pre > 2**31 - 1) | (pre < -(2**31))):
                reached.add("pre-shift wraps")
        if np.any(shift < -19):
            reached.add("multiplier below 2^-20")
        if np.any(mult == 0):
            reached.add("multiplier flushed to 0")
        if np.any(st.acc == 2**31 - 1) or np.any(st.acc == -(2**31)):
            reached.add("accumulator at int32 limit")
        if np.any(st.offset.astype(np.int64) != st.scaled.astype(np.int64) + kp["output_offset"]):
            reached.add("output offset wraps")
        p = case.params
        effective = (np.float64(np.float32(p["input_scale"])) * np.asarray(p["weight_scale"], np.float32)
                     / np.float64(np.float32(p["output_scale"])))
        if np.asarray(p["weight_scale"]).ndim == 1:  # per-channel path: double product
            mantissa, _ = np.frexp(effective)
            if np.any(np.round(mantissa * 2.0**31) == 2.0**31) and np.all(mult == 2**30):
                reached.add("mantissa fix-up")
        single = golden.fully_connected_kernel(case.tensors["input"], case.tensors["weights"],
                                               case.tensors["bias"], **dict(kp, rounding="single")) \
            if np.all(shift <= 30) else st.output
        if np.any(single != st.output):
            reached.add("double/single ties differ")
        lo, hi = kp["quantized_activation_min"], kp["quantized_activation_max"]
        if (lo > -128 or hi < 127) and np.any(st.output == lo) and np.any(st.output == hi):
            reached.add("activation clamps both ends")
    assert reached == {"positive shift", "pre-shift wraps", "multiplier below 2^-20", "multiplier flushed to 0",
                       "accumulator at int32 limit", "output offset wraps", "mantissa fix-up",
                       "double/single ties differ", "activation clamps both ends"}
