"""Real models on the accelerator: the layer mapping (fast, numpy) and end-to-end RTL runs (cocotb)."""

import numpy as np
import pytest

from int8_systolic.golden.tflite.cnn import generated_cnn
from int8_systolic.golden.tflite.inputs import model_inputs
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.golden.tflite.mlperf import MODEL_NAMES, mlperf_model
from int8_systolic.golden.tflite.wakeword import wakeword_models
from int8_systolic.host.mapping import map_layer
from int8_systolic.paths import build_root
from int8_systolic.sim.run_model import main as run_model_main
from int8_systolic.sim.run_model import run_model


@pytest.mark.parametrize(("rows", "cols", "max_n"), [(8, 8, 64), (3, 5, 10), (1, 1, 4)])
def test_mapping_reproduces_every_golden_layer(seed, rows, cols, max_n):
    """Each MAC layer mapped to GEMM problems (N split to the table size, depthwise groups that
    straddle input channels when cols is not a multiple of the depth multiplier) and assembled
    from the problems' golden results equals the golden layer."""
    models = [(p.read_bytes(), p.name, 3) for p in wakeword_models()] + [(generated_cnn(), "cnn", 2)]
    layers = 0
    for raw, name, steps in models:
        interp = Interpreter(raw, name)

        def mac(layer, name=name):
            nonlocal layers
            want = layer.golden()
            # (a depthwise layer both ways: the array's depthwise mode and block-diagonal GEMMs)
            modes = ("auto", "depthwise", "gemm") if layer.kind == "DEPTHWISE_CONV_2D" else ("auto",)
            for mode in modes:
                mapped = map_layer(layer, rows, cols, max_n, depthwise=mode)
                assert all(p.shape[2] <= max_n for p in mapped.problems)
                got = mapped.assemble([p.expected()[0].astype(np.int8) for p in mapped.problems])
                np.testing.assert_array_equal(got, want, err_msg=f"{name} operator {layer.op_index} ({layer.kind}, "
                                                                 f"{mode})")
            layers += 1
            return want

        for x in model_inputs(interp.model, steps, seed):
            interp.invoke(x, mac=mac)
    assert layers == 3 * (10 + 10 + 10 + 15) + 2 * 4  # MAC layers per step: 10, 10, 10, 15; the CNN 4


@pytest.mark.parametrize(("depth_multiplier", "channels", "want"), [
    (1, 16, "depthwise"),      # block-diagonal: 1 of 8 columns busy
    (2, 8, "depthwise"),
    (8, 1, "gemm"),            # 8 output channels reading one input channel: a tie, GEMM mode
    (8, 2, "depthwise"),       # each group reads one input channel, but two GEMMs pay the latency twice
    (9, 2, "depthwise"),       # groups straddle input channels: K doubles for some
])
def test_depthwise_mapping_rule(depth_multiplier, channels, want):
    """The mapping streams the depthwise mode unless the block-diagonal GEMMs take no more cycles."""
    from int8_systolic.sim.stimulus import depthwise_layers

    layer = depthwise_layers(np.random.default_rng(1), 8, random_count=0)[0]   # 3x3, stride 1, SAME
    cout = channels * depth_multiplier
    layer.input = np.zeros((1, 6, 6, channels), np.int8)
    layer.weights = np.ones((1, 3, 3, cout), np.int8)
    layer.bias = np.zeros(cout, np.int32)
    layer.params = {**layer.params, "output_multiplier": np.full(cout, 2**30), "output_shift": np.zeros(cout, int)}
    layer.geometry = {**layer.geometry, "depth_multiplier": depth_multiplier}
    layer.output_shape = (1, 6, 6, cout)
    mapped = map_layer(layer, 8, 8, 64 * 8)
    assert {"depthwise" if p.depthwise else "gemm" for p in mapped.problems} == {want}


