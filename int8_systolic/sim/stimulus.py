"""Random GEMM problems for the RTL tests and benchmarks (shared by cocotb, Amaranth-sim and bench)."""

import numpy as np

from int8_systolic.golden.fixedpoint import quantize_multiplier

from ..host.problem import GemmProblem

__all__ = ["depthwise_layers", "random_problem"]


def random_problem(rng, m, k, n, rounding="double", bypass=False, depthwise=False):
    """int8 A [m, k] (all of -128..127), W [k, n] (-127..127) and random TFLite parameters; with
    ``depthwise``, a problem for the array's depthwise mode, A [m, k, n].

    Multipliers put typical outputs in range (real multiplier ~ 2^-24..4 / (32 k)); one
    problem in five instead spreads them over 2^-31..2^20 so shifts reach both extremes
    (left shifts capped at +30, the hardware's range). One in three clamps to a random
    activation range, and one in three sets one channel's bias to INT32_MAX so the bias
    add wraps.
    """
    lhs = rng.integers(-128, 128, (m, k, n) if depthwise else (m, k)).astype(np.int8)
    rhs = rng.integers(-127, 128, (k, n)).astype(np.int8)
    bias = rng.integers(-(2**20), 2**20, n).astype(np.int32)
    if rng.random() < 0.3:
        bias[rng.integers(0, n)] = np.int32(2**31 - 1)
    real = np.exp(rng.uniform(np.log(2.0**-24), np.log(4.0), n)) / (k * 32)
    if rng.random() < 0.2:
        real = np.exp(rng.uniform(np.log(2.0**-31), np.log(2.0**20), n))
    mult, shift = quantize_multiplier(real, rounding)
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2)) if rng.random() < 0.3 else (-128, 127)
    return GemmProblem(lhs, rhs, bias, input_offset=int(rng.integers(-127, 129)), output_multiplier=mult,
                       output_shift=np.minimum(shift, 30), output_offset=int(rng.integers(-128, 128)),
                       act_min=lo, act_max=hi, rounding=rounding, bypass=bypass, depthwise=depthwise)


# (kernel HxW, stride, dilation, padding, depth multiplier, channels), the last two as (a, b): a * cols + b
_DEPTHWISE_LAYERS = [
    ((3, 3), (1, 1), (1, 1), "SAME", (0, 1), (1, 3)),      # channels not a multiple of cols
    ((3, 3), (2, 2), (1, 1), "VALID", (0, 2), (0, 2)),     # depth multiplier 2, stride 2
    ((1, 1), (1, 1), (1, 1), "SAME", (1, 1), (0, 2)),      # K = 1, depth multiplier cols + 1
    ((3, 3), (1, 1), (2, 2), "SAME", (0, 1), (1, 0)),      # dilation 2
    ((5, 5), (1, 1), (1, 1), "SAME", (0, 1), (2, 1)),      # K = 25, several column tiles
    ((1, 3), (1, 2), (1, 1), "SAME", (0, 3), (0, 1)),      # K = 3, strides differ
    ((2, 2), (2, 1), (1, 2), "VALID", (0, 1), (1, -1)),    # K = 4, stride and dilation mixed
]


def depthwise_layers(rng, cols, rounding="double", random_count=2):
    """Small DEPTHWISE_CONV_2D layers (:class:`golden.tflite.interpreter.MacLayer`) for the depthwise
    mode's tests: depth multipliers 1, 2, 3 and cols + 1, channels not a multiple of ``cols``, K = taps
    from 1 to 25, strides, dilations and both paddings (directed), then ``random_count`` random ones.
    Per-channel multipliers and shifts, any input and output zero point."""
    from int8_systolic.golden.staged import compute_out_size
    from int8_systolic.golden.tflite.interpreter import MacLayer

    shapes = list(_DEPTHWISE_LAYERS)
    for _ in range(random_count):
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        stride, dilation = (tuple(int(v) for v in rng.integers(1, 3, 2)) for _ in range(2))
        shapes.append(((kh, kw), stride, dilation, str(rng.choice(["SAME", "VALID"])),
                       (0, int(rng.integers(1, 4))), (0, int(rng.integers(1, 2 * cols + 2)))))
    layers = []
    for i, ((kh, kw), stride, dilation, padding, dm, channels) in enumerate(shapes):
        dm, cin = (max(1, x * cols + y) for x, y in (dm, channels))
        # an input big enough for one output pixel at least, and a few rows of them
        h = (kh - 1) * dilation[0] + 1 + int(rng.integers(0, 5))
        w = (kw - 1) * dilation[1] + 1 + int(rng.integers(0, 5))
        oh = compute_out_size(padding, h, kh, stride[0], dilation[0])
        ow = compute_out_size(padding, w, kw, stride[1], dilation[1])
        cout = cin * dm
        real = np.exp(rng.uniform(np.log(2.0**-12), np.log(2.0**-4), cout)) / (kh * kw)
        mult, shift = quantize_multiplier(real, rounding)
        params = {"input_offset": int(rng.integers(-127, 129)), "output_multiplier": mult, "output_shift": shift,
                  "output_offset": int(rng.integers(-128, 128)), "quantized_activation_min": -128,
                  "quantized_activation_max": 127, "rounding": rounding}
        layers.append(MacLayer(
            op_index=i, kind="DEPTHWISE_CONV_2D",
            input=rng.integers(-128, 128, (1, h, w, cin)).astype(np.int8),
            weights=rng.integers(-127, 128, (1, kh, kw, cout)).astype(np.int8),
            bias=rng.integers(-(2**16), 2**16, cout).astype(np.int32), params=params,
            geometry={"stride": stride, "dilation": dilation, "padding": padding, "depth_multiplier": dm},
            output_shape=(1, oh, ow, cout)))
    return layers


