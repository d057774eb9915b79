"""The MAC layers' fast path: everything weight-dependent prepared once, Eval one exact GEMM.

As TFLM's Prepare does, :func:`plan` precomputes per layer what does not depend on the
input: the weights as a float32 GEMM operand (int8 products summed in chunks of K <= 1024
stay below 2**24, so float32 BLAS is exact whatever order it adds in), the folded bias
``bias + input_offset * sum(w)`` and the per-channel requantization constants. Eval is
im2col (or the depthwise tap loop), the GEMM, and :func:`requantize`, which computes
MultiplyByQuantizedMultiplier with the fewest numpy passes using two identities:

* SaturatingRoundingDoublingHighMul(a, M) = ``(a * M + 2**30) >> 31`` (arithmetic shift)
  for every operand pair except INT32_MIN * INT32_MIN, which cannot occur since
  QuantizeMultiplier's multipliers lie in [2**30, 2**31) or are 0;
* RoundingDivideByPOT(q, r) = ``(q + 2**(r-1) - [q < 0]) >> r`` for r >= 1.

When the accumulator cannot leave int32 and the shifts are moderate, :func:`requantize` goes
further and folds both roundings, the bias and the output offset into one shift, since
``floor((floor(t / B) + c) / C) = floor((t + c B) / (B C))`` for integers: with
``u = acc M + bias M + 2**30`` (so ``[u < 0]`` is SRDHM's sign),
``out = (u + 2**(30+r) + offset 2**(31+r) - [u < 0] 2**31) >> (31 + r)``, then the clamp; a
channel with no right shift (r = 0) has no second rounding: ``(u + offset 2**31) >> 31``.

This path must equal the staged kernels (:mod:`golden.kernels`, which the RTL is checked
against) and TFLM bit for bit; tests/test_mac_plan.py and the whole-model TFLM
comparisons check both.
"""

import numpy as np

from .. import staged
from ..fixedpoint import wrap_int32_in_int64 as _wrap

__all__ = ["compile_step", "plan", "requantize", "run"]

_CHUNK = 1024
INT32_SPAN = 1 << 32


def gather_index(in_hw, filter_hw, stride, dilation, padding):
    """im2col as one gather: [OH*OW, KH*KW] indices into the input's H*W positions, H*W where a tap falls in the
    padding (the gather reads the input with one row of zero points appended). TFLite's SAME/VALID geometry."""
    (h, w), (kh, kw), (sh, sw), (dh, dw) = in_hw, filter_hw, stride, dilation
    oh = staged.compute_out_size(padding, h, kh, sh, dh)
    ow = staged.compute_out_size(padding, w, kw, sw, dw)
    if oh < 1 or ow < 1:
        raise ValueError(f"the (dilated) filter {kh}x{kw} (dilation {dh}x{dw}) does not fit in the {h}x{w} input "
                         f"with {padding} padding: output would be {oh}x{ow}")
    pt, _ = staged.compute_padding(sh, dh, h, kh, oh)
    pl, _ = staged.compute_padding(sw, dw, w, kw, ow)
    ys = (np.arange(oh) * sh - pt)[:, None, None, None] + (np.arange(kh) * dh)[None, None, :, None]
    xs = (np.arange(ow) * sw - pl)[None, :, None, None] + (np.arange(kw) * dw)[None, None, None, :]
    inside = (ys >= 0) & (ys < h) & (xs >= 0) & (xs < w)
    index = np.where(inside, ys * w + xs, h * w)
    return index.reshape(oh * ow, kh * kw).astype(np.intp)


