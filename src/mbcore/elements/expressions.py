"""Safe arithmetic expressions of time, used as driver functions.

Model files are data, so expression text is never handed to ``eval``/``exec``: it is
parsed with :func:`ast.parse` (``mode="eval"``, which only builds a syntax tree) and the
tree is checked against a small whitelist (numbers, ``t``, ``pi``, ``e``, named
parameters, ``+ - * / **``, and calls of the functions in :data:`FUNCTIONS`).  The tree is
then compiled to a flat postfix (RPN) :class:`Program` — an ``int`` code array and a
``float`` constant array — that both the pure-Python reference VM (:meth:`Program.run`)
and the compiled evaluator (``mbcore._ext._functions``) execute on second-order jets
``(value, d/dt, d²/dt²)``.

Code layout: each instruction is one opcode, followed by one inline operand for
``CONST`` (index into the constant array), ``POWI`` (integer exponent) and ``POWK``
(index of the real exponent in the constant array).  Every other opcode pops its
operands from the jet stack and pushes one result.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from numbers import Real
from typing import Mapping

from ..errors import ModelError

__all__ = [
    "MAX_LENGTH", "MAX_DEPTH", "OPCODES", "FUNCTIONS", "CONSTANTS", "ERROR_CODES",
    "Program", "DomainFault", "compile_expression", "fault_message",
]

MAX_LENGTH = 2000      # characters of expression text
MAX_DEPTH = 100        # nesting levels of the syntax tree (operator chains count once)
MAX_POWI = 1 << 20     # largest |n| compiled as an integer power

# --- opcodes (keep in sync with ext/_functions.pyx; a test checks) -----------------
OP_CONST = 1    # operand: constant index
OP_T = 2
OP_NEG = 3
OP_ADD = 4
OP_SUB = 5
OP_MUL = 6
OP_DIV = 7
OP_POW = 8      # general x**y = exp(y log x)
OP_POWI = 9     # operand: integer exponent n
OP_POWK = 10    # operand: constant index of a real exponent p
OP_SIN = 20
OP_COS = 21
OP_TAN = 22
OP_ASIN = 23
OP_ACOS = 24
OP_ATAN = 25
OP_SINH = 26
OP_COSH = 27
OP_TANH = 28
OP_EXP = 29
OP_LOG = 30
OP_LOG10 = 31
OP_SQRT = 32
OP_ABS = 33
OP_ATAN2 = 40
OP_MIN = 41
OP_MAX = 42

OPCODES: dict[str, int] = {
    name[3:]: value for name, value in globals().items()
    if name.startswith("OP_") and isinstance(value, int)
}
_OPNAME = {v: k.lower() for k, v in OPCODES.items()}
_WITH_OPERAND = (OP_CONST, OP_POWI, OP_POWK)

# whitelisted functions: name -> (opcode, arity)
FUNCTIONS: dict[str, tuple[int, int]] = {
    "sin": (OP_SIN, 1), "cos": (OP_COS, 1), "tan": (OP_TAN, 1),
    "asin": (OP_ASIN, 1), "acos": (OP_ACOS, 1), "atan": (OP_ATAN, 1),
    "atan2": (OP_ATAN2, 2),
    "sinh": (OP_SINH, 1), "cosh": (OP_COSH, 1), "tanh": (OP_TANH, 1),
    "exp": (OP_EXP, 1), "log": (OP_LOG, 1), "log10": (OP_LOG10, 1),
    "sqrt": (OP_SQRT, 1), "abs": (OP_ABS, 1),
    "min": (OP_MIN, 2), "max": (OP_MAX, 2),
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
RESERVED = frozenset({"t", *CONSTANTS})

# --- evaluation error codes (shared with the compiled evaluator) --------------------
ERR_OK = 0
ERR_TIME = 1        # the time is not finite
ERR_RANGE = 2       # outside a table's range with extrapolate: error
ERR_DOMAIN = 3      # an operation's argument is outside its domain (op says which)
ERR_NONFINITE = 4   # the value or a derivative overflowed
ERROR_CODES = {"OK": ERR_OK, "TIME": ERR_TIME, "RANGE": ERR_RANGE,
               "DOMAIN": ERR_DOMAIN, "NONFINITE": ERR_NONFINITE}

LN10 = 2.302585092994045684    # same double as math.log(10)

_BINOPS = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL, ast.Div: OP_DIV,
           ast.Pow: OP_POW}
_BAD_BINOPS = {ast.FloorDiv: "//", ast.Mod: "%", ast.MatMult: "@", ast.BitXor: "^",
               ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>"}
_CONSTRUCTS = {
    "Attribute": "attribute access", "Subscript": "a subscript", "Slice": "a slice",
    "Lambda": "a lambda", "Compare": "a comparison", "BoolOp": "a boolean operator",
    "IfExp": "a conditional expression", "ListComp": "a comprehension",
    "SetComp": "a comprehension", "DictComp": "a comprehension",
    "GeneratorExp": "a generator expression", "List": "a list", "Tuple": "a tuple",
    "Set": "a set", "Dict": "a dict", "JoinedStr": "an f-string",
    "FormattedValue": "an f-string", "NamedExpr": "an assignment expression (:=)",
    "Starred": "a starred argument", "Await": "await", "Yield": "yield",
    "YieldFrom": "yield",
}


class DomainFault(Exception):
    """Raised by the reference VM: an evaluation error ``(code, op, value)``."""

    def __init__(self, code: int, op: int = 0, value: float = 0.0):
        super().__init__(code, op, value)
        self.code, self.op, self.value = code, op, value


def fault_message(code: int, op: int, value: float) -> str:
    """Human-readable reason of an expression evaluation error."""
    if code == ERR_NONFINITE:
        return "the value or a derivative is not finite (overflow)"
    if code == ERR_TIME:
        return f"the time t = {value!r} is not finite"
    if code != ERR_DOMAIN:
        return f"evaluation error {code}"
    v = f"{value:.9g}"
    name = _OPNAME.get(op, str(op))
    if op == OP_DIV:
        return "division by zero"
    if op == OP_POWI:
        return "0 raised to a negative power"
    if op == OP_POWK:
        return (f"x**p with a non-integer exponent needs x > 0, or x = 0 with p > 2 "
                f"(got x = {v})")
    if op == OP_POW:
        return f"x**y with a variable exponent needs x > 0 (got x = {v})"
    if op in (OP_LOG, OP_LOG10):
        return f"{name}(x) needs x > 0 (got x = {v})"
    if op == OP_SQRT:
        return f"sqrt(x) needs x > 0 (its derivative is infinite at 0; got x = {v})"
    if op in (OP_ASIN, OP_ACOS):
        return f"{name}(x) needs -1 < x < 1 for finite derivatives (got x = {v})"
    if op == OP_ATAN2:
        return "atan2(0, 0) is undefined"
    if op == OP_TAN:
        return f"tan(x) at a pole (x = {v})"
    return f"{name}({v}) is outside its domain"


# --- the reference VM -----------------------------------------------------------------
# math.exp/sinh/cosh/pow raise OverflowError where C returns +-inf; these wrappers
# return what C does, so both backends fail the same way (ERR_NONFINITE at the end).

def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sinh(x: float) -> float:
    try:
        return math.sinh(x)
    except OverflowError:
        return math.copysign(math.inf, x)


def _cosh(x: float) -> float:
    try:
        return math.cosh(x)
    except OverflowError:
        return math.inf


def _pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except OverflowError:
        odd = y == math.floor(y) and math.fmod(y, 2.0) != 0.0
        return math.copysign(math.inf, x) if odd else math.inf


def _unary(op: int, x: float) -> tuple[float, float, float]:
    """(f(x), f'(x), f''(x)) of a smooth unary function; raises DomainFault."""
    if op <= OP_TAN and math.isinf(x):    # C gives NaN here, math raises
        return math.nan, math.nan, math.nan
    if op == OP_SIN:
        s, c = math.sin(x), math.cos(x)
        return s, c, -s
    if op == OP_COS:
        s, c = math.sin(x), math.cos(x)
        return c, -s, -c
    if op == OP_TAN:
        if math.cos(x) == 0.0:
            raise DomainFault(ERR_DOMAIN, op, x)
        tn = math.tan(x)
        sec2 = 1.0 + tn * tn
        return tn, sec2, 2.0 * tn * sec2
    if op == OP_ASIN or op == OP_ACOS:
        if not -1.0 < x < 1.0:
            raise DomainFault(ERR_DOMAIN, op, x)
        r = 1.0 - x * x
        q = 1.0 / math.sqrt(r)
        if op == OP_ASIN:
            return math.asin(x), q, x * q / r
        return math.acos(x), -q, -(x * q / r)
    if op == OP_ATAN:
        r = 1.0 / (1.0 + x * x)
        return math.atan(x), r, -2.0 * x * r * r
    if op == OP_SINH:
        sh, ch = _sinh(x), _cosh(x)
        return sh, ch, sh
    if op == OP_COSH:
        sh, ch = _sinh(x), _cosh(x)
        return ch, sh, ch
    if op == OP_TANH:
        th = math.tanh(x)
        s = 1.0 - th * th
        return th, s, -2.0 * th * s
    if op == OP_EXP:
        ex = _exp(x)
        return ex, ex, ex
    if op == OP_LOG:
        if not x > 0.0:
            raise DomainFault(ERR_DOMAIN, op, x)
        r = 1.0 / x
        return math.log(x), r, -r * r
    if op == OP_LOG10:
        if not x > 0.0:
            raise DomainFault(ERR_DOMAIN, op, x)
        r = 1.0 / (x * LN10)
        return math.log10(x), r, -r / x
    if op == OP_SQRT:
        if not x > 0.0:
            raise DomainFault(ERR_DOMAIN, op, x)
        s = math.sqrt(x)
        f1 = 0.5 / s
        return s, f1, -0.5 * f1 / x
    raise ValueError(f"not a unary opcode: {op}")  # pragma: no cover


def _powi(n: int, x: float) -> tuple[float, float, float]:
    if n == 2:
        return x * x, 2.0 * x, 2.0
    if x == 0.0 and n < 0:
        raise DomainFault(ERR_DOMAIN, OP_POWI, x)
    p2 = _pow(x, float(n - 2))
    p1 = p2 * x
    return p1 * x, n * p1, n * (n - 1) * p2


def _powk(p: float, x: float) -> tuple[float, float, float]:
    if x > 0.0:
        v = _pow(x, p)
        f1 = p * v / x
        return v, f1, (p - 1.0) * f1 / x
    if x == 0.0 and p > 2.0:
        return 0.0, 0.0, 0.0
    raise DomainFault(ERR_DOMAIN, OP_POWK, x)


def _lex_le(a: tuple, b: tuple) -> bool:
    """Jet order used by min/max/abs: by value, ties broken by d/dt, then d²/dt²."""
    if a[0] != b[0]:
        return a[0] < b[0]
    if a[1] != b[1]:
        return a[1] < b[1]
    return a[2] <= b[2]


@dataclass(frozen=True)
class Program:
    """A compiled expression: postfix ``code`` (opcodes with inline operands),
    ``consts`` (folded literals and parameter values), ``depth`` = max stack size,
    ``names`` = the parameters it uses with their values."""

    code: tuple[int, ...]
    consts: tuple[float, ...]
    depth: int
    names: tuple[tuple[str, float], ...] = ()

    def run(self, t: float) -> tuple[float, float, float]:
        """Reference VM: the jet of the expression at ``t``; raises :class:`DomainFault`."""
        code, consts = self.code, self.consts
        st: list[tuple[float, float, float]] = []
        pc, n = 0, len(code)
        while pc < n:
            op = code[pc]
            pc += 1
            if op == OP_CONST:
                st.append((consts[code[pc]], 0.0, 0.0))
                pc += 1
            elif op == OP_T:
                st.append((t, 1.0, 0.0))
            elif OP_SIN <= op <= OP_SQRT:
                x, d, dd = st[-1]
                f0, f1, f2 = _unary(op, x)
                st[-1] = (f0, f1 * d, f2 * d * d + f1 * dd)
            elif op == OP_NEG:
                x, d, dd = st[-1]
                st[-1] = (-x, -d, -dd)
            elif op == OP_ABS:
                a = st[-1]
                if not _lex_le((0.0, 0.0, 0.0), a):
                    st[-1] = (-a[0], -a[1], -a[2])
            elif op == OP_POWI or op == OP_POWK:
                x, d, dd = st[-1]
                if op == OP_POWI:
                    k = code[pc]
                    if k == 0:
                        f0, f1, f2 = 1.0, 0.0, 0.0
                    elif k == 1:
                        f0, f1, f2 = x, 1.0, 0.0
                    else:
                        f0, f1, f2 = _powi(k, x)
                else:
                    f0, f1, f2 = _powk(consts[code[pc]], x)
                pc += 1
                st[-1] = (f0, f1 * d, f2 * d * d + f1 * dd)
            else:
                b = st.pop()
                a = st[-1]
                st[-1] = _binary(op, a, b)
        return st[-1]

    def __post_init__(self) -> None:
        check_program(self.code, len(self.consts), self.depth)


def _binary(op: int, a: tuple, b: tuple) -> tuple[float, float, float]:
    a0, a1, a2 = a
    b0, b1, b2 = b
    if op == OP_ADD:
        return a0 + b0, a1 + b1, a2 + b2
    if op == OP_SUB:
        return a0 - b0, a1 - b1, a2 - b2
    if op == OP_MUL:
        return a0 * b0, a1 * b0 + a0 * b1, a2 * b0 + 2.0 * a1 * b1 + a0 * b2
    if op == OP_DIV:
        if b0 == 0.0:
            raise DomainFault(ERR_DOMAIN, op, b0)
        q = a0 / b0
        q1 = (a1 - q * b1) / b0
        return q, q1, (a2 - 2.0 * q1 * b1 - q * b2) / b0
    if op == OP_POW:           # a ** b = exp(b log a)
        if not a0 > 0.0:
            raise DomainFault(ERR_DOMAIN, op, a0)
        lg = math.log(a0)
        u = a1 / a0
        g1 = b1 * lg + b0 * u
        g2 = b2 * lg + 2.0 * b1 * u + b0 * (a2 / a0 - u * u)
        v = _pow(a0, b0)
        return v, v * g1, v * (g2 + g1 * g1)
    if op == OP_ATAN2:         # atan2(y=a, x=b)
        r2 = b0 * b0 + a0 * a0
        if r2 == 0.0:
            raise DomainFault(ERR_DOMAIN, op, 0.0)
        v1 = (b0 * a1 - a0 * b1) / r2
        dr2 = 2.0 * (b0 * b1 + a0 * a1)
        return math.atan2(a0, b0), v1, ((b0 * a2 - a0 * b2) - v1 * dr2) / r2
    if op == OP_MIN:
        return a if _lex_le(a, b) else b
    if op == OP_MAX:
        return b if _lex_le(a, b) else a
    raise ValueError(f"bad opcode {op}")  # pragma: no cover


def check_program(code, nconst: int, depth: int) -> None:
    """Verify that ``code`` is well formed (known opcodes, operands in range, stack
    never underflows, max depth == ``depth``, exactly one result).  The compiled VM
    trusts its programs, so every program is checked before it is packed."""
    sp = top = 0
    pc, n = 0, len(code)
    unary = set(range(OP_SIN, OP_ABS + 1)) | {OP_NEG, OP_POWI, OP_POWK}
    binary = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_ATAN2, OP_MIN, OP_MAX}
    while pc < n:
        op = int(code[pc])
        pc += 1
        if op in _WITH_OPERAND:
            if pc >= n:
                raise ValueError("bad program: missing operand")
            arg = int(code[pc])
            pc += 1
            if op != OP_POWI and not 0 <= arg < nconst:
                raise ValueError("bad program: constant index out of range")
        if op in (OP_CONST, OP_T):
            sp += 1
        elif op in unary:
            if sp < 1:
                raise ValueError("bad program: stack underflow")
        elif op in binary:
            if sp < 2:
                raise ValueError("bad program: stack underflow")
            sp -= 1
        else:
            raise ValueError(f"bad program: unknown opcode {op}")
        top = max(top, sp)
    if sp != 1 or top != depth:
        raise ValueError("bad program: wrong stack balance or depth")


