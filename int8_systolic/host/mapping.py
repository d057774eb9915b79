"""Map a model's MAC layers onto the accelerator as GEMM problems (host side).

Used by the cocotb model testbench (``sim.tb_model``) and the command line
(``int8-systolic run-model``). :func:`map_layer` turns a
:class:`golden.tflite.interpreter.MacLayer` into a list of :class:`sim.host.GemmProblem`
plus the function that assembles their int8 results into the layer's output tensor. The
activation zero point is folded into each problem's bias on the host (``z_a * sum(w)``,
see :meth:`GemmProblem.folded_bias`); the array only sees raw int8 values.

* FULLY_CONNECTED: ``input [batch, K] x weights.T [K, N]``.
* CONV_2D: im2col of the NHWC input (padding filled with the input zero point, stride,
  dilation, SAME/VALID exactly as TFLite computes them) -> ``[B*OH*OW, KH*KW*Cin]`` times
  the OHWI weights reshaped to ``[KH*KW*Cin, Cout]``.
* DEPTHWISE_CONV_2D: every depthwise output channel needs its own input channel, so in the
  GEMM mode (which broadcasts each activation along a row of ``cols`` cells) at most
  ``depth_multiplier`` columns can share an activation. Two mappings:

  - *depthwise mode* (:class:`GemmProblem` with ``depthwise``): one problem, ``lhs[pixel, tap,
    o] = patch[pixel, tap, o // depth_multiplier]`` ([M, KH*KW, Cout]) against the taps
    ``[KH*KW, Cout]``: cell (i, j) accumulates pixel i of channel j over the taps, so the array is
    full whatever the depth multiplier (each step carries ``rows * cols`` activations);
  - *block-diagonal GEMMs*: output channels ``cols`` at a time, K over (tap, input channel of
    the group), the weights zero where the input channel does not feed the output channel:
    bounded by ``depth_multiplier / cols`` (times the row fill), but a step carries ``rows``
    activations.

  :func:`map_layer` takes the one with fewer cycles by :meth:`hw.accelerator.Accelerator.cycles`
  (each GEMM at full rate), and the block-diagonal GEMMs on a tie, since they stream ``cols``
  times fewer activation bytes. They tie only for a layer of at most ``cols`` output channels
  that all read one input channel (one GEMM of the same shape either way); with more channels
  the block-diagonal mapping is a GEMM per group of ``cols``, each paying the pipeline's latency,
  so the depthwise mode's one GEMM is faster even when each group reads one input channel. Zero-point padding cancels
  exactly in both, since the folded bias sums the same weights the array multiplies.

Problems wider than the accelerator's per-channel tables (``max_n``) are split along N.
"""

import dataclasses

import numpy as np

from int8_systolic.golden import staged
from int8_systolic.hw.accelerator import Accelerator

from .problem import GemmProblem

__all__ = ["MappedLayer", "depthwise_cycles", "gemm_cycles", "map_layer"]


@dataclasses.dataclass
class MappedLayer:
    problems: list          # GemmProblem, in the order they are streamed; each covers a slice of the channels
    output_shape: tuple

    def assemble(self, results):
        """The problems' [M, N] int8 results, side by side along N -> the layer's output tensor."""
        return np.concatenate(results, axis=1).reshape(self.output_shape)


def _per_channel(value, channels):
    """Per-channel parameter (array, or one value for a per-tensor layer) for the given channels."""
    v = np.asarray(value, np.int64)
    return v[channels] if v.ndim else np.full(len(channels), int(v))


def _problem(lhs, rhs, bias, params, channels, depthwise=False):
    b = np.zeros(len(channels), np.int32) if bias is None else np.asarray(bias, np.int32)[channels]
    return GemmProblem(np.ascontiguousarray(lhs, np.int8), np.ascontiguousarray(rhs, np.int8), b,
                       input_offset=int(params["input_offset"]),
                       output_multiplier=_per_channel(params["output_multiplier"], channels),
                       output_shift=_per_channel(params["output_shift"], channels),
                       output_offset=int(params["output_offset"]),
                       act_min=int(params["quantized_activation_min"]),
                       act_max=int(params["quantized_activation_max"]), rounding=params["rounding"],
                       depthwise=depthwise)


def _split_n(lhs, rhs, bias, params, max_n):
    """One problem per chunk of at most ``max_n`` output channels."""
    n = rhs.shape[1]
    chunks = [np.arange(s, min(s + max_n, n)) for s in range(0, n, max_n)]
    return [_problem(lhs, rhs[:, c], bias, params, c) for c in chunks]


