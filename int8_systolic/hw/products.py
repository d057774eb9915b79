"""A layer's constants computed with one multiplier used in turn, a product a cycle (the window generators' set-up).

:func:`sequential_products` builds the multiplier and its operand selection; :func:`latch_products`, used
in the caller's set-up state, registers ``product`` into ``const[name]`` in the cycle ``step`` is that
product's index. A product's factors
are geometry fields (``operand(name)``) or earlier products, so the list is in dependency order.
"""

from amaranth import Signal

__all__ = ["latch_products", "sequential_products"]


def sequential_products(m, products, operand, step, *, width=32, factor_width=17):
    """``products``: ``((name, factor, factor), ...)``; returns ``(const, product)``: a register per name, and the
    product of step ``step``'s factors (``width`` bits, the second factor ``factor_width`` bits)."""
    const = {name: Signal(width, name=name) for name, _, _ in products}
    fa, fb = Signal(width), Signal(factor_width)
    with m.Switch(step):
        for s, (_, a, b) in enumerate(products):
            with m.Case(s):
                m.d.comb += [fa.eq(const[a] if a in const else operand(a)),
                             fb.eq(const[b] if b in const else operand(b))]
    product = Signal(width)
    m.d.comb += product.eq(fa * fb)
    return const, product


def latch_products(m, products, const, product, step):
    """In the current (set-up) context: ``const[name] <= product`` when ``step`` is that product's index."""
    for s, (name, _, _) in enumerate(products):
        with m.If(step == s):
            m.d.sync += const[name].eq(product)
