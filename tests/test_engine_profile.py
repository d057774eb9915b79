"""sim.engine_profile: a compiled model's segment run on hw.engine in Amaranth's simulator, each cycle counted in one
category; the steps are its layers' own step counts, and the idle cycles at least the first command's check."""

import pytest

from int8_systolic.golden.tflite.cnn import generated_cnn
from int8_systolic.golden.tflite.interpreter import Interpreter
from int8_systolic.host.engine_compiler import compile_model
from int8_systolic.hw import commands
from int8_systolic.hw.layer_check import LayerCheck
from int8_systolic.sim.engine_profile import main, profile

SIZES = {"rows": 4, "cols": 4, "data_width": 64, "in_depth": 4096, "w_depth": 8192, "out_depth": 4096,
         "max_col_tiles": 16}


def test_the_steps_are_the_layers_and_the_first_check_is_idle():
    raw = generated_cnn(0)
    (r,) = profile(raw, segments=[0], **SIZES)
    # before the first step the back waits at least for the first command's check
    assert r["idle"] >= LayerCheck.check_cycles(4, 4)
    # each layer's steps: row tiles x column tiles x K, from its commands in the image
    sizes = {k: SIZES[k] for k in ("in_depth", "w_depth", "out_depth", "max_col_tiles")}
    program = compile_model(Interpreter(raw, "model"), rows=4, cols=4, data_width=64, **sizes)
    steps = 0
    for i in range(len(program.command_ops[0])):
        c = commands.unpack(bytes(program.memory[program.list_addr + 64 * i:program.list_addr + 64 * (i + 1)]))
        dw = c["op"] == commands.OPS["DEPTHWISE_CONV_2D"]
        k = c["kernel_h"] * c["kernel_w"] * (1 if dw else c["in_c"])
        steps += -(-c["batch"] * c["out_h"] * c["out_w"] // 4) * -(-c["out_c"] // 4) * k
    assert r["step"] == steps
    assert r["ops"] == list(program.segments[0])


def test_a_segment_past_the_last_is_refused(capsys):
    assert main(["cnn", "--segments", "99"]) == 2
    assert "segment 99 is not one of the model's" in capsys.readouterr().err


def test_a_segment_index_is_checked_before_anything_runs():
    with pytest.raises(ValueError, match=r"segment -1 is not one of the model's \d+"):
        profile(generated_cnn(0), segments=[-1], **SIZES)
