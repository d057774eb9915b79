"""The AXI4-Lite register map of the memory engine's top (:mod:`hw.engine_top`), defined once.

Built by the same register block as the AXI top's (:mod:`hw.register_block`, the kinds of
:mod:`hw.registers`); the page ``docs/engine_registers.md`` and the C header
``build/regs/int8_systolic_engine_regs.h`` are generated from it (``python -m
int8_systolic.hw.engine_registers``); tests/test_engine_top.py checks the page is current.

Programming: set the windows (RO_BASE/RO_LAST, RW_BASE/RW_LAST: the last byte of each, inclusive),
LIST_ADDR and IRQ_ENABLE, then write CONTROL.GO. The engine runs the command list until END
(IRQ.DONE), a BARRIER (IRQ.BARRIER: run the host's ops, then GO again to resume after it) or a
refused command (ERROR's bit and ERROR_INDEX, IRQ.ERROR). docs/engine.md has the rest.
"""

from int8_systolic.cli_support import ArgumentParser, command, write_outputs

from .engine import ERRORS
from .registers import Field, Register, check_map, map_c_header, map_markdown

__all__ = ["ENGINE_ERROR_BITS", "ENGINE_REGISTERS", "ID_MAGIC", "VERSION", "c_header", "markdown", "reg"]

ID_MAGIC = 0x49385345  # "I8SE" in ASCII
VERSION = (1, 0)

_ERROR_DOCS = {
    "BAD_OP": "a command with an unknown op",
    "BAD_FIELD": "a MAC command with a field below its minimum (a zero shape, stride, dilation)",
    "LIST": "the command list outside the read-only window, or misaligned",
    "INCONSISTENT": "an inconsistent layer (FULLY_CONNECTED not 1x1, a window outside the padded input, "
                    "act_min > act_max)",
    "UNSUPPORTED": "a layer this engine does not run (bypass)",
    "TOO_BIG": "a tensor larger than its buffer, more column tiles than the tables hold, or K >= 2^24",
    "MISALIGNED": "a tensor address not a multiple of the bus width",
    "WINDOW": "a tensor outside its window",
    "BUS": "a read or write answered with an error response (the list stops after that command)",
}
# ERROR: the engine's reasons, as it reports them when a list stops, then the register block's own
ENGINE_ERROR_BITS = (*(Field(name, bit, 1, _ERROR_DOCS[name] + " (the list stops; ERROR_INDEX says which command)")
                       for name, bit in ERRORS.items()),
                     Field("BAD_ACCESS", len(ERRORS), 1, "an AXI4-Lite write to an unmapped or read-only offset "
                                                         "(answered SLVERR)"))


def _counter(name, offset, doc):
    return Register(name, offset, "counter", f"Performance counter: {doc}", clear=("CONTROL", "CLEAR_COUNTERS"))


def _window(prefix, offset, which):
    return (Register(f"{prefix}_BASE", offset, "stored", f"The {which} window's first byte."),
            Register(f"{prefix}_LAST", offset + 4, "stored", f"The {which} window's last byte (inclusive)."))


