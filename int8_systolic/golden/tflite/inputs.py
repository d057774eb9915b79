"""Inputs for whole-model runs: audio features for the wake-word models, else seeded random data.

A float32 input (models that quantize at their edge, such as visual_wake_words) gets
values spread over the real range of the QUANTIZE that consumes it, so the int8 tensors
behind it cover their whole range rather than saturating.
"""

import numpy as np

__all__ = ["model_inputs"]


def _float_range(model, tensor_index):
    """The real range [lo, hi] of the int8 tensor a QUANTIZE makes of this float input, or (-1, 1)."""
    sg = model.subgraphs[0]
    for op in sg.operators:
        if op.op == "QUANTIZE" and op.inputs and op.inputs[0] == tensor_index:
            q = sg.tensors[op.outputs[0]].quantization
            if q is not None:
                s, zp = float(q.scale[0]), int(q.zero_point[0])
                return (-128 - zp) * s, (127 - zp) * s
    return -1.0, 1.0


def model_inputs(model, steps, seed, kind="auto"):
    """Per step, the list of input arrays: audio features for [1, stride, 40] int8 inputs, else random."""
    sg = model.subgraphs[0]
    tensors = [sg.tensors[i] for i in sg.inputs]
    if kind == "auto":
        kind = "features" if len(tensors) == 1 and len(tensors[0].shape) == 3 and tensors[0].shape[2] == 40 \
            and tensors[0].type == "INT8" else "random"
    if kind == "features":
        from .wakeword import feature_windows

        t = tensors[0]
        return [[w] for w in feature_windows(t.shape, t.quantization.scale[0], t.quantization.zero_point[0],
                                             steps, seed)]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        step = []
        for ti, t in zip(sg.inputs, tensors, strict=True):
            if t.type == "FLOAT32":
                lo, hi = _float_range(model, ti)
                step.append(rng.uniform(lo, hi, t.shape).astype(np.float32))
            else:
                info = np.iinfo(t.dtype)
                step.append(rng.integers(info.min, int(info.max) + 1, t.shape).astype(t.dtype))
        out.append(step)
    return out
