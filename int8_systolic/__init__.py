"""int8-systolic: a bit-exact TFLite int8 systolic MAC array in Amaranth, and everything around it.

Packages:

* :mod:`int8_systolic.golden` - the numpy golden model of TFLite's int8 arithmetic, the spec checker
  and the conformance kit, checked bit for bit against TFLite-Micro;
* :mod:`int8_systolic.hw` - the Amaranth RTL: the array, the core, the AXI top and their parts;
* :mod:`int8_systolic.host` - host-side software that is not a testbench: the GEMM problem model,
  the layer mapping and the register-level driver;
* :mod:`int8_systolic.sim` - the cocotb testbenches, the RTL regression and the benchmarks;
* :mod:`int8_systolic.fpga` - the Yosys + nextpnr flow;
* :mod:`int8_systolic.formal`, :mod:`int8_systolic.mutate` - the formal proof and mutation testing.

The console script ``int8-systolic`` (:mod:`int8_systolic.cli`) runs what a user runs.
"""
