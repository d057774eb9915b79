"""Designs under test the harness knows by name (``int8-systolic conformance run --dut NAME``).

* ``golden`` / ``golden:<variant>``: the golden model, with the MAC ops requantized by one of
  :data:`golden.variants.VARIANTS` (computed from the case's model and inputs, not read from
  the pack's expected files).
* ``litert-ref``, ``litert-optimized``, ``litert-default``: LiteRT's interpreter with the
  BUILTIN_REF resolver, the optimized kernels without delegates (ruy), and its default
  (the XNNPACK delegate).
* ``outputs:<dir>``: outputs recorded by another simulator or a board, one
  ``<dir>/<case id>/output<j>.npy`` per output (the RTL flow writes these).
* ``<module>:<callable>``: any importable Python callable taking a
  :class:`~golden.conformance.harness.DutCase`.
"""

import importlib
import pathlib

import numpy as np

from ..variants import VARIANTS

__all__ = ["GoldenDut", "LiteRTDut", "RecordedDut", "resolve"]

LITERT_MODES = {"litert-ref": "BUILTIN_REF", "litert-optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
                "litert-default": None}


class GoldenDut:
    """The golden model as a DUT, its MAC ops requantized by ``variant``."""

    def __init__(self, variant="double"):
        if variant not in VARIANTS:
            raise ValueError(f"golden variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        self.variant = variant
        self.name = f"golden:{variant}"

    def __call__(self, case):
        from .pack import golden_case

        _, outputs, _, variant_outputs = golden_case(case.model_path.read_bytes(), case.inputs, case.id)
        if variant_outputs is not None:
            outputs = [variant_outputs[self.variant], *outputs[1:]]
        return outputs


class LiteRTDut:
    """LiteRT's Python interpreter with one of its op resolvers."""

    def __init__(self, mode):
        if mode not in LITERT_MODES:
            raise ValueError(f"LiteRT mode must be one of {', '.join(LITERT_MODES)}, got {mode!r}")
        self.mode, self.name = mode, mode

    def __call__(self, case):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = LITERT_MODES[self.mode]
        kwargs = {} if resolver is None else {"experimental_op_resolver_type": getattr(OpResolverType, resolver)}
        interp = Interpreter(model_content=case.model_path.read_bytes(), **kwargs)
        interp.allocate_tensors()
        for detail, x in zip(interp.get_input_details(), case.inputs, strict=True):
            interp.set_tensor(detail["index"], np.ascontiguousarray(x))
        interp.invoke()
        return [np.array(interp.get_tensor(d["index"])) for d in interp.get_output_details()]


class RecordedDut:
    """Outputs another tool recorded: ``<directory>/<case id>/output<j>.npy``."""

    def __init__(self, directory, name=None):
        self.directory = pathlib.Path(directory)
        self.name = name or f"outputs:{self.directory}"

    def __call__(self, case):
        d = self.directory / case.id
        files = sorted(d.glob("output*.npy"), key=lambda p: int(p.stem[6:]))
        if not files:
            raise FileNotFoundError(f"no recorded output for {case.id} (expected {d}/output0.npy)")
        return [np.load(f, allow_pickle=False) for f in files]


def resolve(spec):
    """A DUT from its command-line name (see the module docstring)."""
    if spec == "golden":
        return GoldenDut()
    if spec.startswith("golden:"):
        return GoldenDut(spec.split(":", 1)[1])
    if spec in LITERT_MODES:
        return LiteRTDut(spec)
    if spec.startswith("outputs:"):
        return RecordedDut(spec.split(":", 1)[1])
    if ":" in spec:
        module, attr = spec.split(":", 1)
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"cannot load the DUT {spec!r}: {exc}") from None
        if not callable(fn):
            raise ValueError(f"the DUT {spec!r} is not callable")
        return fn
    raise ValueError(f"unknown DUT {spec!r}: use golden[:VARIANT], {', '.join(LITERT_MODES)}, outputs:DIR or "
                     f"module:callable")
