"""hw.axi_lite.AxiLiteSlave alone in Amaranth's simulator: a random AXI4-Lite master on one side, a small
register file on the other (both the test's), every output checked in every cycle against a model
of the module docstring's contract.

The contract: BVALID comes ``write_latency`` + 1 cycles after the cycle in which both AW and W have
been accepted, RVALID ``read_latency`` + 2 cycles after AR's; both are held with their payloads until
BREADY/RREADY takes them and never wait for those. The block answers a write's ``w_err`` in the cycle
of its ``w_stb`` and a read's ``r_data``/``r_err`` ``read_latency`` cycles after its ``r_stb``, and the
VALIDs are the registered answers, so the strobes come one cycle before the answers are taken into
BRESP/RDATA: ``w_stb`` ``write_latency`` cycles after acceptance, ``r_stb`` one after. With
``write_latency`` >= 2, ``w_pre`` comes the cycle before ``w_stb``; ``w_addr``/``w_data`` are the
write's from ``write_latency`` - 1 cycles before ``w_stb`` until its response is taken. A write whose
WSTRB is not all ones gives no ``w_stb`` (nor ``w_pre``), ``w_partial`` in its place, and SLVERR; a
``w_err`` or ``r_err`` answer gives SLVERR, otherwise OKAY. One write and one read are outstanding at
most (from acceptance to the response's handshake); a write and a read may overlap.

The master runs writes and reads independently, each AXI channel presenting its next item after a
random gap and holding it until its handshake, so AW comes before W, after it or with it, and the
next access is offered while the last is still outstanding; BREADY and RREADY are random, with long
stretches low. Partial WSTRBs, unmapped and read-only addresses are mixed in. The register file
drives junk on ``w_err``, ``r_data`` and ``r_err`` in every cycle it is not answering, so an answer taken
in the wrong cycle shows. ``w_pre`` is only defined with ``write_latency`` >= 2, and is not checked at 1.
"""

import random

import pytest

from int8_systolic.hw.axi_lite import AxiLiteSlave
from int8_systolic.sim.amaranth_bench import simulate

OKAY, SLVERR = 0b00, 0b10
# The module docstring's latencies: BVALID write_latency + B_AFTER cycles after AW and W are accepted,
# RVALID read_latency + R_AFTER after AR; BRESP/RDATA are the block's answers registered (ANSWER_REG).
B_AFTER, R_AFTER, ANSWER_REG = 1, 2, 1
PRE_LEAD = 1   # w_pre comes the cycle before w_stb

WRITABLE = range(0x00, 0x20, 4)   # the test's register file: eight read/write words,
READ_ONLY = (0x20, 0x24)          # two read-only ones (a write answers w_err); everything else unmapped


def random_addr(rng):
    pick = rng.random()
    if pick < 0.7:
        return rng.choice(WRITABLE)
    if pick < 0.85:
        return rng.choice(READ_ONLY)
    return rng.choice((0x28, 0x40, 0xFFC, 4 * rng.randrange(1 << 10)))


def random_gap(rng):
    pick = rng.random()
    return 0 if pick < 0.45 else rng.randint(1, 3) if pick < 0.85 else rng.randint(4, 12)


class Channel:
    """One master channel: presents its items in order, each after a random gap, holding it until taken."""

    def __init__(self, rng, items):
        self.rng, self.items, self.next, self.valid, self.wait = rng, items, 0, False, random_gap(rng)
        self.raised = {}   # item -> cycle its VALID went up

    def drive(self, t):
        if not self.valid and self.next < len(self.items):
            if self.wait == 0:
                self.valid = True
                self.raised[self.next] = t
            else:
                self.wait -= 1
        return self.items[self.next] if self.valid else None

    def taken(self):
        self.valid, self.next, self.wait = False, self.next + 1, random_gap(self.rng)


