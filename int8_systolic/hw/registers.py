"""The AXI4-Lite register map of the AXI top (:mod:`hw.axi_top`), defined once.

The register logic takes its offsets and field positions from :data:`REGISTERS`; the
documentation (``docs/registers.md``) and the C header (``build/regs/int8_systolic_regs.h``) are
generated from it (``python -m int8_systolic.hw.registers``), and tests/test_axi_top.py checks the page is current.

All registers are 32 bits wide at word-aligned byte offsets; bits outside a register's fields read
0. Each register declares its *kind*, from which :class:`hw.register_block.RegisterBlock` builds
its logic and which gives its access:

=========  ======  =====================================================================
kind       access  what the block builds
=========  ======  =====================================================================
const      ro      a constant bound at elaboration (ID, the configuration)
status     ro      a live value bound to a signal of the design
counter    ro      a 32-bit counter with an increment bound to a signal, zeroed by ``clear``
stored     rw      storage the design reads (a descriptor's fields, a table entry's words);
                   ``updated`` ones also take a value from the design (an index that moves on)
strobe     wo      a pulse with the written word, reads 0 (a push, a commit, a command)
w1c        w1c     sticky bits set by signals of the design, cleared by writing 1; a ``live``
                   field reads a signal instead and ignores writes
=========  ======  =====================================================================

A write to an unmapped or read-only offset answers SLVERR and sets ERROR.BAD_ACCESS; a read of an
unmapped offset answers SLVERR and 0.
"""

from dataclasses import dataclass, field

from int8_systolic.cli_support import ArgumentParser, command, write_outputs

__all__ = ["ERROR_BITS", "ID_MAGIC", "KINDS", "REGISTERS", "VERSION", "Field", "Register", "c_header", "check_map",
           "map_c_header", "map_markdown", "markdown", "reg"]

ID_MAGIC = 0x49385341  # "I8SA" in ASCII
VERSION = (1, 1)


KINDS = {"const": "ro", "status": "ro", "counter": "ro", "stored": "rw", "strobe": "wo", "w1c": "w1c"}


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    doc: str
    signed: bool = False
    live: bool = False   # (w1c registers) reads a signal of the design, ignores writes

    @property
    def mask(self):
        return ((1 << self.width) - 1) << self.lsb


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    kind: str
    doc: str
    fields: tuple = field(default_factory=tuple)
    updated: bool = False    # (stored) the design also loads it
    clear: tuple = ()        # (counter) the strobe field that zeroes it: (register, field)

    @property
    def access(self):
        return KINDS[self.kind]

    @property
    def mask(self):
        """The bits the register holds: its fields', or the whole word for a register without fields."""
        return sum(f.mask for f in self.fields) if self.fields else 0xFFFF_FFFF

    @property
    def width(self):
        """Bits held: up to the last field's top bit, or the whole word for a register without fields."""
        return max((f.lsb + f.width for f in self.fields), default=32)

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}")


def _f(name, lsb, width, doc, **kw):
    return Field(name, lsb, width, doc, **kw)


def _counter(name, offset, doc):
    return Register(name, offset, "counter", f"Performance counter: {doc}", clear=("CONTROL", "CLEAR_COUNTERS"))


# Sticky error bits (ERROR, w1c): each refuses or flags something, never computes it silently.
ERROR_BITS = (
    _f("DESC_K", 0, 1, "a descriptor with K = 0 was pushed (refused, not queued)"),
    _f("DESC_TILES", 1, 1, "a descriptor with zero column tiles or zero row tiles was pushed (refused)"),
    _f("DESC_TABLE", 2, 1, "a descriptor whose TABLE_BASE + N_TILES exceeds the table depth was pushed (refused)"),
    _f("DESC_BOUNDS", 3, 1, "a descriptor with ACT_MIN > ACT_MAX was pushed (refused)"),
    _f("QUEUE_FULL", 4, 1, "a descriptor was pushed while the queue was full (refused)"),
    _f("TABLE_RANGE", 5, 1, "a table entry was committed with its address >= the table depth or lane >= cols "
                            "(refused)"),
    _f("TABLE_BUSY", 6, 1, "a table entry was committed into the table range of a queued or running GEMM "
                           "(refused)"),
    _f("ACT_TLAST", 7, 1, "s_axis_act TLAST was high on a step other than a GEMM's last, or low on its last"),
    _f("WTS_TLAST", 8, 1, "s_axis_wts TLAST was high on a step other than a GEMM's last, or low on its last"),
    _f("BAD_ACCESS", 9, 1, "an AXI4-Lite write to an unmapped or read-only offset (answered SLVERR)"),
)

