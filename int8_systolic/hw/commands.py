"""The memory engine's command descriptor, defined once: 16 little-endian 32-bit words per command.

:data:`FIELDS` is the definition. The engine's decoding (:func:`layout`, an Amaranth
``StructLayout`` of the 512 bits), the host's packing (:func:`pack`, :func:`unpack`), the
documentation (``docs/commands.md``) and the C header (``build/regs/int8_systolic_commands.h``) are
all generated from it (``python -m int8_systolic.hw.commands``); tests/test_commands.py checks
that the page is current and that the C header packs the same bytes as :func:`pack`.

A command list is a sequence of descriptors in the engine's read-only window, ending with an
``END`` command; a ``BARRIER`` stops the list with the IRQ so that the host can run the ops
between MAC layers, and GO resumes after it. See docs/engine.md.
"""

from dataclasses import dataclass

from amaranth import signed, unsigned
from amaranth.lib import data

from int8_systolic.cli_support import ArgumentParser, command, write_outputs

__all__ = ["FIELDS", "OPS", "WORDS", "Field", "c_header", "layout", "markdown", "pack", "unpack"]

WORDS = 16    # 64 bytes a command

OPS = {"END": 0, "FULLY_CONNECTED": 1, "CONV_2D": 2, "DEPTHWISE_CONV_2D": 3, "BARRIER": 15}


@dataclass(frozen=True)
class Field:
    name: str
    word: int
    lsb: int
    width: int
    doc: str
    signed: bool = False
    minimum: int | None = None     # the least value the engine accepts (None: the field's range)

    @property
    def bit(self):
        return 32 * self.word + self.lsb

    @property
    def lo(self):
        low = -(1 << (self.width - 1)) if self.signed else 0
        return low if self.minimum is None else max(low, self.minimum)

    @property
    def hi(self):
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1


F = Field
FIELDS = (
    F("op", 0, 0, 4, "the command: " + ", ".join(f"{k} {v}" for k, v in OPS.items())),
    F("bypass", 0, 4, 1, "write the int32 accumulators (bias included) instead of int8 results: 4 bytes an output"),
    F("stack", 0, 5, 1, "CONV_2D with dilation_h 1 and in_c at most a bus word: hold the input row-stacked on chip "
                        "(each output row's kernel_h "
                        "input rows interleaved, so a window is one run: few-channel layers at the array's rate); the "
                        "weights are then in (kw, kh, c) order (docs/engine.md)"),
    F("keep", 0, 6, 1, "keep the output on chip only, for the next command, which reads it there: it is not "
                       "written to memory (refused, TOO_BIG, when it does not fit beside the input)"),
    F("out_split_h", 0, 7, 1, "the output kept on chip for the next command split by row parity, the even rows "
                              "first, as a stride-2 DEPTHWISE_CONV_2D holds its input (docs/engine.md); its bytes in "
                              "memory are unchanged. Refused (INCONSISTENT) unless out_c is whole bus words"),
    F("out_split_w", 0, 8, 1, "likewise by column parity"),
    F("input_addr", 1, 0, 32, "byte address of the input tensor (NHWC int8; [batch, K] for FULLY_CONNECTED), "
                              "read-write window"),
    F("weights_addr", 2, 0, 32, "byte address of the weights in the engine's layout (docs/engine.md), read-only "
                                "window"),
    F("table_addr", 3, 0, 32, "byte address of the per-channel table, 12 bytes a channel, read-only window"),
    F("output_addr", 4, 0, 32, "byte address of the output tensor (NHWC int8, packed), read-write window"),
    F("in_h", 5, 0, 16, "input height (1 for FULLY_CONNECTED)", minimum=1),
    F("in_w", 5, 16, 16, "input width (1 for FULLY_CONNECTED)", minimum=1),
    F("in_c", 6, 0, 16, "input channels (K for FULLY_CONNECTED)", minimum=1),
    F("batch", 6, 16, 16, "batch (rows of a FULLY_CONNECTED input)", minimum=1),
    F("out_h", 7, 0, 16, "output height", minimum=1),
    F("out_w", 7, 16, 16, "output width", minimum=1),
    F("out_c", 8, 0, 16, "output channels", minimum=1),
    F("depth_multiplier", 8, 16, 16, "DEPTHWISE_CONV_2D's depth multiplier (1 otherwise)", minimum=1),
    F("kernel_h", 9, 0, 8, "filter height", minimum=1),
    F("kernel_w", 9, 8, 8, "filter width", minimum=1),
    F("stride_h", 9, 16, 8, "vertical stride", minimum=1),
    F("stride_w", 9, 24, 8, "horizontal stride", minimum=1),
    F("dilation_h", 10, 0, 8, "vertical dilation", minimum=1),
    F("dilation_w", 10, 8, 8, "horizontal dilation", minimum=1),
    F("pad_top", 10, 16, 8, "rows of zero point above the input (SAME or VALID resolved by the compiler)"),
    F("pad_left", 10, 24, 8, "columns of zero point left of the input"),
    F("input_zero_point", 11, 0, 8, "the input's zero point (padding taps take it)", signed=True),
    F("output_zero_point", 11, 8, 8, "the output's zero point", signed=True),
    F("act_min", 11, 16, 8, "the fused activation's lower bound (quantized_activation_min)", signed=True),
    F("act_max", 11, 24, 8, "the fused activation's upper bound (quantized_activation_max)", signed=True),
    F("weights_ahead", 12, 0, 32, "bytes of later commands' weights that follow this command's in memory (the "
                                  "compiler lays a list's weights out in command order): the engine may read them "
                                  "ahead, as its weight buffer has room, when it starts reading weights at this "
                                  "command. Rounded down to whole bus words and bounded by the read-only window; 0: "
                                  "this command's weights alone (docs/engine.md, Weights read ahead)"),
)

