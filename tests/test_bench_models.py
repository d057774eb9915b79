"""make bench-models' figures from a model testbench result (the RTL runs themselves are the benchmark's)."""

import pytest

from int8_systolic.sim import bench_models


def _result(cycles=(421, 1000), formula=(421, 1000), mismatch=None):
    layer = {"op_index": 0, "op": "DEPTHWISE_CONV_2D", "input": "1x12x12x64", "weights": "1x3x3x64",
             "output": "1x6x6x64", "gemm_shapes": ["36x9x64"], "modes": ["depthwise"], "macs": 36 * 9 * 64,
             "cycles": [cycles[0]], "formula_cycles": formula[0], "fill_steps": 360, "act_bytes": 360 * 64,
             "input_bytes": 12 * 12 * 64, "gemm_mode_cycles": 4000, "first_mismatch": mismatch}
    conv = {**layer, "op_index": 1, "op": "CONV_2D", "modes": ["gemm"], "macs": 64_000, "cycles": [cycles[1]],
            "formula_cycles": formula[1], "fill_steps": 1000, "act_bytes": 8000, "input_bytes": 4000,
            "first_mismatch": None}
    del conv["gemm_mode_cycles"]
    return {"model": "m.tflite", "rows": 8, "cols": 8, "compared": 10, "failures": 0, "layers": [layer, conv]}


def test_summary_figures():
    s = bench_models.summarize(_result())
    dw, _ = s["layers"]
    assert dw["utilization"] == pytest.approx(36 * 9 * 64 / (64 * 421))
    assert dw["bound"] == pytest.approx(0.9)                    # 36 of 40 rows filled
    assert s["cycles"] == 1421
    assert s["gemm_mode_cycles"] == 5000                        # the depthwise layer's block-diagonal formula
    assert s["depthwise_share_cycles"] == pytest.approx(421 / 1421)
    assert not bench_models._problems(s)


def test_cycles_off_the_formula_and_mismatches_fail():
    s = bench_models.summarize(_result(cycles=(422, 1000)))
    assert any("422 cycles measured, the formula gives 421" in p for p in bench_models._problems(s))
    s = bench_models.summarize(_result(mismatch="step 0, element [0]"))
    assert any("not bit-exact" in p for p in bench_models._problems(s))


def test_depthwise_verdicts():
    s = bench_models.summarize(_result())
    s["model"] = "visual_wake_words"
    (line,) = bench_models.depthwise_table([s])[1:]
    assert "pipeline's fill and drain (61 cycles) against 360 steps" in line


@pytest.mark.parametrize("args", [["--arrays", "8"], ["--arrays", "0x8"], ["--models", "resnet"]])
def test_bad_arguments_refused(args, capsys):
    assert bench_models.main(args) == 2
    assert "error:" in capsys.readouterr().err


def test_engine_figures_and_the_axi_top_behind_the_same_port():
    core = bench_models.summarize(_result())
    on = {"op_index": 0, "where": "engine", "macs": 36 * 9 * 64, "cycles": [500], "bytes_read": [3000],
          "bytes_written": [2304], "tensor_bytes": 12 * 12 * 64 + 576 + 256 + 2304}
    host = {"op_index": 1, "where": "host: its input is too large", "macs": 64_000, "cycles": [0], "bytes_read": [0],
            "bytes_written": [0], "tensor_bytes": 0}
    res = {"model": "m.tflite", "rows": 8, "cols": 8, "bus_bytes": 8, "mem_latency": 20, "failures": 0,
           "layers": [on, host]}
    e = bench_models.engine_summary(res, core)
    assert e["cycles"] == 500
    assert e["utilization"] == pytest.approx(36 * 9 * 64 / (64 * 500))
    assert e["bytes_ratio"] == pytest.approx(5304 / on["tensor_bytes"])
    assert e["host_mac_layers"] == 1
    # the AXI top's depthwise layer: 360 steps of 64 activation bytes and 8 weight bytes, 36 x 64 results in 32-bit
    # lanes, through 8 bytes a cycle
    assert e["axi_cycles"] == max(421, -(-(360 * 64 + 360 * 8 + 4 * 36 * 64) // 8))
    assert len(bench_models.engine_table([e])) == 2
