"""GATHER (spec: same scale/zero point in and out): TFLM micro/kernels/gather.cc.

int32 indices along ``axis`` (negative counts from the end), with ``batch_dims`` leading
dimensions shared by the params and the indices. TFLM does not check the index values
(it reads out of bounds); an index outside [0, axis size) is refused here.
"""

import numpy as np

from ._base import Op

__all__ = ["OPS"]


def prepare(ctx):
    t = ctx.tensor(0)
    idx = ctx.tensor(1, types=("INT32",), what="indices")
    if t.type == "INT8":
        ctx.same_quantization([0], clause="the spec requires GATHER's input and output to have the same "
                                          "scale/zero_point (TFLM copies raw values)")
    rank, idx_rank = len(t.shape), len(idx.shape)
    axis = ctx.axis(ctx.option("axis", 0), rank)
    batch_dims = int(ctx.option("batchDims", 0))
    if batch_dims < 0:
        batch_dims += idx_rank
    if not 0 <= batch_dims <= min(axis, idx_rank):
        ctx.fail(f"batch_dims {ctx.option('batchDims', 0)} must be in [0, min(axis {axis}, rank of indices "
                 f"{idx_rank})]")
    if tuple(t.shape[:batch_dims]) != tuple(idx.shape[:batch_dims]):
        ctx.fail(f"the first {batch_dims} dimensions of the input {list(t.shape)} and indices {list(idx.shape)} "
                 f"must match")
    shape = tuple(t.shape[:axis]) + tuple(idx.shape[batch_dims:]) + tuple(t.shape[axis + 1:])
    if tuple(ctx.outputs[0].shape) != shape:
        ctx.fail(f"GATHER gives {list(shape)} but output '{ctx.outputs[0].name}' is {list(ctx.outputs[0].shape)}")
    return {"axis": axis, "batch_dims": batch_dims, "output_shape": shape}


def eval_gather(p, inputs):
    x, idx = inputs[0], np.asarray(inputs[1], np.int64)
    axis, b = p["axis"], p["batch_dims"]
    size = x.shape[axis]
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise ValueError(f"index {bad} is outside [0, {size}) on axis {axis}")
    batch = int(np.prod(x.shape[:b]))
    outer = int(np.prod(x.shape[b:axis]))
    inner = int(np.prod(x.shape[axis + 1:]))
    xr = x.reshape(batch, outer, size, inner)
    ir = idx.reshape(batch, -1)
    out = xr[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], ir[:, None, :]]
    return [out.reshape(p["output_shape"])]


OPS = {"GATHER": Op(prepare, eval_gather)}