_BY_NAME = {f.name: f for f in FIELDS}


def layout():
    """The 512 bits of a descriptor as an Amaranth ``StructLayout`` (reserved bits as ``_pad<bit>``)."""
    members, bit = {}, 0
    for f in sorted(FIELDS, key=lambda f: f.bit):
        if f.bit > bit:
            members[f"_pad{bit}"] = f.bit - bit
        members[f.name] = signed(f.width) if f.signed else unsigned(f.width)
        bit = f.bit + f.width
    if bit < 32 * WORDS:
        members[f"_pad{bit}"] = 32 * WORDS - bit
    return data.StructLayout(members)


def pack(**values):
    """One descriptor's 64 bytes. Every field not given is 0; a value outside its field's range (or an unknown
    field) is refused with a ValueError naming it."""
    unknown = sorted(set(values) - set(_BY_NAME))
    if unknown:
        raise ValueError(f"unknown command field(s) {', '.join(unknown)}; the fields are "
                         f"{', '.join(f.name for f in FIELDS)}")
    words = [0] * WORDS
    for name, value in values.items():
        f = _BY_NAME[name]
        if name == "op" and isinstance(value, str):
            if value not in OPS:
                raise ValueError(f"op must be one of {', '.join(OPS)}, got {value!r}")
            value = OPS[value]
        if isinstance(value, bool) or not isinstance(value, int) or not f.lo <= value <= f.hi:
            raise ValueError(f"command field {name} must be an integer in [{f.lo}, {f.hi}], got {value!r}")
        words[f.word] |= (value & ((1 << f.width) - 1)) << f.lsb
    return b"".join(w.to_bytes(4, "little") for w in words)


def unpack(raw):
    """The fields of one descriptor's 64 bytes (signed fields sign-extended)."""
    if len(raw) != 4 * WORDS:
        raise ValueError(f"a command is {4 * WORDS} bytes, got {len(raw)}")
    words = [int.from_bytes(raw[4 * i:4 * i + 4], "little") for i in range(WORDS)]
    out = {}
    for f in FIELDS:
        v = (words[f.word] >> f.lsb) & ((1 << f.width) - 1)
        if f.signed and v >> (f.width - 1):
            v -= 1 << f.width
        out[f.name] = v
    return out


def markdown():
    lines = ["# The memory engine's command descriptor", "",
             "Generated from `int8_systolic/hw/commands.py` (`python -m int8_systolic.hw.commands`); do not edit.", "",
             f"A command is {WORDS} little-endian 32-bit words ({4 * WORDS} bytes); bits not listed are reserved "
             "and must be 0. A list ends with `END`; a `BARRIER` stops it with the IRQ. In a MAC command "
             "(FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D) a field with a minimum is refused below it: the engine "
             "stops the list with an error and the command's index.", "",
             "| op | code |", "|---|---:|"]
    lines += [f"| `{k}` | {v} |" for k, v in OPS.items()]
    lines += ["", "| field | word | bits | range | meaning |", "|---|---:|---|---|---|"]
    for f in FIELDS:
        bits = f"{f.lsb + f.width - 1}:{f.lsb}" if f.width > 1 else f"{f.lsb}"
        kind = "signed " if f.signed else ""
        lines.append(f"| `{f.name}` | {f.word} | {bits} | {kind}{f.lo}..{f.hi} | {f.doc} |")
    return "\n".join(lines) + "\n"


def c_header():
    """Each field's word, shift and mask, the op codes, and a packing macro."""
    lines = ["/* int8_systolic memory engine command descriptor: generated from int8_systolic/hw/commands.py, do not "
             "edit. */", "#ifndef INT8_SYSTOLIC_COMMANDS_H", "#define INT8_SYSTOLIC_COMMANDS_H", "",
             "#include <stdint.h>", "", f"#define I8E_CMD_WORDS {WORDS}u"]
    lines += [f"#define I8E_OP_{k} {v}u" for k, v in OPS.items()]
    lines.append("")
    for f in FIELDS:
        n = f.name.upper()
        lines += [f"#define I8E_CMD_{n}_WORD {f.word}u", f"#define I8E_CMD_{n}_SHIFT {f.lsb}u",
                  f"#define I8E_CMD_{n}_MASK 0x{((1 << f.width) - 1) << f.lsb:08X}u"]
    lines += ["", "/* set field F of the descriptor cmd (uint32_t[I8E_CMD_WORDS]) to v (signed values wrap to the "
              "field) */",
              "#define I8E_CMD_SET(cmd, F, v) ((cmd)[I8E_CMD_##F##_WORD] = ((cmd)[I8E_CMD_##F##_WORD] & "
              "~I8E_CMD_##F##_MASK) | (((uint32_t)(v) << I8E_CMD_##F##_SHIFT) & I8E_CMD_##F##_MASK))",
              "", "#endif", ""]
    return "\n".join(lines)


@command("python -m int8_systolic.hw.commands")
def main(argv=None):
    parser = ArgumentParser(description="Write docs/commands.md and the C header from int8_systolic/hw/commands.py")
    parser.add_argument("--markdown", default="docs/commands.md")
    parser.add_argument("--header", default="build/regs/int8_systolic_commands.h")
    args = parser.parse_args(argv)
    write_outputs(((args.markdown, markdown()), (args.header, c_header())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
