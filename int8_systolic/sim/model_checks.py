"""What every model testbench checks per layer and per step (the core's and AXI top's, sim/tb_model.py; the memory
engine's, sim/tb_engine_model.py): a MAC layer's hardware output against golden (the first mismatch reported with
its golden stages), and after each step every tensor against TFLite-Micro, with a progress line."""

import time

import numpy as np

from ..golden.tflite.interpreter import compare_with_tflm

__all__ = ["check_layer", "check_step"]


def check_layer(rec, hw, stages, step, layer, mismatches, log, *, what="RTL", seed=None):
    """Compare ``hw`` with the golden ``stages`` of ``layer``; count an exact step in ``rec`` or record the first
    mismatching element (in ``rec`` once, in ``mismatches`` and the log each time)."""
    want = stages.output.reshape(layer.output_shape)
    if np.array_equal(hw, want):
        rec["exact_steps"] += 1
        return
    idx = tuple(int(v) for v in np.argwhere(hw != want)[0])
    flat = int(np.ravel_multi_index(idx, want.shape))
    text = (f"step {step}, element {list(idx)}: {what} {int(hw[idx])}, golden stages "
            f"{stages.at(np.unravel_index(flat, stages.output.shape))}")
    rec["first_mismatch"] = rec["first_mismatch"] or text
    mismatches.append(f"operator {layer.op_index} ({layer.kind}) {text}")
    log.error(f"MISMATCH operator {layer.op_index} ({layer.kind}) {text} (seed {seed})")


def check_step(interp, tflm, x, step, steps, name, mismatches, log, t0, where):
    """After a step: run TFLM on ``x``, compare every tensor, print the progress line; returns the tensors compared."""
    tflm.invoke(x)
    tensors, _, differences = compare_with_tflm(interp, tflm)
    for text in differences:
        mismatches.append(f"step {step}: {text}")
        log.error(mismatches[-1])
    done = (step + 1) * 30 // steps
    print(f"[model] {name} [{'#' * done}{'.' * (30 - done)}] step {step + 1}/{steps}: {where}, "
          f"{len(mismatches)} mismatches, {time.perf_counter() - t0:.1f} s", flush=True)
    return tensors
