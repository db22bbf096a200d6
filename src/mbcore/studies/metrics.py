"""Summary metrics of a case: ``NAME=EXPR`` reductions of result columns.

A metric is a small expression over the columns of a case's result (named as the
result names them: ``channel/label``, e.g. ``reactions/O2.i.fx``, a bare label, a
one-column channel, or ``t``; a name with other characters is quoted:
``"forces/my-spring.force"``) that reduces to one number::

    max_reaction = max(abs(reactions/O2.i.fx))
    final_energy = last(energy/total)
    phi_at_1_5   = at(q/crank.phi, 1.5)
    settle       = rms(window(q/crank.phi, 2, 3)) / 2

Grammar (a dedicated recursive-descent parser; nothing is ever evaluated as Python)::

    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := ("-" | "+") unary | power
    power  := atom ("**" unary)?
    atom   := NUMBER | COLUMN | STRING | NAME "(" expr ("," expr)* ")" | "(" expr ")"

Every sub-expression is a *series* (a column over time) or a *scalar*; the kinds are
checked when the metric is parsed, so ``q/crank.phi`` alone (a series) or ``max(2)``
are errors before anything runs.  Reductions (series -> scalar): ``max min mean rms
std first last integral argmax argmin`` (``argmax``/``argmin``: the time of the
extreme) and ``at(x, t)`` (linear interpolation at time ``t``).  Element-wise: ``abs
sqrt exp log log10 sin cos tan``, ``atan2(y, x)``, ``hypot(a, b)`` and the two-argument
``max(a, b)``/``min(a, b)``.  ``window(x, t0, t1)`` keeps the rows with t0 <= t <= t1.
Division directly after a column name needs spaces (``energy/total / 2``): the
unspaced ``/`` belongs to the column name.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ModelError

__all__ = ["Metric", "MetricError", "ColumnError", "parse_metric", "parse_metrics",
           "evaluate", "FUNCTIONS", "RESERVED"]

MAX_LENGTH = 1000


class MetricError(ModelError):
    """A metric cannot be parsed or evaluated; ``path`` is ``metrics.NAME``."""


class ColumnError(MetricError):
    """A metric names a column the case's result does not have."""


#: name -> (argument kinds, result kind); "s" series, "c" scalar, "x" either
_REDUCTIONS = ("max", "min", "mean", "rms", "std", "first", "last", "integral",
               "argmax", "argmin")
_ELEMENTWISE1 = {"abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
                 "log10": np.log10, "sin": np.sin, "cos": np.cos, "tan": np.tan}
_ELEMENTWISE2 = ("atan2", "hypot", "max", "min")
FUNCTIONS = tuple(sorted(set(_REDUCTIONS) | set(_ELEMENTWISE1) | set(_ELEMENTWISE2)
                         | {"at", "window"}))
#: column names of the study index (a metric may not take one of them)
RESERVED = ("case", "file", "status", "error", "wall_time", "key")

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"[^"]*"|'[^']*')
  | (?P<name>[A-Za-z_][\w.]*(?:[/:]\w[\w.]*)?)
  | (?P<op>\*\*|[-+*/(),])