ENGINE_REGISTERS = (
    Register("ID", 0x000, "const", f"Fixed magic value 0x{ID_MAGIC:08X} (\"I8SE\"): the engine is present."),
    Register("VERSION", 0x004, "const", "Register map version.", (
        Field("MINOR", 0, 16, "minor version"), Field("MAJOR", 16, 16, "major version"))),
    Register("CONFIG", 0x008, "const", "The elaborated configuration.", (
        Field("ROWS", 0, 8, "array rows"), Field("COLS", 8, 8, "array columns"),
        Field("BUS_BYTES", 16, 8, "the AXI4 master's data width in bytes"),
        Field("ROUNDING", 24, 1, "0: TFLite's double rounding (gemmlowp), 1: single rounding"))),
    Register("BUFFERS", 0x00C, "const", "The on-chip buffers, in KiB.", (
        Field("INPUT_KIB", 0, 10, "input buffer"), Field("WEIGHTS_KIB", 10, 11, "weight buffer"),
        Field("OUTPUT_KIB", 21, 10, "output buffer"))),
    Register("STATUS", 0x010, "status", "What the engine is doing.", (
        Field("BUSY", 0, 1, "a list is running (GO is ignored while it is)"),)),
    Register("ERROR", 0x014, "w1c", "Sticky error bits; write 1 to clear. Any bit set raises IRQ.ERROR.",
             ENGINE_ERROR_BITS),
    Register("ERROR_INDEX", 0x018, "status", "The index in its list of the command the last error stopped at.", (
        Field("INDEX", 0, 16, "command index (0: the list's first)"),)),
    Register("IRQ", 0x01C, "w1c", "Interrupt causes; write 1 to clear. `irq` is high while IRQ & IRQ_ENABLE is "
             "not zero.", (
        Field("DONE", 0, 1, "a list reached END"),
        Field("BARRIER", 1, 1, "a list reached a BARRIER: run the host's ops, then GO resumes after it"),
        Field("ERROR", 2, 1, "ERROR is not zero (clears with ERROR)", live=True))),
    Register("IRQ_ENABLE", 0x020, "stored", "Which IRQ causes drive `irq`.", (
        Field("DONE", 0, 1, "enable IRQ.DONE"), Field("BARRIER", 1, 1, "enable IRQ.BARRIER"),
        Field("ERROR", 2, 1, "enable IRQ.ERROR"))),
    Register("CONTROL", 0x024, "strobe", "Commands.", (
        Field("GO", 0, 1, "write 1: run the list at LIST_ADDR, or resume after a BARRIER"),
        Field("CLEAR_COUNTERS", 1, 1, "write 1: zero the performance counters (0x080-0x098)"))),
    Register("LIST_ADDR", 0x028, "stored", "The command list's first byte (read-only window, bus-aligned)."),
    *_window("RO", 0x030, "read-only (commands, weights, tables)"),
    *_window("RW", 0x038, "read-write (activations)"),
    _counter("CYCLES", 0x080, "clock cycles (32 bits, wraps)."),
    _counter("BUSY_CYCLES", 0x084, "cycles with STATUS.BUSY set."),
    _counter("STEPS", 0x088, "array steps taken."),
    _counter("MEM_WAIT_CYCLES", 0x08C, "cycles a layer was running and the array took no step because its "
             "activations or weights were not yet read from memory (or not yet built)."),
    Register("BYTES_READ", 0x090, "status", "Performance counter: bytes read over the AXI4 master (32 bits, wraps; "
             "zeroed by CONTROL.CLEAR_COUNTERS)."),
    Register("BYTES_WRITTEN", 0x094, "status", "Performance counter: bytes written over the AXI4 master, by their "
             "strobes (32 bits, wraps; zeroed by CONTROL.CLEAR_COUNTERS)."),
    _counter("LAYERS_DONE", 0x098, "commands whose output is written."),
)

check_map(ENGINE_REGISTERS)
_BY_NAME = {r.name: r for r in ENGINE_REGISTERS}


def reg(name):
    """The engine register called ``name``."""
    return _BY_NAME[name]


def markdown():
    return map_markdown(ENGINE_REGISTERS, title="The memory engine's register map",
                        source="int8_systolic/hw/engine_registers.py", block="The engine top", version=VERSION)


def c_header():
    return map_c_header(ENGINE_REGISTERS, what="int8_systolic memory engine",
                        source="int8_systolic/hw/engine_registers.py", guard="INT8_SYSTOLIC_ENGINE_REGS_H",
                        prefix="I8E", magic=ID_MAGIC, version=VERSION)


@command("python -m int8_systolic.hw.engine_registers")
def main(argv=None):
    parser = ArgumentParser(description="Write docs/engine_registers.md and the C header from "
                                        "int8_systolic/hw/engine_registers.py")
    parser.add_argument("--markdown", default="docs/engine_registers.md")
    parser.add_argument("--header", default="build/regs/int8_systolic_engine_regs.h")
    args = parser.parse_args(argv)
    write_outputs(((args.markdown, markdown()), (args.header, c_header())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
