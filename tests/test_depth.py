"""fpga.depth: the estimated delay of a register-to-register path is its cells' and nets' delays (an exact sum on a
netlist written by hand), a carry ripples without routing, and the parts a path crosses are named."""

import math

import pytest

from int8_systolic.fpga import depth


def _netlist(cells, nets):
    return {"modules": {"top": {"cells": cells, "netnames": {n: {"bits": [b], "hide_name": 0}
                                                              for n, b in nets.items()}}}}


def _ff(d, q):
    return {"type": "TRELLIS_FF", "port_directions": {"CLK": "input", "DI": "input", "Q": "output"},
            "connections": {"CLK": [1], "DI": [d], "Q": [q]}}


def _lut(inputs, z):
    pins = dict(zip("ABCD", inputs, strict=False))
    return {"type": "LUT4", "port_directions": {**dict.fromkeys(pins, "input"), "Z": "output"},
            "connections": {**{p: [b] for p, b in pins.items()}, "Z": [z]}}


def _net(fanout):
    return depth.ROUTE_NS + depth.FANOUT_NS * math.sqrt(fanout)


def test_a_path_through_two_parts_is_the_sum_of_its_cells_and_nets():
    # a.q -> b.lut1 -> b.lut2 -> c.d, and a.q also straight into a second register (fanout 2 on a.q)
    cells = {"ff_a": _ff(10, 2), "lut1": _lut([2], 3), "lut2": _lut([3, 2], 4), "ff_c": _ff(4, 5),
             "ff_d": _ff(2, 6)}
    nets = {"a.q": 2, "b.x": 3, "b.y": 4, "c.q": 5, "d.q": 6, "a.d": 10}
    paths = depth.analyse(_netlist(cells, nets), levels=1)
    ns, end, parts = paths[0]
    assert end == "ff_c.DI"
    want = depth.CLK_TO_Q_NS + _net(3) + depth.LUT_NS + _net(1) + depth.LUT_NS + _net(1)
    assert ns == pytest.approx(want)
    assert parts == ["b", "a"]
    # the other endpoints: a.q straight into ff_d (fanout 3: lut1, lut2, ff_d)
    assert {e: t for t, e, _ in paths}["ff_d.DI"] == pytest.approx(depth.CLK_TO_Q_NS + _net(3))


def test_a_carry_ripples_without_routing():
    def ccu(a, cin, s, cout):
        ports = {"A0": a, "CIN": cin}
        return {"type": "CCU2C", "port_directions": {"A0": "input", "CIN": "input", "S0": "output", "COUT": "output"},
                "connections": {**{p: [b] for p, b in ports.items() if b is not None}, "S0": [s], "COUT": [cout]}}
    n = 8
    cells = {"ff_a": _ff(99, 2)}
    nets = {"a.q": 2, "a.d": 99}
    cin = None
    for k in range(n):
        cells[f"c{k}"] = ccu(2, cin, 100 + k, 200 + k)
        nets[f"sum.s{k}"], nets[f"sum.c{k}"] = 100 + k, 200 + k
        cin = 200 + k
    cells["ff_s"] = _ff(100 + n - 1, 300)
    nets["s.q"] = 300
    paths = depth.analyse(_netlist(cells, nets))
    ns, end, _ = paths[0]
    assert end == "ff_s.DI"
    # into the first cell's A0 (a.q loads all eight cells), carry out, six ripples, the last cell's sum
    want = (depth.CLK_TO_Q_NS + _net(n) + depth.LUT_NS + 0.1 + (n - 2) * depth.CARRY_NS + depth.LUT_NS + _net(1))
    assert ns == pytest.approx(want)


def test_a_combinational_loop_is_refused():
    cells = {"l1": _lut([3], 2), "l2": _lut([2], 3), "ff": _ff(3, 4)}
    with pytest.raises(ValueError, match="combinational loop"):
        depth.analyse(_netlist(cells, {"x.a": 2, "x.b": 3, "x.q": 4}))


def test_the_report_counts_what_exceeds_the_target():
    paths = [(9.0, "r1.DI", ["p", "q"]), (7.0, "r2.DI", ["p", "q"]), (4.0, "r3.DI", ["p"])]
    text = depth.format_report(paths, 175)
    assert "3 endpoints; 2 estimated above 5.71 ns (175 MHz); worst 9.0 ns" in text
    assert "| 9.0 | 2 | p <- q |" in text