REGISTERS = (
    Register("ID", 0x000, "const", f"Fixed magic value 0x{ID_MAGIC:08X} (\"I8SA\"): the block is present."),
    Register("VERSION", 0x004, "const", "Register map version.", (
        _f("MINOR", 0, 16, "minor version"), _f("MAJOR", 16, 16, "major version"))),
    Register("CONFIG", 0x008, "const", "The elaborated configuration.", (
        _f("ROWS", 0, 8, "array rows (activation lanes per step, result rows per tile)"),
        _f("COLS", 8, 8, "array columns (weight lanes per step, result lanes per row)"),
        _f("ROUNDING", 16, 1, "0: TFLite's double rounding (gemmlowp), 1: single rounding"),
        _f("QUEUE_DEPTH", 24, 8, "descriptors the queue holds"))),
    Register("TABLE_DEPTH", 0x00C, "const", "Per-channel table rows (N <= TABLE_DEPTH * COLS over all "
             "GEMMs whose tables are loaded at once).", (_f("DEPTH", 0, 16, "table rows"),)),
    Register("LATENCY", 0x010, "const", "Timing of the core.", (
        _f("LATENCY", 0, 16, "cycles from a tile's last step to its last result row at full rate"),
        _f("MIN_TILE_STEPS", 16, 8, "shorter tiles are padded with idle cycles up to this"))),
    Register("STATUS", 0x014, "status", "What the block is doing.", (
        _f("BUSY", 0, 1, "a GEMM is queued, running or has results not yet transferred"),
        _f("ACTIVE", 1, 1, "a GEMM is taking steps"),
        _f("QUEUED", 4, 4, "descriptors waiting in the queue"),
        _f("IN_FLIGHT", 8, 4, "GEMMs started whose last result row has not been transferred"))),
    Register("ERROR", 0x018, "w1c", "Sticky error bits; write 1 to clear. Any bit set raises IRQ.ERROR.",
             ERROR_BITS),
    Register("IRQ", 0x01C, "w1c", "Interrupt causes; write 1 to clear. `irq` is high while "
             "IRQ & IRQ_ENABLE is not zero.", (
        _f("DONE", 0, 1, "a GEMM's last result row was transferred"),
        _f("ERROR", 1, 1, "ERROR is not zero (clears with ERROR)", live=True))),
    Register("IRQ_ENABLE", 0x020, "stored", "Which IRQ causes drive `irq`.", (
        _f("DONE", 0, 1, "enable IRQ.DONE"), _f("ERROR", 1, 1, "enable IRQ.ERROR"))),
    Register("CONTROL", 0x024, "strobe", "Commands.", (
        _f("CLEAR_COUNTERS", 0, 1, "write 1: zero the performance counters (0x080-0x098)"),)),
    Register("DESC_K", 0x040, "stored", "Next descriptor: K, the steps per tile (1 .. 2^24 - 1).", (
        _f("K", 0, 24, "steps per tile"),)),
    Register("DESC_N_TILES", 0x044, "stored", "Next descriptor: column tiles, ceil(N / COLS).", (
        _f("N_TILES", 0, 16, "column tiles"),)),
    Register("DESC_M_TILES", 0x048, "stored", "Next descriptor: row tiles, ceil(M / ROWS).", (
        _f("M_TILES", 0, 24, "row tiles"),)),
    Register("DESC_TABLE_BASE", 0x04C, "stored", "Next descriptor: the table row of its column tile 0.", (
        _f("BASE", 0, 16, "table row"),)),
    Register("DESC_OUTPUT", 0x050, "stored", "Next descriptor: the output stage.", (
        _f("OUTPUT_OFFSET", 0, 8, "output zero point, int8", signed=True),
        _f("ACT_MIN", 8, 8, "fused activation's lower bound, int8", signed=True),
        _f("ACT_MAX", 16, 8, "fused activation's upper bound, int8", signed=True),
        _f("BYPASS", 24, 1, "1: stream the int32 accumulator (bias included) instead of the int8 result"))),
    Register("DESC_PUSH", 0x054, "strobe", "Write any value: check the staged descriptor and queue it, or "
             "refuse it and set an ERROR bit."),
    Register("DESC_MODE", 0x058, "stored", "Next descriptor: how the array takes its activations.", (
        _f("DEPTHWISE", 0, 1, "0: GEMM, each step's s_axis_act bytes 0 .. ROWS-1 are the rows' activations, "
           "broadcast along each row; 1: depthwise, byte j*ROWS + i is cell (i, j)'s own activation "
           "(output pixel i, channel j: a depthwise convolution's patches)"),)),
    Register("TABLE_INDEX", 0x060, "stored", "Table entry the next TABLE_SHIFT write commits; moves to the "
             "next lane (then the next row) after each commit.", (
        _f("LANE", 0, 8, "lane: output channel n sits in lane n % COLS"),
        _f("ROW", 8, 16, "table row: TABLE_BASE + n // COLS")), updated=True),
    Register("TABLE_BIAS", 0x064, "stored", "Entry's folded bias: bias - input_zero_point * sum(weights), int32."),
    Register("TABLE_MULTIPLIER", 0x068, "stored", "Entry's output multiplier (QuantizeMultiplier), int32."),
    Register("TABLE_SHIFT", 0x06C, "strobe", "Entry's output shift (QuantizeMultiplier's exponent, -31 .. 31); "
             "the write commits the entry.", (_f("SHIFT", 0, 6, "signed shift", signed=True),)),
    _counter("CYCLES", 0x080, "clock cycles (32 bits, wraps)."),
    _counter("BUSY_CYCLES", 0x084, "cycles with STATUS.BUSY set."),
    _counter("STEPS", 0x088, "steps accepted (one activation and one weight "
             "transfer each)."),
    _counter("ACT_STARVED", 0x08C, "cycles a GEMM was taking steps and "
             "s_axis_act had no TVALID."),
    _counter("WTS_STARVED", 0x090, "cycles a GEMM was taking steps and "
             "s_axis_wts had no TVALID."),
    _counter("RES_STALLED", 0x094, "cycles m_axis_res had TVALID and no TREADY."),
    _counter("GEMMS_DONE", 0x098, "GEMMs whose last result row was transferred."),
)