# --- the compiler -----------------------------------------------------------------------

class _Frag:
    """A compiled sub-expression: a folded constant, or code with its stack depth."""

    __slots__ = ("const", "code", "depth")

    def __init__(self, const: float | None = None, code: list[int] | None = None,
                 depth: int = 1):
        self.const, self.code, self.depth = const, code, depth


class _Compiler:
    def __init__(self, text: str, path: str, parameters: Mapping[str, float]):
        self.text, self.path, self.parameters = text, path, parameters
        self.consts: list[float] = []
        self.index: dict[str, int] = {}
        self.used: dict[str, float] = {}

    # errors name the construct, its column and the expression
    def fail(self, message: str, node: ast.AST | None = None):
        where = ""
        if node is not None and hasattr(node, "col_offset"):
            where = f" at column {node.col_offset + 1}"
        raise ModelError(self.path, f"{message}{where} in expression {self.text!r}")

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or type(node).__name__

    def const_index(self, value: float) -> int:
        key = value.hex()
        if key not in self.index:
            self.index[key] = len(self.consts)
            self.consts.append(value)
        return self.index[key]

    def emit(self, f: _Frag) -> tuple[list[int], int]:
        if f.const is not None:
            return [OP_CONST, self.const_index(f.const)], 1
        return f.code, f.depth

    def fold(self, node: ast.AST, op: int, args: list[float]) -> _Frag:
        """Evaluate an operation on constants at compile time."""
        try:
            if op == OP_CONST:
                v = args[0]
            elif op == OP_POW:
                a, b = args
                if a < 0.0 and b != math.floor(b):
                    raise ValueError("negative base with a non-integer exponent")
                v = math.pow(a, b)
            else:
                jets = [(x, 0.0, 0.0) for x in args]
                if op == OP_NEG:
                    v = -args[0]
                elif op == OP_ABS:
                    v = abs(args[0])
                elif op in (OP_SQRT, OP_LOG, OP_LOG10, OP_ASIN, OP_ACOS):
                    fn = {OP_SQRT: math.sqrt, OP_LOG: math.log, OP_LOG10: math.log10,
                          OP_ASIN: math.asin, OP_ACOS: math.acos}[op]
                    v = fn(args[0])        # the value domain is wider than the jet's
                elif OP_SIN <= op <= OP_SQRT:
                    v = _unary(op, args[0])[0]
                else:
                    v = _binary(op, jets[0], jets[1])[0]
        except (ValueError, OverflowError, ZeroDivisionError, DomainFault) as exc:
            reason = (fault_message(exc.code, exc.op, exc.value)
                      if isinstance(exc, DomainFault) else str(exc))
            self.fail(f"constant subexpression '{self.segment(node)}' is undefined "
                      f"({reason})", node)
        if not math.isfinite(v):
            self.fail(f"constant subexpression '{self.segment(node)}' is not finite",
                      node)
        return _Frag(const=float(v))

    def compile(self, node: ast.AST, level: int) -> _Frag:
        if level > MAX_DEPTH:
            self.fail(f"expression is nested too deeply (more than {MAX_DEPTH} levels)",
                      node)
        if isinstance(node, ast.BinOp):
            return self.binop(node, level)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                kind = {str: "a string literal", bytes: "a bytes literal",
                        complex: "a complex number", bool: "a boolean"}.get(
                            type(value), "a literal")
                self.fail(f"{kind} ({self.segment(node)}) is not allowed", node)
            try:
                v = float(value)
            except OverflowError:
                self.fail(f"number {self.segment(node)} is too large", node)
            return self.fold(node, OP_CONST, [v])
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.UAdd):
                return self.compile(node.operand, level + 1)
            if not isinstance(node.op, ast.USub):
                sym = "not" if isinstance(node.op, ast.Not) else "~"
                self.fail(f"operator '{sym}' is not allowed", node)
            a = self.compile(node.operand, level + 1)
            if a.const is not None:
                return self.fold(node, OP_NEG, [a.const])
            return _Frag(code=a.code + [OP_NEG], depth=a.depth)
        if isinstance(node, ast.Call):
            return self.call(node, level)
        kind = _CONSTRUCTS.get(type(node).__name__, f"'{type(node).__name__}'")
        self.fail(f"{kind} ('{self.segment(node)}') is not allowed", node)

    def binop(self, node: ast.BinOp, level: int) -> _Frag:
        # walk the left spine of a chain (a + b - c * ...) iteratively, so that long
        # sums and products count as one nesting level
        spine = []
        left: ast.AST = node
        while isinstance(left, ast.BinOp) and not isinstance(left.op, ast.Pow):
            spine.append(left)
            left = left.left
        if spine:
            acc = self.compile(left, level + 1)
        else:
            spine = [node]
            acc = self.compile(node.left, level + 1)
        for n in reversed(spine):
            acc = self.combine(n, acc, self.compile(n.right, level + 1))
        return acc

    def combine(self, node: ast.BinOp, a: _Frag, b: _Frag) -> _Frag:
        op = _BINOPS.get(type(node.op))
        if op is None:
            sym = _BAD_BINOPS.get(type(node.op), type(node.op).__name__)
            hint = " (use ** for powers)" if sym == "^" else ""
            self.fail(f"operator '{sym}' is not allowed{hint}; allowed: + - * / **",
                      node)
        if a.const is not None and b.const is not None:
            return self.fold(node, op, [a.const, b.const])
        if op == OP_DIV and b.const == 0.0:
            self.fail(f"division by zero ('{self.segment(node)}')", node)
        ca, da = self.emit(a)
        if op == OP_POW and b.const is not None:
            p = b.const
            if p == math.floor(p) and abs(p) <= MAX_POWI:
                if p == 1.0:
                    return _Frag(code=ca, depth=da)
                return _Frag(code=ca + [OP_POWI, int(p)], depth=da)
            return _Frag(code=ca + [OP_POWK, self.const_index(p)], depth=da)
        cb, db = self.emit(b)
        return _Frag(code=ca + cb + [op], depth=max(da, db + 1))

    def name(self, node: ast.Name) -> _Frag:
        name = node.id
        if name == "t":
            return _Frag(code=[OP_T], depth=1)
        if name in CONSTANTS:
            return _Frag(const=CONSTANTS[name])
        if name in self.parameters:
            value = self.parameters[name]
            if isinstance(value, bool) or not isinstance(value, Real) \
                    or not math.isfinite(float(value)):
                self.fail(f"parameter '{name}' must be a finite number "
                          f"(got {value!r})", node)
            self.used[name] = float(value)
            return _Frag(const=float(value))
        if name in FUNCTIONS:
            self.fail(f"'{name}' is a function; call it as {name}(...)", node)
        known = ["t", *CONSTANTS, *sorted(self.parameters)]
        shown = ", ".join(known[:25]) + (", ..." if len(known) > 25 else "")
        self.fail(f"unknown name '{name}' (known: {shown})", node)

    def call(self, node: ast.Call, level: int) -> _Frag:
        func = node.func
        allowed = ", ".join(FUNCTIONS)
        if not isinstance(func, ast.Name):
            self.fail(f"calling '{self.segment(func)}' is not allowed (only plain "
                      f"function names: {allowed})", node)
        fname = func.id
        if fname not in FUNCTIONS:
            self.fail(f"function '{fname}' is not allowed (allowed: {allowed})", node)
        if node.keywords:
            self.fail(f"keyword arguments are not allowed in a call of '{fname}'", node)
        op, arity = FUNCTIONS[fname]
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.fail(f"starred arguments are not allowed in a call of '{fname}'", node)
        if len(node.args) != arity:
            self.fail(f"function '{fname}' takes {arity} argument"
                      f"{'s' if arity > 1 else ''} (got {len(node.args)})", node)
        args = [self.compile(a, level + 1) for a in node.args]
        if all(a.const is not None for a in args):
            return self.fold(node, op, [a.const for a in args])
        code: list[int] = []
        depth = 0
        for i, a in enumerate(args):
            c, d = self.emit(a)
            code += c
            depth = max(depth, d + i)
        return _Frag(code=code + [op], depth=depth)


def compile_expression(text: str, path: str = "",
                       parameters: Mapping[str, float] | None = None) -> Program:
    """Check and compile expression ``text``; bad input raises ``ModelError(path, ...)``.

    ``parameters`` maps the names the expression may use to their values; they are
    folded into the constant array (the program records which ones it used).
    """
    if not isinstance(text, str):
        raise ModelError(path, f"an expression must be a string (got {type(text).__name__})")
    if len(text) > MAX_LENGTH:
        raise ModelError(path, f"expression is too long ({len(text)} characters, "
                               f"at most {MAX_LENGTH})")
    if not text.strip():
        raise ModelError(path, "empty expression")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        col = f" at column {exc.offset}" if exc.offset else ""
        raise ModelError(path, f"syntax error{col} in expression {text!r}: "
                               f"{exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ModelError(path, f"cannot parse expression {text!r}: "
                               f"{type(exc).__name__}") from None
    comp = _Compiler(text.strip(), path, parameters or {})
    root = comp.compile(tree.body, 1)
    code, depth = comp.emit(root)
    return Program(code=tuple(code), consts=tuple(comp.consts), depth=depth,
                   names=tuple(sorted(comp.used.items())))
