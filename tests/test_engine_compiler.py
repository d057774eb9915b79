"""host.engine_compiler on its own (no RTL): the bundled models' plans, the row-stacking choice, and the tiling of
layers larger than the engine's buffers (row bands with halos, channel chunks), each part's windows checked
against golden's im2col of the whole layer (host.windows.steps plays the window generator's reads)."""

import random

import numpy as np
import pytest

from int8_systolic.golden import staged
from int8_systolic.golden.tflite.builder import ModelBuilder, _spatial_options, schema
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.golden.tflite.mlperf import mlperf_model
from int8_systolic.host.engine_compiler import _engine_refusal, _tiles, compile_model
from int8_systolic.host.windows import Geometry, steps
from int8_systolic.hw import commands
from int8_systolic.sim.engine_stimulus import pad_conv_model

DEFAULTS = {"in_depth": 32768, "w_depth": 65536, "out_depth": 32768}


def _commands(program):
    out, addr = [], program.list_addr
    for _ in range(sum(L.commands for L in program.layers.values()) + len(program.segments)):
        out.append(commands.unpack(bytes(program.memory[addr:addr + 64])))
        addr += 64
    return out


@pytest.mark.parametrize(("name", "tiled", "stacked"), [
    ("image_classification", {}, 0),
    ("keyword_spotting", {}, 1),              # DS-CNN's first layer, 10x4 over one channel
    ("visual_wake_words", {3: 3, 4: 3, 7: 2, 8: 2}, 0),   # depthwise layers reading a tensor that does not
                                                            # stay on chip: their bands and their producer's
                                                            # interleaved (fused)
    ("keyword_spotting_mobilenetv2", {4: 2, 6: 2}, 1),    # its first layer, 3x3 stride 2 over one channel
    ("anomaly_detection", {2: 2, 11: 2}, 0),  # 80 KB of weights in two channel chunks
])
def test_every_mac_layer_of_the_bundled_models_goes_to_the_engine(name, tiled, stacked):
    program = compile_model(Interpreter(mlperf_model(name)))
    assert program.host_macs == {}
    assert {op: L.commands for op, L in program.layers.items() if L.commands > 1} == tiled
    cmds = _commands(program)
    assert sum(c["stack"] for c in cmds) == stacked
    assert [c["op"] for c in cmds].count(commands.OPS["END"]) == 1
    # every command passes the engine's checks (the compiler's statement of them)
    for c in cmds:
        if c["op"] in (commands.OPS["END"], commands.OPS["BARRIER"]):
            continue
        dw = c["op"] == commands.OPS["DEPTHWISE_CONV_2D"]
        g = Geometry(*(c[f] for f in ("batch", "in_h", "in_w", "in_c", "out_h", "out_w", "kernel_h", "kernel_w",
                                      "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_left")))
        k = g.kernel_h * g.kernel_w * (1 if dw else g.in_c)
        assert _engine_refusal(g, c["out_c"], k, -(-c["out_c"] // 8), cols=8, data_width=64, max_col_tiles=64,
                               stack=bool(c["stack"]), **DEFAULTS) is None, c
        assert all(c[f] % 8 == 0 for f in ("input_addr", "output_addr", "weights_addr", "table_addr")), c


def _random_big_layer(rng):
    c = rng.choice([1, 3, 8, 16])
    kh, kw = rng.randint(1, 5), rng.randint(1, 3)
    stride, dilation = (rng.randint(1, 3), rng.randint(1, 2)), (rng.choice([1, 1, 2]), 1)
    shape = (rng.choice([1, 2]), rng.randint(12, 30), rng.choice([8, 16]), c)
    padding = rng.choice(["SAME", "VALID"])
    return Geometry.of(shape, (kh, kw), stride, dilation, padding), (kh, kw), stride, dilation, padding


@pytest.mark.parametrize("seed", range(12))
def test_row_bands_are_the_layer_exactly(seed):
    """A CONV_2D (or DEPTHWISE_CONV_2D) too large for small buffers, in row bands: the bands' outputs tile the
    output once each, every band passes the engine's checks, and each band's windows (its input rows with their
    halo, its top padding) are exactly the whole layer's for its output rows."""
    rng = random.Random(seed)
    g, filter_hw, stride, dilation, padding = _random_big_layer(rng)
    kind = rng.choice(["CONV_2D", "DEPTHWISE_CONV_2D"])
    out_c = g.in_c if kind == "DEPTHWISE_CONV_2D" else rng.randint(1, 12)
    k = g.kernel_h * g.kernel_w * (1 if kind == "DEPTHWISE_CONV_2D" else g.in_c)
    depths = {"in_depth": 1024, "w_depth": 8192, "out_depth": 1024}
    whole = g.batch * g.in_h * g.in_w * g.in_c
    parts = _tiles(kind, g, out_c, k, stack=False, cols=8, data_width=64, max_col_tiles=64, **depths)
    if parts is None:      # no band fits (a bus word's alignment, or one output row's windows too large)
        assert whole > 1024 or g.pixels * out_c > 1024
        return
    assert len(parts) > 1
    zp = rng.randint(-128, 127)
    x = np.random.default_rng(seed).integers(-128, 128, (g.batch, g.in_h, g.in_w, g.in_c)).astype(np.int8)
    cols = staged.im2col(x, filter_hw, stride, dilation, padding, pad_value=zp)      # [b, oh, ow, K]
    covered = np.zeros(g.pixels * out_c, int)
    for part, part_c, in_off, out_off, w_off, t_off in parts:
        assert (part.batch, part_c, w_off, t_off) == (1, out_c, 0, 0)
        assert _engine_refusal(part, out_c, k, -(-out_c // 8), cols=8, data_width=64, max_col_tiles=64,
                               **depths) is None
        assert (in_off % 8, out_off % 8) == (0, 0)
        n_out = part.pixels * out_c
        covered[out_off:out_off + n_out] += 1
        b, first = divmod(out_off // (g.out_w * out_c), g.out_h)
        rows_in = x.reshape(-1)[in_off:in_off + part.in_h * g.in_w * g.in_c].reshape(1, part.in_h, g.in_w, g.in_c)
        got = steps(part, rows_in, zp, rows=part.out_w, width=8)                      # a tile an output row
        want = cols[b, first:first + part.out_h].transpose(0, 2, 1)                    # [rows, K, ow]
        np.testing.assert_array_equal(got, want, err_msg=f"{g}: band at output row {first} of image {b}")
    assert (covered == 1).all(), "the bands do not tile the output exactly once"


def test_channel_chunks_of_a_one_pixel_layer():
    """FULLY_CONNECTED at batch 1 with weights past the buffer: chunks of whole column tiles, their outputs,
    weights and table entries contiguous and together the layer's, each within the buffer; not at batch 2."""
    g = Geometry(1, 1, 1, 640, 1, 1, 1, 1)
    parts = _tiles("FULLY_CONNECTED", g, 128, 640, stack=False, cols=8, data_width=64, max_col_tiles=64,
                   **DEFAULTS)
    # the largest chunk that fits first: 12 tiles (61 440 bytes of the 65 536), then the 4 left
    assert [(c, o, w, t) for _, c, _, o, w, t in parts] == [(96, 0, 0, 0), (32, 96, 96 * 640, 96 * 12)]
    assert _tiles("FULLY_CONNECTED", Geometry(2, 1, 1, 640, 1, 1, 1, 1), 128, 640, stack=False, cols=8,
                  data_width=64, max_col_tiles=64, **DEFAULTS) is None, "batch 2: a chunk's output is not contiguous"


def test_a_producer_and_its_tiled_consumer_alternate_band_for_band():
    """VWW's layers 3 (1x1, 48x48x8 to 48x48x16) and 4 (3x3 depthwise, stride 2): the 36 KB between them cannot stay
    on chip whole, so their bands alternate and each depthwise band reads exactly the band of layer 3 before it
    (the engine's condition for taking it on chip: same address, channels and size), which fits beside that
    band's input; layer 3's bands together write all of its output."""
    program = compile_model(Interpreter(mlperf_model("visual_wake_words")))
    seg = next(s for s in program.command_ops if 3 in s)
    first = seg.index(3)
    assert seg[first:first + 6] == [3, 4, 3, 4, 3, 4]
    cmds = [c for c in _commands(program) if c["op"] not in (commands.OPS["END"], commands.OPS["BARRIER"])]
    ops = [op for s in program.command_ops for op in s]
    pairs = [(cmds[i], cmds[i + 1]) for i in range(len(ops) - 1) if (ops[i], ops[i + 1]) == (3, 4)]
    assert len(pairs) == 3
    rows = set()
    out_addr = program.layers[3].output_addr
    for prod, cons in pairs:
        assert cons["input_addr"] == prod["output_addr"]
        assert (cons["in_c"], cons["in_h"], cons["in_w"]) == (prod["out_c"], prod["out_h"], prod["out_w"])
        # the producer band's input (8 channels: no pitch) and output (16: 24 bytes a pixel) beside each other
        assert prod["in_h"] * prod["in_w"] * 8 + prod["out_h"] * prod["out_w"] * 24 + 64 <= DEFAULTS["in_depth"]
        first_row = (prod["output_addr"] - out_addr) // (48 * 16)
        rows.update(range(first_row, first_row + prod["out_h"]))
    assert rows == set(range(48))


def _geometry(cmd):
    return Geometry(*(cmd[f] for f in ("batch", "in_h", "in_w", "in_c", "out_h", "out_w", "kernel_h", "kernel_w",
                                       "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_left")))


@pytest.mark.parametrize(("paddings", "kw"), [
    (((0, 0), (0, 1), (1, 1), (0, 0)), {}),                                          # MobileNetV2's, stride 2
    (((0, 0), (2, 0), (0, 1), (0, 0)), {"depthwise": False, "stride": (1, 1)}),      # no SAME gives this one
    (((0, 0), (1, 1), (1, 1), (0, 0)), {"constant": "zero_point", "padding": "SAME"}),  # PADV2, then SAME
])
def test_a_pad_is_folded_into_the_window_of_the_convolution_it_feeds(paddings, kw):
    """PAD (or PADV2 whose constant is the zero point) then a convolution: one engine layer reading the PAD's input,
    no host operator between; its window over the unpadded input is golden's im2col of the padded tensor, so the
    window generator's zero points are the PAD's."""
    interp = Interpreter(pad_conv_model(3, paddings, **kw))
    program = compile_model(interp, cols=8, **DEFAULTS)
    layer = program.layers[1]
    assert (layer.pad_folded, layer.input_tensor, program.segments) == (0, 0, [[1]])
    cmd = _commands(program)[0]
    g, zp = _geometry(cmd), cmd["input_zero_point"]
    sg = interp.model.subgraphs[0]
    assert zp == sg.tensors[0].quantization.zero_point[0]
    x = np.random.default_rng(3).integers(-128, 128, sg.tensors[0].shape).astype(np.int8)
    padded = np.pad(x, paddings, constant_values=zp)
    want = staged.im2col(padded, (g.kernel_h, g.kernel_w), (g.stride_h, g.stride_w), (1, 1),
                         kw.get("padding", "VALID"), pad_value=zp)              # [1, oh, ow, K]
    got = steps(g, x, zp, rows=g.out_w, width=8)                                 # a tile an output row
    np.testing.assert_array_equal(got, want[0].transpose(0, 2, 1))


@pytest.mark.parametrize(("paddings", "kw", "why"), [
    (((0, 0), (1, 1), (1, 1), (0, 0)), {"constant": 5}, "PADV2's constant is not the zero point"),
    (((0, 0), (1, 1), (1, 1), (0, 1)), {"depthwise": False}, "it pads channels"),
    (((0, 0), (3, 0), (0, 0), (0, 0)), {}, "3 rows above a 3x3 window: more than it reaches"),
])
def test_a_pad_that_cannot_fold_stays_the_hosts(paddings, kw, why):
    interp = Interpreter(pad_conv_model(3, paddings, **kw))
    layer = compile_model(interp, cols=8, **DEFAULTS).layers[1]
    assert (layer.pad_folded, layer.input_tensor) == (None, interp.model.subgraphs[0].operators[0].outputs[0]), why


def test_kws_mobilenetv2s_pads_are_folded():
    """KWS MobileNetV2's four PADs (before its stride-2 depthwise layers) fold: no barrier for them, and the 36 KB
    tensor before the first never goes to memory (its producer's bands alternate with the depthwise layer's)."""
    program = compile_model(Interpreter(mlperf_model("keyword_spotting_mobilenetv2")))
    assert {op: L.pad_folded for op, L in program.layers.items() if L.pad_folded is not None} == \
        {6: 5, 14: 13, 26: 25, 54: 53}
    assert len(program.segments) == 14       # 12 ADDs and the MEAN before the classifier
    assert (program.layers[4].kept, program.layers[4].commands, program.layers[6].commands) == (True, 2, 2)


def _conv_then_fc(seed):
    """CONV_2D 1x1 ([1, 2, 2, 4] -> [1, 2, 2, 16]) whose output a FULLY_CONNECTED reads directly as [1, 64]."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.tensor("input", (1, 2, 2, 4), np.int8, scale=0.05, zero_point=3)
    w = mb.tensor("w", (16, 1, 1, 4), np.int8, scale=np.full(16, 0.01, np.float32), zero_point=0,
                  quantized_dimension=0, data=rng.integers(-127, 128, (16, 1, 1, 4)).astype(np.int8))
    b = mb.tensor("b", (16,), np.int32, scale=np.full(16, 0.0005), zero_point=0, data=np.zeros(16, np.int32))
    y = mb.tensor("conv", (1, 2, 2, 16), np.int8, scale=0.02, zero_point=-5)
    opts = _spatial_options(schema.Conv2DOptionsT(), (1, 1), (1, 1), "VALID", "NONE")
    mb.operator(schema.BuiltinOperator.CONV_2D, [x, w, b], [y], schema.BuiltinOptions.Conv2DOptions, opts)
    fw = mb.tensor("fc_w", (8, 64), np.int8, scale=np.float32(0.01), zero_point=0,
                   data=rng.integers(-127, 128, (8, 64)).astype(np.int8))
    fb = mb.tensor("fc_b", (8,), np.int32, scale=np.float32(0.0002), zero_point=0, data=np.zeros(8, np.int32))
    out = mb.tensor("fc", (1, 8), np.int8, scale=0.05, zero_point=-2)
    mb.operator(schema.BuiltinOperator.FULLY_CONNECTED, [y, fw, fb], [out], schema.BuiltinOptions.FullyConnectedOptions,
                schema.FullyConnectedOptionsT())
    return mb.finish([x], [out])


def test_an_output_read_by_a_fully_connected_as_is_is_not_kept():
    """An output kept on chip only is one the next command reads in the engine's buffer as the producer left it: a
    FULLY_CONNECTED reading a CONV_2D's [1, 2, 2, 16] output as [1, 64] reads it from memory, so it is written."""
    program = compile_model(Interpreter(_conv_then_fc(0)))
    assert [program.layers[op].kind for op in program.segments[0]] == ["CONV_2D", "FULLY_CONNECTED"]
    conv = program.segments[0][0]
    assert not program.layers[conv].kept
    assert not _commands(program)[0]["keep"]
