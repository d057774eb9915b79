"""The golden model against real TFLite runtimes, bit for bit.

Every case is written as a single-op int8 .tflite model (flatbuffers + TFLite schema),
run in TFLite-Micro's interpreter (the reference kernels), and compared element by
element with the golden model. CONV_2D and DEPTHWISE_CONV_2D are also run through
LiteRT with the BUILTIN_REF resolver. A summary table of the counts is printed at the
end of the run.
"""

import numpy as np
import pytest

from int8_systolic.golden.conformance import mac_cases as cases
from int8_systolic.golden.tflite.runtimes import run_litert_reference, run_tflm

pytestmark = pytest.mark.tflm

RANDOM_CASES = {  # 360 random cases in the default run
    "fully_connected": 80,
    "conv_2d": 80,
    "depthwise_conv_2d": 70,
    "add": 50,
    "average_pool_2d": 40,
    "max_pool_2d": 40,
}


def _compare(case_list, runner, against, record_property):
    """Run every case; fail listing every mismatching case with its first differing element."""
    failures = []
    elements = 0
    for i, case in enumerate(case_list):
        model, inputs = cases.to_tflite(case)
        got = runner(model, inputs)[0]
        want = case.golden()
        elements += want.size
        if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
            if got.shape == want.shape:
                idx = tuple(int(j) for j in np.argwhere(got != want)[0])
                detail = f"first mismatch at {idx}: runtime {int(got[idx])}, golden {int(want[idx])}, " \
                         f"{int((got != want).sum())} of {want.size} differ"
            else:
                detail = f"runtime shape {got.shape} {got.dtype}, golden {want.shape} {want.dtype}"
            failures.append(f"case {i}: {case.describe()}\n    {detail}")
    ops = {c.op for c in case_list}
    record_property("crosscheck", {"against": against, "op": ops.pop() if len(ops) == 1 else "directed",
                                   "cases": len(case_list), "matched": len(case_list) - len(failures),
                                   "elements": elements})
    assert not failures, f"{len(failures)} of {len(case_list)} cases differ from {against}:\n" + "\n".join(failures)


@pytest.mark.parametrize("op", sorted(RANDOM_CASES))
def test_random_cases_match_tflm(op, seed, record_property):
    _compare(cases.random_cases(op, RANDOM_CASES[op], seed * 1000 + sorted(RANDOM_CASES).index(op)),
             run_tflm, "TFLM", record_property)


def test_directed_cases_match_tflm(record_property):
    _compare(cases.directed_cases(), run_tflm, "TFLM", record_property)


def test_tie_cases_tell_rounding_variants_apart():
    """The tie sweep must separate double from single rounding, or it proves nothing about ties."""
    case = cases.tie_sensitive_case()
    double = case.golden()
    single = case.golden(rounding="single")
    assert (double != single).sum() >= 10


def test_tflm_is_double_rounding_not_single(record_property):
    """TFLM equals golden's double rounding and differs from single rounding on the tie sweep."""
    case = cases.tie_sensitive_case()
    model, inputs = cases.to_tflite(case)
    got = run_tflm(model, inputs)[0]
    assert np.array_equal(got, case.golden())
    assert not np.array_equal(got, case.golden(rounding="single"))


@pytest.mark.litert
@pytest.mark.parametrize("op", ["conv_2d", "depthwise_conv_2d"])
def test_random_cases_match_litert_reference(op, seed, record_property):
    case_list = [c for c in cases.random_cases(op, 40, seed * 7919 + len(op)) if c.tensors["bias"] is not None]
    _compare(case_list, run_litert_reference, "LiteRT BUILTIN_REF", record_property)


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(RANDOM_CASES))
def test_many_random_cases_match_tflm(op, seed, record_property):
    """Long regression: 2000 more random cases per op (make test-all)."""
    _compare(cases.random_cases(op, 2000, seed * 104729 + sorted(RANDOM_CASES).index(op)),
             run_tflm, "TFLM", record_property)
