"""Random GEMM problems for the RTL tests and benchmarks (shared by cocotb, Amaranth-sim and bench)."""

import numpy as np

from golden.fixedpoint import quantize_multiplier

from .host import GemmProblem

__all__ = ["random_problem"]


def random_problem(rng, m, k, n, rounding="double", bypass=False):
    """int8 A [m, k] (all of -128..127), W [k, n] (-127..127) and random TFLite parameters.

    Multipliers put typical outputs in range (real multiplier ~ 2^-24..4 / (32 k)); one
    problem in five instead spreads them over 2^-31..2^20 so shifts reach both extremes
    (left shifts capped at +30, the hardware's range). One in three clamps to a random
    activation range, and one in three sets one channel's bias to INT32_MAX so the bias
    add wraps.
    """
    lhs = rng.integers(-128, 128, (m, k)).astype(np.int8)
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
                       act_min=lo, act_max=hi, rounding=rounding, bypass=bypass)
