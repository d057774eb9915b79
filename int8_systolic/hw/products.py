"""A layer's constants computed with one multiplier used in turn, a product a step (the engine's set-ups).

A product's factors are operands (``operand(name)``: geometry or command fields) or earlier products.
The multiplier is pipelined for the clock: its operands registered, then two
:class:`hw.multiplier.Multiplier` (the first factor's two 16-bit halves times the second factor, the
DSP blocks' own registers), then their sum: :data:`LAG` cycles from a step to its product. So a
product that uses another is issued :data:`LAG` + 1 steps after it at the earliest:
:func:`schedule` gives each product its step (in list order, leaving gaps where a product waits
for its factor), and :func:`setup_cycles` the cycles a set-up takes.

:func:`sequential_products` builds the multiplier and its operand selection; :func:`latch_products`,
used in the caller's set-up state (``step`` counting from 0), registers each product into
``const[name]`` in the cycle ``step`` is its step plus LAG.
"""

from amaranth import Cat, Const, Mux, Signal

from .multiplier import Multiplier

__all__ = ["LAG", "latch_products", "schedule", "sequential_products", "setup_cycles"]

# the step's selection registered (one-hot), the operands registered, the multiplier, the halves summed
LAG = 2 + Multiplier.latency_of(1) + 1
_HALF = 16


def _and_or(m, sel, values, width):
    """The OR of ``values[n]`` (each assigned to ``width`` bits, extended as an assignment would) where ``sel[n]``
    is set: a multiplexer for a one-hot ``sel``."""
    out = Const(0, width)
    for n, v in enumerate(values):
        fitted = Signal(width, name=f"operand{n}")
        m.d.comb += fitted.eq(v)
        out = out | (fitted & sel[n].replicate(width))
    return out


def schedule(products):
    """``{name: step}``: each product at the first step after the previous one's that is LAG + 1 steps after its
    factors' steps (the list is in dependency order)."""
    steps, t = {}, 0
    for name, a, b in products:
        ready = max([steps[f] + LAG + 1 for f in (a, b) if f in steps], default=0)
        t = max(t, ready)
        steps[name] = t
        t += 1
    return steps


def setup_cycles(products):
    """Set-up cycles until every product is latched (the last's step, then LAG)."""
    return max(schedule(products).values()) + LAG + 1


def sequential_products(m, products, operand, step, *, dsp="generic", width=32, factor_width=17, saturate=False):
    """``products``: ``((name, factor, factor), ...)``; returns ``(const, product)``: a register per name, and the
    product of step ``step - LAG``'s factors (``width`` bits; with ``saturate``, ``2**width - 1`` when it does not
    fit, else its low bits). The first factor is up to 32 bits, the second ``factor_width`` (at most 17)."""
    if width > 2 * _HALF or factor_width > 17:
        raise ValueError(f"products are at most 32 x 17 bits, got width {width}, factor_width {factor_width}")
    steps = schedule(products)
    const = {name: Signal(width, name=name) for name, _, _ in products}
    fa, fb = Signal(2 * _HALF), Signal(factor_width)
    # the operands by a one-hot selection registered from ``step`` (an AND-OR a few LUTs deep, not a decoder and
    # a wide multiplexer in one cycle); a step with no product selects zero
    sel = Signal(len(products))
    m.d.sync += sel.eq(Cat(step == steps[name] for name, _, _ in products))
    pick = lambda k: const[k] if k in const else operand(k)  # noqa: E731
    m.d.sync += [fa.eq(_and_or(m, sel, [pick(a) for _, a, _ in products], 2 * _HALF)),
                 fb.eq(_and_or(m, sel, [pick(b) for _, _, b in products], factor_width))]
    halves = []
    for k in range(2):
        mul = m.submodules[f"product_{'lh'[k]}"] = Multiplier(_HALF + 1, 18, dsp=dsp)
        m.d.comb += [mul.a.eq(fa[k * _HALF:(k + 1) * _HALF]), mul.b.eq(fb), mul.en.eq(1)]
        halves.append(mul.p)
    full = Signal(2 * _HALF + factor_width)
    m.d.sync += full.eq(halves[0].as_unsigned() + Cat(Const(0, _HALF), halves[1].as_unsigned()))
    product = Signal(width)
    if saturate:
        m.d.comb += product.eq(Mux(full[width:].any(), (1 << width) - 1, full[:width]))
    else:
        m.d.comb += product.eq(full[:width])
    return const, product


def latch_products(m, products, const, product, step):
    """In the current (set-up) context: ``const[name] <= product`` when ``step`` is that product's step plus LAG."""
    for name, s in schedule(products).items():
        with m.If(step == s + LAG):
            m.d.sync += const[name].eq(product)
