"""hw.command_fetch alone in Amaranth's simulator: command lists packed by hw.commands.pack in a Python memory, the
read port served with random delays; MAC commands come out decoded and indexed, END and BARRIER stop the list
(the next go resumes after a barrier), and a bad command stops it with its error bit and index."""

import random

import pytest

from int8_systolic.hw import commands
from int8_systolic.hw.command_fetch import ERRORS, CommandFetch
from int8_systolic.sim.amaranth_bench import simulate

BASE = 0x1000


def conv(**kw):
    fields = {"op": "CONV_2D", "input_addr": 0x8000, "weights_addr": 0x2000, "table_addr": 0x3000,
              "output_addr": 0x9000, "in_h": 8, "in_w": 8, "in_c": 16, "batch": 1, "out_h": 8, "out_w": 8,
              "out_c": 16, "depth_multiplier": 1, "kernel_h": 3, "kernel_w": 3, "stride_h": 1, "stride_w": 1,
              "dilation_h": 1, "dilation_w": 1, "pad_top": 1, "pad_left": 1, "input_zero_point": -3,
              "output_zero_point": 5, "act_min": -128, "act_max": 127}
    fields.update(kw)
    return commands.pack(**fields)


def with_field(raw, name, value):
    """``raw`` with one field set to ``value`` directly in its bits (pack refuses values below a field's minimum,
    which is what a hostile list holds)."""
    f = next(f for f in commands.FIELDS if f.name == name)
    bits = int.from_bytes(raw, "little")
    bits = bits & ~(((1 << f.width) - 1) << f.bit) | (value & ((1 << f.width) - 1)) << f.bit
    return bits.to_bytes(len(raw), "little")


def run(dut, image, gos, rng, cycles=3000, window=None):
    """Serve the read port from ``image`` (bytes at BASE); pulse go at the cycles in ``gos``; return the events."""
    nbytes = dut.data_width // 8
    events = []

    async def bench(ctx):
        ctx.set(dut.list_addr, BASE)
        ctx.set(dut.win_base, BASE if window is None else window[0])
        ctx.set(dut.win_limit, BASE + len(image) if window is None else window[1])
        beats, delay, last_error = [], 0, 0
        for t in range(cycles):
            ctx.set(dut.go, t in gos)
            ctx.set(dut.rd_cmd.ready, not beats and rng.random() < 0.7)
            if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                p = ctx.get(dut.rd_cmd.payload)
                off = p["addr"] - BASE
                chunk = image[off:off + p["length"]]
                beats = [chunk[i:i + nbytes] for i in range(0, len(chunk), nbytes)]
                delay = rng.randint(1, 6)
            offer = bool(beats) and delay == 0 and rng.random() < 0.8
            delay = max(0, delay - 1)
            ctx.set(dut.rd_data.valid, offer)
            if offer:
                ctx.set(dut.rd_data.payload, {"data": int.from_bytes(beats[0], "little"), "last": len(beats) == 1})
                if ctx.get(dut.rd_data.ready):
                    beats.pop(0)
            ready = rng.random() < 0.6
            ctx.set(dut.desc.ready, ready)
            if ready and ctx.get(dut.desc.valid):
                events.append(("desc", ctx.get(dut.desc.payload)["index"]))
            await ctx.tick()
            if ctx.get(dut.done):
                events.append(("done",))
            if ctx.get(dut.barrier):
                events.append(("barrier", ctx.get(dut.next_addr)))
            error = ctx.get(dut.error)
            if error and error != last_error:     # (error holds until the next go)
                events.append(("error", error, ctx.get(dut.error_index)))
            last_error = error

    simulate(dut, bench)
    return events


def descs(events):
    return [e for e in events if e[0] == "desc"]


@pytest.mark.parametrize("data_width", [32, 64, 128])
def test_a_list_comes_out_decoded_in_order_and_ends(data_width):
    rng = random.Random(data_width)
    cmds = [conv(in_c=16 + i, out_c=8 * (i + 1), input_zero_point=-i) for i in range(4)]
    image = b"".join(cmds) + commands.pack(op="END")
    dut = CommandFetch(data_width)
    events = run(dut, image, {2}, rng)
    got = descs(events)
    assert [e[1] for e in got] == [0, 1, 2, 3]
    assert [e for e in events if e[0] != "desc"] == [("done",)]


