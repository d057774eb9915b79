"""Random and directed int8 test cases shared by the golden-model tests.

Each case is a :class:`Case`: the op name, its int8/int32 tensors and the scale-level
keyword arguments of the golden op (``golden.fully_connected(**...)`` etc.). Random
cases draw shapes, zero points over the whole int8 range, weight scales per tensor or
per channel, activations, and effective multipliers spread from ~2^-24 to above 1;
half of them pick the output scale from the actual accumulator range so that outputs
are not all saturated.
"""

import dataclasses

import numpy as np

from int8_systolic import golden
from int8_systolic.golden.staged import compute_out_size

ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


@dataclasses.dataclass
class Case:
    op: str
    tensors: dict
    params: dict
    label: str = ""

    def golden(self, **extra):
        fn = getattr(golden, self.op)
        if self.op in ("fully_connected", "conv_2d", "depthwise_conv_2d"):
            return fn(self.tensors["input"], self.tensors["weights"], self.tensors["bias"], **self.params, **extra)
        if self.op == "add":
            return fn(self.tensors["input1"], self.tensors["input2"], **self.params, **extra)
        return fn(self.tensors["input"], **self.params, **extra)

    def describe(self):
        shapes = {k: list(np.shape(v)) for k, v in self.tensors.items() if v is not None}
        return f"{self.op} {self.label} shapes={shapes} params={self.params}"


def log_uniform(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _int8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)


def _output_quant(rng, acc_real):
    """Output (scale, zero point): half the time from the real range of the result, else random."""
    if rng.random() < 0.5 and acc_real.size and np.ptp(acc_real) > 0:
        lo, hi = float(acc_real.min()), float(acc_real.max())
        scale = (hi - lo) / 255.0 * rng.uniform(0.5, 2.0)
        zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
        return scale, zp
    return None, int(rng.integers(-128, 128))


def _finish_gemm_case(rng, op, tensors, params, in_scale, w_scale, fold_raw):
    """Pick the output scale: from the real accumulator range, or from a random multiplier."""
    scale, zp = _output_quant(rng, fold_raw * in_scale * np.mean(w_scale))
    if scale is None:
        multiplier = log_uniform(rng, 2.0**-24, 4.0)
        scale = in_scale * float(np.mean(w_scale)) / multiplier
    params.update(output_scale=scale, output_zero_point=zp, activation=str(rng.choice(ACTIVATIONS)))
    return Case(op, tensors, params, label="random")


def _weight_scale(rng, n, per_channel):
    if per_channel:
        return np.array([log_uniform(rng, 1e-4, 0.1) for _ in range(n)], dtype=np.float32)
    return log_uniform(rng, 1e-4, 0.1)


def _bias(rng, n):
    """Bias of a realistic size (a few hundred output steps) or occasionally anywhere in int32."""
    if rng.random() < 0.1:
        return rng.integers(-(2**31), 2**31, size=n, dtype=np.int64).astype(np.int32)
    if rng.random() < 0.1:
        return None
    mag = int(rng.integers(1, 2**20))
    return rng.integers(-mag, mag + 1, size=n, dtype=np.int64).astype(np.int32)


def random_fully_connected(rng):
    batch, k, n = int(rng.integers(1, 5)), int(rng.integers(1, 300)), int(rng.integers(1, 40))
    x = _int8(rng, (batch, k))
    w = _int8(rng, (n, k), -127, 127)
    in_scale = log_uniform(rng, 1e-3, 1.0)
    w_scale = _weight_scale(rng, n, per_channel=rng.random() < 0.5)
    zp = int(rng.integers(-128, 128))
    bias = _bias(rng, n)
    raw = x.astype(np.int64) @ w.T.astype(np.int64) - zp * w.astype(np.int64).sum(axis=1)
    params = {"input_scale": in_scale, "input_zero_point": zp, "weight_scale": w_scale}
    return _finish_gemm_case(rng, "fully_connected", {"input": x, "weights": w, "bias": bias}, params,
                             in_scale, w_scale, raw)


