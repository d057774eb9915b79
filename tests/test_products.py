"""hw.products: the set-up multiplier's schedule (a product LAG + 1 steps after the products it uses, list order
kept) and its limits; the products' values are checked through the window generators and the layer check."""

import pytest
from amaranth import Module, Signal

from int8_systolic.hw.products import LAG, schedule, sequential_products, setup_cycles


def test_a_product_waits_for_its_factors():
    products = (("a", "x", "y"), ("b", "x", "z"), ("c", "a", "y"), ("d", "y", "z"), ("e", "c", "b"))
    steps = schedule(products)
    assert steps == {"a": 0, "b": 1, "c": LAG + 1, "d": LAG + 2, "e": 2 * LAG + 2}
    assert setup_cycles(products) == 2 * LAG + 2 + LAG + 1


def test_independent_products_take_a_step_each():
    products = tuple((f"p{k}", "x", "y") for k in range(5))
    assert list(schedule(products).values()) == list(range(5))
    assert setup_cycles(products) == 5 + LAG


def test_wider_products_refused():
    m = Module()
    m._MustUse__silence = True      # refused before anything is built into it
    with pytest.raises(ValueError, match="at most 32 x 17 bits, got width 40"):
        sequential_products(m, (("a", "x", "y"),), lambda name: Signal(8), Signal(4), width=40)
