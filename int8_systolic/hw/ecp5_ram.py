"""ECP5 memory facts and primitives shared by the channel tables, the output FIFOs and the engine's buffers.

``LUTRAM_DEPTH``: entries in one ECP5 LUT-RAM cell (the bank size of the tables and FIFOs in
distributed RAM). :func:`dp16kd`: one ``DP16KD`` block RAM, 2048 x 9, 1024 x 18 or 512 x 36, with its
output register (``int8_systolic/sim/ecp5_models.py`` models it for simulation).
"""

from amaranth import ClockSignal, Const, Instance

__all__ = ["DP16KD_DEPTH", "DP16KD_MODES", "LUTRAM_BITS", "LUTRAM_DEPTH", "dp16kd"]

LUTRAM_BITS = 4
LUTRAM_DEPTH = 1 << LUTRAM_BITS
DP16KD_DEPTH = 1024
# data width -> words, for the modes dp16kd builds (18 432 bits each: 2 KB of 9-bit bytes)
DP16KD_MODES = {9: 2048, 18: 1024, 36: 512}


def dp16kd(w_addr, w_data, w_en, r_addr, r_data, *, width=18):
    """One ECP5 ``DP16KD``: port A writes ``w_data`` at ``w_addr``; port B reads ``r_addr`` into ``r_data``
    two clock edges later (the read, then the output register: REGMODE OUTREG, which Yosys never enables
    by itself, and without which the block RAM's clock-to-out is most of a 175 MHz cycle).

    ``width`` 18 (1024 x 18) and 9 (2048 x 9) are true dual-port modes: ``w_en`` one bit, every byte of the
    word written. 36 (512 x 36) is the pseudo dual-port mode (Lattice's ``PDPW16KD``): ``w_en`` four byte
    enables (9 bits each), port A's data pins the low 18 bits and port B's the high 18, the read word on
    DOA (low) and DOB (high), and both ports' REGMODE OUTREG (nextpnr sets both from PDPW16KD's one
    REGMODE). Port wiring as Yosys' own mappings (``brams_map_16kd.v``): the word address on the top
    address bits, the byte enables of an 18- or 36-bit write on the bottom ones.

    A read of the word port A writes in the same cycle returns undefined data on the device (the model
    returns it inverted): the caller must never depend on one."""
    if width not in DP16KD_MODES:
        raise ValueError(f"DP16KD width must be one of {sorted(DP16KD_MODES)}, got {width!r}")
    zero, one = Const(0, 1), Const(1, 1)
    low = {9: 3, 18: 4, 36: 5}[width]          # the word address starts at AD[low]
    ports = {"i_CLKA": ClockSignal("sync"), "i_CLKB": ClockSignal("sync"),
             "i_WEB": zero, "i_CEA": one, "i_CEB": one, "i_OCEA": one, "i_OCEB": one,
             "i_RSTA": zero, "i_RSTB": zero}
    for port in "AB":
        ports.update({f"i_CS{port}{n}": zero for n in range(3)})
    if width == 9:
        ports["i_WEA"] = w_en
        enables = [zero, zero, zero]
    elif width == 18:
        ports["i_WEA"] = w_en
        enables = [one, one, zero, zero]
    else:
        ports["i_WEA"] = one
        enables = [w_en[n] for n in range(4)] + [zero]
    for n in range(low):
        ports[f"i_ADA{n}"] = enables[n]
        ports[f"i_ADB{n}"] = zero
    for n in range(14 - low):
        ports[f"i_ADA{n + low}"] = w_addr[n] if n < len(w_addr) else zero
        ports[f"i_ADB{n + low}"] = r_addr[n] if n < len(r_addr) else zero
    half = min(width, 18)
    ports.update({f"i_DIA{n}": w_data[n] if n < half else zero for n in range(18)})
    ports.update({f"i_DIB{n}": w_data[18 + n] if width == 36 else zero for n in range(18)})
    if width == 36:
        ports.update({f"o_DOA{n}": r_data[n] for n in range(18)})
        ports.update({f"o_DOB{n}": r_data[18 + n] for n in range(18)})
    else:
        ports.update({f"o_DOB{n}": r_data[n] for n in range(width)})
    return Instance(
        "DP16KD",
        p_DATA_WIDTH_A=width, p_DATA_WIDTH_B=width, p_REGMODE_A="OUTREG" if width == 36 else "NOREG",
        p_REGMODE_B="OUTREG", p_RESETMODE="SYNC", p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000",
        p_CSDECODE_B="0b000", p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_GSR="DISABLED",
        **ports)
