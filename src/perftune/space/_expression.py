"""Safe expressions over parameter names, for constraints and ``when=`` conditions.

The text is parsed once with :mod:`ast`; only a small, side-effect-free subset of Python is accepted,
and the tree is compiled into nested closures that are evaluated against a mapping of names to
values. Nothing is ever passed to ``eval``/``exec``.

Example:
    >>> e = Expression("32 <= block_x * block_y <= 1024")
    >>> sorted(e.names)
    ['block_x', 'block_y']
    >>> e.evaluate({"block_x": 32, "block_y": 8})
    True
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from perftune.errors import ExpressionError

__all__ = ["Expression", "evaluate_constant"]

_Fn = Callable[[Mapping[str, Any]], Any]

_MAX_EXPONENT = 10_000
_MAX_SEQUENCE_REPEAT = 100_000
# Value lists (T1 "Values") are at most this long: a hostile range(10**12) fails fast instead of
# exhausting memory.
_MAX_ITEMS = 100_000


def _safe_pow(a: Any, b: Any) -> Any:
    # Guard against expressions that would take forever or exhaust memory (10 ** 10 ** 10).
    if isinstance(b, int | float) and abs(b) > _MAX_EXPONENT and isinstance(a, int | float) and abs(a) > 1:
        raise ValueError(f"exponent {b} is too large")
    return a**b


def _safe_mul(a: Any, b: Any) -> Any:
    # The product's length matters, not the repeat count alone: (0,) * 10**5 * 10**5 is 10**10 items.
    for seq, n in ((a, b), (b, a)):
        is_repeat = isinstance(seq, str | tuple | list) and isinstance(n, int) and not isinstance(n, bool)
        if is_repeat and (n > _MAX_SEQUENCE_REPEAT or len(seq) * max(n, 0) > _MAX_ITEMS * 10):
            raise ValueError("sequence repetition is too large")
    return a * b


def _range(*args: Any) -> tuple[int, ...]:
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"range() takes integers, not {type(a).__name__}")
    r = range(*args)
    if len(r) > _MAX_ITEMS:
        raise ValueError(f"range of {len(r)} values is too large (at most {_MAX_ITEMS})")
    return tuple(r)


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _safe_mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _safe_pow,
}

_CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _round(x: Any, ndigits: Any = None) -> Any:
    return round(x) if ndigits is None else round(x, ndigits)


_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    # name: (function, min args, max args)
    "min": (min, 1, 64),
    "max": (max, 1, 64),
    "abs": (abs, 1, 1),
    "int": (int, 1, 1),
    "float": (float, 1, 1),
    "round": (_round, 1, 2),
    "len": (len, 1, 1),
    "log2": (math.log2, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
}

# Only in constant value lists (evaluate_constant), where a T1 file writes "[32 * i for i in range(1, 32)]".
_SEQUENCE_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {"range": (_range, 1, 3)}

_FORBIDDEN_HINTS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Lambda: "lambda is not allowed",
    ast.NamedExpr: "assignment expressions are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.Dict: "dict literals are not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.Starred: "starred arguments are not allowed",
    ast.Await: "await is not allowed",
    ast.Yield: "yield is not allowed",
}


class Expression:
    """A parsed, safely evaluable expression over parameter names.

    Accepted syntax: literals (numbers, strings, booleans, ``None``), names, ``+ - * / // % **``,
    unary ``-``/``+``, comparisons (chained, ``in``/``not in`` with tuple or list literals),
    ``and``/``or``/``not``, parentheses, ``a if cond else b``, and the functions ``min``, ``max``,
    ``abs``, ``int``, ``float``, ``round``, ``len``, ``log2`` and ``sqrt``.

    Args:
        text: The expression in Python syntax.

    Raises:
        ExpressionError: The text is not valid Python or uses something outside the subset.

    Example:
        >>> Expression("use_padding == 0 or block_x % 32 != 0").evaluate({"use_padding": 1, "block_x": 48})
        True
        >>> Expression("algo in ('quick', 'merge')").names
        frozenset({'algo'})
    """

    __slots__ = ("_fn", "names", "text")

    text: str
    names: frozenset[str]
    _fn: _Fn

    def __init__(self, text: str) -> None:
        if isinstance(text, Expression):
            text = text.text
        if not isinstance(text, str):
            raise ExpressionError(f"expression {text!r}: must be a string, not {type(text).__name__}")
        self.text = text
        self._compile()

    def _compile(self) -> None:
        text = self.text
        stripped = text.strip()
        if not stripped:
            raise ExpressionError("expression '': empty expression")
        try:
            tree = ast.parse(stripped, mode="eval")
        except SyntaxError as e:
            detail = e.msg or "invalid syntax"
            raise ExpressionError(f"expression {text!r}: syntax error: {detail}") from None
        names: set[str] = set()
        compiler = _Compiler(text, names)
        fn, _const, _value = compiler.compile(tree.body)
        self._fn = fn
        self.names = frozenset(names)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate against ``env``.

        Raises:
            KeyError: A name is missing from ``env`` (for example an inactive parameter).
            ArithmeticError, TypeError, ValueError: The evaluation itself failed (division by zero...).
        """
        return self._fn(env)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        return self._fn(env)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    def __hash__(self) -> int:
        return hash(("Expression", self.text))

    # Closures are not picklable: pickle the text and compile again.
    def __getstate__(self) -> str:
        return self.text

    def __setstate__(self, state: str) -> None:
        self.text = state
        self._compile()


