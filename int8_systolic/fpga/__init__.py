"""FPGA flow: synthesis (Yosys) and place-and-route (nextpnr) reports for the accelerator."""
