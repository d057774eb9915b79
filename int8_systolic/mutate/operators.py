"""Mutants of the Amaranth RTL sources: a small AST mutator that knows Amaranth's idioms.

Each mutant is one change to one expression or statement of the code that describes hardware:
the ``elaborate`` methods, the module-level helpers they call (any function taking ``m``), the
properties and class constants that size or time the design, and the module-level layouts.
Refusal code (``__init__``, ``model``, ``name``), docstrings, strings (signal names, attributes)
and assertions are left alone: they do not describe hardware.

Operators (:data:`OPERATORS`):

* ``binop``: ``+``/``-``, ``&``/``|``, ``^`` -> ``|``, ``<<``/``>>``;
* ``compare``: ``==``/``!=``, ``<``/``<=``, ``>``/``>=``;
* ``constant``: an integer n -> n + 1 and n - 1 (widths, depths, latencies, bit positions);
* ``invert``: ``~x`` -> ``x``, ``-x`` -> ``x``, a condition of ``m.If``/``m.Elif`` -> its negation;
* ``mux``: ``Mux(s, a, b)`` -> ``Mux(s, b, a)``;
* ``slice``: ``x[a:b]`` -> ``x[a:b - 1]`` and ``x[a + 1:b]`` (a narrowed slice);
* ``boolop``: ``and``/``or``;
* ``drop``: an ``m.d.<domain> += ...`` statement removed, and each element of a list it adds.

A mutant's id names its file, function, operator, the source text before and after, and the
occurrence of that text in the function (``int8_systolic/hw/array.py::MACCell.elaborate::mux::Mux(idle, 0, acc[bits])
-> Mux(idle, acc[bits], 0)#0``): stable when unrelated lines move, readable in a review.
"""

import ast
import dataclasses
import pathlib

__all__ = ["OPERATORS", "Mutant", "mutants"]

OPERATORS = ("binop", "compare", "constant", "invert", "mux", "slice", "boolop", "drop")

_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr,
          ast.LShift: ast.RShift, ast.RShift: ast.LShift}
_COMPARE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
            ast.GtE: ast.Gt}
_SKIP_FUNCTIONS = {"__init__", "model", "name", "__repr__"}


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    file: str         # path relative to the repository
    line: int
    operator: str
    before: str
    after: str
    source: str       # the whole mutated file

    def diff(self):
        return f"{self.file}:{self.line}: {self.before}  ->  {self.after}"


class _Lines:
    """Offsets of a source's lines, to splice text at AST positions."""

    def __init__(self, text):
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line.encode()))
        self.raw = text.encode()

    def span(self, node):
        return (self.starts[node.lineno - 1] + node.col_offset, self.starts[node.end_lineno - 1] + node.end_col_offset)

    def segment(self, node):
        a, b = self.span(node)
        return self.raw[a:b].decode()

    def splice(self, node, new):
        a, b = self.span(node)
        return (self.raw[:a] + new.encode() + self.raw[b:]).decode()


def _is_m_domain_add(stmt):
    """``m.d.<domain> += value``"""
    t = stmt.target if isinstance(stmt, ast.AugAssign) else None
    return (t is not None and isinstance(stmt.op, ast.Add) and isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Attribute) and t.value.attr == "d")


def _is_call(node, name):
    f = node.func if isinstance(node, ast.Call) else None
    return f is not None and ((isinstance(f, ast.Name) and f.id == name)
                              or (isinstance(f, ast.Attribute) and f.attr == name))