def run_axi(dut, seed, n_writes=300, n_reads=300):
    """Run random writes and reads through ``dut``; check every cycle; return coverage counts."""
    rng = random.Random(seed)
    WL, RL = dut.write_latency, dut.read_latency
    p = dut.p
    writes = [(random_addr(rng), rng.getrandbits(32), 0xF if rng.random() < 0.8 else rng.randrange(0xF),
               rng.randrange(8)) for _ in range(n_writes)]
    reads = [(random_addr(rng), rng.randrange(8)) for _ in range(n_reads)]
    aw, w, ar = Channel(rng, writes), Channel(rng, writes), Channel(rng, reads)
    cover = dict.fromkeys(("aw_first", "w_first", "together", "partial", "w_err", "r_err", "b_held", "r_held",
                           "overlap", "refused_busy_w", "refused_busy_r"), 0)
    budget = 40 * (n_writes + n_reads) + 500

    async def bench(ctx):
        regs = {a: rng.getrandbits(32) for a in (*WRITABLE, *READ_ONLY)}
        aw_at, w_at = {}, {}        # write -> cycle of its AW / W handshake
        wr = None                   # the write outstanding: dict of its expected cycles, or None
        rd = None                   # the read outstanding
        w_done = r_done = 0         # responses taken
        answers = {}                # cycle -> (r_data, r_err) the register file drove
        block_reads = []            # (cycle to answer, address) as the register file saw r_stb
        p_b = p_r = 1.0
        for t in range(budget):
            if w_done == n_writes and r_done == n_reads:
                break
            if t % 37 == 0:   # BREADY/RREADY probabilities change now and then: sometimes long stretches low
                p_b, p_r = rng.choice((1.0, 0.7, 0.3, 0.05)), rng.choice((1.0, 0.7, 0.3, 0.05))
            # -- master: AW, W, AR held until taken; BREADY, RREADY random
            wa, wd, ra = aw.drive(t), w.drive(t), ar.drive(t)
            ctx.set(p("awvalid"), wa is not None)
            ctx.set(p("awaddr"), wa[0] if wa else rng.getrandbits(dut.addr_width))
            ctx.set(p("awprot"), wa[3] if wa else rng.randrange(8))
            ctx.set(p("wvalid"), wd is not None)
            ctx.set(p("wdata"), wd[1] if wd else rng.getrandbits(32))
            ctx.set(p("wstrb"), wd[2] if wd else rng.randrange(16))
            ctx.set(p("arvalid"), ra is not None)
            ctx.set(p("araddr"), ra[0] if ra else rng.getrandbits(dut.addr_width))
            ctx.set(p("arprot"), ra[1] if ra else rng.randrange(8))
            bready, rready = rng.random() < p_b, rng.random() < p_r
            ctx.set(p("bready"), bready)
            ctx.set(p("rready"), rready)

            # -- register side: the strobes and what goes with them
            w_pre, w_stb, w_partial = ctx.get(dut.w_pre), ctx.get(dut.w_stb), ctx.get(dut.w_partial)
            w_addr, w_data = ctx.get(dut.w_addr), ctx.get(dut.w_data)
            r_stb, r_addr = ctx.get(dut.r_stb), ctx.get(dut.r_addr)
            if wr is not None:
                want_stb = wr["full"] and t == wr["stb"]
                assert w_stb == want_stb, f"cycle {t}: w_stb {w_stb} for the write accepted in cycle {wr['acc']}"
                assert w_partial == (not wr["full"] and t == wr["stb"]), f"cycle {t}: w_partial {w_partial}"
                if WL >= 2:
                    assert w_pre == (wr["full"] and t == wr["stb"] - PRE_LEAD), f"cycle {t}: w_pre {w_pre}"
                if wr["full"] and t >= wr["stb"] - (WL - 1):   # until the response is taken (below)
                    assert (w_addr, w_data) == (wr["addr"], wr["data"]), (
                        f"cycle {t}: w_addr/w_data {w_addr:#x}/{w_data:#x}, want {wr['addr']:#x}/{wr['data']:#x}")
            else:
                assert (w_stb, w_partial) == (0, 0), f"cycle {t}: a strobe with no write accepted"
                if WL >= 2:
                    assert w_pre == 0, f"cycle {t}: w_pre with no write accepted"
            if rd is not None and t == rd["stb"]:
                assert r_stb == 1, f"cycle {t}: no r_stb for the read accepted in cycle {rd['acc']}"
                assert r_addr == rd["addr"], f"cycle {t}: r_addr {r_addr:#x}, want {rd['addr']:#x}"
            else:
                assert r_stb == 0, f"cycle {t}: an r_stb not due"

            # -- the register file: answers in the strobe's cycle / read_latency after it, junk otherwise
            if w_stb:
                w_err = w_addr not in WRITABLE
                if not w_err:
                    regs[w_addr] = w_data
            else:
                w_err = rng.random() < 0.5
            ctx.set(dut.w_err, w_err)
            if r_stb:
                block_reads.append((t + RL, r_addr))
            if block_reads and block_reads[0][0] == t:
                a = block_reads.pop(0)[1]
                answers[t] = (regs.get(a, 0), a not in regs)
            else:
                answers[t] = (rng.getrandbits(32), rng.random() < 0.5)
            ctx.set(dut.r_data, answers[t][0])
            ctx.set(dut.r_err, answers[t][1])
            if wr is not None and t == wr["stb"]:
                wr["resp"] = SLVERR if not wr["full"] or w_err else OKAY
                if wr["full"]:   # (end to end: the register file's own decode of the write's address)
                    assert w_err == (wr["addr"] not in WRITABLE)

            # -- AXI outputs
            awready, wready, arready = ctx.get(p("awready")), ctx.get(p("wready")), ctx.get(p("arready"))
            bvalid, bresp = ctx.get(p("bvalid")), ctx.get(p("bresp"))
            rvalid, rdata, rresp = ctx.get(p("rvalid")), ctx.get(p("rdata")), ctx.get(p("rresp"))
            want_b = wr is not None and t >= wr["b"]
            assert bvalid == want_b, f"cycle {t}: BVALID {bvalid}, want {int(want_b)}"
            if want_b:
                assert bresp == wr["resp"], f"cycle {t}: BRESP {bresp}, want {wr['resp']}"
            want_r = rd is not None and t >= rd["r"]
            assert rvalid == want_r, f"cycle {t}: RVALID {rvalid}, want {int(want_r)}"
            if want_r:
                data, err = answers[rd["r"] - ANSWER_REG]
                assert (rdata, rresp) == (data, SLVERR if err else OKAY), (
                    f"cycle {t}: RDATA/RRESP {rdata:#x}/{rresp}, want {data:#x}/{SLVERR if err else OKAY}")

            # -- handshakes, and the model's next state (a response taken in this cycle lets the next
            # access of its kind be accepted in this cycle too: the contract counts them outstanding
            # from acceptance to the response's handshake)
            cover["b_held"] += want_b and not bready
            cover["r_held"] += want_r and not rready
            cover["overlap"] += wr is not None and rd is not None
            if want_b and bready:
                wr = None
                w_done += 1
            if want_r and rready:
                rd = None
                r_done += 1
            # AW and W are for write w_done (the one to accept next) only when nothing is outstanding
            for name, chan, item, ready, at in (("AW", aw, wa, awready, aw_at), ("W", w, wd, wready, w_at)):
                if item is None:
                    continue
                free = wr is None and chan.next == w_done
                assert free or not ready, f"cycle {t}: {name} of write {chan.next} taken, write {w_done} outstanding"
                cover["refused_busy_w"] += not free
                if ready:
                    at[chan.next] = t
                    chan.taken()
            k = w_done
            if wr is None and k in aw_at and k in w_at:
                acc = max(aw_at[k], w_at[k])
                addr, data, strb, _ = writes[k]
                wr = {"acc": acc, "stb": acc + WL + B_AFTER - ANSWER_REG, "b": acc + WL + B_AFTER, "full": strb == 0xF,
                      "addr": addr, "data": data}
                first_aw, first_w = aw.raised[k], w.raised[k]
                cover["aw_first" if first_aw < first_w else "w_first" if first_w < first_aw else "together"] += 1
                cover["partial"] += strb != 0xF
                cover["w_err"] += strb == 0xF and addr not in WRITABLE
            if ra is not None:
                assert rd is None or not arready, f"cycle {t}: AR taken with a read outstanding"
                cover["refused_busy_r"] += rd is not None
                if arready:
                    rd = {"acc": t, "stb": t + R_AFTER - ANSWER_REG, "r": t + RL + R_AFTER, "addr": ra[0]}
                    cover["r_err"] += ra[0] not in regs
                    ar.taken()
            await ctx.tick()
        else:
            raise AssertionError(f"timed out after {budget} cycles: {w_done} of {n_writes} writes, "
                                 f"{r_done} of {n_reads} reads answered")

    simulate(dut, bench)
    return cover


@pytest.mark.parametrize("write_latency", [1, 2, 3])
@pytest.mark.parametrize("read_latency", [0, 1, 3])
def test_axi_lite_slave_against_contract(seed, write_latency, read_latency):
    """BVALID write_latency + 1 and RVALID read_latency + 2 cycles after acceptance, held with their
    payloads until taken; w_stb/w_pre/w_partial/r_stb when due and never otherwise, w_addr/w_data held
    until the response is taken, r_data/r_err taken read_latency after r_stb; SLVERR for a partial
    WSTRB, w_err and r_err; one write and one read outstanding at most, under random AW/W/AR timing and
    BREADY/RREADY backpressure."""
    dut = AxiLiteSlave(read_latency=read_latency, write_latency=write_latency)
    cover = run_axi(dut, seed * 100 + write_latency * 10 + read_latency)
    for name, n in cover.items():
        assert n >= 5, f"stimulus reached {name} only {n} times: {cover}"


def test_axi_lite_slave_refuses_write_latency_outside_1_to_3():
    for bad in (0, 4):
        with pytest.raises(ValueError, match=rf"write_latency must be 1, 2 or 3, got {bad}"):
            AxiLiteSlave(write_latency=bad)
