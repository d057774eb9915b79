"""The command-line tools: a bad argument or input is one line on stderr and exit status 2; --debug shows the
traceback instead."""

import re
import subprocess
import sys

import pytest

from int8_systolic import cli
from int8_systolic.cli_support import command


@pytest.mark.parametrize(("argv", "message"), [
    (["check"], r"int8-systolic check: error: the following arguments are required: model \(see --help\)"),
    (["check", "{tmp}/missing.tflite"], r"int8-systolic check: error: .*missing.tflite: cannot read the file"),
    (["check", "{tmp}"], r"int8-systolic check: error: .*: cannot read the file \(Is a directory\)"),
    (["check", "{tmp}/random.tflite"], r"int8-systolic check: error: .*random.tflite: not a TFLite flatbuffer"),
    (["run-model", "{tmp}/random.tflite"], r"int8-systolic run-model: error: .*random.tflite: not a TFLite"),
    (["run-model", "cnn", "--steps", "many"], r"int8-systolic run-model: error: argument --steps: invalid int value"),
    (["run-model", "cnn", "--rows", "0"], r"int8-systolic run-model: error: --steps, --rows and --cols must be >= 1"),
    (["export", "--rows", "0"], r"int8-systolic export: error: --rows and --cols must be >= 1"),
    (["export", "--max-col-tiles", "0", "--out-dir", "{tmp}"], r"int8-systolic export: error: max_col_tiles must be"),
    (["conformance", "run", "{tmp}", "--dut", "golden"], r"int8-systolic conformance: error: .*: no manifest.json"),
    (["conformance", "frobnicate"], r"int8-systolic conformance: error: argument command: invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    (tmp_path / "random.tflite").write_bytes(b"\x01\x02\x03\x04\x05\x06\x07\x08\x09" * 10)
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert re.match(message, err[0]), err[0]


def test_debug_shows_the_traceback(tmp_path):
    from int8_systolic.golden.tflite.model import ModelError
    with pytest.raises(ModelError, match="cannot read the file"):
        cli.main(["check", str(tmp_path / "missing.tflite"), "--debug"])


def test_an_internal_error_is_one_line_that_says_so(capsys):
    @command("tool")
    def main(argv):
        return {}["missing"]

    assert main([]) == 2
    assert capsys.readouterr().err.strip() == ("tool: error: internal error (KeyError: 'missing'); rerun with --debug "
                                              "and report it")
    with pytest.raises(KeyError):
        main(["--debug"])


def test_the_console_script_exits_2_without_a_traceback(tmp_path):
    """The installed command, as a user runs it (python -m for the same entry point)."""
    proc = subprocess.run([sys.executable, "-m", "int8_systolic.cli", "check", str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
