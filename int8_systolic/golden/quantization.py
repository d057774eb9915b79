"""Choosing and applying int8 quantization parameters the way TFLite does.

TFLite int8 quantization spec (https://ai.google.dev/edge/litert/models/quantization_spec):
``real = (q - zero_point) * scale``; activations are asymmetric int8 in [-128, 127]
with a zero point in that range; weights are symmetric int8 in [-127, 127] (narrow
range) with zero point 0, per output channel for CONV_2D / DEPTHWISE_CONV_2D.

Floating point is used here only where TFLite uses it: choosing parameters from real
ranges, quantizing and dequantizing real tensors, and deriving activation bounds.
"""

import numpy as np

from ._checks import (
    ACTIVATIONS,
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    choice,
    finite_real,
    int_array,
    int_param,
    scale_param,
    zero_point_param,
)
from .fixedpoint import round_half_away

__all__ = [
    "MovingAverageMinMax",
    "activation_range",
    "choose_quantization_params",
    "dequantize",
    "fake_quant_nudge",
    "quantize",
    "quantize_weights_symmetric",
    "symmetric_weight_params",
]


def choose_quantization_params(rmin, rmax, qmin=INT8_MIN, qmax=INT8_MAX):
    """Asymmetric (scale, zero_point) for a real range, as TFLite's ``ChooseQuantizationParams``.

    The range is first widened to contain 0 (``rmin = min(rmin, 0)``,
    ``rmax = max(rmax, 0)``), as TFLite's calibration does, so real 0 is always exactly
    representable. Then, in double precision: ``scale = (rmax - rmin) / (qmax - qmin)``;
    the zero point is computed from whichever of (rmin, qmin) and (rmax, qmax) carries
    the smaller rounding error, and *nudged*: clamped to [qmin, qmax] and otherwise
    rounded to nearest (ties away from zero, ``std::round``).

    Note: some write-ups (and older tutorials) compute ``int(qmin - rmin/scale)``, which
    truncates toward zero and is off by one for about half of all ranges; TFLite
    rounds. A degenerate range [0, 0] gives TFLite's ``(0.0, 0)``; a zero scale is not a
    legal tensor scale, so callers must not use it for a live tensor.

    Returns ``(scale: float, zero_point: int)``; ``scale`` is the double value, which a
    .tflite file stores as float32.
    """
    rmin = min(finite_real("rmin", rmin), 0.0)
    rmax = max(finite_real("rmax", rmax), 0.0)
    qmin = int_param("qmin", qmin, INT32_MIN, INT32_MAX)
    qmax = int_param("qmax", qmax, qmin + 1, INT32_MAX)
    if rmin == rmax:
        return 0.0, 0
    scale = (rmax - rmin) / (qmax - qmin)
    zp_from_min = qmin - rmin / scale
    zp_from_max = qmax - rmax / scale
    zp_from_min_error = abs(qmin) + abs(rmin / scale)
    zp_from_max_error = abs(qmax) + abs(rmax / scale)
    zp = zp_from_min if zp_from_min_error < zp_from_max_error else zp_from_max
    if zp < qmin:
        nudged = qmin
    elif zp > qmax:
        nudged = qmax
    else:
        nudged = int(round_half_away(zp))
    return scale, nudged


def _half_range(weights, axis):
    """max|w| in float32, per tensor or per slice along ``axis``; returns (half_range, weights, axis)."""
    w = np.asarray(weights, dtype=np.float32)
    if not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite")
    if axis is None:
        return (np.max(np.abs(w)) if w.size else np.float32(0)), w, None
    axis = int_param("axis", axis, -w.ndim, w.ndim - 1) % w.ndim
    other = tuple(i for i in range(w.ndim) if i != axis)
    return np.max(np.abs(w), axis=other, initial=np.float32(0)), w, axis


def symmetric_weight_params(weights, axis=None):
    """Symmetric narrow-range weight scale(s): ``max|w| / 127`` per tensor or along ``axis``.

    Mirrors TFLite's converter (``SymmetricPerChannelQuantization``), in float32. A
    slice that is all zero has no range; TFLite would emit scale 0, which is not a legal
    scale, so we return 1.0 for it (any positive scale reproduces its zeros exactly).
    Returns a float32 scalar or a float32 vector of length ``weights.shape[axis]``.
    """
    half_range, _, _ = _half_range(weights, axis)
    scale = np.asarray(half_range / np.float32(127.0), dtype=np.float32)
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    return scale[()] if scale.ndim == 0 else scale


