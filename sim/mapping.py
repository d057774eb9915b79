"""Map a model's MAC layers onto the accelerator as GEMM problems (host side).

Used by the cocotb model testbench (``sim.tb_model``) and the command line
(``python -m sim.run_model``). :func:`map_layer` turns a
:class:`golden.tflite.interpreter.MacLayer` into a list of :class:`sim.host.GemmProblem`
plus the function that assembles their int8 results into the layer's output tensor. The
activation zero point is folded into each problem's bias on the host (``z_a * sum(w)``,
see :meth:`GemmProblem.folded_bias`); the array only sees raw int8 values.

* FULLY_CONNECTED: ``input [batch, K] x weights.T [K, N]``.
* CONV_2D: im2col of the NHWC input (padding filled with the input zero point, stride,
  dilation, SAME/VALID exactly as TFLite computes them) -> ``[B*OH*OW, KH*KW*Cin]`` times
  the OHWI weights reshaped to ``[KH*KW*Cin, Cout]``.
* DEPTHWISE_CONV_2D: the array broadcasts each activation along a row of ``cols`` cells,
  but every depthwise output channel needs its own input channel, so at most
  ``depth_multiplier`` columns can share an activation. Output channels are taken
  ``cols`` at a time; each group is a GEMM whose K runs over (tap, input channel of the
  group) and whose weight matrix is block-diagonal (zero where the input channel does not
  feed the output channel). Utilization is therefore bounded by ``depth_multiplier /
  cols`` (times the row fill); zero-point padding still cancels exactly because the
  folded bias uses the same block-diagonal weights.

Problems wider than the accelerator's per-channel tables (``max_n``) are split along N.
"""

import dataclasses

import numpy as np

from golden import staged

from .host import GemmProblem

__all__ = ["MappedLayer", "map_layer"]


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


def _problem(lhs, rhs, bias, params, channels):
    b = np.zeros(len(channels), np.int32) if bias is None else np.asarray(bias, np.int32)[channels]
    return GemmProblem(np.ascontiguousarray(lhs, np.int8), np.ascontiguousarray(rhs, np.int8), b,
                       input_offset=int(params["input_offset"]),
                       output_multiplier=_per_channel(params["output_multiplier"], channels),
                       output_shift=_per_channel(params["output_shift"], channels),
                       output_offset=int(params["output_offset"]),
                       act_min=int(params["quantized_activation_min"]),
                       act_max=int(params["quantized_activation_max"]), rounding=params["rounding"])


def _split_n(lhs, rhs, bias, params, max_n):
    """One problem per chunk of at most ``max_n`` output channels."""
    n = rhs.shape[1]
    chunks = [np.arange(s, min(s + max_n, n)) for s in range(0, n, max_n)]
    return [_problem(lhs, rhs[:, c], bias, params, c) for c in chunks]


def map_layer(layer, rows, cols, max_n):
    """GEMM problems for ``layer`` on a ``rows x cols`` array whose tables hold ``max_n`` channels."""
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
    # DEPTHWISE_CONV_2D: groups of `cols` output channels, block-diagonal weights.
    m = g["depth_multiplier"]
    cin = layer.input.shape[3]
    cout = cin * m
    taps = kh * kw
    patches = lhs.reshape(-1, taps, cin)
    w = layer.weights.reshape(taps, cout)
    problems = []
    group = max(1, min(cols, max_n))
    for o0 in range(0, cout, group):
        outs = np.arange(o0, min(o0 + group, cout))
        c0, c1 = outs[0] // m, outs[-1] // m + 1
        ng = c1 - c0
        rhs = np.zeros((taps, ng, len(outs)), np.int8)
        rhs[:, outs // m - c0, np.arange(len(outs))] = w[:, outs]
        problems.append(_problem(patches[:, :, c0:c1].reshape(-1, taps * ng), rhs.reshape(taps * ng, len(outs)),
                                 layer.bias, layer.params, outs))
    return MappedLayer(problems, layer.output_shape)