def _conv_geometry(rng):
    while True:
        h, w = int(rng.integers(1, 13)), int(rng.integers(1, 13))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.4 else (1, 1)
        padding = str(rng.choice(["SAME", "VALID"]))
        oh = compute_out_size(padding, h, kh, stride[0], dilation[0])
        ow = compute_out_size(padding, w, kw, stride[1], dilation[1])
        if oh >= 1 and ow >= 1:
            return h, w, kh, kw, stride, dilation, padding, oh, ow


def random_conv_2d(rng):
    h, w_, kh, kw, stride, dilation, padding, _oh, _ow = _conv_geometry(rng)
    b, cin, cout = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
    x = _int8(rng, (b, h, w_, cin))
    w = _int8(rng, (cout, kh, kw, cin), -127, 127)
    in_scale = log_uniform(rng, 1e-3, 1.0)
    w_scale = _weight_scale(rng, cout, per_channel=True)
    zp = int(rng.integers(-128, 128))
    bias = _bias(rng, cout)
    raw = golden.conv_2d_kernel(x, w, None, input_offset=-zp, output_multiplier=2**30, output_shift=0,
                                output_offset=0, stride=stride, dilation=dilation, padding=padding,
                                return_stages=True).acc
    params = {"input_scale": in_scale, "input_zero_point": zp, "weight_scale": w_scale, "stride": stride,
              "dilation": dilation, "padding": padding}
    return _finish_gemm_case(rng, "conv_2d", {"input": x, "weights": w, "bias": bias}, params, in_scale,
                             w_scale, raw.astype(np.float64))


def random_depthwise_conv_2d(rng):
    h, w_, kh, kw, stride, dilation, padding, _oh, _ow = _conv_geometry(rng)
    b, cin, mult = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.choice([1, 2]))
    cout = cin * mult
    x = _int8(rng, (b, h, w_, cin))
    w = _int8(rng, (1, kh, kw, cout), -127, 127)
    in_scale = log_uniform(rng, 1e-3, 1.0)
    w_scale = _weight_scale(rng, cout, per_channel=True)
    zp = int(rng.integers(-128, 128))
    bias = _bias(rng, cout)
    raw = golden.depthwise_conv_2d_kernel(x, w, None, input_offset=-zp, output_multiplier=2**30,
                                          output_shift=0, output_offset=0, stride=stride, dilation=dilation,
                                          padding=padding, depth_multiplier=mult, return_stages=True).acc
    params = {"input_scale": in_scale, "input_zero_point": zp, "weight_scale": w_scale, "stride": stride,
              "dilation": dilation, "padding": padding, "depth_multiplier": mult}
    return _finish_gemm_case(rng, "depthwise_conv_2d", {"input": x, "weights": w, "bias": bias}, params,
                             in_scale, w_scale, raw.astype(np.float64))


def random_add(rng):
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 6, size=ndim))
    shape2 = list(shape)
    if rng.random() < 0.4:  # broadcast: set some dims of input2 to 1, or drop leading dims
        for i in range(ndim):
            if rng.random() < 0.5:
                shape2[i] = 1
        shape2 = shape2[int(rng.integers(0, ndim)):]
    s1, s2 = log_uniform(rng, 1e-3, 1.0), log_uniform(rng, 1e-3, 1.0)
    out = max(s1, s2) * log_uniform(rng, 0.25, 8.0)
    params = {"input1_scale": s1, "input1_zero_point": int(rng.integers(-128, 128)), "input2_scale": s2,
              "input2_zero_point": int(rng.integers(-128, 128)), "output_scale": out,
              "output_zero_point": int(rng.integers(-128, 128)), "activation": str(rng.choice(ACTIVATIONS))}
    return Case("add", {"input1": _int8(rng, shape), "input2": _int8(rng, tuple(shape2))}, params, "random")


