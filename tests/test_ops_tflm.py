"""Every op of the golden model's table against TFLite-Micro, one single-op model per case.

Per op: random cases plus adversarial ones (int8_systolic/golden/conformance/op_cases.py): zero points -128 and 127,
inputs at -128/127, multipliers below 2**-20 and above 1, exact rounding ties, every
option, the largest ranks TFLM accepts. Every output element is compared bit for bit.
``make test`` runs a few random cases per op; ``make test-all`` (``slow``) at least 100.
SPACE_TO_BATCH_ND is checked against LiteRT's reference resolver: TFLM's int8 kernel pads
with an uninitialised value (docs/runtimes.md).
"""

import numpy as np
import pytest

from int8_systolic.golden.conformance.op_cases import GENERATORS, cases
from int8_systolic.golden.reference_ops import OP_FAMILIES, OP_TABLE
from int8_systolic.golden.tflite.interpreter import MAC_OPS, Interpreter
from int8_systolic.golden.tflite.runtimes import run_litert_reference, run_tflm

pytestmark = pytest.mark.tflm

NON_MAC_OPS = sorted(op for op in OP_TABLE if op not in MAC_OPS)


def test_every_non_mac_op_has_cases():
    assert sorted(GENERATORS) == NON_MAC_OPS


def check_op(op, seed, n, record_property):
    rng = np.random.default_rng([seed, sorted(OP_TABLE).index(op)])
    elements = 0
    all_cases = cases(op, rng, n)
    for i, c in enumerate(all_cases):
        interp = Interpreter(c.model, f"{op} case {i}")
        ours = interp.invoke(c.inputs)
        run = run_tflm if c.runtime == "tflm" else run_litert_reference
        theirs = run(c.model, c.inputs, num_outputs=len(ours)) if c.runtime == "tflm" else run(c.model, c.inputs)
        assert len(theirs) == len(ours)
        for k, (got, want) in enumerate(zip(ours, theirs, strict=True)):
            want = np.asarray(want).reshape(got.shape)
            assert got.dtype == want.dtype, f"{op} case {i} ({c.tag}) output {k}: {got.dtype} vs {want.dtype}"
            bad = np.flatnonzero(got.ravel() != want.ravel())
            assert not bad.size, (f"{op} case {i} ({c.tag}) output {k}: {bad.size} of {got.size} elements differ from "
                                  f"{c.runtime}; first at {bad[0]}: golden {got.ravel()[bad[0]]}, {c.runtime} "
                                  f"{want.ravel()[bad[0]]}; inputs {[x.ravel()[:8] for x in c.inputs]} (SEED={seed})")
            elements += got.size
    record_property("crosscheck", {"against": "TFLM" if all_cases[0].runtime == "tflm" else "LiteRT BUILTIN_REF",
                                   "op": f"{OP_FAMILIES[op]} (interpreter)", "cases": len(all_cases),
                                   "matched": len(all_cases),
                                   "elements": elements})


@pytest.mark.parametrize("op", NON_MAC_OPS)
def test_op_matches_tflm(op, seed, record_property):
    check_op(op, seed, 6, record_property)


@pytest.mark.slow
@pytest.mark.parametrize("op", NON_MAC_OPS)
def test_op_matches_tflm_100_random(op, seed, record_property):
    check_op(op, seed + 1000, 100, record_property)
