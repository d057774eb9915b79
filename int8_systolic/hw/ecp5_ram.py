"""ECP5 memory facts and primitives shared by the channel tables and the output FIFOs.

``LUTRAM_DEPTH``: entries in one ECP5 LUT-RAM cell (the bank size of the tables and FIFOs in
distributed RAM). :func:`dp16kd`: one ``DP16KD`` block RAM instantiated in 1024 x 18 mode, with its
output register (``int8_systolic/sim/ecp5_models.py`` models it for simulation).
"""

from amaranth import ClockSignal, Const, Instance

__all__ = ["DP16KD_DEPTH", "LUTRAM_BITS", "LUTRAM_DEPTH", "dp16kd"]

LUTRAM_BITS = 4
LUTRAM_DEPTH = 1 << LUTRAM_BITS
DP16KD_DEPTH = 1024

def dp16kd(w_addr, w_data, w_en, r_addr, r_data):
    """One ECP5 ``DP16KD`` in 1024 x 18 mode: port A writes ``w_data`` at ``w_addr`` when
    ``w_en``; port B reads ``r_addr`` into ``r_data`` two clock edges later (the read, then the
    output register). Port wiring as Yosys' own DP16KD mapping (``brams_map_16kd.v``) for 18-bit
    ports: the word address on AD[13:4], AD[1:0] the byte enables of a write, AD[3:2] zero."""
    zero, one = Const(0, 1), Const(1, 1)
    ports = {"i_CLKA": ClockSignal("sync"), "i_CLKB": ClockSignal("sync"),
             "i_WEA": w_en, "i_WEB": zero, "i_CEA": one, "i_CEB": one, "i_OCEA": one, "i_OCEB": one,
             "i_RSTA": zero, "i_RSTB": zero}
    for port in "AB":
        ports.update({f"i_CS{port}{n}": zero for n in range(3)})
    for n, bit in enumerate((one, one, zero, zero)):
        ports[f"i_ADA{n}"] = bit
        ports[f"i_ADB{n}"] = zero
    for n in range(10):
        ports[f"i_ADA{n + 4}"] = w_addr[n] if n < len(w_addr) else zero
        ports[f"i_ADB{n + 4}"] = r_addr[n] if n < len(r_addr) else zero
    ports.update({f"i_DIA{n}": w_data[n] for n in range(18)})
    ports.update({f"i_DIB{n}": zero for n in range(18)})
    ports.update({f"o_DOB{n}": r_data[n] for n in range(18)})
    return Instance(
        "DP16KD",
        p_DATA_WIDTH_A=18, p_DATA_WIDTH_B=18, p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG",
        p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000", p_CSDECODE_B="0b000",
        p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
        **ports)