def random_pool(rng, kind):
    while True:
        h, w = int(rng.integers(1, 13)), int(rng.integers(1, 13))
        fh, fw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        padding = str(rng.choice(["SAME", "VALID"]))
        if compute_out_size(padding, h, fh, stride[0]) >= 1 and compute_out_size(padding, w, fw, stride[1]) >= 1:
            break
    x = _int8(rng, (int(rng.integers(1, 3)), h, w, int(rng.integers(1, 9))))
    params = {"filter_size": (fh, fw), "stride": stride, "padding": padding,
              "scale": log_uniform(rng, 1e-3, 1.0), "zero_point": int(rng.integers(-128, 128)),
              "activation": str(rng.choice(ACTIVATIONS))}
    return Case(f"{kind}_pool_2d", {"input": x}, params, "random")


GENERATORS = {
    "fully_connected": random_fully_connected,
    "conv_2d": random_conv_2d,
    "depthwise_conv_2d": random_depthwise_conv_2d,
    "add": random_add,
    "average_pool_2d": lambda rng: random_pool(rng, "average"),
    "max_pool_2d": lambda rng: random_pool(rng, "max"),
}


def random_cases(op, n, seed):
    rng = np.random.default_rng(seed)
    return [GENERATORS[op](rng) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Directed corners. Each names what it exercises; expected values always come from running
# the case (golden and a real runtime), never from a hand-written table.

def _fc(label, x, w, bias, **params):
    params.setdefault("activation", "NONE")
    return Case("fully_connected", {"input": np.asarray(x, np.int8), "weights": np.asarray(w, np.int8),
                                    "bias": None if bias is None else np.asarray(bias, np.int32)}, params, label)


def _bias_sweep(label, start, count, *, input_scale, weight_scale, output_scale, output_zero_point=0,
                activation="NONE", per_channel=False):
    """FC with zero weights, so each output channel's accumulator is exactly its bias: start + n.

    ``per_channel`` repeats ``weight_scale`` per channel, which selects TFLite's double-precision
    effective-scale path instead of the per-tensor float32 product.
    """
    if per_channel:
        weight_scale = np.full(count, weight_scale, np.float32)
    bias = (np.arange(count, dtype=np.int64) + start)
    bias = np.clip(bias, -(2**31), 2**31 - 1).astype(np.int32)
    return _fc(label, np.zeros((1, 1), np.int8), np.zeros((count, 1), np.int8), bias,
               input_scale=input_scale, input_zero_point=0, weight_scale=weight_scale,
               output_scale=output_scale, output_zero_point=output_zero_point, activation=activation)


# float32 pairs whose exact (double) product sits just below 1:
# (1 - 2**-23)(1 + 2**-23) = 1 - 2**-46: the effective scale's mantissa rounds up to 2**31 (the fix-up);
# (1 - 2**-15)(1 + 2**-15) = 1 - 2**-30: multiplier 2**31 - 2, so acc * M stays within 2 of acc.
# A per-tensor FULLY_CONNECTED forms the product in float32 (it rounds to 1.0), so neither corner is
# reachable there: a ratio of float32 scales never lands within 2**-32 of a power of two.
_A_NEAR_ONE = float(np.float32(1 - 2.0**-23))
_B_NEAR_ONE = float(np.float32(1 + 2.0**-23))
_C_NEAR_ONE = float(np.float32(1 - 2.0**-15))
_D_NEAR_ONE = float(np.float32(1 + 2.0**-15))


def directed_cases():
    rng = np.random.default_rng(20261121)
    cases = []
    # Zero points at the ends of the int8 range, inputs pinned at -128 / 127, weights at +-127.
    for zp_in in (-128, 127):
        for zp_out in (-128, 127):
            for fill in (-128, 127):
                x = np.full((2, 64), fill, np.int8)
                w = np.where(rng.random((5, 64)) < 0.5, -127, 127).astype(np.int8)
                cases.append(_fc(f"zp_in={zp_in} zp_out={zp_out} input={fill}", x, w,
                                 rng.integers(-1000, 1000, 5).astype(np.int32), input_scale=0.05,
                                 input_zero_point=zp_in, weight_scale=0.01, output_scale=0.5,
                                 output_zero_point=zp_out))
    # Multipliers below 2**-20 (deep right shifts; below ~2**-31 flushes to zero) and above 1 (left shifts).
    for mult in (2.0**-20 * 0.7, 2.0**-25, 2.0**-31 * 1.5, 2.0**-32, 2.0**-33, 2.0**-40,
                 1.0, 1.7, 3.999, 40.0, 1000.0, 2.0**29 * 1.1):
        x = _int8(rng, (3, 50))
        w = _int8(rng, (7, 50), -127, 127)
        cases.append(_fc(f"multiplier={mult:.3g}", x, w, rng.integers(-(2**24), 2**24, 7).astype(np.int32),
                         input_scale=0.5, input_zero_point=int(rng.integers(-128, 128)), weight_scale=0.25,
                         output_scale=0.125 / mult, output_zero_point=int(rng.integers(-128, 128))))
        # Per-channel variant through CONV_2D (double-precision effective scale).
        cases.append(Case("conv_2d", {"input": _int8(rng, (1, 4, 4, 3)),
                                      "weights": _int8(rng, (4, 3, 3, 3), -127, 127),
                                      "bias": rng.integers(-(2**20), 2**20, 4).astype(np.int32)},
                          {"input_scale": 0.5, "input_zero_point": -3,
                           "weight_scale": np.float32([0.25, 0.125, 0.0625, 0.2]),
                           "output_scale": 0.125 / mult, "output_zero_point": 5, "padding": "SAME"},
                          f"multiplier={mult:.3g}"))
    # The mantissa rounding up to exactly 2**31 (fix-up to 2**30 and shift + 1).
    cases.append(_bias_sweep("mantissa rounds to 2**31 (FC per channel)", -300, 600, input_scale=_A_NEAR_ONE,
                             weight_scale=_B_NEAR_ONE, output_scale=4.0, per_channel=True))
    cases.append(_bias_sweep("float32 product rounds to 1 (FC per tensor)", -300, 600, input_scale=_A_NEAR_ONE,
                             weight_scale=_B_NEAR_ONE, output_scale=4.0))
    cases.append(Case("conv_2d", {"input": _int8(rng, (1, 3, 3, 2)), "weights": _int8(rng, (2, 1, 1, 2), -127, 127),
                                  "bias": np.array([7, -9], np.int32)},
                      {"input_scale": _A_NEAR_ONE, "input_zero_point": 0,
                       "weight_scale": np.float32([_B_NEAR_ONE, _B_NEAR_ONE]), "output_scale": 1.0,
                       "output_zero_point": 0}, "mantissa rounds to 2**31 (conv)"))
    # Requantized values exactly on .5 ties: multiplier 2**-s, accumulators swept across odd multiples
    # of 2**(s-1) (each one a tie), positive and negative, near zero and near the int32 limits.
    for s_ in (1, 2, 3, 7):
        cases.append(_bias_sweep(f"ties at 2**-{s_}", -(6 << s_), (12 << s_) + 1, input_scale=1.0,
                                 weight_scale=1.0, output_scale=float(2**s_)))
    for s_ in (15, 24, 31):
        for center in (1, -1, 3, -3, 2047, -2047):
            c = center * (1 << (s_ - 1))
            if c - 150 >= -(2**31) and c + 150 < 2**31:
                cases.append(_bias_sweep(f"ties at 2**-{s_} around {center}/2", c - 150, 301, input_scale=1.0,
                                         weight_scale=1.0, output_scale=float(2**s_)))
    # Ties of the two-step (double) rounding that single rounding resolves differently.
    cases.append(_bias_sweep("double-rounding ties", -2000, 4000, input_scale=1.0, weight_scale=1.0,
                             output_scale=float(np.float32(1 / 0.3000000119))))
    # Accumulators reaching the int32 limits: K up to 66 000 taps of 255 * 127, plus bias.
    # Each tap contributes (q_a + input_offset) * q_w = (-128 - 127) * -127 = 32385 in TFLite's loop;
    # 66311 taps sum to 1312 below INT32_MAX, so bias 1312 hits INT32_MAX exactly and 1313 wraps.
    taps_to_limit = 2**31 - 1 - 66311 * 32385
    for k, bias in ((66000, 0), (66311, 0), (66400, 0), (66311, taps_to_limit), (66311, taps_to_limit + 1000)):
        x = np.full((1, k), -128, np.int8)
        w = np.full((3, k), -127, np.int8)
        b = np.array([bias, bias + 1 if bias < 2**31 - 1 else bias, -bias], dtype=np.int64)
        b = np.clip(b, -(2**31), 2**31 - 1).astype(np.int32)
        for mult in (2.0**-24, 2.0**-31 * 3):
            cases.append(_fc(f"K={k} bias={bias} mult={mult:.3g}", x, w, b, input_scale=1.0,
                             input_zero_point=127, weight_scale=1.0, output_scale=1.0 / mult,
                             output_zero_point=0))
    # Biases at the int32 limits (the bias add itself wraps).
    x = _int8(rng, (2, 8))
    w = _int8(rng, (6, 8), -127, 127)
    b = np.array([2**31 - 1, -(2**31), 2**31 - 100, -(2**31) + 100, 2**31 - 1, -(2**31)], np.int64).astype(np.int32)
    for mult in (2.0**-24, 2.0**-30, 0.9):
        cases.append(_fc(f"bias at int32 limits mult={mult:.3g}", x, w, b, input_scale=1.0, input_zero_point=-7,
                         weight_scale=1.0, output_scale=1.0 / mult, output_zero_point=3))
    # Left shift whose pre-multiplication wraps int32, and an output offset that wraps past INT32_MAX.
    for mult, zp_out in ((2.0**20 * 1.3, 100), (2.0**10 * 1.7, 127), (1.999, 127), (64.5, -128)):
        cases.append(_bias_sweep(f"pre-shift wrap mult={mult:.3g}", 2**31 - 300, 299, input_scale=1.0,
                                 weight_scale=1.0, output_scale=1.0 / mult, output_zero_point=zp_out))
        cases.append(_bias_sweep(f"pre-shift wrap mult={mult:.3g} (negative)", -(2**31), 300, input_scale=1.0,
                                 weight_scale=1.0, output_scale=1.0 / mult, output_zero_point=zp_out))
    # Requantized values within 2 of the int32 limits, so adding the output zero point wraps.
    cases.append(_bias_sweep("output offset wraps past INT32_MAX", 2**31 - 300, 300, input_scale=_C_NEAR_ONE,
                             weight_scale=_D_NEAR_ONE, output_scale=1.0, output_zero_point=127, per_channel=True))
    cases.append(_bias_sweep("output offset wraps past INT32_MIN", -(2**31), 300, input_scale=_C_NEAR_ONE,
                             weight_scale=_D_NEAR_ONE, output_scale=1.0, output_zero_point=-128, per_channel=True))
    # DEPTHWISE_CONV_2D corners: zero points at the ends with pinned inputs and +-127 weights, tiny and large
    # multipliers, biases at the int32 limits (per channel, multipliers 1 and 2).
    def _dw(label, x, w, bias, mult=1, **params):
        params.setdefault("activation", "NONE")
        return Case("depthwise_conv_2d", {"input": x, "weights": w, "bias": np.asarray(bias, np.int32)},
                    {"input_scale": 0.5, "weight_scale": np.float32(np.linspace(0.01, 0.3, w.shape[3])),
                     "padding": "SAME", "stride": (1, 1), "depth_multiplier": mult, **params}, label)
    for zp_in, zp_out, fill in ((-128, -128, 127), (127, 127, -128), (-128, 127, -128), (127, -128, 127)):
        w = np.where(rng.random((1, 3, 3, 6)) < 0.5, -127, 127).astype(np.int8)
        cases.append(_dw(f"DW zp_in={zp_in} zp_out={zp_out} input={fill}", np.full((1, 5, 5, 3), fill, np.int8), w,
                         rng.integers(-1000, 1000, 6), mult=2, input_zero_point=zp_in, output_scale=2.0,
                         output_zero_point=zp_out))
    for mult in (2.0**-25, 2.0**-33, 1.7, 40.0, 1000.0):
        cases.append(_dw(f"DW multiplier={mult:.3g}", _int8(rng, (2, 6, 6, 4)), _int8(rng, (1, 3, 3, 4), -127, 127),
                         rng.integers(-(2**20), 2**20, 4), input_zero_point=int(rng.integers(-128, 128)),
                         output_scale=0.5 * 0.155 / mult, output_zero_point=int(rng.integers(-128, 128))))
    cases.append(_dw("DW bias at int32 limits", _int8(rng, (1, 4, 4, 4)), _int8(rng, (1, 2, 2, 4), -127, 127),
                     [2**31 - 1, -(2**31), 2**31 - 100, -(2**31) + 100], input_zero_point=-7, output_scale=2.0**20,
                     output_zero_point=3))
    # Fused activation bounds, including bounds that land on a float32 .5 tie (roundf: away from zero).
    for act in ("RELU", "RELU6", "RELU_N1_TO_1"):
        for out_scale, zp in ((12.0, 0), (4.0, -3), (2.0, 10), (0.02, -128), (0.0235, -100), (0.5, 127),
                              (0.047058824, -128)):
            cases.append(_bias_sweep(f"{act} out_scale={out_scale} zp={zp}", -3000, 6000, input_scale=0.5,
                                     weight_scale=0.5, output_scale=out_scale, output_zero_point=zp,
                                     activation=act))
    return cases


def tie_sensitive_case():
    """The double-rounding sweep above: golden's double and single rounding must differ on it."""
    return next(c for c in directed_cases() if c.label == "double-rounding ties")


# ---------------------------------------------------------------------------------------------
# Case -> .tflite model and runtime inputs.

def to_tflite(case):
    """(model bytes, list of runtime inputs) for a case."""
    from int8_systolic.golden.tflite import builder

    t, p = case.tensors, dict(case.params)
    expected_shape = np.shape(case.golden())
    if case.op == "fully_connected":
        model = builder.fully_connected_model(t["weights"], t["bias"], batch=t["input"].shape[0], **p)
        return model, [t["input"]]
    if case.op == "conv_2d":
        model = builder.conv_2d_model(t["weights"], t["bias"], input_shape=t["input"].shape,
                                      output_shape=expected_shape, **p)
        return model, [t["input"]]
    if case.op == "depthwise_conv_2d":
        # TFLM's Python build segfaults on a DEPTHWISE_CONV_2D without a bias tensor; an all-zero
        # bias is the same computation in the reference kernel (`if (bias_data) acc += bias`), and
        # the golden model is still called with bias=None.
        bias = t["bias"] if t["bias"] is not None else np.zeros(t["weights"].shape[3], np.int32)
        model = builder.depthwise_conv_2d_model(t["weights"], bias, input_shape=t["input"].shape,
                                                output_shape=expected_shape, **p)
        return model, [t["input"]]
    if case.op == "add":
        model = builder.add_model(shape1=t["input1"].shape, shape2=t["input2"].shape, out_shape=expected_shape, **p)
        return model, [t["input1"], t["input2"]]
    kind = case.op.split("_")[0]
    model = builder.pool_2d_model(kind, input_shape=t["input"].shape, output_shape=expected_shape, **p)
    return model, [t["input"]]


# ---------------------------------------------------------------------------------------------
# Discriminators: the five requantization arithmetics (golden.variants) disagree on these.
# Weights +-1 and a swept input put the accumulator on consecutive integers, and scales of
# 1/4, 1/8, 1/2 and 0.3000000119 (a float32 whose double product with small integers lands
# on exact .5 ties of the first rounding step) make many of them exact ties.

DISCRIMINATOR_SCALES = (0.25, 0.125, 0.5, float(np.float32(0.3000000119)), 0.0625, 0.75, 0.375,
                        float(np.float32(1 / 3)))


def discriminator_cases():
    """Tie cases of FULLY_CONNECTED (per tensor and per channel), CONV_2D and DEPTHWISE_CONV_2D.

    Inside the range every runtime's arithmetic is measured on: no activation, no accumulator
    near the int32 limits, requantization scales well below 256 (XNNPACK's limit).
    """
    cases = []
    rng = np.random.default_rng(20261124)
    sweep = np.arange(-128, 128, dtype=np.int8)
    # FULLY_CONNECTED, per tensor: zero weights, consecutive biases (the accumulator is the bias).
    for out_scale in (4.0, 8.0, 2.0, 16.0, float(np.float32(1 / 0.3000000119))):
        for zp in (0, 5):
            cases.append(_bias_sweep(f"ties, FC per tensor, output scale {out_scale:.6g} zp {zp}", -256, 512,
                                     input_scale=1.0, weight_scale=1.0, output_scale=out_scale, output_zero_point=zp))
    # FULLY_CONNECTED, per channel: one input row per swept value, weights +-1, a scale per channel.
    ws = np.array(DISCRIMINATOR_SCALES, np.float32)
    w = np.where(np.arange(ws.size) % 2, -1, 1)[:, None].astype(np.int8)
    for zp in (0, -128, 77):
        cases.append(_fc(f"ties, FC per channel, input zp {zp}", sweep[:, None], w,
                         np.arange(ws.size, dtype=np.int32) * 3 - 10, input_scale=1.0, input_zero_point=zp,
                         weight_scale=ws, output_scale=1.0, output_zero_point=0))
    # CONV_2D over a 16x16 image of every int8 value; one channel per scale; 1x1 and 3x3 SAME with weights in
    # {-1, 0, 1} (the accumulator still steps by one).
    image = sweep.reshape(1, 16, 16, 1)
    for k in (1, 3):
        for zp, zp_out in ((0, 0), (-128, 3)):
            wk = w.reshape(ws.size, 1, 1, 1) if k == 1 else rng.integers(-1, 2, (ws.size, 3, 3, 1)).astype(np.int8)
            cases.append(Case("conv_2d", {"input": image, "weights": wk,
                                          "bias": np.arange(ws.size, dtype=np.int32) * 5 - 128},
                              {"input_scale": 1.0, "input_zero_point": zp, "weight_scale": ws, "output_scale": 1.0,
                               "output_zero_point": zp_out, "padding": "VALID" if k == 1 else "SAME"},
                              f"ties, CONV_2D {k}x{k} input zp {zp}"))
    # DEPTHWISE_CONV_2D on 8 channels (LiteRT's optimized kernel takes whole blocks of 8), multiplier 1 and 2.
    img8 = np.stack([np.roll(sweep, 17 * c) for c in range(8)], axis=-1).reshape(1, 16, 16, 8)
    for mult in (1, 2):
        for k in (1, 3):
            wsm = np.resize(ws, 8 * mult).astype(np.float32)
            wd = np.where(np.arange(8 * mult) % 3 == 1, -1, 1).reshape(1, 1, 1, 8 * mult).astype(np.int8) if k == 1 \
                else rng.integers(-1, 2, (1, 3, 3, 8 * mult)).astype(np.int8)
            cases.append(Case("depthwise_conv_2d", {"input": img8, "weights": wd,
                                                    "bias": np.arange(8 * mult, dtype=np.int32) * 7 - 20},
                              {"input_scale": 1.0, "input_zero_point": 0, "weight_scale": wsm, "output_scale": 1.0,
                               "output_zero_point": 0, "padding": "VALID" if k == 1 else "SAME",
                               "depth_multiplier": mult},
                              f"ties, DEPTHWISE_CONV_2D {k}x{k} multiplier {mult}"))
    return cases
