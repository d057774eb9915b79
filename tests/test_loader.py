"""hw.loader in Amaranth's simulator: a copy's beats, given by a read port with random gaps, land at consecutive
buffer addresses from 0 with every byte strobed, ``loaded`` counting them; the copy is asked for in commands of at
most ``chunk`` bytes, in order; done pulses once, after the last write."""

import random

import pytest

from int8_systolic.hw.depthwise_gen import InputLayout
from int8_systolic.hw.loader import Loader
from int8_systolic.sim.amaranth_bench import simulate


@pytest.mark.parametrize(("data_width", "buffer_width", "chunk", "pixel", "pitch", "pairs", "split"),
                         [(64, 8, 64, 0, 0, False, None), (32, 8, 256, 0, 0, False, None),
                          (128, 16, 32, 0, 0, False, None), (64, 8, 64, 16, 24, False, None),
                          (128, 16, 64, 32, 40, False, None), (32, 8, 256, 64, 72, False, None),
                          (64, 16, 64, 0, 0, True, None), (64, 16, 64, 24, 40, True, None),
                          (32, 16, 256, 8, 12, True, None),
                          (64, 8, 64, 16, 24, False, (1, 1)), (64, 16, 64, 8, 8, True, (0, 1)),
                          (128, 16, 64, 32, 40, False, (1, 0)), (32, 16, 256, 8, 12, True, (1, 1))])
