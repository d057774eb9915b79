"""The installed package: one namespace, the int8-systolic command, and generated files where the user runs it."""

import os
import pathlib
import subprocess
import sys

import pytest

from int8_systolic import cli, paths

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_subcommand_answers_help(name, capsys):
    assert cli.main([name, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: int8-systolic {name}")


def test_cli_lists_subcommands_and_refuses_an_unknown_one(capsys):
    assert cli.main([]) == 2
    listing = capsys.readouterr().out
    assert all(name in listing for name in cli.COMMANDS)
    assert cli.main(["synthesize"]) == 2
    assert "unknown subcommand 'synthesize'" in capsys.readouterr().err


def test_generated_files_go_under_the_current_directory_or_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("INT8_SYSTOLIC_BUILD", raising=False)
    monkeypatch.chdir(tmp_path)
    assert paths.build_root() == tmp_path.resolve() / "build"
    monkeypatch.setenv("INT8_SYSTOLIC_BUILD", str(tmp_path / "elsewhere"))
    assert paths.build_root() == (tmp_path / "elsewhere").resolve()


def test_one_top_level_package_and_its_data_files():
    """pyproject installs int8_systolic and nothing else at the top level, with the files the code reads."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["int8_systolic*"]
    assert project["project"]["scripts"] == {"int8-systolic": "int8_systolic.cli:main"}
    for pattern in project["tool"]["setuptools"]["package-data"]["int8_systolic"]:
        assert list(paths.PACKAGE.glob(pattern)), pattern
    tops = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert tops == {"int8_systolic"}


@pytest.mark.slow
@pytest.mark.sim
def test_an_installed_copy_runs_a_model_on_the_rtl(tmp_path):
    """pip install the project (not editable) into a folder, then, from another folder, run a model with
    every MAC layer on the simulated RTL through the installed copy."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(ROOT)],
                   check=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}"}
    env.pop("INT8_SYSTOLIC_BUILD", None)
    script = "from int8_systolic import cli; raise SystemExit(cli.main())"
    out = subprocess.run([sys.executable, "-c", script, "run-model", "okay_nabu", "--steps", "1"], cwd=work, env=env,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "0 differ" in out.stdout
    assert (work / "build" / "models" / "okay_nabu_verilator_8x8.json").exists()