def _requant_corners(rounding):
    """(acc, multiplier, shift) triples that together hit every bin of the coverage model's
    ``requantizer`` group (:func:`sim.coverage.classify`), found by searching candidates with that
    classifier: shifts -31..30, zero and tiny multipliers, every rounding tie, the wraps."""
    from .coverage import MODEL, classify

    i32min, i32max = -(2**31), 2**31 - 1
    accs = sorted({v for k in range(31) for v in (1 << k, -(1 << k), 3 << k, -(3 << k))
                   if i32min <= v <= i32max} | {i32min, i32max})
    mults = [2**30, 2**30 + 1, i32max] + ([i32min] if rounding == "double" else [])
    triples = [(0, 2**30 + 12345, s) for s in range(-31, 31)]            # every shift
    triples += [(1000, 0, 0), (1 << 20, 2**30, -25)]                    # multiplier zero, below 2^-20
    triples += [(i32max, i32max, 30)]                                    # pre-shift / result wraps
    point = "double_rdbpot_tie" if rounding == "double" else "single_tie"
    wanted = set(MODEL["requantizer"][point])
    for s in range(-31, 31):
        for m in mults:
            for acc in accs:
                labels = classify(np.array([acc]), m, s, 0, -128, 127, rounding)[point] & wanted
                if labels:
                    wanted -= labels
                    triples.append((acc, m, s))
    assert not wanted, f"no stimulus found for {sorted(wanted)}"
    if rounding == "double":
        triples.append((i32min, i32min, 0))                              # SRDHM saturates
    return triples


def coverage_corners(rng, rows, cols, rounding, max_col_tiles):
    """Directed GEMMs for the bins random stimulus does not reach (see sim.coverage): the requantizer
    corners (one output channel each: zero activations, the accumulator set through the bias), the
    output-offset wrap, the clamp, K = max(rows, cols), 1 < K < that, K >= 4096, the tables full."""
    problems = []
    triples = _requant_corners(rounding)
    per = max_col_tiles * cols
    for start in range(0, len(triples), per):
        chunk = triples[start:start + per]
        n = len(chunk)
        acc, mult, shift = (np.array([t[i] for t in chunk], np.int64) for i in range(3))
        problems.append(GemmProblem(
            lhs=np.zeros((1, 1), np.int8), rhs=np.zeros((1, n), np.int8), bias=acc.astype(np.int32), input_offset=0,
            output_multiplier=mult, output_shift=shift, output_offset=int(rng.integers(-128, 128)),
            act_min=-20, act_max=20, rounding=rounding))
    # the output offset wraps (scaled ~ 2**31 - 2, offset 127)
    problems.append(GemmProblem(lhs=np.zeros((1, 1), np.int8), rhs=np.zeros((1, 1), np.int8),
                                bias=np.array([2**31 - 1], np.int32), input_offset=0,
                                output_multiplier=np.array([2**31 - 1]), output_shift=np.array([0]), output_offset=127,
                                rounding=rounding))
    big = max(rows, cols)
    ks = [big, 4100] + ([2] if big > 2 else [])
    problems += [random_problem(rng, rows, k, cols, rounding) for k in ks]
    problems.append(random_problem(rng, rows, 1, max_col_tiles * cols, rounding))   # tables full
    return problems


def long_k_problem(rows, cols, rounding):
    """K = 132105 steps of -128 x (+-127, by column): every raw accumulator passes 2**30 and wraps
    int32 (+-(2**31 + 15240)), the one way to reach the array's accumulator limits with int8
    activations and spec weights (-127..127)."""
    k = 132105
    sign = np.where(np.arange(cols) % 2 == 0, -1, 1)
    return GemmProblem(lhs=np.full((rows, k), -128, np.int8), rhs=np.tile(127 * sign, (k, 1)).astype(np.int8),
                       bias=np.zeros(cols, np.int32), input_offset=0, output_multiplier=np.full(cols, 2**30),
                       output_shift=np.full(cols, -20), output_offset=0, rounding=rounding, bypass=False)