class _Compiler:
    """Turns a checked AST into closures; folds constant sub-expressions."""

    def __init__(self, text: str, names: set[str], *, sequences: bool = False) -> None:
        self.text = text
        self.names = names
        self.sequences = sequences
        self.bound: list[str] = []  # comprehension variables in scope, innermost last

    def fail(self, message: str) -> ExpressionError:
        return ExpressionError(f"expression {self.text!r}: {message}")

    def compile(self, node: ast.AST) -> tuple[_Fn, bool, Any]:
        """Return (closure, is_constant, constant_value)."""
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            hint = _FORBIDDEN_HINTS.get(type(node))
            if hint is None:
                hint = f"{type(node).__name__} is not allowed"
            raise self.fail(hint)
        fn, is_const = method(node)
        if is_const:
            try:
                value = fn({})
            except Exception as e:  # constant sub-expression that cannot be computed, e.g. 1/0
                raise self.fail(f"cannot compute {ast.unparse(node)!r}: {e}") from None
            return (lambda env, v=value: v), True, value
        return fn, False, None

    def _const(self, value: Any) -> tuple[_Fn, bool]:
        return (lambda env, v=value: v), True

    def _Constant(self, node: ast.Constant) -> tuple[_Fn, bool]:
        if node.value is not None and not isinstance(node.value, int | float | str | bool):
            raise self.fail(f"literal {node.value!r} is not allowed")
        return self._const(node.value)

    def _Name(self, node: ast.Name) -> tuple[_Fn, bool]:
        name = node.id
        if name.startswith("__"):
            raise self.fail(f"name {name!r} is not allowed")
        if name in ("True", "False", "None"):  # pragma: no cover - parsed as Constant on 3.8+
            return self._const({"True": True, "False": False, "None": None}[name])
        if name in _FUNCTIONS or (self.sequences and name in _SEQUENCE_FUNCTIONS):
            raise self.fail(f"function {name!r} must be called")
        if name in self.bound:
            return operator.itemgetter(name), False
        self.names.add(name)
        return operator.itemgetter(name), False

    def _BinOp(self, node: ast.BinOp) -> tuple[_Fn, bool]:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.fail(f"operator {type(node.op).__name__} is not allowed")
        lf, lc, lv = self.compile(node.left)
        rf, rc, rv = self.compile(node.right)
        if lc and rc:
            return (lambda env: op(lv, rv)), True
        if rc:
            return (lambda env: op(lf(env), rv)), False
        if lc:
            return (lambda env: op(lv, rf(env))), False
        return (lambda env: op(lf(env), rf(env))), False

    def _UnaryOp(self, node: ast.UnaryOp) -> tuple[_Fn, bool]:
        f, c, _ = self.compile(node.operand)
        if isinstance(node.op, ast.Not):
            return (lambda env: not f(env)), c
        if isinstance(node.op, ast.USub):
            return (lambda env: -f(env)), c
        if isinstance(node.op, ast.UAdd):
            return (lambda env: +f(env)), c
        raise self.fail(f"operator {type(node.op).__name__} is not allowed")

    def _BoolOp(self, node: ast.BoolOp) -> tuple[_Fn, bool]:
        parts = [self.compile(v) for v in node.values]
        fns = tuple(p[0] for p in parts)
        is_const = all(p[1] for p in parts)
        if isinstance(node.op, ast.And):
            if len(fns) == 2:
                a, b = fns
                return (lambda env: a(env) and b(env)), is_const

            def and_(env: Mapping[str, Any]) -> Any:
                value: Any = True
                for f in fns:
                    value = f(env)
                    if not value:
                        return value
                return value

            return and_, is_const
        if len(fns) == 2:
            a, b = fns
            return (lambda env: a(env) or b(env)), is_const

        def or_(env: Mapping[str, Any]) -> Any:
            value: Any = False
            for f in fns:
                value = f(env)
                if value:
                    return value
            return value

        return or_, is_const

    def _Compare(self, node: ast.Compare) -> tuple[_Fn, bool]:
        ops = []
        for op in node.ops:
            fn = _CMPOPS.get(type(op))
            if fn is None:
                raise self.fail(f"comparison {type(op).__name__} is not allowed (use == or !=)")
            ops.append(fn)
        left = self.compile(node.left)
        comparators = []
        for op, comp in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                comparators.append(self._container(comp))
            else:
                comparators.append(self.compile(comp))
        is_const = left[1] and all(c[1] for c in comparators)
        if len(ops) == 1:
            op0 = ops[0]
            lf = left[0]
            rf, rc, rv = comparators[0]
            if isinstance(node.ops[0], ast.In | ast.NotIn) and rc and isinstance(rv, frozenset):
                members = rv
                if isinstance(node.ops[0], ast.In):
                    return (lambda env: lf(env) in members), is_const
                return (lambda env: lf(env) not in members), is_const
            if rc:
                return (lambda env: op0(lf(env), rv)), is_const
            if left[1]:
                lv = left[2]
                return (lambda env: op0(lv, rf(env))), is_const
            return (lambda env: op0(lf(env), rf(env))), is_const
        first = left[0]
        pairs = tuple(zip(ops, (c[0] for c in comparators), strict=True))

        def chain(env: Mapping[str, Any]) -> bool:
            a = first(env)
            for op, f in pairs:
                b = f(env)
                if not op(a, b):
                    return False
                a = b
            return True

        return chain, is_const

    def _container(self, node: ast.AST) -> tuple[_Fn, bool, Any]:
        # `x in (1, 2, 3)`: a literal of constants becomes a frozenset for O(1) membership.
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            parts = [self.compile(e) for e in node.elts]
            if all(p[1] for p in parts):
                values = [p[2] for p in parts]
                try:
                    frozen = frozenset(values)
                except TypeError:
                    tup = tuple(values)
                    return (lambda env: tup), True, tup
                return (lambda env: frozen), True, frozen
        return self.compile(node)

    def _Tuple(self, node: ast.Tuple) -> tuple[_Fn, bool]:
        parts = [self.compile(e) for e in node.elts]
        fns = tuple(p[0] for p in parts)
        return (lambda env: tuple(f(env) for f in fns)), all(p[1] for p in parts)

    _List = _Tuple
    _Set = _Tuple

    def _IfExp(self, node: ast.IfExp) -> tuple[_Fn, bool]:
        test, tc, _ = self.compile(node.test)
        body, bc, _ = self.compile(node.body)
        orelse, oc, _ = self.compile(node.orelse)
        return (lambda env: body(env) if test(env) else orelse(env)), tc and bc and oc

    def _Call(self, node: ast.Call) -> tuple[_Fn, bool]:
        if not isinstance(node.func, ast.Name):
            if isinstance(node.func, ast.Attribute):
                raise self.fail("attribute access is not allowed")
            raise self.fail("only calls of min, max, abs, int, float, round, len, log2, sqrt are allowed")
        name = node.func.id
        allowed = {**_FUNCTIONS, **_SEQUENCE_FUNCTIONS} if self.sequences else _FUNCTIONS
        spec = allowed.get(name)
        if spec is None:
            raise self.fail(f"unknown function {name!r} (allowed: {', '.join(sorted(allowed))})")
        if node.keywords:
            raise self.fail(f"{name}() takes no keyword arguments")
        func, lo, hi = spec
        if not lo <= len(node.args) <= hi:
            raise self.fail(f"{name}() takes {lo if lo == hi else f'{lo} to {hi}'} argument(s)")
        parts = [self.compile(a) for a in node.args]
        fns = tuple(p[0] for p in parts)
        is_const = all(p[1] for p in parts)
        if len(fns) == 1:
            (a,) = fns
            return (lambda env: func(a(env))), is_const
        if len(fns) == 2:
            a, b = fns
            return (lambda env: func(a(env), b(env))), is_const
        return (lambda env: func(*[f(env) for f in fns])), is_const

    def _ListComp(self, node: ast.ListComp) -> tuple[_Fn, bool]:
        # A list comprehension evaluates to a tuple, as list literals do (values stay hashable).
        if not self.sequences:
            raise self.fail("comprehensions are not allowed")
        outer, free = self.names, set[str]()
        self.names = free
        n_bound = len(self.bound)
        try:
            loops: list[tuple[str, _Fn, tuple[_Fn, ...]]] = []
            for gen in node.generators:
                if gen.is_async:
                    raise self.fail("async comprehensions are not allowed")
                if not isinstance(gen.target, ast.Name) or gen.target.id.startswith("__"):
                    raise self.fail("a comprehension variable must be a plain name")
                iter_fn = self.compile(gen.iter)[0]  # evaluated before its own variable is bound
                self.bound.append(gen.target.id)
                conds = tuple(self.compile(c)[0] for c in gen.ifs)
                loops.append((gen.target.id, iter_fn, conds))
            element = self.compile(node.elt)[0]
        finally:
            del self.bound[n_bound:]
            self.names = outer
        outer |= free

        def comprehension(env: Mapping[str, Any]) -> tuple[Any, ...]:
            out: list[Any] = []
            n_steps = [0]

            def run(level: int, scope: dict[str, Any]) -> None:
                if level == len(loops):
                    out.append(element(scope))
                    return
                name, iter_fn, conds = loops[level]
                for value in iter_fn(scope):
                    n_steps[0] += 1
                    if n_steps[0] > _MAX_ITEMS:
                        raise ValueError(f"comprehension takes more than {_MAX_ITEMS} steps")
                    inner = {**scope, name: value}
                    if all(c(inner) for c in conds):
                        run(level + 1, inner)

            run(0, dict(env))
            return tuple(out)

        return comprehension, not free


def evaluate_constant(text: str) -> Any:
    """Evaluate a constant expression that may build sequences, such as a T1 file's ``Values``.

    On top of :class:`Expression`'s subset this accepts ``range(...)`` and list comprehensions
    (``[32 * i for i in range(1, 32)]``, several ``for`` and ``if`` clauses); list literals and
    comprehensions evaluate to tuples. The expression must not depend on any parameter, and no
    sequence may exceed 100,000 values. Nothing is passed to ``eval``.

    Raises:
        ExpressionError: The text uses something outside the subset (attribute access, dunder
            names, unknown functions), names a free variable, or cannot be computed (a range or
            comprehension that is too large, a division by zero).

    Example:
        >>> evaluate_constant("[1] + [2 * i for i in range(1, 4)]")
        (1, 2, 4, 6)
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expression {text!r}: must be a string, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ExpressionError("expression '': empty expression")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"expression {text!r}: syntax error: {e.msg or 'invalid syntax'}") from None
    names: set[str] = set()
    compiler = _Compiler(text, names, sequences=True)
    _fn, is_const, value = compiler.compile(tree.body)
    if not is_const:
        raise ExpressionError(f"expression {text!r}: must be constant, but names {', '.join(sorted(names))}")
    return value
