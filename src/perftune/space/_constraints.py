"""How a space holds its constraints: each one's text or callable, the names it reads, its evaluator.

Example:
    >>> c = Constraint("a < b", known=["a", "b"])
    >>> sorted(c.names), c.fn({"a": 1, "b": 2})
    (['a', 'b'], True)
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perftune.errors import ExpressionError, SpaceError
from perftune.space._config import Config
from perftune.space._expression import Expression

__all__ = [
    "CallableConstraint",
    "Constraint",
    "ConstraintFn",
    "ConstraintKeyError",
    "checks_hold",
    "guard",
    "suggest",
    "unknown_name",
]

ConstraintFn = Callable[[Mapping[str, Any]], Any]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    parameter) holds, one that raises anything else does not (a callable's typo'd key raises
    :class:`ConstraintKeyError`)."""
    for fn in checks:
        try:
            if not fn(data):
                return False
        except KeyError:
            continue
        except ConstraintKeyError:
            raise
        except Exception:
            return False
    return True


def suggest(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(name: str, known: Sequence[str]) -> str:
    """`` (did you mean ...?)`` for a name an expression reads that is no parameter; for one that is part
    of a parameter's name that is no identifier (``my-param``), why an expression cannot name it."""
    hidden = [k for k in known if not k.isidentifier() and name in _IDENTIFIER.findall(k)]
    if hidden:
        return (f" (parameter {hidden[0]!r} is not a Python identifier, so no expression can name it: "
                "rename it, with letters, digits and underscores)")
    return suggest(name, known)


class ConstraintKeyError(SpaceError):
    """A callable constraint read a key that is not a parameter of the space (a typo): it never holds by
    default, the run stops with this error instead."""


class CallableConstraint:
    """Adapts a user callable ``f(config) -> bool`` to the internal ``f(dict)`` form; picklable.

    A ``KeyError`` for a parameter absent from the configuration (inactive through its ``when=``) means
    the constraint holds; one for a key that is no parameter raises :class:`ConstraintKeyError`, naming
    the constraint and the key. Any other exception is remembered in :attr:`error` (type and message, for
    the error that says no valid configuration was found) and raised on: it breaks the constraint.
    """

    __slots__ = ("error", "fn", "known", "label")

    def __init__(self, fn: Callable[[Config], Any], known: Sequence[str] = (), label: str = "") -> None:
        self.fn = fn
        self.known = frozenset(known)
        self.label = label or getattr(fn, "__qualname__", None) or repr(fn)
        self.error: str | None = None

    def __call__(self, data: Mapping[str, Any]) -> Any:
        try:
            return self.fn(Config._trusted(dict(data)) if type(data) is not dict else Config._trusted(data))
        except KeyError as exc:
            key = exc.args[0] if len(exc.args) == 1 else exc.args
            try:
                is_param = key in self.known
            except TypeError:  # an unhashable key
                is_param = False
            if is_param and key not in data:
                raise  # reads an inactive parameter: the callers count the constraint as holding
            if is_param:
                self.error = f"KeyError: {exc}"
                return False
            raise ConstraintKeyError(
                f"constraint {self.label}: reads {key!r}, which is not a parameter of the space"
                f"{suggest(key, sorted(self.known)) if isinstance(key, str) else ''}"
            ) from None
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            raise


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
                        f"constraint {expr.text!r}: unknown parameter {name!r}{unknown_name(name, known)}"
                    )
            self.names: frozenset[str] | None = expr.names
            self.fn: ConstraintFn = expr._fn
            self.label = repr(expr.text)
            self.source = expr.text
        elif callable(source):
            self.names = None
            self.label = getattr(source, "__qualname__", None) or repr(source)
            self.fn = CallableConstraint(source, known, self.label)
        else:
            raise SpaceError(
                f"constraint {source!r}: must be an expression string or a callable, "
                f"not {type(source).__name__}"
            )
