"""A layer's constants computed with one multiplier used in turn, a product a cycle (the window generators' set-up).

:func:`sequential_products` builds the multiplier and its operand selection; :func:`latch_products`, used
in the caller's set-up state, registers each product into ``const[name]``. A product's factors are
geometry fields (``operand(name)``) or earlier products. The multiplier is pipelined (its operands
registered, then its product: :data:`LAG` cycles), so product ``s`` is latched in the cycle ``step`` is
``s + LAG`` and a product may use another only :data:`LAG` + 1 steps later: :func:`check_order` refuses a
list that does not. A set-up therefore takes ``len(products) + LAG`` cycles.
"""

from amaranth import Signal

__all__ = ["LAG", "check_order", "latch_products", "sequential_products"]

LAG = 2


def check_order(products):
    """Raise ValueError unless every product's factors that are products come ``LAG + 1`` steps before it."""
    index = {name: s for s, (name, _, _) in enumerate(products)}
    for s, (name, a, b) in enumerate(products):
        for f in (a, b):
            if f in index and s - index[f] <= LAG:
                raise ValueError(f"product {name!r} (step {s}) uses {f!r} (step {index[f]}): the multiplier's "
                                 f"latency needs {LAG + 1} steps between them")


def sequential_products(m, products, operand, step, *, width=32, factor_width=17):
    """``products``: ``((name, factor, factor), ...)``; returns ``(const, product)``: a register per name, and the
    product of step ``step - LAG``'s factors (``width`` bits, the second factor ``factor_width`` bits)."""
    check_order(products)
    const = {name: Signal(width, name=name) for name, _, _ in products}
    fa, fb = Signal(width), Signal(factor_width)
    with m.Switch(step):
        for s, (_, a, b) in enumerate(products):
            with m.Case(s):
                m.d.sync += [fa.eq(const[a] if a in const else operand(a)),
                             fb.eq(const[b] if b in const else operand(b))]
    product = Signal(width)
    m.d.sync += product.eq(fa * fb)
    return const, product


def latch_products(m, products, const, product, step):
    """In the current (set-up) context: ``const[name] <= product`` when ``step`` is that product's index plus LAG."""
    for s, (name, _, _) in enumerate(products):
        with m.If(step == s + LAG):
            m.d.sync += const[name].eq(product)