def map_layer(layer, rows, cols, max_n, depthwise="auto"):
    """GEMM problems for ``layer`` on a ``rows x cols`` array whose tables hold ``max_n`` channels.

    ``depthwise`` (DEPTHWISE_CONV_2D only): "auto" (the faster mapping, see the module docstring),
    "depthwise" (the array's depthwise mode) or "gemm" (block-diagonal GEMMs)."""
    if depthwise not in ("auto", "depthwise", "gemm"):
        raise ValueError(f"depthwise must be 'auto', 'depthwise' or 'gemm', got {depthwise!r}")
    if layer.kind == "FULLY_CONNECTED":
        problems = _split_n(layer.input, layer.weights.T, layer.bias, layer.params, max_n)
        return MappedLayer(problems, layer.output_shape)
    kh, kw = layer.weights.shape[1:3]
    g = layer.geometry
    cols_ = staged.im2col(layer.input, (kh, kw), g["stride"], g["dilation"], g["padding"],
                          pad_value=-layer.params["input_offset"])
    b, oh, ow, t = cols_.shape
    lhs = cols_.reshape(b * oh * ow, t)
    if layer.kind == "CONV_2D":
        cout = layer.weights.shape[0]
        problems = _split_n(lhs, layer.weights.reshape(cout, t).T, layer.bias, layer.params, max_n)
        return MappedLayer(problems, layer.output_shape)
    return MappedLayer(_depthwise(layer, lhs, rows, cols, max_n, depthwise), layer.output_shape)


def _depthwise_plan(layer, cols, max_n):
    """A DEPTHWISE_CONV_2D's two mappings as channel sets: the depthwise mode's chunks of at most
    ``max_n`` output channels, the block-diagonal groups of at most ``cols`` and the input
    channels [c0, c1) each group reads."""
    m = layer.geometry["depth_multiplier"]
    cout = layer.weights.shape[3]
    group = max(1, min(cols, max_n))
    chunks = [np.arange(s, min(s + max_n, cout)) for s in range(0, cout, max_n)]
    groups = [np.arange(s, min(s + group, cout)) for s in range(0, cout, group)]
    return chunks, groups, [(int(g[0]) // m, int(g[-1]) // m + 1) for g in groups]


def depthwise_cycles(layer, rows, cols, max_n):
    """Cycles of a DEPTHWISE_CONV_2D's GEMMs at full rate (:meth:`Accelerator.cycles`, from the shapes
    alone), per mapping: ``{"depthwise": ..., "gemm": ...}`` (the latter block-diagonal)."""
    acc = Accelerator.model(rows, cols)
    taps = layer.weights.shape[1] * layer.weights.shape[2]
    pixels = int(np.prod(layer.output_shape[:3]))
    chunks, groups, spans = _depthwise_plan(layer, cols, max_n)
    return {"depthwise": sum(acc.cycles(pixels, taps, len(c)) for c in chunks),
            "gemm": sum(acc.cycles(pixels, taps * (c1 - c0), len(g))
                        for g, (c0, c1) in zip(groups, spans, strict=True))}


def _depthwise(layer, lhs, rows, cols, max_n, mode):
    """DEPTHWISE_CONV_2D's problems: depthwise mode or block-diagonal GEMMs (see the module docstring)."""
    if mode == "auto":
        cycles = depthwise_cycles(layer, rows, cols, max_n)
        mode = "depthwise" if cycles["depthwise"] < cycles["gemm"] else "gemm"
    m = layer.geometry["depth_multiplier"]
    _, kh, kw, cout = layer.weights.shape
    taps = kh * kw
    chunks, groups, spans = _depthwise_plan(layer, cols, max_n)
    patches = lhs.reshape(-1, taps, layer.input.shape[3])
    w = layer.weights.reshape(taps, cout)
    if mode == "depthwise":
        return [_problem(patches[:, :, c // m], w[:, c], layer.bias, layer.params, c, depthwise=True)
                for c in chunks]
    problems = []
    for outs, (c0, c1) in zip(groups, spans, strict=True):
        rhs = np.zeros((taps, c1 - c0, len(outs)), np.int8)
        rhs[:, outs // m - c0, np.arange(len(outs))] = w[:, outs]
        problems.append(_problem(patches[:, :, c0:c1].reshape(-1, taps * (c1 - c0)),
                                 rhs.reshape(taps * (c1 - c0), len(outs)), layer.bias, layer.params, outs))
    return problems


def gemm_cycles(acc, problems):
    """Cycles of ``problems`` one after another at full rate on ``acc`` (an Accelerator model)."""
    return sum(acc.cycles(*p.shape) for p in problems)