def plan(kind, weights, bias, params, geometry, input_shape=None):
    """Precompute a layer (``params`` from :func:`golden.ops.conv_params`); None where the fast path does not apply."""
    if params.get("rounding", "double") != "double":
        return None
    w = np.asarray(weights)
    if kind == "FULLY_CONNECTED":
        rhs = w.T
    elif kind == "CONV_2D":
        rhs = w.reshape(w.shape[0], -1).T
    else:
        rhs = None
    if rhs is not None:
        sums = rhs.astype(np.int64).sum(axis=0)
        k = rhs.shape[0]
        rhs_f32 = [np.ascontiguousarray(rhs[k0:k0 + _CHUNK].astype(np.float32)) for k0 in range(0, max(k, 1), _CHUNK)]
    else:
        sums = w.astype(np.int64).sum(axis=(0, 1, 2))
        k = w.shape[1] * w.shape[2]
        rhs_f32 = None
    n = sums.shape[0]
    b = np.zeros(n, np.int64) if bias is None else np.asarray(bias, np.int64)
    folded = ((b + int(params["input_offset"]) * sums + (1 << 31)) % INT32_SPAN) - (1 << 31)
    mult = np.broadcast_to(np.asarray(params["output_multiplier"], np.int64), (n,)).copy()
    shift = np.broadcast_to(np.asarray(params["output_shift"], np.int64), (n,))
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    # |raw accumulator| <= K * 128 * 127; if the folded sum cannot leave int32, no wrap is needed
    needs_wrap = k * 128 * 127 + int(np.abs(folded).max(initial=0)) >= 1 << 31
    offset = int(params["output_offset"])
    # The one-shift form: every constant below 2**62 (|acc M| < 2**62, offset 2**(31+r) < 2**61)
    fused = None
    if not needs_wrap and not left.any() and int(right.max(initial=0)) <= 22:
        total_shift = 31 + right
        half = np.where(right > 0, np.int64(1) << (30 + right), 0)     # the second rounding's half, if any
        fused = {"multiplier": mult,
                 "constant": folded * mult + (1 << 30) + half + offset * (np.int64(1) << total_shift),
                 # u < 0  <=>  acc M + constant < half + offset 2**(31+r)
                 "negative_below": half + offset * (np.int64(1) << total_shift),
                 "sign_step": np.where(right > 0, np.int64(1) << 31, 0),
                 "shift": total_shift}
        if np.all(right == right[0]):
            fused["shift"] = int(total_shift[0])
    return {"kind": kind, "rhs_f32": rhs_f32, "weights_i32": None if rhs is not None else w.astype(np.int32),
            "folded_bias": folded, "needs_wrap": bool(needs_wrap),
            "left_pow": None if not left.any() else (np.int64(1) << left), "multiplier": mult,
            "right": right if right.any() else None, "half": np.where(right > 0, np.int64(1) << (right - 1), 0),
            # -1 where a channel shifts right (its rounding subtracts 1 from negative values), 0 elsewhere
            "sign_mask": -(right > 0).astype(np.int64), "output_offset": offset, "fused": fused,
            "act_min": int(params["quantized_activation_min"]), "act_max": int(params["quantized_activation_max"]),
            "input_offset": int(params["input_offset"]), "geometry": geometry,
            "filter_hw": tuple(w.shape[1:3]) if kind != "FULLY_CONNECTED" else None,
            "gather": None if kind == "FULLY_CONNECTED" or input_shape is None else
            gather_index(input_shape[1:3], w.shape[1:3], geometry["stride"], geometry["dilation"],
                         geometry["padding"]),
            # depthwise: [taps, C, depth_multiplier] float32 (products and sums of <= 1024 taps are exact)
            "taps_f32": None if kind != "DEPTHWISE_CONV_2D" else
            w.reshape(-1, w.shape[3] // geometry["depth_multiplier"], geometry["depth_multiplier"]).astype(np.float32)}


def requantize(acc, p):
    """int64 raw accumulators [..., N] -> int8: + folded bias, MultiplyByQuantizedMultiplier, + offset, clamp."""
    f = p["fused"]
    if f is not None:
        v = acc * f["multiplier"]
        v += f["constant"]
        negative = v < f["negative_below"]
        v -= negative * f["sign_step"]
        v >>= f["shift"]
        np.maximum(v, p["act_min"], out=v)
        return np.minimum(v, p["act_max"], out=v).astype(np.int8)
    acc += p["folded_bias"]
    x = _wrap(acc) if p["needs_wrap"] else acc
    if p["left_pow"] is not None:
        x = _wrap(x * p["left_pow"])
    q = x * p["multiplier"]
    q += 1 << 30
    q >>= 31
    if p["right"] is not None:
        sign = q >> 63          # -1 where q < 0: RoundingDivideByPOT rounds half away from zero
        sign &= p["sign_mask"]  # ... in the channels that shift right
        q += p["half"]
        q += sign
        q >>= p["right"]
    q += p["output_offset"]
    np.maximum(q, p["act_min"], out=q)
    return np.minimum(q, p["act_max"], out=q).astype(np.int8)


def _gemm(lhs, rhs_chunks):
    if len(rhs_chunks) == 1:
        return (lhs.astype(np.float32) @ rhs_chunks[0]).astype(np.int64)
    acc = None
    k0 = 0
    for rhs in rhs_chunks:
        part = lhs[:, k0:k0 + rhs.shape[0]].astype(np.float32) @ rhs
        k0 += rhs.shape[0]
        acc = part.astype(np.int64) if acc is None else acc + part.astype(np.int64)
    return acc


def compile_step(p, output_shape, k=None):
    """``run`` as one closure over a layer's constants, for the interpreter's compiled program; FULLY_CONNECTED
    layers with one GEMM chunk and the one-shift requantization (the common case) skip every lookup."""
    f = p["fused"]
    if p["kind"] != "FULLY_CONNECTED" or len(p["rhs_f32"]) != 1 or f is None:
        return lambda x: run(p, x if k is None else x.reshape(-1, k), output_shape)
    rhs, mult, constant, below, step, shift = (p["rhs_f32"][0], f["multiplier"], f["constant"], f["negative_below"],
                                               f["sign_step"], f["shift"])
    lo, hi = p["act_min"], p["act_max"]

    def fully_connected(x):
        v = (x.reshape(-1, k).astype(np.float32) @ rhs).astype(np.int64)
        v *= mult
        v += constant
        v -= (v < below) * step
        v >>= shift
        np.maximum(v, lo, out=v)
        return np.minimum(v, hi, out=v).astype(np.int8).reshape(output_shape)

    return fully_connected


def _columns(p, x):
    """[B, OH*OW, KH*KW, C] input taps (padding = the input zero point), by the precomputed gather."""
    b, h, w, c = x.shape
    flat = np.empty((b, h * w + 1, c), np.float32)
    flat[:, :h * w] = x.reshape(b, h * w, c)
    flat[:, h * w] = -p["input_offset"]
    return flat[:, p["gather"]]


def run(p, x, output_shape):
    """The layer's int8 output for input ``x`` (FULLY_CONNECTED: already [batch, K])."""
    kind, g = p["kind"], p["geometry"]
    if kind == "FULLY_CONNECTED":
        acc = _gemm(x, p["rhs_f32"])
    elif kind == "CONV_2D":
        if p["filter_hw"] == (1, 1) and g["stride"] == (1, 1):
            lhs = x.reshape(-1, x.shape[3])
        elif p["gather"] is not None and p["gather"].size * x.shape[3] * x.shape[0] < 1 << 24:
            cols = _columns(p, x)
            lhs = cols.reshape(-1, cols.shape[2] * cols.shape[3])
        else:
            cols = staged.im2col(x, p["filter_hw"], g["stride"], g["dilation"], g["padding"], -p["input_offset"])
            lhs = cols.reshape(-1, cols.shape[-1])
        acc = _gemm(lhs, p["rhs_f32"])
    elif p["gather"] is not None and p["taps_f32"].shape[0] <= _CHUNK:
        cols = _columns(p, x)                                   # [B, P, T, C]
        taps = p["taps_f32"]                                    # [T, C, m]
        acc = np.einsum("bptc,tcm->bpcm", cols, taps, optimize=False) if taps.shape[2] > 1 else \
            np.einsum("bptc,tc->bpc", cols, taps[:, :, 0])
        acc = acc.reshape(x.shape[0], -1, taps.shape[1] * taps.shape[2]).astype(np.int64)
    else:
        w = p["weights_i32"]
        acc = staged.depthwise_accumulate(x, w, g["stride"], g["dilation"], g["padding"], -p["input_offset"],
                                          g["depth_multiplier"]).astype(np.int64)
    return requantize(acc, p).reshape(output_shape)