_BY_NAME = {r.name: r for r in REGISTERS}


def reg(name):
    """The register called ``name``."""
    return _BY_NAME[name]


def check_map(registers):
    """Refuse a malformed register map (a ValueError naming the register): offsets, kinds, fields, clears."""
    by_name = {r.name: r for r in registers}
    offsets = [r.offset for r in registers]
    if len(set(offsets)) != len(offsets) or any(o % 4 for o in offsets):
        raise ValueError(f"register offsets must be distinct and word-aligned: {offsets}")
    for r in registers:
        if r.kind not in KINDS:
            raise ValueError(f"register {r.name}: kind must be one of {list(KINDS)}, got {r.kind!r}")
        used = 0
        for f in r.fields:
            if f.lsb + f.width > 32 or used & f.mask:
                raise ValueError(f"field {r.name}.{f.name} overlaps another or leaves the word")
            if f.live and r.kind != "w1c":
                raise ValueError(f"field {r.name}.{f.name}: only w1c registers have live fields")
            used |= f.mask
        if r.updated and r.kind != "stored":
            raise ValueError(f"register {r.name}: only stored registers are updated by the design")
        if (r.kind == "counter") != bool(r.clear):
            raise ValueError(f"register {r.name}: a counter names the strobe field that clears it, nothing else does")
        if r.clear and (by_name.get(r.clear[0]) is None or by_name[r.clear[0]].kind != "strobe"):
            raise ValueError(f"register {r.name}: its clear {r.clear} is not a strobe register's field")
        if r.clear:
            by_name[r.clear[0]].field(r.clear[1])