def quantize_weights_symmetric(weights, axis=None):
    """Quantize real weights to symmetric int8 [-127, 127] with zero point 0.

    Returns ``(q_weights int8, scale)`` where ``scale`` is per tensor (``axis=None``)
    or per slice along ``axis`` (any axis: 0 for CONV_2D's OHWI, 3 for DEPTHWISE's
    1HWC). Values are ``roundf(w * (127 / max|w|))`` in float32, clamped to
    [-127, 127], as TFLite's converter computes them.
    """
    half_range, w, axis = _half_range(weights, axis)
    hr = np.asarray(half_range, dtype=np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(hr > 0, np.float32(127.0) / np.where(hr > 0, hr, 1), 0).astype(np.float32)
    if axis is not None:
        shape = [1] * w.ndim
        shape[axis] = -1
        inv = inv.reshape(shape)
    q = np.clip(round_half_away((w * inv).astype(np.float32)), -127, 127)
    return q.astype(np.int8), symmetric_weight_params(w, axis)


def _broadcast_params(name_scale, scale, name_zp, zero_point, shape, axis):
    """Scale and zero point reshaped to broadcast against ``shape`` (per tensor or along axis)."""
    if axis is None:
        s = scale_param(name_scale, scale)
        zp = np.asarray(int_param(name_zp, zero_point, INT32_MIN, INT32_MAX), dtype=np.int64)
        return s, zp
    axis = int_param("axis", axis, -len(shape), len(shape) - 1) % len(shape)
    n = shape[axis]
    s = scale_param(name_scale, scale, n)
    zp = np.asarray(zero_point)
    if zp.ndim == 0:
        zp = np.full(n, int_param(name_zp, int(zp) if np.issubdtype(zp.dtype, np.integer) else zero_point,
                                  INT32_MIN, INT32_MAX), dtype=np.int64)
    elif zp.shape != (n,):
        raise ValueError(f"{name_zp} must be a scalar or have shape ({n},), got {zp.shape}")
    else:
        zp = int_array(name_zp, zp, np.int64)
    bshape = [1] * len(shape)
    bshape[axis] = n
    return np.broadcast_to(s, (n,)).reshape(bshape), zp.reshape(bshape)


def quantize(real, scale, zero_point, *, axis=None, qmin=INT8_MIN, qmax=INT8_MAX, dtype=np.int8):
    """Quantize reals as TFLite's reference QUANTIZE (``AffineQuantize``).

    ``q = clamp(zero_point + (int32)roundf(real / scale), qmin, qmax)`` with the
    division and rounding in float32. Per tensor, or per slice along ``axis`` with
    vector ``scale`` / ``zero_point``.
    """
    dtype = _integer_dtype(dtype)
    info = np.iinfo(dtype)
    qmin = int_param(f"qmin (of {dtype})", qmin, int(info.min), int(info.max))
    qmax = int_param(f"qmax (of {dtype}, above qmin)", qmax, qmin + 1, int(info.max))
    try:
        x = np.asarray(real, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"real must be an array of real numbers, got {type(real).__name__}") from None
    if not np.all(np.isfinite(x)):
        raise ValueError("real must be finite")
    s, zp = _broadcast_params("scale", scale, "zero_point", zero_point, x.shape, axis)
    if np.any(zp < qmin) or np.any(zp > qmax):
        raise ValueError(f"zero_point must be in [{qmin}, {qmax}], got {zero_point!r}")
    with np.errstate(over="ignore"):
        r = round_half_away((x / s).astype(np.float32))
    r = np.clip(r, INT32_MIN, INT32_MAX).astype(np.int64)
    return np.clip(r + zp, qmin, qmax).astype(dtype)


def _integer_dtype(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be an integer numpy dtype, got {dtype!r}") from None
    if dt == np.bool_ or dt.kind not in "iu" or dt.itemsize > 4:
        raise ValueError(f"dtype must be an integer numpy dtype of at most 32 bits, got {dt}")
    return dt


def dequantize(q, scale, zero_point, *, axis=None):
    """Dequantize as TFLite's reference DEQUANTIZE: ``(float)((double)scale * (q - zero_point))``."""
    qa = int_array("q", q, np.int64)
    s, zp = _broadcast_params("scale", scale, "zero_point", zero_point, qa.shape, axis)
    return (s.astype(np.float64) * (qa - zp)).astype(np.float32)


def _quantize_scalar_f32(scale, zero_point, f):
    """TFLite kernel_util.cc ``Quantize``: zero_point + (int32)roundf(f / scale), in float32."""
    tmp = round_half_away(np.float32(f) / np.float32(scale))
    if not (INT32_MIN <= float(tmp) < 2**31):
        raise ValueError(f"activation bound {f} / scale {float(scale)!r} does not fit in int32 "
                         f"(TFLite rejects this at prepare time)")
    return int(zero_point) + int(tmp)


def activation_range(activation, scale, zero_point, qmin=INT8_MIN, qmax=INT8_MAX):
    """Quantized fused-activation bounds, as TFLite's ``CalculateActivationRangeQuantized``.

    RELU: [max(qmin, Q(0)), qmax]; RELU6: [max(qmin, Q(0)), min(qmax, Q(6))];
    RELU_N1_TO_1: [max(qmin, Q(-1)), min(qmax, Q(1))]; NONE: [qmin, qmax], where
    ``Q(f) = zero_point + roundf(f / scale)`` evaluated in float32.
    """
    activation = choice("activation", activation, ACTIVATIONS)
    qmin = int_param("qmin", qmin, INT32_MIN, INT32_MAX)
    qmax = int_param("qmax", qmax, qmin + 1, INT32_MAX)
    s = scale_param("output_scale", scale)
    zp = zero_point_param("output_zero_point", zero_point, qmin, qmax)
    if activation == "RELU":
        return max(qmin, _quantize_scalar_f32(s, zp, 0.0)), qmax
    if activation == "RELU6":
        return max(qmin, _quantize_scalar_f32(s, zp, 0.0)), min(qmax, _quantize_scalar_f32(s, zp, 6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, _quantize_scalar_f32(s, zp, -1.0)), min(qmax, _quantize_scalar_f32(s, zp, 1.0))
    return qmin, qmax


def fake_quant_nudge(rmin, rmax, num_bits=8, narrow_range=False):
    """TensorFlow's fake-quant ``Nudge`` (fake_quant_ops_functor.h), in float32.

    The quantized range is [narrow_range ? 1 : 0, 2**num_bits - 1]; the zero point is
    ``round(quant_min - rmin / scale)`` clamped to that range, and the range is moved
    so that real 0 lands exactly on it. Returns ``(nudged_min, nudged_max, scale,
    zero_point)`` with the zero point expressed in the signed int8 domain (shifted by
    -2**(num_bits-1)), ready for an int8 tensor.
    """
    rmin = np.float32(finite_real("rmin", rmin))
    rmax = np.float32(finite_real("rmax", rmax))
    num_bits = int_param("num_bits", num_bits, 2, 16)   # TensorFlow's FakeQuant* ops take 2 to 16 bits
    if not isinstance(narrow_range, (bool, np.bool_)):
        raise ValueError(f"narrow_range must be a bool, got {narrow_range!r}")
    if not rmin <= 0 <= rmax or rmin == rmax:
        raise ValueError(f"fake-quant range must contain 0 and be non-empty, got [{rmin}, {rmax}]")
    quant_min = np.float32(1 if narrow_range else 0)
    quant_max = np.float32(2**num_bits - 1)
    scale = np.float32((rmax - rmin) / (quant_max - quant_min))
    zp_from_min = np.float32(quant_min - rmin / scale)
    if zp_from_min < quant_min:
        nudged_zp = quant_min
    elif zp_from_min > quant_max:
        nudged_zp = quant_max
    else:
        nudged_zp = np.float32(round_half_away(zp_from_min))
    nudged_min = np.float32((quant_min - nudged_zp) * scale)
    nudged_max = np.float32((quant_max - nudged_zp) * scale)
    return float(nudged_min), float(nudged_max), float(scale), int(nudged_zp) - 2 ** (num_bits - 1)


class MovingAverageMinMax:
    """Exponential-moving-average range tracker used in quantization-aware training.

    Follows TensorFlow's ``MovingAvgQuantize`` / fake-quant training rules:

    * the first observed batch initialises min and max; each later batch updates
      ``v = decay * v + (1 - decay) * batch_v``;
    * the range used for quantization always contains 0 (``min <= 0 <= max``);
    * ``symmetric=True`` uses ``[-m, m]`` with ``m = max(|min|, |max|)`` (weights);
    * ``narrow_range=True`` uses the quantized range [-127, 127] instead of [-128, 127].

    ``quantization_params()`` applies fake-quant's nudge and returns ``(scale,
    zero_point)`` for an int8 tensor.
    """

    def __init__(self, decay=0.999, *, symmetric=False, narrow_range=False):
        decay = finite_real("decay", decay)
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.symmetric = bool(symmetric)
        self.narrow_range = bool(narrow_range)
        self.min = None
        self.max = None

    def update(self, batch):
        x = np.asarray(batch, dtype=np.float64)
        if x.size == 0 or not np.all(np.isfinite(x)):
            raise ValueError("batch must be non-empty and finite")
        bmin, bmax = float(x.min()), float(x.max())
        if self.min is None:
            self.min, self.max = bmin, bmax
        else:
            self.min = self.decay * self.min + (1.0 - self.decay) * bmin
            self.max = self.decay * self.max + (1.0 - self.decay) * bmax
        return self

    def range(self):
        """The range quantization uses: contains 0; symmetric about 0 if requested."""
        if self.min is None:
            raise ValueError("no batch observed yet: call update() first")
        lo, hi = min(self.min, 0.0), max(self.max, 0.0)
        if self.symmetric:
            m = max(-lo, hi)
            lo, hi = -m, m
        return lo, hi

    def quantization_params(self):
        lo, hi = self.range()
        if lo == hi:
            raise ValueError("observed range is [0, 0]: no scale can be chosen")
        _, _, scale, zero_point = fake_quant_nudge(lo, hi, narrow_range=self.narrow_range)
        return scale, zero_point