""", re.VERBOSE)


@dataclass(frozen=True)
class Node:
    """A parsed sub-expression: ``op`` (num, col, neg, + - * / **, or a function
    name), ``args``, ``value`` (number or column name), ``kind`` (series/scalar)."""

    op: str
    args: tuple = ()
    value: Any = None
    kind: str = "scalar"
    pos: int = 0


@dataclass(frozen=True)
class Metric:
    """A parsed metric: ``name``, its ``text`` and syntax tree."""

    name: str
    text: str
    tree: Node

    def columns(self) -> list[str]:
        """The result columns the metric reads."""
        out: list[str] = []

        def walk(n: Node) -> None:
            if n.op == "col" and n.value not in out:
                out.append(n.value)
            for a in n.args:
                walk(a)
        walk(self.tree)
        return out

    def __call__(self, result) -> float:
        return evaluate(self, result)


class _Parser:
    def __init__(self, name: str, text: str):
        self.name, self.text = name, text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                self.fail(f"unexpected character {text[pos]!r}", pos)
            if m.lastgroup != "ws":
                self.tokens.append((m.lastgroup, m.group(), pos))
            pos = m.end()
        self.tokens.append(("end", "", len(text)))
        self.i = 0

    def fail(self, message: str, pos: int):
        raise MetricError(f"metrics.{self.name}",
                          f"{message} at position {pos + 1} of '{self.text}'")

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        kind, text, pos = self.take()
        if text != value or kind != "op":
            self.fail(f"expected '{value}', found {text!r}" if text else
                      f"expected '{value}', found the end", pos)

    def parse(self) -> Node:
        node = self.expr()
        kind, text, pos = self.peek()
        if kind != "end":
            self.fail(f"unexpected {text!r}", pos)
        if node.kind != "scalar":
            self.fail("the metric is a series, not a number: reduce it with one of " +
                      ", ".join(_REDUCTIONS) + " or at(x, t)", 0)
        return node

    def binary(self, op: str, a: Node, b: Node, pos: int) -> Node:
        kind = "series" if "series" in (a.kind, b.kind) else "scalar"
        return Node(op, (a, b), kind=kind, pos=pos)

    def expr(self) -> Node:
        node = self.term()
        while self.peek()[1] in ("+", "-") and self.peek()[0] == "op":
            _, op, pos = self.take()
            node = self.binary(op, node, self.term(), pos)
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek()[1] in ("*", "/") and self.peek()[0] == "op":
            _, op, pos = self.take()
            node = self.binary(op, node, self.unary(), pos)
        return node

    def unary(self) -> Node:
        kind, text, pos = self.peek()
        if kind == "op" and text in ("-", "+"):
            self.take()
            inner = self.unary()
            return inner if text == "+" else Node("neg", (inner,), kind=inner.kind, pos=pos)
        return self.power()

    def power(self) -> Node:
        node = self.atom()
        if self.peek()[1] == "**":
            _, _, pos = self.take()
            node = self.binary("**", node, self.unary(), pos)
        return node

    def atom(self) -> Node:
        kind, text, pos = self.take()
        if kind == "num":
            return Node("num", value=float(text), pos=pos)
        if kind == "str":
            if len(text) == 2:
                self.fail("empty column name", pos)
            return Node("col", value=text[1:-1], kind="series", pos=pos)
        if kind == "op" and text == "(":
            node = self.expr()
            self.expect(")")
            return node
        if kind == "name":
            if self.peek()[1] == "(" and self.peek()[0] == "op":
                return self.call(text, pos)
            return Node("col", value=text, kind="series", pos=pos)
        self.fail(f"unexpected {text!r}" if text else "unexpected end", pos)

    def call(self, fname: str, pos: int) -> Node:
        self.take()                          # "("
        if fname not in FUNCTIONS:
            close = difflib.get_close_matches(fname, FUNCTIONS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else \
                f" (functions: {', '.join(FUNCTIONS)})"
            self.fail(f"unknown function '{fname}'{hint}", pos)
        args = [self.expr()]
        while self.peek()[1] == ",":
            self.take()
            args.append(self.expr())
        self.expect(")")
        return self.check_call(fname, tuple(args), pos)

    def check_call(self, f: str, args: tuple, pos: int) -> Node:
        n = len(args)
        kinds = [a.kind for a in args]

        def need(count: int, sig: str) -> None:
            if n != count:
                self.fail(f"{f}() takes {count} argument{'s' if count > 1 else ''} "
                          f"({f}({sig})), got {n}", pos)

        if f in ("max", "min") and n == 2:
            return Node(f + "2", args, kind="series" if "series" in kinds else "scalar",
                        pos=pos)
        if f in _REDUCTIONS:
            need(1, "x" if f not in ("max", "min") else "x) or " + f + "(a, b")
            if kinds[0] != "series":
                self.fail(f"{f}() reduces a series (a column), got a number", pos)
            return Node(f, args, pos=pos)
        if f == "at":
            need(2, "x, t")
            if kinds != ["series", "scalar"]:
                self.fail("at(x, t) takes a series and a time", pos)
            return Node(f, args, pos=pos)
        if f == "window":
            need(3, "x, t0, t1")
            if kinds != ["series", "scalar", "scalar"]:
                self.fail("window(x, t0, t1) takes a series and two times", pos)
            return Node(f, args, kind="series", pos=pos)
        if f in _ELEMENTWISE1:
            need(1, "x")
            return Node(f, args, kind=kinds[0], pos=pos)
        need(2, "a, b")
        return Node(f, args, kind="series" if "series" in kinds else "scalar", pos=pos)


_NAME = re.compile(r"[A-Za-z_]\w*\Z")


def parse_metric(name: str, text: str) -> Metric:
    """Parse ``text`` as the metric ``name``; :class:`MetricError` naming it."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise MetricError(f"metrics.{name}", "a metric name is a letter or '_' followed "
                                             "by letters, digits or '_'")
    if name in RESERVED:
        raise MetricError(f"metrics.{name}", f"'{name}' is a column of the index; "
                                             f"choose another name")
    if not isinstance(text, str) or not text.strip():
        raise MetricError(f"metrics.{name}", "empty expression")
    if len(text) > MAX_LENGTH:
        raise MetricError(f"metrics.{name}", f"longer than {MAX_LENGTH} characters")
    return Metric(name, text.strip(), _Parser(name, text.strip()).parse())


