"""hw.commands, the engine's command descriptor defined once: the fields fit and do not overlap, the host's
packing round-trips, the Amaranth layout decodes the same bits, the page is current, and the generated C header
packs exactly the bytes Python packs (compiled with the machine's C compiler)."""

import random
import shutil
import subprocess

import pytest

from int8_systolic.hw import commands
from int8_systolic.hw.commands import FIELDS, OPS, WORDS, layout, pack, unpack
from int8_systolic.paths import SOURCE


def random_values(rng):
    return {f.name: rng.randint(f.lo, f.hi) for f in FIELDS}


def test_fields_fit_their_words_and_do_not_overlap():
    used = set()
    for f in FIELDS:
        assert 0 <= f.word < WORDS
        assert f.lsb + f.width <= 32, f"{f.name} crosses a word"
        bits = set(range(f.bit, f.bit + f.width))
        assert not bits & used, f"{f.name} overlaps another field"
        used |= bits
    assert len({f.name for f in FIELDS}) == len(FIELDS)
    assert layout().size == 32 * WORDS


def test_pack_unpack_round_trip():
    rng = random.Random(1)
    for _ in range(200):
        values = random_values(rng)
        raw = pack(**values)
        assert len(raw) == 4 * WORDS
        assert unpack(raw) == values


def test_the_amaranth_layout_decodes_what_pack_writes():
    rng = random.Random(2)
    for _ in range(50):
        values = random_values(rng)
        view = layout().from_bits(int.from_bytes(pack(**values), "little"))
        for f in FIELDS:
            assert getattr(view, f.name) == values[f.name], f.name


@pytest.mark.parametrize(("values", "message"), [
    ({"opcode": 1}, r"unknown command field\(s\) opcode"),
    ({"op": "POOL"}, r"op must be one of END, FULLY_CONNECTED"),
    ({"in_h": 0}, r"command field in_h must be an integer in \[1, 65535\], got 0"),
    ({"stride_w": 256}, r"command field stride_w must be an integer in \[1, 255\], got 256"),
    ({"input_zero_point": 128}, r"command field input_zero_point must be an integer in \[-128, 127\], got 128"),
    ({"bypass": True}, r"command field bypass must be an integer in \[0, 1\], got True"),
])
def test_pack_refuses_what_the_descriptor_cannot_hold(values, message):
    with pytest.raises(ValueError, match=message):
        pack(**values)


def test_op_names_pack_to_their_codes():
    assert unpack(pack(op="CONV_2D"))["op"] == OPS["CONV_2D"]


def test_the_page_is_current():
    page = SOURCE / "docs" / "commands.md"
    stale = "docs/commands.md is stale: run `python -m int8_systolic.hw.commands`"
    assert page.read_text() == commands.markdown(), stale


def test_the_c_header_packs_the_same_bytes(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed (make install installs build-essential)"
    (tmp_path / "int8_systolic_commands.h").write_text(commands.c_header())
    rng = random.Random(3)
    cases = [random_values(rng) for _ in range(20)]
    body = []
    for values in cases:
        body.append("    memset(cmd, 0, sizeof cmd);")
        body += [f"    I8E_CMD_SET(cmd, {name.upper()}, {value});" for name, value in values.items()]
        body.append('    for (i = 0; i < I8E_CMD_WORDS; i++)')
        body.append('        printf("%08x", (unsigned)cmd[i]);')
        body.append('    printf("\\n");')
    (tmp_path / "t.c").write_text("\n".join([
        "#include <stdio.h>", "#include <string.h>", '#include "int8_systolic_commands.h"',
        "int main(void) {", "    uint32_t cmd[I8E_CMD_WORDS]; unsigned i;", *body, "    return 0;", "}", ""]))
    build = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(tmp_path / "t"),
                            str(tmp_path / "t.c")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    lines = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout.split()
    for values, line in zip(cases, lines, strict=True):
        words = [int(line[8 * i:8 * i + 8], 16) for i in range(WORDS)]
        assert b"".join(w.to_bytes(4, "little") for w in words) == pack(**values)
