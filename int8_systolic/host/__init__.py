"""Host-side software that is not a testbench: what drives the accelerator and prepares its work.

* :mod:`.problem` - :class:`~.problem.GemmProblem`, one GEMM as the core takes it (steps, tables,
  the expected results from the golden model);
* :mod:`.mapping` - a model's MAC layers as GEMMs for an array (im2col, tiling, the depthwise mode);
* :mod:`.axi_driver` - the register-level driver of the AXI top (on cocotbext-axi bus models).
"""
