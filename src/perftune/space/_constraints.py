"""How a space holds its constraints: each one's text or callable, the names it reads, its evaluator.

Example:
    >>> c = Constraint("a < b", known=["a", "b"])
    >>> sorted(c.names), c.fn({"a": 1, "b": 2})
    (['a', 'b'], True)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perftune.errors import ExpressionError, SpaceError
from perftune.space._config import Config
from perftune.space._expression import Expression

__all__ = ["CallableConstraint", "Constraint", "ConstraintFn", "checks_hold", "guard", "suggest"]

ConstraintFn = Callable[[Mapping[str, Any]], Any]


def guard(fn: ConstraintFn, conditional: tuple[str, ...]) -> ConstraintFn:
    """A constraint that mentions an inactive parameter is satisfied, whatever it would evaluate to."""

    def guarded(data: Mapping[str, Any]) -> Any:
        for n in conditional:
            if n not in data:
                return True
        return fn(data)

    return guarded


def checks_hold(checks: Sequence[ConstraintFn], data: Mapping[str, Any]) -> bool:
    """True when every constraint check holds for ``data``: one that reads an absent name (an inactive
    parameter) holds, one that raises anything else does not."""
    for fn in checks:
        try:
            if not fn(data):
                return False
        except KeyError:
            continue
        except Exception:
            return False
    return True


def suggest(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class CallableConstraint:
    """Adapts a user callable ``f(config) -> bool`` to the internal ``f(dict)`` form; picklable."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Config], Any]) -> None:
        self.fn = fn

    def __call__(self, data: Mapping[str, Any]) -> Any:
        return self.fn(Config._trusted(dict(data)) if type(data) is not dict else Config._trusted(data))


class Constraint:
    """One constraint: its text (or callable), the names it reads (None: unknown), its evaluator."""

    __slots__ = ("fn", "label", "names", "source")

    def __init__(self, source: str | Callable[[Config], Any], known: Sequence[str]) -> None:
        self.source = source
        if isinstance(source, str | Expression):
            expr = Expression(source) if isinstance(source, str) else source
            for name in sorted(expr.names):
                if name not in known:
                    raise ExpressionError(
                        f"constraint {expr.text!r}: unknown parameter {name!r}{suggest(name, known)}"
                    )
            self.names: frozenset[str] | None = expr.names
            self.fn: ConstraintFn = expr._fn
            self.label = repr(expr.text)
            self.source = expr.text
        elif callable(source):
            self.names = None
            self.fn = CallableConstraint(source)
            self.label = getattr(source, "__qualname__", None) or repr(source)
        else:
            raise SpaceError(
                f"constraint {source!r}: must be an expression string or a callable, "
                f"not {type(source).__name__}"
            )
