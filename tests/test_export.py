"""Verilog export: module name encodes the configuration, no machine paths, lint-clean."""

import re

import pytest

from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.hw.export import export, export_axi, export_engine
from int8_systolic.sim.lint import lint


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


def test_axi_top_exports_with_amba_port_names_and_lints_clean(tmp_path):
    path = export_axi(2, 3, "double", out_dir=tmp_path, max_col_tiles=4)
    assert path.name == "int8_systolic_axi_2x3_double.v"
    text = path.read_text()
    header = text[text.index("module int8_systolic_axi_2x3_double("):].split(");", 1)[0]
    for port in ("aclk", "aresetn", "irq", "s_axil_awaddr", "s_axil_rresp", "s_axis_act_tdata", "s_axis_act_tlast",
                 "s_axis_wts_tready", "m_axis_res_tdata", "m_axis_res_tlast"):
        assert re.search(rf"[(, \n]{port}[,\n]|[(, \n]{port}$", header), port
    assert "input [47:0] s_axis_act_tdata;" in text        # ROWS x COLS bytes
    assert "output [95:0] m_axis_res_tdata;" in text       # COLS x 32 bits
    rc, out = lint(path)
    assert rc == 0, out
    assert "%Warning" not in out, out


def test_engine_top_exports_with_amba_port_names_and_lints_clean(tmp_path):
    path = export_engine(2, 2, "double", out_dir=tmp_path, max_col_tiles=4, bus_bytes=4)
    assert path.name == "int8_systolic_engine_2x2_32.v"
    text = path.read_text()
    header = text[text.index("module int8_systolic_engine_2x2_32("):].split(");", 1)[0]
    for port in ("aclk", "aresetn", "irq", "s_axil_awaddr", "s_axil_rresp", "m_axi_araddr", "m_axi_rdata",
                 "m_axi_awlen", "m_axi_wstrb", "m_axi_bresp"):
        assert re.search(rf"[(, \n]{port}[,\n]|[(, \n]{port}$", header), port
    assert "input [31:0] m_axi_rdata;" in text
    assert "/work" not in text
    rc, out = lint(path)
    assert rc == 0, out
    assert "%Warning" not in out, out


def test_gemm_settings_bits_as_documented():
    """docs/architecture.md gives gemm__settings' fields from bit 0 in this order, and 63 bits at 64 tiles."""
    from int8_systolic.hw.gemm_control import settings_layout
    layout = settings_layout(64)
    assert list(layout.members) == ["k_steps", "n_tiles", "table_base", "depthwise", "output_offset", "act_min",
                                    "act_max", "bypass"]
    assert [layout[f].width for f in layout.members] == [24, 7, 6, 1, 8, 8, 8, 1]
    assert layout.size == 63
