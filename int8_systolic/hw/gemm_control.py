"""The core's per-GEMM interface: the settings of the running GEMM and the tile handshake.

One signature, :func:`gemm_control`, seen from the side that drives the settings (the AXI top's
scheduler, :mod:`hw.gemm_scheduler`, or a testbench); the core (:mod:`hw.accelerator`) takes it
flipped, and the two are joined with ``wiring.connect``. Members:

- ``settings`` (:func:`settings_layout`): K (``k_steps``), the column tiles (``n_tiles``), the
  table row of column tile 0 (``table_base``), the array's mode (``depthwise``) and the output
  stage (``output_offset``, ``act_min``, ``act_max``, ``bypass``). Stable from three cycles
  before a GEMM's first step to its last result (the scheduler's ``SETTLE``);
- ``hold``: high, the core admits no tile (between GEMMs);
- ``admit`` (from the core): a tile's first step accepted;
- ``tile_end`` (from the core): a tile's last step accepted, a cycle later.

In the exported Verilog of the core the members are ports ``gemm__settings`` (the layout's fields
packed from bit 0 in the order above: docs/architecture.md gives the bits), ``gemm__hold``,
``gemm__admit`` and ``gemm__tile_end``.
"""

from amaranth import signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["gemm_control", "settings_layout"]


def settings_layout(max_col_tiles):
    """One GEMM's settings, as the core reads them (``max_col_tiles``: the tables' depth)."""
    return data.StructLayout({
        "k_steps": 24, "n_tiles": range(max_col_tiles + 1), "table_base": range(max(max_col_tiles, 2)),
        "depthwise": 1,
        "output_offset": signed(8), "act_min": signed(8), "act_max": signed(8), "bypass": 1,
    })


def gemm_control(max_col_tiles):
    """The per-GEMM settings and the tile handshake, from the driving side (see the module docstring)."""
    return wiring.Signature({"settings": Out(settings_layout(max_col_tiles)), "hold": Out(1),
                             "admit": In(1), "tile_end": In(1)})