def test_beats_land_in_order(data_width, buffer_width, chunk, pixel, pitch, pairs, split):
    """Linear copies; spread ones (a depthwise input: each pixel of ``pixel`` bytes at ``pitch``); split ones (a
    stride-2 depthwise input: the pixels of random batches and odd or even heights and widths where
    hw.depthwise_gen.InputLayout puts them); with ``pairs``, two beats a write where they land together. The buffer
    (a model of the 4 KB the addresses reach) holds every beat at its place at the end; ``loaded`` counts the bytes
    written and every byte of the first ``filled / pitch`` pixels (every byte below ``filled``, for a linear copy) is
    written, at every write."""
    rng = random.Random(data_width + pitch + pairs + 3 * bool(split))
    dut = Loader(data_width, buffer_width=buffer_width, addr_width=12, chunk=chunk, pairs=pairs)
    nbytes = data_width // 8
    if split:
        shapes = [(rng.randint(1, 2), rng.randint(1, 5), rng.randint(1, 6)) for _ in range(3)]
        copies = [(rng.randrange(0, 1 << 20) * nbytes, b * h * w * pixel) for b, h, w in shapes]
    else:
        shapes = [(1, 1, 1)] * 3
        copies = [(rng.randrange(0, 1 << 20) * nbytes, rng.randint(1, 40) * (pixel or nbytes)) for _ in range(3)]
    seen = {"cmds": [], "writes": []}

    def places(shape, length):
        """Each beat's place: linear, at the pitch, or where the split layout puts its pixel."""
        if not pitch:
            return [n * nbytes for n in range(length // nbytes)]
        _, h, w = shape
        layout = InputLayout(h, w, pitch, *(split or (0, 0)))
        where = [layout.address(p // (h * w), p // w % h, p % w) if split else p * pitch
                 for p in range(length // pixel)]
        return [where[n * nbytes // pixel] + n * nbytes % pixel for n in range(length // nbytes)]

    def pixels_in(filled, written, shape, length):
        """Every byte below ``filled`` written (a linear copy), or every byte of the first filled / pitch pixels."""
        if not pitch:
            return all(a in written for a in range(filled))
        beat_places = places(shape, length)
        first = [beat_places[n] for n in range(0, length // nbytes, pixel // nbytes)]
        return all(first[p] + j in written for p in range(filled // pitch) for j in range(pixel))

    async def bench(ctx):
        for (addr, length), shape in zip(copies, shapes, strict=True):
            if split:
                layout = InputLayout(shape[1], shape[2], pitch, *split)
                ctx.set(dut.in_h, shape[1])
                ctx.set(dut.in_w, shape[2])
                ctx.set(dut.split_h, split[0])
                ctx.set(dut.split_w, split[1])
                ctx.set(dut.row_bytes, layout.row_bytes)
                ctx.set(dut.odd_w, layout.odd_w)
            beats = [rng.getrandbits(data_width) for _ in range(length // nbytes)]
            owed = 0          # beats of the commands taken, not yet given
            ctx.set(dut.addr, addr)
            ctx.set(dut.length, length)
            ctx.set(dut.pixel, pixel)
            ctx.set(dut.pitch, pitch)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            writes, done_at = [], None
            all_beats = list(beats)
            buf, written = bytearray(1 << 12), set()
            last_w_filled = None
            for t in range(2000):
                ctx.set(dut.rd_cmd.ready, rng.random() < 0.5)
                offer = owed > 0 and rng.random() < 0.7
                ctx.set(dut.rd_data.valid, offer)
                if offer:
                    ctx.set(dut.rd_data.payload, {"data": beats[0], "last": 0})
                if ctx.get(dut.rd_cmd.valid) and ctx.get(dut.rd_cmd.ready):
                    cmd = ctx.get(dut.rd_cmd.payload)
                    seen["cmds"].append((cmd["addr"], cmd["length"]))
                    owed += cmd["length"] // nbytes
                hold = rng.random() < 0.2
                ctx.set(dut.hold, hold)
                if hold:
                    assert not ctx.get(dut.rd_data.ready), "a beat taken while held"
                if offer and ctx.get(dut.rd_data.ready):
                    beats.pop(0)
                    owed -= 1
                if ctx.get(dut.w_en):
                    assert ctx.get(dut.loaded) == len(written)
                    assert pixels_in(ctx.get(dut.filled), written, shape, length)
                    w_addr, w_data, w_strb = ctx.get(dut.w_addr), ctx.get(dut.w_data), ctx.get(dut.w_strb)
                    writes.append((w_addr, w_data, w_strb))
                    for j in range(buffer_width):
                        if w_strb >> j & 1:
                            buf[(w_addr + j) % (1 << 12)] = w_data >> 8 * j & 0xFF
                            written.add(w_addr + j)
                    # and below `w_filled` once this write is in
                    last_w_filled = ctx.get(dut.w_filled)
                    assert pixels_in(last_w_filled, written, shape, length)
                if ctx.get(dut.done):
                    assert done_at is None
                    done_at = t
                await ctx.tick()
                if done_at is not None and t > done_at + 3:
                    break
            assert not beats
            assert done_at is not None
            assert not ctx.get(dut.busy)
            assert ctx.get(dut.loaded) == length
            assert ctx.get(dut.filled) == (length if not pitch else length // pixel * pitch)
            assert last_w_filled == ctx.get(dut.filled)
            for n, (beat, place) in enumerate(zip(all_beats, places(shape, length), strict=True)):
                got = int.from_bytes(bytes(buf[(place + j) % (1 << 12)] for j in range(nbytes)), "little")
                assert got == beat, f"beat {n} at {place}"
            seen["writes"].append(writes)

    simulate(dut, bench)
    # each copy asked for in commands of at most `chunk` bytes, in order
    want = [(addr + o, min(chunk, length - o)) for addr, length in copies for o in range(0, length, chunk)]
    assert seen["cmds"] == want
    for (_, length), shape, writes in zip(copies, shapes, seen["writes"], strict=True):
        # a write is one beat, or two (pairs) that land together
        strobes = {w[2] for w in writes}
        assert strobes <= ({(1 << nbytes) - 1, (1 << 2 * nbytes) - 1} if pairs else {(1 << nbytes) - 1})
        if not pairs:
            assert [w[0] for w in writes] == [a % (1 << 12) for a in places(shape, length)]
        elif length // (pixel or nbytes) > 4 and (pixel or 2 * nbytes) >= 2 * nbytes:
            assert (1 << 2 * nbytes) - 1 in strobes, "no two beats written together"


def test_pairs_take_the_write_port_every_other_cycle():
    """A copy at the port's rate (a beat every cycle) with ``pairs``: half as many writes as beats, each in the
    cycle its second beat comes, so another writer has the port every other cycle."""
    dut = Loader(64, buffer_width=16, addr_width=12, chunk=256, pairs=True)
    beats = 32

    async def bench(ctx):
        ctx.set(dut.addr, 0)
        ctx.set(dut.length, beats * 8)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.rd_cmd.ready, 1)
        writes = given = 0
        for _ in range(beats + 5):
            ctx.set(dut.rd_data.valid, given < beats)
            ctx.set(dut.rd_data.payload, {"data": given, "last": 0})
            if given < beats and ctx.get(dut.rd_data.ready):
                given += 1
            writes += ctx.get(dut.w_en)
            await ctx.tick()
        assert (given, writes) == (beats, beats // 2)
        assert ctx.get(dut.filled) == beats * 8

    simulate(dut, bench)


def test_parameters_refused():
    with pytest.raises(ValueError, match="at least a beat"):
        Loader(128, buffer_width=8)
    with pytest.raises(ValueError, match="chunk a power of two"):
        Loader(64, chunk=100)


def test_a_throttled_copy_asks_only_for_what_fits_the_room():
    """``throttle``: a command is asked for only when it and the bytes asked but not yet written fit ``room`` (the
    stacker's FIFO: its free bytes, falling a cycle after each beat written into it, rising as it is read at
    random), so no beat waits in the read port; unthrottled, the room is ignored."""
    rng = random.Random(5)
    dut = Loader(64, buffer_width=16, addr_width=12, chunk=64, throttle=True)
    length = 64 * 9

    async def bench(ctx):
        for throttled in (1, 0):
            owed, asked, written = 0, 0, 0
            ctx.set(dut.addr, 0x1000)
            ctx.set(dut.length, length)
            ctx.set(dut.throttled, throttled)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            peak, level, cap = 0, 0, 200
            for _ in range(3000):
                room = cap - level
                ctx.set(dut.room, room)
                ctx.set(dut.rd_cmd.ready, 1)
                offer = owed > 0 and rng.random() < 0.5
                ctx.set(dut.rd_data.valid, offer)
                ctx.set(dut.rd_data.payload, {"data": 0, "last": 0})
                if ctx.get(dut.rd_cmd.valid):
                    n = ctx.get(dut.rd_cmd.payload)["length"]
                    if throttled:
                        assert asked - written + n <= room, "a command asked for past the room"
                    asked += n
                    owed += n // 8
                took = offer and ctx.get(dut.rd_data.ready)
                if took:
                    owed -= 1
                    written += 8
                peak = max(peak, asked - written)
                await ctx.tick()
                level = max(0, level + 8 * took - 8 * (rng.random() < 0.3))
                if not ctx.get(dut.busy):
                    break
            assert written == length
            if not throttled:
                assert peak > 200, "unthrottled, the room is not a bound"

    simulate(dut, bench)
