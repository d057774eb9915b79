"""Verilog export: module name encodes the configuration, no machine paths, lint-clean."""

import pytest

from hw.accelerator import Accelerator
from hw.export import export
from sim.lint import lint


@pytest.mark.parametrize(("rows", "cols", "rounding"), [(2, 3, "single"), (1, 1, "double")])
def test_export_names_and_lints_clean(tmp_path, rows, cols, rounding):
    path = export(rows, cols, rounding, out_dir=tmp_path, max_col_tiles=4)
    assert path.name == f"int8_systolic_{rows}x{cols}_{rounding}.v"
    text = path.read_text()
    assert f"module int8_systolic_{rows}x{cols}_{rounding}(" in text
    assert str(tmp_path.parent) not in text
    assert "/work" not in text
    assert ".py" not in text
    rc, out = lint(path)
    assert rc == 0, out
    assert "%Warning" not in out, out


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="rows must be an integer >= 1"):
        Accelerator(0, 4)
    with pytest.raises(ValueError, match="rounding must be 'double' or 'single'"):
        Accelerator(2, 2, rounding="nearest")