def _scopes(tree):
    """(qualified name, node) of the code that describes hardware (see the module docstring)."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and not any(isinstance(t, ast.Name) and t.id == "__all__"
                                                    for t in node.targets):
            out.append(("<module>", node))
        elif isinstance(node, ast.FunctionDef) and node.name not in _SKIP_FUNCTIONS:
            if (node.args.args and node.args.args[0].arg == "m") or (node.name.startswith("_") and node.args.args):
                out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.Assign):
                    out.append((node.name, item))
                elif isinstance(item, ast.FunctionDef) and item.name not in _SKIP_FUNCTIONS:
                    decorated = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
                    if item.name == "elaborate" or decorated or item.name in ("in_bank", "_multiplier"):
                        out.append((f"{node.name}.{item.name}", item))
    return out


def _skip(node, parents):
    """Code inside a scope that is not hardware: docstrings, asserts, raises, strings."""
    return any(isinstance(p, (ast.Assert, ast.Raise, ast.JoinedStr)) for p in parents)


def _walk(node, parents=()):
    yield node, parents
    for child in ast.iter_child_nodes(node):
        yield from _walk(child, (*parents, node))


def _candidates(node, parents, lines):
    """(operator, replacement text) for one node; the replacement takes the node's source span."""
    def unparse(n):
        return ast.unparse(n)

    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        yield "binop", f"({unparse(ast.BinOp(node.left, _BINOP[type(node.op)](), node.right))})"
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        yield "compare", f"({unparse(ast.Compare(node.left, [_COMPARE[type(node.ops[0])]()], node.comparators))})"
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        parent = parents[-1] if parents else None
        if not (isinstance(parent, ast.keyword) and parent.arg in ("name",)):
            yield "constant", str(node.value + 1)
            yield "constant", f"({node.value - 1})"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.USub)):
        yield "invert", f"({unparse(node.operand)})"
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", f"({unparse(ast.BoolOp(other, node.values))})"
    elif isinstance(node, ast.Call) and _is_call(node, "Mux") and len(node.args) == 3:
        s, a, b = node.args
        yield "mux", unparse(ast.Call(node.func, [s, b, a], []))
    elif (isinstance(node, ast.Call) and (_is_call(node, "If") or _is_call(node, "Elif")) and len(node.args) == 1
          and isinstance(node.func, ast.Attribute)):
        yield "invert", unparse(ast.Call(node.func, [ast.UnaryOp(ast.Invert(), node.args[0])], []))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.upper is not None:
        sl = node.slice
        upper = ast.BinOp(sl.upper, ast.Sub(), ast.Constant(1))
        yield "slice", unparse(ast.Subscript(node.value, ast.Slice(sl.lower, upper, sl.step)))
        lower = ast.BinOp(sl.lower, ast.Add(), ast.Constant(1)) if sl.lower is not None else ast.Constant(1)
        yield "slice", unparse(ast.Subscript(node.value, ast.Slice(lower, sl.upper, sl.step)))


def mutants(path, root):
    """Every mutant of one source file (``path`` under ``root``), in source order."""
    path = pathlib.Path(path)
    rel = str(path.resolve().relative_to(pathlib.Path(root).resolve()))
    text = path.read_text()
    lines = _Lines(text)
    tree = ast.parse(text)
    out, seen = [], {}

    def add(scope, op, node, after, line):
        before = lines.segment(node)
        key = f"{rel}::{scope}::{op}::{' '.join(before.split())} -> {' '.join(after.split())}"
        n = seen.get(key, 0)
        seen[key] = n + 1
        source = lines.splice(node, after)
        out.append(Mutant(f"{key}#{n}", rel, line, op, " ".join(before.split()), " ".join(after.split()), source))

    for scope, top in _scopes(tree):
        for node, parents in _walk(top):
            if node is not top and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue                                     # a docstring
            if _skip(node, parents) or isinstance(node, (ast.Assert, ast.Raise)):
                continue
            if any(isinstance(p, ast.Expr) and isinstance(p.value, ast.Constant) for p in parents):
                continue
            if isinstance(node, ast.AugAssign) and _is_m_domain_add(node):
                add(scope, "drop", node, "pass", node.lineno)
                if isinstance(node.value, ast.List) and len(node.value.elts) > 1:
                    for k in range(len(node.value.elts)):
                        rest = node.value.elts[:k] + node.value.elts[k + 1:]
                        add(scope, "drop", node.value, ast.unparse(ast.List(rest)), node.lineno)
            if not isinstance(node, ast.expr):
                continue
            for op, after in _candidates(node, parents, lines):
                add(scope, op, node, after, node.lineno)
    # every mutant must still be Python
    for mut in out:
        compile(mut.source, rel, "exec")
    return out
