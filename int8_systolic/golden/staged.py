"""The staged form of TFLite's int8 GEMM-like kernels: the contract the RTL implements.

TFLite's reference kernels compute, per output element::

    acc = sum_k (q_w[k] + weights_offset) * (q_a[k] + input_offset)   # int32, wraps
    acc += bias
    out = clamp(MultiplyByQuantizedMultiplier(acc, M, shift) + output_offset, act_min, act_max)

Weights are symmetric (weights_offset = 0), so the activation offset separates out::

    sum_k q_w[k] * (q_a[k] + input_offset) = sum_k q_a[k] * q_w[k] + input_offset * sum_k q_w[k]

and the second term is a per-output-channel constant that is folded into the bias ahead
of time. The hardware therefore multiplies raw int8 values, accumulates in int32 and
adds one precomputed int32 per channel. Every sum is taken modulo 2**32 (two's
complement), which is a ring, so the staged result equals TFLite's loop bit for bit
even when the accumulator overflows.

Stages, each a pure function so that a mismatch can be localised::

    accumulate -> fold_bias / add_bias -> requantize -> add_output_offset -> clamp

Convolutions reduce to the same GEMM through :func:`im2col`, which fills padding with
the input zero point: a padded tap then contributes ``zero_point * w`` to the raw sum,
which the fold removes again (TFLite instead skips out-of-image taps; the results are
identical).
"""

import numpy as np

from .fixedpoint import multiply_by_quantized_multiplier, wrap_int32

__all__ = [
    "StagedResult",
    "accumulate",
    "accumulate_with_sums",
    "add_bias",
    "add_output_offset",
    "clamp",
    "compute_out_size",
    "compute_padding",
    "depthwise_accumulate",
    "fold_bias",
    "im2col",
    "requantize",
    "requantize_stages",
]

# |q_a * q_w| <= 128 * 127 = 16256, so any partial sum of up to 1024 such products is an integer
# below 2**24 and exactly representable in float32, whatever order BLAS adds them in.
_EXACT_F32_K = 1024


def _exact_matmul(lhs_f32, rhs_f32):
    """Exact integer product of float32-held int8 matrices, as int64 (K split into exact chunks)."""
    k = lhs_f32.shape[-1]
    acc = None
    for k0 in range(0, max(k, 1), _EXACT_F32_K):
        part = (lhs_f32[:, k0:k0 + _EXACT_F32_K] @ rhs_f32[k0:k0 + _EXACT_F32_K, :]).astype(np.int64)
        acc = part if acc is None else acc + part
    return acc


def accumulate_with_sums(lhs, rhs):
    """Raw int32 accumulators ``lhs @ rhs`` and the weight column sums ``sum_k rhs[k, n]`` (int64).

    ``lhs`` int8 [M, K], ``rhs`` int8 [K, N]. The sums are exact (float32 BLAS on chunks
    of K that cannot round) and the accumulators are reduced modulo 2**32, as a chain of
    int32 additions would be.
    """
    rhs_f32 = np.asarray(rhs).astype(np.float32)
    acc = _exact_matmul(np.asarray(lhs).astype(np.float32), rhs_f32)
    sums = _exact_matmul(np.ones((1, rhs_f32.shape[0]), np.float32), rhs_f32)[0]
    return wrap_int32(acc), sums


def accumulate(lhs, rhs):
    """Raw int32 accumulators ``lhs @ rhs`` (int8 [M, K] x int8 [K, N]) with wrap-around."""
    return accumulate_with_sums(lhs, rhs)[0]


def depthwise_accumulate(x, weights, stride, dilation, padding, pad_value, depth_multiplier):
    """Raw int32 depthwise accumulators [B, OH, OW, C*m], tap by tap with int32 wrap-around.

    Output channel ``c*m + j`` sums ``x[..., c] * weights[0, ky, kx, c*m + j]`` over taps;
    padding is filled with ``pad_value`` (the input zero point), as in :func:`im2col`.
    """
    xp, (oh, ow), taps = _padded_taps(x, weights.shape[1:3], stride, dilation, padding, pad_value)
    xp = xp.astype(np.int32)
    if depth_multiplier > 1:  # input channel c feeds output channels c*m .. c*m + m-1
        xp = np.repeat(xp, depth_multiplier, axis=3)
    acc = np.zeros((x.shape[0], oh, ow, weights.shape[3]), np.int32)
    w = weights.astype(np.int32)
    for ky, kx, window in taps:
        acc += xp[window] * w[0, ky, kx]  # numpy int32 array arithmetic wraps like C's
    return acc


def fold_bias(bias, weight_sums, input_offset):
    """Per-channel folded bias ``bias + input_offset * sum_k q_w`` (int32, wraps).

    ``input_offset`` is TFLite's name for ``-input_zero_point``; ``weight_sums`` is
    ``sum_k q_w[k, n]`` per output channel; ``bias`` may be None (treated as 0).
    """
    sums = np.asarray(weight_sums, dtype=np.int64)
    b = np.zeros(sums.shape, np.int64) if bias is None else np.asarray(bias, dtype=np.int64)
    return wrap_int32(b + np.int64(input_offset) * sums)


def add_bias(acc, folded_bias):
    """Raw accumulators plus the folded bias, per output channel (last axis), int32 wrap.

    Both operands are int32 arrays, whose numpy addition wraps modulo 2**32 as C's does.
    """
    return np.asarray(acc, dtype=np.int32) + np.asarray(folded_bias, dtype=np.int32)