def test_the_decoded_fields_are_the_packed_ones():
    """The desc payload viewed through hw.commands.layout holds exactly the packed fields."""
    rng = random.Random(7)
    cmd = conv(in_h=31, pad_left=2, input_zero_point=-128, act_max=100)
    dut = CommandFetch(64)
    seen = []

    async def bench(ctx):
        ctx.set(dut.list_addr, BASE)
        image = cmd + commands.pack(op="END")
        ctx.set(dut.win_base, BASE)
        ctx.set(dut.win_limit, BASE + len(image))
        beats = []
        for t in range(400):
            ctx.set(dut.go, t == 1)
            ctx.set(dut.rd_cmd.ready, not beats)
            if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                p = ctx.get(dut.rd_cmd.payload)
                chunk = image[p["addr"] - BASE:p["addr"] - BASE + p["length"]]
                beats = [chunk[i:i + 8] for i in range(0, len(chunk), 8)]
            ctx.set(dut.rd_data.valid, bool(beats))
            if beats:
                ctx.set(dut.rd_data.payload, {"data": int.from_bytes(beats[0], "little"), "last": len(beats) == 1})
                if ctx.get(dut.rd_data.ready):
                    beats.pop(0)
            ctx.set(dut.desc.ready, rng.random() < 0.5)
            if ctx.get(dut.desc.valid) and ctx.get(dut.desc.ready):
                c = ctx.get(dut.desc.payload)["command"]
                seen.append({f.name: int(getattr(c, f.name)) for f in commands.FIELDS})
            await ctx.tick()

    simulate(dut, bench)
    assert seen == [commands.unpack(cmd)]


def test_a_barrier_stops_the_list_and_go_resumes_after_it():
    rng = random.Random(3)
    image = conv() + commands.pack(op="BARRIER") + conv(in_c=3) + commands.pack(op="END")
    dut = CommandFetch(64)
    events = run(dut, image, {2, 600}, rng)
    kinds = [e[0] for e in events]
    assert kinds == ["desc", "barrier", "desc", "done"], events
    assert events[1] == ("barrier", BASE + 128)
    assert [e[1] for e in descs(events)] == [0, 2]


@pytest.mark.parametrize(("bad", "error"), [
    (commands.pack(op=7), "BAD_OP"),
    (with_field(conv(), "in_h", 0), "BAD_FIELD"),
    (with_field(conv(), "stride_w", 0), "BAD_FIELD"),
    (with_field(conv(), "depth_multiplier", 0), "BAD_FIELD"),
    (with_field(conv(), "out_c", 0), "BAD_FIELD"),
])
def test_a_bad_command_stops_the_list_with_its_index(bad, error):
    rng = random.Random(5)
    image = conv() + conv() + bad + conv() + commands.pack(op="END")
    dut = CommandFetch(64)
    events = run(dut, image, {2}, rng)
    assert [e[1] for e in descs(events)] == [0, 1]
    assert [e for e in events if e[0] != "desc"] == [("error", 1 << ERRORS[error], 2)]


@pytest.mark.parametrize(("window", "index"), [
    ((BASE, BASE + 2 * 64 + 63), 2),      # the third command runs past the window's end
    ((BASE + 8, BASE + 4096), 0),          # the list starts below the window
])
def test_a_list_outside_the_window_stops_before_the_read(window, index):
    rng = random.Random(6)
    image = conv() + conv() + conv() + commands.pack(op="END")
    dut = CommandFetch(64)
    events = run(dut, image, {2}, rng, window=window)
    assert [e[1] for e in descs(events)] == list(range(index))
    assert [e for e in events if e[0] != "desc"] == [("error", 1 << ERRORS["LIST"], index)]


def test_a_misaligned_list_is_refused():
    dut = CommandFetch(64)

    async def bench(ctx):
        ctx.set(dut.list_addr, BASE + 4)
        ctx.set(dut.win_base, 0)
        ctx.set(dut.win_limit, 1 << 32)
        ctx.set(dut.go, 1)
        await ctx.tick()
        ctx.set(dut.go, 0)
        for _ in range(5):
            assert not ctx.get(dut.rd_cmd.valid)
            await ctx.tick()
        assert ctx.get(dut.error) == 1 << ERRORS["LIST"]
        assert not ctx.get(dut.busy)

    simulate(dut, bench)


def test_parameters_refused():
    with pytest.raises(ValueError, match="data_width must be 32, 64 or 128"):
        CommandFetch(16)