def test_map_layer_refuses_unknown_mode():
    from int8_systolic.sim.stimulus import depthwise_layers

    layer = depthwise_layers(np.random.default_rng(1), 8, random_count=0)[0]
    with pytest.raises(ValueError, match="depthwise must be 'auto', 'depthwise' or 'gemm'"):
        map_layer(layer, 8, 8, 64, depthwise="fast")


def _check(res, steps):
    assert res["steps"] == steps
    assert not res["mismatches"], res["mismatches"][:3]
    assert res["failures"] == 0
    assert res["compared"] > 0
    assert res["tflm_tensors_compared"] > 0
    for layer in res["layers"]:
        assert layer["exact_steps"] == steps, layer


@pytest.mark.sim
@pytest.mark.slow       # make sim runs okay_nabu on the RTL (20 steps, every tensor against TFLM)
def test_wakeword_model_on_verilator(seed):
    res = run_model("okay_nabu", sim="verilator", steps=3, seed=seed)
    _check(res, 3)
    assert len(res["layers"]) == 15                  # 6 CONV_2D, 8 DEPTHWISE_CONV_2D, 1 FULLY_CONNECTED
    assert res["tflm_tensors_compared"] == 3 * 51    # every non-resource tensor of every step


@pytest.mark.sim
@pytest.mark.slow       # make sim runs the generated CNN on the core and on the engine (every tensor against TFLM)
def test_generated_cnn_on_verilator_and_icarus(seed):
    res = run_model("cnn", sim="verilator", steps=2, seed=seed)
    _check(res, 2)
    conv = [x for x in res["layers"] if x["op"] == "CONV_2D"]
    assert all(x["macs"] / (64 * np.mean(x["cycles"])) >= 0.8 for x in conv), conv  # arrays filled: >= 80%
    _check(run_model("cnn", sim="icarus", steps=1, rows=4, cols=4, seed=seed), 1)


def test_run_model_refuses_unreadable_model(tmp_path, capsys):
    bad = tmp_path / "broken.tflite"
    bad.write_bytes(b"\x18\x00\x00\x00TFL3" + b"\x00" * 5)
    assert run_model_main([str(bad), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "broken.tflite" in err
    assert "malformed" in err or "no subgraphs" in err


def test_run_model_refuses_unsupported_op_before_building(tmp_path, capsys):
    """An op the golden interpreter does not run is refused in one line naming it, before any simulator build."""
    from int8_systolic.golden.tflite.builder import TensorSpec, single_op_model

    path = tmp_path / "rsqrt.tflite"
    path.write_bytes(single_op_model("RSQRT", [TensorSpec((4,), np.int8, 0.1, 0)], [TensorSpec((4,), np.int8, 0.1, 0)]))
    assert run_model_main([str(path), "--steps", "1", "--rows", "3", "--cols", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "rsqrt.tflite: subgraph 0, operator 0 (RSQRT): unsupported op" in err
    assert not list((build_root() / "sim").glob("verilator_3x3_*_model*")), "the simulator was built anyway"


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_mapping_reproduces_every_mlperf_layer(name, seed):
    """Every MAC layer of each MLPerf Tiny class model, mapped to 8x8 GEMM problems (tables 16 tiles deep, as
    in make sim) and assembled from the problems' golden results, equals the golden layer."""
    interp = Interpreter(mlperf_model(name).read_bytes(), name)
    layers = []

    def mac(layer):
        mapped = map_layer(layer, 8, 8, 8 * 16)
        got = mapped.assemble([p.expected()[0].astype(np.int8) for p in mapped.problems])
        np.testing.assert_array_equal(got, layer.golden(), err_msg=f"{name} operator {layer.op_index} ({layer.kind})")
        layers.append(layer.op_index)
        return got

    interp.invoke(model_inputs(interp.model, 1, seed)[0], mac=mac)
    sg = interp.model.subgraphs[0]
    assert layers == [op.index for op in sg.operators if op.op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")]