def parse_metrics(spec: Mapping[str, str] | Sequence[str] | None) -> list[Metric]:
    """Metrics from ``{name: expr}`` or a sequence of ``"NAME=EXPR"`` strings (or of
    parsed :class:`Metric`)."""
    if spec is None:
        return []
    items: list[tuple[str, str]] = []
    out: list[Metric] = []
    if isinstance(spec, Mapping):
        items = [(str(k), v) for k, v in spec.items()]
    else:
        for s in spec:
            if isinstance(s, Metric):
                out.append(s)
                continue
            name, eq, text = str(s).partition("=")
            if not eq:
                raise MetricError(f"metrics.{name.strip()}", "expected NAME=EXPR, e.g. "
                                  "max_force=max(abs(reactions/O2.i.fx))")
            items.append((name.strip(), text))
    out += [parse_metric(n, t) for n, t in items]
    seen: set[str] = set()
    for m in out:
        if m.name in seen:
            raise MetricError(f"metrics.{m.name}", "defined twice")
        seen.add(m.name)
    return out


# --------------------------------------------------------------------- evaluation
class _Series:
    __slots__ = ("t", "y")

    def __init__(self, t: np.ndarray, y: np.ndarray):
        self.t, self.y = t, y


def evaluate(metric: Metric, result) -> float:
    """The value of ``metric`` on ``result`` (a :class:`mbcore.Result` or
    MemoryResult); :class:`ColumnError` for an unknown column, :class:`MetricError`
    for a reduction of no rows or a time outside the run."""
    cache: dict[str, _Series] = {}
    with np.errstate(all="ignore"):
        value = _eval(metric, metric.tree, result, cache)
    return float(value)


def _column(metric: Metric, node: Node, result, cache) -> _Series:
    name = node.value
    if name not in cache:
        from ..results.result import ResultKeyError
        t = np.asarray(result.t, dtype=float)
        if name == "t":
            cache[name] = _Series(t, t)
            return cache[name]
        try:
            y = np.asarray(result[name], dtype=float)
        except ResultKeyError as exc:
            raise ColumnError(f"metrics.{metric.name}", str(exc)) from None
        if y.ndim == 2:
            if y.shape[1] != 1:
                raise ColumnError(f"metrics.{metric.name}",
                                  f"'{name}' is a channel of {y.shape[1]} columns; name one "
                                  f"(e.g. {name}/{result.labels(name)[0]})")
            y = y[:, 0]
        cache[name] = _Series(t, y)
    return cache[name]


def _fail(metric: Metric, message: str):
    raise MetricError(f"metrics.{metric.name}", message)


def _same_rows(metric: Metric, a: Any, b: Any) -> np.ndarray | None:
    ta = a.t if isinstance(a, _Series) else None
    tb = b.t if isinstance(b, _Series) else None
    if ta is not None and tb is not None and ta is not tb and \
            (len(ta) != len(tb) or not np.array_equal(ta, tb)):
        _fail(metric, "combines series of different time windows")
    return ta if ta is not None else tb


def _val(x: Any) -> Any:
    return x.y if isinstance(x, _Series) else x


_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
           "**": np.power, "atan2": np.arctan2, "hypot": np.hypot, "max2": np.maximum,
           "min2": np.minimum}


def _eval(metric: Metric, node: Node, result, cache) -> Any:
    op = node.op
    if op == "num":
        return node.value
    if op == "col":
        return _column(metric, node, result, cache)
    args = [_eval(metric, a, result, cache) for a in node.args]
    if op == "neg":
        return _wrap(args[0], np.negative(_val(args[0])))
    if op in _BINARY:
        t = _same_rows(metric, args[0], args[1])
        y = _BINARY[op](_val(args[0]), _val(args[1]))
        return _Series(t, y) if t is not None else float(y)
    if op in _ELEMENTWISE1:
        return _wrap(args[0], _ELEMENTWISE1[op](_val(args[0])))
    if op == "window":
        s, t0, t1 = args
        keep = (s.t >= t0) & (s.t <= t1)
        return _Series(s.t[keep], s.y[keep])
    s = args[0]
    if len(s.y) == 0:
        _fail(metric, f"{op}() of a series with no rows")
    if op == "at":
        t = float(args[1])
        if not s.t[0] <= t <= s.t[-1]:
            _fail(metric, f"at(): time {t:g} is outside the result's {s.t[0]:g} .. "
                          f"{s.t[-1]:g}")
        return float(np.interp(t, s.t, s.y))
    return _reduce(op, s)


def _wrap(like: Any, y: Any) -> Any:
    return _Series(like.t, y) if isinstance(like, _Series) else float(y)


def _reduce(op: str, s: _Series) -> float:
    y = s.y
    if op == "max":
        return float(np.max(y))
    if op == "min":
        return float(np.min(y))
    if op == "mean":
        return float(np.mean(y))
    if op == "rms":
        return float(np.sqrt(np.mean(y * y)))
    if op == "std":
        return float(np.std(y))
    if op == "first":
        return float(y[0])
    if op == "last":
        return float(y[-1])
    if op == "integral":
        return float(np.trapezoid(y, s.t)) if len(y) > 1 else 0.0
    if op == "argmax":
        return float(s.t[int(np.argmax(y))])
    return float(s.t[int(np.argmin(y))])          # argmin