check_map(REGISTERS)


def map_markdown(registers, *, title, source, block, version, error_register="ERROR"):
    """A register map's page: a table of the registers, then one per register's fields."""
    lines = [f"# {title}", "",
             f"Generated from `{source}` by `python -m {source.removesuffix('.py').replace('/', '.')}`; do not "
             "edit by hand.", "",
             f"{block}'s AXI4-Lite slave (`s_axil_*`): 32-bit registers at word-aligned byte offsets. "
             "Access: ro read-only, rw read-write, wo write-only (reads 0), w1c write 1 to clear; bits outside a "
             "register's fields read 0. The kind says what the register block builds "
             "(`int8_systolic/hw/registers.py`). "
             f"A write to an unmapped or read-only offset answers SLVERR and sets {error_register}.BAD_ACCESS; "
             "a read of an unmapped offset answers SLVERR.", "",
             f"Map version {version[0]}.{version[1]}.", "",
             "| offset | name | access | kind | description |", "|---|---|---|---|---|"]
    lines += [f"| 0x{r.offset:03X} | {r.name} | {r.access} | {r.kind} | {r.doc} |" for r in registers]
    for r in registers:
        if not r.fields:
            continue
        lines += ["", f"## {r.name} (0x{r.offset:03X})", "", "| bits | field | description |", "|---|---|---|"]
        for f in r.fields:
            bits = f"{f.lsb}" if f.width == 1 else f"{f.lsb + f.width - 1}:{f.lsb}"
            lines.append(f"| {bits} | {f.name} | {f.doc} |")
    return "\n".join(lines) + "\n"


def map_c_header(registers, *, what, source, guard, prefix, magic, version):
    """A register map's C header: each register's offset and each field's shift and mask."""
    lines = [f"/* {what} register map: generated from {source}, do not edit. */",
             f"#ifndef {guard}", f"#define {guard}", "",
             f"#define {prefix}_ID_MAGIC 0x{magic:08X}u",
             f"#define {prefix}_VERSION_MAJOR {version[0]}u", f"#define {prefix}_VERSION_MINOR {version[1]}u", ""]
    for r in registers:
        lines.append(f"#define {prefix}_{r.name} 0x{r.offset:03X}u  /* {r.access} */")
        for f in r.fields:
            lines.append(f"#define {prefix}_{r.name}_{f.name}_SHIFT {f.lsb}u")
            lines.append(f"#define {prefix}_{r.name}_{f.name}_MASK 0x{f.mask:08X}u")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def markdown():
    """``docs/registers.md``: the AXI top's map as a table per register."""
    return map_markdown(REGISTERS, title="Register map", source="int8_systolic/hw/registers.py",
                        block="The AXI top", version=VERSION)


def c_header():
    """A C header with each register's offset and each field's shift and mask."""
    return map_c_header(REGISTERS, what="int8_systolic AXI top", source="int8_systolic/hw/registers.py",
                        guard="INT8_SYSTOLIC_REGS_H", prefix="I8S", magic=ID_MAGIC, version=VERSION)


@command("python -m int8_systolic.hw.registers")
def main(argv=None):
    parser = ArgumentParser(
        description="Write docs/registers.md and the C header from int8_systolic/hw/registers.py")
    parser.add_argument("--markdown", default="docs/registers.md")
    parser.add_argument("--header", default="build/regs/int8_systolic_regs.h")
    args = parser.parse_args(argv)
    write_outputs(((args.markdown, markdown()), (args.header, c_header())))


if __name__ == "__main__":
    raise SystemExit(main())