def requantize(acc, output_multiplier, output_shift, rounding="double"):
    """``MultiplyByQuantizedMultiplier`` per output channel (the last axis of ``acc``)."""
    return multiply_by_quantized_multiplier(acc, output_multiplier, output_shift, rounding)


def add_output_offset(scaled, output_offset):
    """``acc_scaled += output_offset`` with int32 wrap-around, as in TFLite's C++."""
    return np.asarray(scaled, dtype=np.int32) + np.full((), output_offset, dtype=np.int32)


def clamp(x, act_min, act_max):
    """Clamp to the fused activation range and narrow to int8."""
    return np.clip(x, act_min, act_max).astype(np.int8)


class StagedResult:
    """Every intermediate of one requantized GEMM, for localising a mismatch.

    Attributes (all numpy arrays with the output's shape unless noted): ``raw_acc``
    (sum q_a*q_w), ``folded_bias`` (per channel), ``acc`` (raw_acc + folded_bias),
    ``scaled`` (after MultiplyByQuantizedMultiplier), ``offset`` (+ output offset) and
    ``output`` (clamped int8).
    """

    __slots__ = ("acc", "folded_bias", "offset", "output", "raw_acc", "scaled")

    def __init__(self, **stages):
        for name in self.__slots__:
            setattr(self, name, stages[name])

    def at(self, index):
        """The stages of one output element, as a dict of Python ints."""
        index = tuple(np.atleast_1d(index))
        return {
            "raw_acc": int(self.raw_acc[index]),
            "folded_bias": int(self.folded_bias[index[-1]]),
            "acc": int(self.acc[index]),
            "scaled": int(self.scaled[index]),
            "offset": int(self.offset[index]),
            "output": int(self.output[index]),
        }


def requantize_stages(raw_acc, folded_bias, output_multiplier, output_shift, output_offset,
                      act_min, act_max, rounding="double"):
    """Run the post-accumulation stages and keep every intermediate (a :class:`StagedResult`)."""
    acc = add_bias(raw_acc, folded_bias)
    scaled = requantize(acc, output_multiplier, output_shift, rounding)
    offset = add_output_offset(scaled, output_offset)
    return StagedResult(raw_acc=raw_acc, folded_bias=np.asarray(folded_bias), acc=acc, scaled=scaled,
                        offset=offset, output=clamp(offset, act_min, act_max))


def compute_out_size(padding, image_size, filter_size, stride, dilation=1):
    """TFLite ``ComputeOutSize`` (kernels/padding.h)."""
    effective = (filter_size - 1) * dilation + 1
    if padding == "SAME":
        return (image_size + stride - 1) // stride
    return (image_size + stride - effective) // stride


def compute_padding(stride, dilation, in_size, filter_size, out_size):
    """TFLite ``ComputePaddingWithOffset``: (before, after); SAME puts floor(total/2) before."""
    effective = (filter_size - 1) * dilation + 1
    total = max((out_size - 1) * stride + effective - in_size, 0)
    return total // 2, total - total // 2


def _padded_taps(x, filter_hw, stride, dilation, padding, pad_value):
    """Pad an NHWC tensor as TFLite's geometry requires; return it, (OH, OW) and the tap windows.

    Each tap is ``(ky, kx, window)`` where ``x_padded[window]`` is that tap's input for every
    output position, shape [B, OH, OW, C].
    """
    _, h, w, _ = x.shape
    kh, kw = filter_hw
    (sh, sw), (dh, dw) = stride, dilation
    oh = compute_out_size(padding, h, kh, sh, dh)
    ow = compute_out_size(padding, w, kw, sw, dw)
    if oh < 1 or ow < 1:
        raise ValueError(f"the (dilated) filter {kh}x{kw} (dilation {dh}x{dw}) does not fit in the "
                         f"{h}x{w} input with {padding} padding: output would be {oh}x{ow}")
    pt, pb = compute_padding(sh, dh, h, kh, oh)
    pl, pr = compute_padding(sw, dw, w, kw, ow)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=pad_value)
    taps = [(ky, kx, (slice(None), slice(ky * dh, ky * dh + (oh - 1) * sh + 1, sh),
                      slice(kx * dw, kx * dw + (ow - 1) * sw + 1, sw), slice(None)))
            for ky in range(kh) for kx in range(kw)]
    return xp, (oh, ow), taps


def im2col(x, filter_hw, stride, dilation, padding, pad_value):
    """Patches [B, OH, OW, KH*KW*C] of an NHWC tensor, padding filled with ``pad_value``.

    ``padding`` is "SAME" or "VALID"; output sizes and padding follow TFLite exactly.
    The patch ordering (KH, KW, C) matches OHWI filters reshaped to [O, KH*KW*I].
    """
    b, _, _, c = x.shape
    kh, kw = filter_hw
    xp, (oh, ow), taps = _padded_taps(x, filter_hw, stride, dilation, padding, pad_value)
    cols = np.empty((b, oh, ow, kh, kw, c), dtype=x.dtype)
    for ky, kx, window in taps:
        cols[:, :, :, ky, kx, :] = xp[window]
    return cols.reshape(b, oh, ow, kh * kw * c)
