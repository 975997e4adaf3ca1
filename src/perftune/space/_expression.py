"""Safe expressions over parameter names, for constraints and ``when=`` conditions.

The text is parsed once with :mod:`ast`; only a small, side-effect-free subset of Python is accepted,
and the tree is compiled into nested closures that are evaluated against a mapping of names to
values. Nothing is ever passed to ``eval``/``exec``.

Expressions often come from files that others wrote (a T1 file's ``Conditions`` and ``Values``, the
constraints saved in a store), and constant sub-expressions are computed when the text is parsed, so
nothing may take unbounded time or memory. Every operation that could blow up is checked against the
size of its operands *before* it runs:

* the text: at most 50,000 characters (value lists: 1,000,000), 5,000 syntax nodes (value lists:
  300,000) and 100 levels of nesting;
* integers: no literal, product or power beyond 4,096 bits (``(10**10000)**10000`` is refused, not
  computed); ``round``'s ``ndigits`` within +-1,000; ``int()`` of a string of at most 1,300 characters;
* strings and tuples: a string literal, ``+`` or ``*`` result of at most 10,000 items or characters
  (value lists: 1,000,000), the items of nested tuples counted too for ``*``;
* ``%`` on a string (printf-style formatting, ``'%0500000000d' % 1``) is refused; there is no other
  formatting (no f-strings, ``format`` or ``str``), no shifts and no bitwise operators;
* value lists (:func:`evaluate_constant`): all the comprehensions of one evaluation, nested ones
  included, take at most 100,000 steps together, and the evaluation does at most 10,000,000 units of
  work (an operation costs the size of what it reads and builds), so nesting cannot multiply the caps;
* constraints and conditions: the constant parts computed when the text is parsed build at most
  1,000,000 units together (each ``(0,) * 10000`` is 10,000), and :attr:`Expression.work` bounds the
  units one evaluation may build and read, which a caller can refuse past a limit of its own (the
  replay target refuses a T1 ``Conditions`` expression of more than 100,000 per configuration).

A refusal is an :class:`~perftune.errors.ExpressionError` naming the expression when the text is
parsed (constant parts are computed then), or a ``ValueError`` when a constraint is evaluated on a
configuration (the configuration then counts as invalid).

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
from typing import Any, NamedTuple

from perftune.errors import ExpressionError

__all__ = ["Expression", "evaluate_constant"]

_Fn = Callable[[Mapping[str, Any]], Any]

# Value lists (T1 "Values") are at most this long, and all the comprehensions of one evaluation take at
# most this many steps together: a hostile range(10**12) fails fast instead of exhausting memory.
_MAX_ITEMS = 100_000
_MAX_INT_BITS = 4096
_MAX_ROUND_DIGITS = 1000
_MAX_INT_TEXT = 1300  # int("...") of at most this many characters (4,096 bits are 1,234 digits)
_MAX_WORK = 10_000_000  # units of work of one evaluate_constant (items read or built, 32-bit words)
_MAX_CONSTANT_WORK = 1_000_000  # units the computed constant parts of one expression build together
_SEQUENCES = (str, tuple, list)


class _Limits(NamedTuple):
    text: int  # characters of the expression
    nodes: int  # ast nodes
    depth: int  # ast nesting
    length: int  # items of a built sequence (nested items and characters included)


_CONSTANT_LIMITS = _Limits(text=1_000_000, nodes=300_000, depth=100, length=_MAX_ITEMS * 10)
# Constraints get the same room for their text: perftune writes long ones itself (a Triton kernel's list
# of configurations is one membership test, `(BLOCK_M, ...) in {(16, 64, ...), ...}`, thousands of
# tuples); what bounds a hostile one is the cost of each operation, checked before it runs.
_EXPRESSION_LIMITS = _Limits(text=1_000_000, nodes=300_000, depth=100, length=10_000)


_SCALAR_TYPES = frozenset({int, float, bool, type(None)})


def _deep_len(value: Any, limit: int) -> int:
    """Items of a string or (nested) sequence, strings counted by characters; stops once past ``limit``."""
    if isinstance(value, str):
        return len(value)
    if not isinstance(value, tuple | list):
        return 1
    total = 0
    stack: list[Any] = [value]
    while stack:
        seq = stack.pop()
        total += len(seq)
        if total > limit:
            return total
        kinds = set(map(type, seq))  # at C speed: most sequences hold numbers only
        if kinds <= _SCALAR_TYPES:
            continue
        if kinds == {str}:
            total += sum(map(len, seq))
            if total > limit:
                return total
            continue
        for item in seq:
            if isinstance(item, tuple | list):
                stack.append(item)
            elif isinstance(item, str):
                total += len(item)
                if total > limit:
                    return total
    return total


def _cost(value: Any, limit: int) -> int:
    """Units of work that reading or building ``value`` takes (see :data:`_MAX_WORK`)."""
    if isinstance(value, int):
        return 1 + value.bit_length() // 32
    if isinstance(value, _SEQUENCES):
        return 1 + _deep_len(value, limit)
    return 1


def _bits(value: Any) -> int:
    return value.bit_length() if isinstance(value, int) else 0


class _Ops(NamedTuple):
    add: Callable[[Any, Any], Any]
    mul: Callable[[Any, Any], Any]
    mod: Callable[[Any, Any], Any]
    pow: Callable[[Any, Any], Any]


def _make_ops(length: int) -> _Ops:
    """The guarded ``+ * % **`` of one set of limits: each checks its operands' sizes before it runs."""

    def add(a: Any, b: Any) -> Any:
        # Concatenation is the only + that grows (numbers gain at most one bit), and only as much as
        # its operands: their length bounds it, nested items need not be counted.
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and len(a) + len(b) > length:
            raise ValueError(f"concatenation would hold more than {length} items")
        return a + b

    def mul(a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            if a.bit_length() + b.bit_length() > _MAX_INT_BITS:
                raise ValueError(f"product would have more than {_MAX_INT_BITS} bits")
            return a * b
        # The product's size matters, not the repeat count alone: (0,) * 10**5 * 10**5 is 10**10 items.
        for seq, n in ((a, b), (b, a)):
            repeats = isinstance(seq, _SEQUENCES) and isinstance(n, int) and n > 0
            if repeats and (n > length or _deep_len(seq, length // n) * n > length):
                raise ValueError(f"sequence repetition is too large (more than {length} items)")
        return a * b

    def mod(a: Any, b: Any) -> Any:
        if isinstance(a, str | bytes):
            raise ValueError("string formatting with % is not allowed")
        return a % b

    def pow_(a: Any, b: Any) -> Any:
        # The result's size, not the exponent alone: (10**10000)**10000 has a small exponent.
        grows = isinstance(a, int) and isinstance(b, int) and b > 1 and not -1 <= a <= 1
        if grows and (b > _MAX_INT_BITS or b * math.log2(abs(a)) > _MAX_INT_BITS):
            raise ValueError(f"power would have more than {_MAX_INT_BITS} bits")
        result = a**b
        if isinstance(result, complex):
            raise ValueError("power has a complex result")
        return result

    return _Ops(add, mul, mod, pow_)


_EXPRESSION_OPS = _make_ops(_EXPRESSION_LIMITS.length)
_CONSTANT_OPS = _make_ops(_CONSTANT_LIMITS.length)


def _range(*args: Any) -> tuple[int, ...]:
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"range() takes integers, not {type(a).__name__}")
    r = range(*args)
    if len(r) > _MAX_ITEMS:
        raise ValueError(f"range of {len(r)} values is too large (at most {_MAX_ITEMS})")
    return tuple(r)


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
    if ndigits is None:
        return round(x)
    # round(1, -10**9) computes 10**(10**9) inside int.__round__.
    if isinstance(ndigits, int) and abs(ndigits) > _MAX_ROUND_DIGITS:
        raise ValueError(f"round() ndigits must be within +-{_MAX_ROUND_DIGITS}")
    return round(x, ndigits)


def _int(x: Any) -> int:
    # int("9" * 10**6) is quadratic; Python's own digit limit can be switched off by the host program.
    if isinstance(x, str) and len(x) > _MAX_INT_TEXT:
        raise ValueError(f"int() of a string longer than {_MAX_INT_TEXT} characters")
    return int(x)


_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    # name: (function, min args, max args)
    "min": (min, 1, 64),
    "max": (max, 1, 64),
    "abs": (abs, 1, 1),
    "int": (_int, 1, 1),
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


def _shown(text: str) -> str:
    """``repr(text)`` for messages, shortened: one line even for a megabyte of hostile text."""
    if len(text) > 200:
        return repr(text[:160]) + f"... ({len(text)} characters)"
    return repr(text)


def _parse(text: str, limits: _Limits) -> ast.expr:
    """Parse ``text`` in eval mode and check its size; ExpressionError naming it otherwise."""
    if not isinstance(text, str):
        raise ExpressionError(f"expression {text!r}: must be a string, not {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ExpressionError("expression '': empty expression")
    if len(stripped) > limits.text:
        raise ExpressionError(f"expression {_shown(text)}: longer than {limits.text} characters")
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        detail = e.msg or "invalid syntax"
        raise ExpressionError(f"expression {_shown(text)}: syntax error: {detail}") from None
    except (RecursionError, MemoryError, ValueError) as e:  # parser stack overflow, NUL bytes
        detail = str(e) if isinstance(e, ValueError) else "nested too deeply"
        raise ExpressionError(f"expression {_shown(text)}: cannot parse it ({detail})") from None
    n_nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        n_nodes += 1
        if n_nodes > limits.nodes:
            raise ExpressionError(f"expression {_shown(text)}: more than {limits.nodes} syntax nodes")
        if depth > limits.depth:
            raise ExpressionError(f"expression {_shown(text)}: nested more than {limits.depth} levels deep")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body


class _Budget:
    """The work of one :func:`evaluate_constant`, comprehensions nested in each other included."""

    __slots__ = ("steps", "work")

    def __init__(self) -> None:
        self.steps = 0
        self.work = 0

    def step(self) -> None:
        self.steps += 1
        if self.steps > _MAX_ITEMS:
            raise ValueError(f"comprehensions take more than {_MAX_ITEMS} steps")

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > _MAX_WORK:
            raise ValueError(f"the value list takes more than {_MAX_WORK} units of work to compute")

    def spend_on(self, value: Any) -> None:
        self.spend(_cost(value, _MAX_WORK - self.work))


class Expression:
    """A parsed, safely evaluable expression over parameter names.

    Accepted syntax: literals (numbers, strings, booleans, ``None``), names, ``+ - * / // % **``,
    unary ``-``/``+``, comparisons (chained, ``in``/``not in`` with tuple or list literals),
    ``and``/``or``/``not``, parentheses, ``a if cond else b``, and the functions ``min``, ``max``,
    ``abs``, ``int``, ``float``, ``round``, ``len``, ``log2`` and ``sqrt``. Sizes are bounded (see the
    module docstring): ``2 ** 5000`` or ``'%9999d' % x`` are refused, not computed.

    Args:
        text: The expression in Python syntax.

    Raises:
        ExpressionError: The text is not valid Python, uses something outside the subset, is too
            large, or a constant part of it cannot be computed within the limits.

    Example:
        >>> Expression("use_padding == 0 or block_x % 32 != 0").evaluate({"use_padding": 1, "block_x": 48})
        True
        >>> Expression("algo in ('quick', 'merge')").names
        frozenset({'algo'})
    """

    __slots__ = ("_fn", "names", "text", "work")

    text: str
    names: frozenset[str]
    work: int
    _fn: _Fn

    def __init__(self, text: str, *, value_sizes: Mapping[str, int | None] | None = None) -> None:
        if isinstance(text, Expression):
            text = text.text
        if not isinstance(text, str):
            raise ExpressionError(f"expression {text!r}: must be a string, not {type(text).__name__}")
        self.text = text
        self._compile(value_sizes)

    def _compile(self, value_sizes: Mapping[str, int | None] | None = None) -> None:
        text = self.text
        body = _parse(text, _EXPRESSION_LIMITS)
        names: set[str] = set()
        compiler = _Compiler(text, names, value_sizes=value_sizes)
        fn, _const, _value = compiler.compile(body)
        self._fn = fn
        self.names = frozenset(names)
        #: An upper bound of the units of work (items built or read) of one evaluation, with each name's
        #: value as ``value_sizes`` says: None for a number, else the most items or characters it holds;
        #: a name it does not list (or without ``value_sizes``) may be any value of up to 10,000 items.
        self.work = compiler.eval_work

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate against ``env``.

        Raises:
            KeyError: A name is missing from ``env`` (for example an inactive parameter).
            ArithmeticError, TypeError, ValueError: The evaluation itself failed (division by zero,
                a result beyond the size limits...).
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


_NO_READ = 1 << 30


class _Compiler:
    """Turns a checked AST into closures; folds constant sub-expressions.

    With ``sequences`` (value lists) every closure inside a comprehension also charges the
    evaluation's :class:`_Budget` for what it reads and builds, since it runs once per step.
    """

    def __init__(
        self,
        text: str,
        names: set[str],
        *,
        sequences: bool = False,
        value_sizes: Mapping[str, int | None] | None = None,
    ) -> None:
        self.text = text
        self.names = names
        self.sequences = sequences
        self.limits = _CONSTANT_LIMITS if sequences else _EXPRESSION_LIMITS
        self.ops = _CONSTANT_OPS if sequences else _EXPRESSION_OPS
        self.budget = _Budget() if sequences else None
        # Expressions: the units their computed constants built (bounded), and a bound of the units of one
        # evaluation, from each node's (is a number, most items) as far as the compiler can tell.
        self.value_sizes = value_sizes or {}
        self.constant_work = 0
        self.eval_work = 0
        self.shape: dict[int, tuple[bool, int]] = {}
        self.bound: list[str] = []  # comprehension variables in scope, innermost last
        # Index in self.bound of the outermost comprehension variable read so far: a comprehension that
        # reads a variable of an enclosing one is not constant (it runs again at each outer step).
        self.lowest_bound_read = _NO_READ
        self.const_cost = 0  # cost of the constant operands of the node being compiled

    def fail(self, message: str) -> ExpressionError:
        return ExpressionError(f"expression {_shown(self.text)}: {message}")

    def compile(self, node: ast.AST) -> tuple[_Fn, bool, Any]:
        """Return (closure, is_constant, constant_value)."""
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            hint = _FORBIDDEN_HINTS.get(type(node))
            if hint is None:
                hint = f"{type(node).__name__} is not allowed"
            raise self.fail(hint)
        outer_cost, self.const_cost = self.const_cost, 0
        try:
            fn, is_const = method(node)
            operand_cost = self.const_cost
        finally:
            self.const_cost = outer_cost
        budget = self.budget
        if is_const:
            try:
                value = fn({})
                if budget is not None:
                    budget.spend_on(value)
            except Exception as e:  # constant sub-expression that cannot be computed, e.g. 1/0
                detail = " ".join(str(e).split())
                detail = detail if len(detail) <= 300 else detail[:300] + "..."
                try:
                    part = _shown(ast.unparse(node))
                except RecursionError:  # pragma: no cover - the nesting limit keeps unparse shallow
                    part = "a part of it"
                raise self.fail(f"cannot compute {part}: {detail}") from None
            if budget is not None and self.bound:
                self.const_cost += _cost(value, _MAX_WORK)  # read again at every step: the parent pays
            if budget is None:
                self._constant_shape(node, value)
            return (lambda env, v=value: v), True, value
        if budget is not None and self.bound:
            fn = self._charged(fn, operand_cost, budget)
        if budget is None:
            _numeric, size = self.shape.setdefault(id(node), (False, self.limits.length))
            self.eval_work += size  # what this node builds, at every evaluation
        return fn, False, None

    def _constant_shape(self, node: ast.AST, value: Any) -> None:
        """Record a constant's shape; a computed one (not a literal or a display of literals, which the
        text's size bounds) is charged to the expression's constant work."""
        size = _cost(value, _MAX_CONSTANT_WORK)
        self.shape[id(node)] = (type(value) in _SCALAR_TYPES and not isinstance(value, str), size)
        if isinstance(node, ast.BinOp | ast.Call | ast.IfExp | ast.BoolOp | ast.UnaryOp):
            self.constant_work += size
            if self.constant_work > _MAX_CONSTANT_WORK:
                raise self.fail(f"its constant parts build more than {_MAX_CONSTANT_WORK} units "
                                "(items and characters) together")

    def _shape(self, node: ast.AST) -> tuple[bool, int]:
        """(is surely a number, most items) of a compiled node's value."""
        return self.shape.get(id(node), (False, self.limits.length))

    def _note(self, node: ast.AST, numeric: bool, size: int, read: int = 0) -> None:
        """Record a non-constant node's shape; ``read``: units it reads besides building its value."""
        if self.budget is None:
            self.shape[id(node)] = (numeric, 1 if numeric else size)
            self.eval_work += read

    def _size_of(self, node: ast.AST, compiled: tuple[_Fn, bool, Any]) -> int:
        """Units an operand holds (a constant set: looked up by hashing, not read)."""
        _fn, is_const, value = compiled
        if is_const:
            return 1 if isinstance(value, frozenset) else _cost(value, _MAX_CONSTANT_WORK)
        return self._shape(node)[1]

    @staticmethod
    def _charged(fn: _Fn, operand_cost: int, budget: _Budget) -> _Fn:
        """``fn`` charging the budget, at each call, for its constant operands and its result."""

        def charged(env: Mapping[str, Any]) -> Any:
            value = fn(env)
            kind = type(value)
            if kind is int:
                cost = 1 + value.bit_length() // 32
            elif kind is float or kind is bool or value is None:
                cost = 1
            else:
                cost = _cost(value, _MAX_WORK - budget.work)
            budget.spend(operand_cost + cost)
            return value

        return charged

    def _const(self, value: Any) -> tuple[_Fn, bool]:
        return (lambda env, v=value: v), True

    def _Constant(self, node: ast.Constant) -> tuple[_Fn, bool]:
        value = node.value
        if value is not None and not isinstance(value, int | float | str | bool):
            raise self.fail(f"literal {_shown(repr(value))} is not allowed")
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise self.fail(f"integer literal of more than {_MAX_INT_BITS} bits")
        if isinstance(value, str) and len(value) > self.limits.length:
            raise self.fail(f"string literal of more than {self.limits.length} characters")
        return self._const(value)

    def _Name(self, node: ast.Name) -> tuple[_Fn, bool]:
        name = node.id
        if name.startswith("__"):
            raise self.fail(f"name {_shown(name)} is not allowed")
        if name in ("True", "False", "None"):  # pragma: no cover - parsed as Constant on 3.8+
            return self._const({"True": True, "False": False, "None": None}[name])
        if name in _FUNCTIONS or (self.sequences and name in _SEQUENCE_FUNCTIONS):
            raise self.fail(f"function {_shown(name)} must be called")
        if name in self.bound:
            index = len(self.bound) - 1 - self.bound[::-1].index(name)  # the innermost binding
            self.lowest_bound_read = min(self.lowest_bound_read, index)
            return operator.itemgetter(name), False
        self.names.add(name)
        if name in self.value_sizes:
            size = self.value_sizes[name]
            self._note(node, size is None, size or 1)
        return operator.itemgetter(name), False

    def _BinOp(self, node: ast.BinOp) -> tuple[_Fn, bool]:
        kind = type(node.op)
        if kind not in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow):
            raise self.fail(f"operator {kind.__name__} is not allowed")
        lf, lc, lv = self.compile(node.left)
        rf, rc, rv = self.compile(node.right)
        op: Callable[[Any, Any], Any]
        number = (int, float)
        if kind is ast.Add:
            # A number cannot be concatenated: with one constant number operand, + cannot grow.
            number_operand = (lc and type(lv) in number) or (rc and type(rv) in number)
            op = operator.add if number_operand else self.ops.add
        elif kind is ast.Sub:
            op = operator.sub
        elif kind is ast.Mult:
            op = self.ops.mul
        elif kind is ast.Div:
            op = operator.truediv
        elif kind is ast.FloorDiv:
            op = operator.floordiv
        elif kind is ast.Mod:
            if lc and isinstance(lv, str):
                raise self.fail("string formatting with % is not allowed")
            op = operator.mod if lc else self.ops.mod
        else:
            op = self.ops.pow
        if not (lc and rc):
            (l_num, l_size), (r_num, r_size) = self._shape(node.left), self._shape(node.right)
            length = self.limits.length
            if l_num and r_num or kind not in (ast.Add, ast.Mult):
                self._note(node, True, 1)  # a number (sequences have no - / // % **, and % of one fails)
            elif kind is ast.Add:
                self._note(node, False, l_size + r_size)
            elif lc and type(lv) is int:
                self._note(node, False, min(max(lv, 0) * r_size, length))
            elif rc and type(rv) is int:
                self._note(node, False, min(max(rv, 0) * l_size, length))
            else:  # a repetition by a count known only then: the operator's cap bounds it
                self._note(node, False, length)
        if lc and rc:
            return (lambda env: op(lv, rv)), True
        if rc:
            return (lambda env: op(lf(env), rv)), False
        if lc:
            return (lambda env: op(lv, rf(env))), False
        return (lambda env: op(lf(env), rf(env))), False

    def _UnaryOp(self, node: ast.UnaryOp) -> tuple[_Fn, bool]:
        if not isinstance(node.op, ast.Not | ast.USub | ast.UAdd):
            raise self.fail(f"operator {type(node.op).__name__} is not allowed")
        f, c, _ = self.compile(node.operand)
        self._note(node, True, 1)
        if isinstance(node.op, ast.Not):
            return (lambda env: not f(env)), c
        if isinstance(node.op, ast.USub):
            return (lambda env: -f(env)), c
        return (lambda env: +f(env)), c

    def _BoolOp(self, node: ast.BoolOp) -> tuple[_Fn, bool]:
        parts = [self.compile(v) for v in node.values]
        fns = tuple(p[0] for p in parts)
        is_const = all(p[1] for p in parts)
        shapes = [self._shape(v) for v in node.values]  # the value is one of the operands'
        self._note(node, all(n for n, _ in shapes), max(size for _, size in shapes))
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
        # Comparing reads both sides (a constant set: hashing the other side).
        read = self._size_of(node.left, left) + sum(
            self._size_of(comp, c) for comp, c in zip(node.comparators, comparators, strict=True))
        self._note(node, True, 1, read)
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
        # `x in (1, 2, 3)`: a constant tuple becomes a frozenset for O(1) membership (a string stays a
        # string: `in` is then a substring test).
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
            if self.budget is None:  # built at every evaluation (compile() never sees this node)
                size = len(parts) + sum(self._size_of(e, p) for e, p in zip(node.elts, parts, strict=True))
                self.shape[id(node)] = (False, size)
                self.eval_work += size
            return self._sequence_of(parts)
        fn, is_const, value = self.compile(node)
        if is_const and isinstance(value, tuple | list):
            try:
                frozen = frozenset(value)
            except TypeError:
                return fn, is_const, value
            return (lambda env: frozen), True, frozen
        return fn, is_const, value

    def _sequence_of(self, parts: list[tuple[_Fn, bool, Any]]) -> tuple[_Fn, bool, Any]:
        fns = tuple(p[0] for p in parts)
        is_const = all(p[1] for p in parts)
        if len(fns) == 1:
            (a,) = fns
            return (lambda env: (a(env),)), is_const, None
        if len(fns) == 2:
            a, b = fns
            return (lambda env: (a(env), b(env))), is_const, None
        return (lambda env: tuple([f(env) for f in fns])), is_const, None

    def _Tuple(self, node: ast.Tuple) -> tuple[_Fn, bool]:
        parts = [self.compile(e) for e in node.elts]
        fn, is_const, _ = self._sequence_of(parts)
        self._note(node, False, len(parts) + sum(self._shape(e)[1] for e in node.elts))
        return fn, is_const

    _List = _Tuple
    _Set = _Tuple

    def _IfExp(self, node: ast.IfExp) -> tuple[_Fn, bool]:
        test, tc, _ = self.compile(node.test)
        body, bc, _ = self.compile(node.body)
        orelse, oc, _ = self.compile(node.orelse)
        (b_num, b_size), (o_num, o_size) = self._shape(node.body), self._shape(node.orelse)
        self._note(node, b_num and o_num, max(b_size, o_size))
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
            raise self.fail(f"unknown function {_shown(name)} (allowed: {', '.join(sorted(allowed))})")
        if node.keywords:
            raise self.fail(f"{name}() takes no keyword arguments")
        func, lo, hi = spec
        if not lo <= len(node.args) <= hi:
            raise self.fail(f"{name}() takes {lo if lo == hi else f'{lo} to {hi}'} argument(s)")
        parts = [self.compile(a) for a in node.args]
        fns = tuple(p[0] for p in parts)
        is_const = all(p[1] for p in parts)
        shapes = [self._shape(a) for a in node.args]
        read = sum(self._size_of(a, p) for a, p in zip(node.args, parts, strict=True))
        if name in ("min", "max"):  # one of the arguments, or an item of the one argument
            self._note(node, all(n for n, _ in shapes), max(size for _, size in shapes), read)
        else:
            self._note(node, True, 1, read)
        if len(fns) == 1:
            (a,) = fns
            return (lambda env: func(a(env))), is_const
        if len(fns) == 2:
            a, b = fns
            return (lambda env: func(a(env), b(env))), is_const
        return (lambda env: func(*[f(env) for f in fns])), is_const

    def _ListComp(self, node: ast.ListComp) -> tuple[_Fn, bool]:
        # A list comprehension evaluates to a tuple, as list literals do (values stay hashable).
        if not self.sequences or self.budget is None:
            raise self.fail("comprehensions are not allowed")
        budget = self.budget
        outer, free = self.names, set[str]()
        self.names = free
        n_bound = len(self.bound)
        outer_lowest, self.lowest_bound_read = self.lowest_bound_read, n_bound
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
            reads_outer = self.lowest_bound_read < n_bound  # a variable of an enclosing comprehension
            self.lowest_bound_read = min(outer_lowest, self.lowest_bound_read)
        outer |= free

        def comprehension(env: Mapping[str, Any]) -> tuple[Any, ...]:
            out: list[Any] = []

            def run(level: int, scope: dict[str, Any]) -> None:
                if level == len(loops):
                    out.append(element(scope))
                    return
                name, iter_fn, conds = loops[level]
                for value in iter_fn(scope):
                    budget.step()  # one count for all the comprehensions of the evaluation
                    budget.spend(len(scope))  # copying the variables in scope
                    inner = {**scope, name: value}
                    if all(c(inner) for c in conds):
                        run(level + 1, inner)

            run(0, dict(env))
            return tuple(out)

        return comprehension, not free and not reads_outer


def evaluate_constant(text: str) -> Any:
    """Evaluate a constant expression that may build sequences, such as a T1 file's ``Values``.

    On top of :class:`Expression`'s subset this accepts ``range(...)`` and list comprehensions
    (``[32 * i for i in range(1, 32)]``, several ``for`` and ``if`` clauses, nested comprehensions);
    list literals and comprehensions evaluate to tuples. The expression must not depend on any
    parameter. No range may exceed 100,000 values, all the comprehensions of the expression take at
    most 100,000 steps together, and the whole evaluation is bounded in work and memory (see the
    module docstring). Nothing is passed to ``eval``.

    Raises:
        ExpressionError: The text uses something outside the subset (attribute access, dunder
            names, unknown functions), names a free variable, or cannot be computed (a range or
            comprehension that is too large, a division by zero).

    Example:
        >>> evaluate_constant("[1] + [2 * i for i in range(1, 4)]")
        (1, 2, 4, 6)
    """
    body = _parse(text, _CONSTANT_LIMITS)
    names: set[str] = set()
    compiler = _Compiler(text, names, sequences=True)
    _fn, is_const, value = compiler.compile(body)
    if not is_const:
        raise ExpressionError(
            f"expression {_shown(text)}: must be constant, but names {', '.join(sorted(names))}"
        )
    return value
