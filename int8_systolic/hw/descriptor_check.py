"""The descriptor check: the staged DESC_* registers checked and turned into what the scheduler queues.

Contract: ``staged`` holds the DESC_* registers' fields (:data:`staged_layout`). From them the
check keeps, in register stages, the scheduler's descriptor (:func:`hw.gemm_scheduler.descriptor_layout`:
the fields, ``end`` = base + n_tiles, the tile counts - 1 and whether each is 1, and whether the
output stage equals the one last queued) and four checks (K = 0, no column or row tiles, a table
range past ``max_col_tiles``, ACT_MIN > ACT_MAX). They are current :attr:`DescriptorCheck.SETTLE`
cycles after ``staged`` (or a push) changes, so at a DESC_PUSH strobe: register writes are at
least five cycles apart (:attr:`hw.register_block.RegisterBlock.WRITE_LATENCY`).

At ``push_req`` (the DESC_PUSH strobe) each failed check, and ``full`` (the queue), raises its bit
of ``errors`` for that cycle; if none does, ``push`` (a register) asks the scheduler to queue
``desc`` in the next cycle (``staged`` holds: no write comes before then).
"""

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .gemm_scheduler import descriptor_layout
from .pipeline import KEEP_APART
from .register_block import register_layout
from .registers import reg

__all__ = ["ERRORS", "DescriptorCheck", "staged_layout"]

# The ERROR bits the check raises (hw.registers.ERROR_BITS), in the order of `errors`.
ERRORS = ("DESC_K", "DESC_TILES", "DESC_TABLE", "DESC_BOUNDS", "QUEUE_FULL")


def staged_layout():
    """The DESC_* registers' fields, as the register block holds them."""
    return data.StructLayout({
        "k": reg("DESC_K").field("K").width, "n_tiles": reg("DESC_N_TILES").field("N_TILES").width,
        "m_tiles": reg("DESC_M_TILES").field("M_TILES").width, "base": reg("DESC_TABLE_BASE").field("BASE").width,
        "output": register_layout(reg("DESC_OUTPUT")), "depthwise": 1})


class DescriptorCheck(wiring.Component):
    """Checks and completes the staged descriptor (see the module docstring)."""

    SETTLE = 3  # cycles from a change of `staged` or a push to the checks and `desc` being current

    def __init__(self, max_col_tiles):
        self.max_col_tiles = max_col_tiles
        super().__init__({
            "staged": In(staged_layout()), "push_req": In(1), "full": In(1),
            "desc": Out(descriptor_layout(max_col_tiles)), "push": Out(1),
            "errors": Out(data.StructLayout({name.lower(): 1 for name in ERRORS})),
        })

    def elaborate(self, platform):
        m = Module()
        st, desc = self.staged, self.desc
        out = {f: st.output[f] for f in ("output_offset", "act_min", "act_max", "bypass")}
        # Stage 1: copies of the fields beside the checks (the staging registers sit by the bus).
        checked = {"k": st.k, "n": st.n_tiles, "mt": st.m_tiles, "base": st.base,
                   "act_min": out["act_min"].as_unsigned(), "act_max": out["act_max"].as_unsigned()}
        chk = {name: Signal.like(v, attrs=KEEP_APART, name=f"dup_chk_{name}", reset_less=True)
               for name, v in checked.items()}
        m.d.sync += [chk[name].eq(v) for name, v in checked.items()]

        def nibbles_equal(value, const, name):
            """A register per four bits of ``value``: whether they equal ``const``'s."""
            flags = Signal(-(-len(value) // 4), name=name, reset_less=True)
            m.d.sync += flags.eq(Cat(value[i:i + 4] == (const >> i) & 0xF for i in range(0, len(value), 4)))
            return flags

        # Stage 2: the counts - 1, `end`, the bounds' difference, and each field's compares with 0
        # and 1 by groups of four bits. Stage 3: the checks and the flags for counts of 1.
        k0, n0, mt0 = (nibbles_equal(chk[f], 0, f"chk_{f}_is0") for f in ("k", "n", "mt"))
        n1, mt1 = (nibbles_equal(chk[f], 1, f"chk_{f}_is1") for f in ("n", "mt"))
        end = Signal(17, reset_less=True)
        bounds = Signal(signed(9), reset_less=True)
        counts = {"m_m1": Signal(24, reset_less=True), "n_m1": Signal(16, reset_less=True),
                  "m_one": Signal(reset_less=True), "n_one": Signal(reset_less=True)}
        m.d.sync += [end.eq(chk["base"] + chk["n"]),
                     bounds.eq(chk["act_max"].as_signed() - chk["act_min"].as_signed()),
                     counts["m_m1"].eq(chk["mt"] - 1), counts["n_m1"].eq(chk["n"] - 1)]
        bad = {name: Signal(name=f"bad_{name.lower()}") for name in ERRORS[:4]}
        m.d.sync += [bad["DESC_K"].eq(k0.all()), bad["DESC_TILES"].eq(n0.all() | mt0.all()),
                     bad["DESC_TABLE"].eq(end > self.max_col_tiles), bad["DESC_BOUNDS"].eq(bounds < 0),
                     counts["m_one"].eq(mt1.all()), counts["n_one"].eq(n1.all())]
        m.d.comb += [desc.k.eq(st.k), desc.n_tiles.eq(st.n_tiles), desc.base.eq(st.base), desc.end.eq(end),
                     desc.depthwise.eq(st.depthwise), *(getattr(desc, f).eq(v) for f, v in counts.items()),
                     *(getattr(desc, f).eq(v) for f, v in out.items())]

        # Whether the staged output stage is that of the descriptor last queued (the scheduler
        # launches the GEMMs of one output stage without draining): a register per two bits of the
        # compare, from copies of the staging registers and of the last queued stage, then their AND.
        out_bits = Cat(*out.values())
        last_out = Signal(len(out_bits), name="last_queued_output")
        with m.If(self.push):
            m.d.sync += last_out.eq(out_bits)
        chk_out = Signal(len(out_bits), reset_less=True, attrs=KEEP_APART, name="dup_chk_output")
        m.d.sync += chk_out.eq(out_bits)
        out_eq = Signal(-(-len(out_bits) // 2), reset_less=True, name="chk_output_eq")
        m.d.sync += out_eq.eq(Cat(chk_out[i:i + 2] == last_out[i:i + 2] for i in range(0, len(out_bits), 2)))
        same_output = Signal(reset_less=True, name="chk_same_output")
        m.d.sync += same_output.eq(out_eq.all())
        m.d.comb += desc.same_output.eq(same_output)

        refused = {**bad, "QUEUE_FULL": self.full}
        with m.If(self.push_req):
            m.d.comb += [getattr(self.errors, name.lower()).eq(cond) for name, cond in refused.items()]
        m.d.sync += self.push.eq(self.push_req & ~Cat(*refused.values()).any())
        return m
