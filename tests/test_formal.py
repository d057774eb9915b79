"""The requantizer proof machinery can fail: a broken RTL gives a counterexample; the z3 identities hold.

The full proof is `make formal` (minutes: see the README); here the harness is shown to catch a
deliberately broken requantizer (the INT32_MIN * INT32_MIN saturation test off by one) with a
counterexample table naming the input, and the arithmetic identities the proof rests on are
proved by z3 while a wrong one is refuted. The slow tests break the reference in each of the
other ways and prove the real design (about as long as `make formal`).
"""

import pytest

from int8_systolic.formal.__main__ import run_task
from int8_systolic.formal.identities import prove_all
from int8_systolic.formal.requantizer import BROKEN, RequantizerProof

pytestmark = pytest.mark.formal


def test_the_identities_are_proved_and_a_wrong_one_is_not():
    import z3

    assert all(proved for proved, _ in prove_all(progress=lambda line: None).values())
    x, r = z3.BitVec("x", 34), z3.BitVec("r", 34)
    one, zero = z3.BitVecVal(1, 34), z3.BitVecVal(0, 34)
    mask = (one << r) - 1
    golden = (x >> r) + z3.If(z3.UGT(x & mask, (mask >> 1) + z3.If(x < 0, one, zero)), one, zero)
    ties_up = (x + z3.If(r > 0, (one << r) >> 1, zero)) >> r
    s = z3.Solver()
    s.add(x >= -(2**31), x < 2**31, r >= 0, r <= 31, golden != ties_up)
    assert s.check() == z3.sat       # rounding ties up is not RoundingDivideByPOT: z3 finds an x


def test_a_broken_requantizer_gives_a_counterexample(tmp_path):
    status, _, detail = run_task("rtl-saturation", RequantizerProof("double", "rtl-saturation", stalls=False), "bmc",
                                 27, tmp_path)
    assert status == "FAIL"
    values = dict(line.strip().rsplit(None, 1) for line in detail.splitlines()[1:])
    # (the broken test takes INT32_MIN + 1 for INT32_MIN: the solver finds either side of it, both operands
    # INT32_MIN, which the reference saturates and the broken RTL does not, or both INT32_MIN + 1, the reverse)
    mult = int(values["input multiplier"])
    assert mult in (-(2**31), -(2**31) + 1)
    assert int(values["ref_pre"]) == mult
    if mult == -(2**31):
        assert values["ref_high"] == str(2**31 - 1)
    assert values["dut.o__payload"] != values["ref_out"]


@pytest.mark.slow
@pytest.mark.parametrize("broken", sorted(b for b in BROKEN if b != "rtl-saturation"))
def test_each_broken_reference_gives_a_counterexample(tmp_path, broken):
    status, _, detail = run_task(broken, RequantizerProof("double", broken, stalls=False), "bmc", 27, tmp_path)
    assert status == "FAIL", detail
    assert "counterexample at step 26" in detail


@pytest.mark.slow
@pytest.mark.parametrize("rounding", ["double", "single"])
def test_the_requantizer_is_proved(tmp_path, rounding):
    status, _, detail = run_task(rounding, RequantizerProof(rounding, stalls=False), "bmc", 27, tmp_path)
    assert status == "PASS", detail
