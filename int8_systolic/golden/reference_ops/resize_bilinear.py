"""RESIZE_BILINEAR, int8 (spec: input and output share scale and zero point).

TFLM micro/kernels/resize_bilinear.cc and reference ``ResizeBilinearInteger``: source
coordinates in 10-bit fixed point (``scale_10 = round(1024 * in / out)``, or with
``align_corners`` ``round(1024 * (in - 1) / (out - 1))``; ``half_pixel_centers`` shifts by
half a pixel), the four neighbours weighted in 20-bit fixed point and rounded half away
from zero (``(v +- 2**19) / 2**20``). Raw int8 values are interpolated: no requantization.
"""

import numpy as np

from ._base import Op, int32_data

__all__ = ["OPS"]


def _cdiv(a, b):
    """C's truncating integer division."""
    a = np.asarray(a, np.int64)
    return np.where(a >= 0, a // b, -((-a) // b))


def prepare(ctx):
    t = ctx.tensor(0, types=("INT8",))
    ctx.tensor(0, output=True, types=("INT8",))
    ctx.same_quantization([0], clause="the spec requires RESIZE_BILINEAR's input and output to have the same "
                                      "scale/zero_point (TFLM interpolates raw values)")
    if len(t.shape) != 4:
        ctx.fail(f"input '{t.name}' must be 4-D NHWC, got {list(t.shape)}")
    size = int32_data(ctx, 1, "the size tensor")
    if size is None or size.size != 2:
        ctx.fail("the size tensor must be a constant [new_height, new_width]")
    align, half = bool(ctx.option("alignCorners", False)), bool(ctx.option("halfPixelCenters", False))
    if align and half:
        ctx.fail("align_corners and half_pixel_centers cannot both be set (TFLM refuses it)")
    oh, ow = int(size[0]), int(size[1])
    if oh < 1 or ow < 1:
        ctx.fail(f"output size {oh}x{ow} must be positive")
    return {"output_height": oh, "output_width": ow, "align_corners": align, "half_pixel_centers": half}


def _axis_values(out_size, in_size, align, half):
    scale = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    v = np.arange(out_size, dtype=np.int64)
    scaled = v * scale + scale // 2 - (1 << 9) if half else v * scale
    lower = np.maximum(_cdiv(scaled, 1 << 10), 0)
    upper = np.minimum(_cdiv(scaled + (1 << 10) - 1, 1 << 10), in_size - 1)
    return scaled, lower, upper


def eval_resize(p, inputs):
    x = inputs[0].astype(np.int64)
    _, h, w, _ = x.shape
    ys, y0, y1 = _axis_values(p["output_height"], h, p["align_corners"], p["half_pixel_centers"])
    xs, x0, x1 = _axis_values(p["output_width"], w, p["align_corners"], p["half_pixel_centers"])
    dy = (ys - (1 << 10) * y0)[None, :, None, None]
    dx = (xs - (1 << 10) * x0)[None, None, :, None]
    g = lambda yy, xx: x[:, yy][:, :, xx]  # noqa: E731
    out20 = (g(y0, x0) * ((1 << 10) - dy) * ((1 << 10) - dx) + g(y1, x0) * dy * ((1 << 10) - dx)
             + g(y0, x1) * ((1 << 10) - dy) * dx + g(y1, x1) * dy * dx)
    rounded = _cdiv(out20 + np.where(out20 > 0, 1 << 19, -(1 << 19)), 1 << 20)
    return [rounded.astype(np.int8)]


OPS = {"RESIZE_BILINEAR": Op(prepare, eval_resize)}
