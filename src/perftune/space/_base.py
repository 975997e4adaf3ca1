"""The :class:`Param` base class and the helpers that every parameter type shares.

Scalar parameters (``_params``), permutations and schedules (``_permutation``) and algorithmic
selectors (``_selector``) all build on this module, and it imports none of them, so the parameter
modules form a tree rather than a circle.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from perftune.errors import SpaceError
from perftune.space._expression import Expression
from perftune.space._normalize import normalize_value

__all__ = ["MAX_VALUES", "Param"]

MAX_VALUES = 10_000
# Parameters normalise values exactly as Config does, so a value a parameter returns is the value a
# Config built from it holds.
_normalize = normalize_value


def _unit(x: Any) -> float:
    """A float in [0, 1] from anything numeric (NaN -> 0.5)."""
    x = float(x)
    if x != x:
        return 0.5
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def _bucket_encode(index: int, n: int) -> float:
    return (index + 0.5) / n


def _bucket_decode(x: Any, n: int) -> int:
    i = int(_unit(x) * n)
    return n - 1 if i >= n else i


def _is_int(v: Any) -> bool:
    return type(v) is int or (isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_))


def _is_real(v: Any) -> bool:
    return (
        type(v) is float or type(v) is int or isinstance(v, int | float | np.integer | np.floating)
    ) and not (isinstance(v, bool | np.bool_))


def _as_int(v: Any, what: str, owner: str) -> int:
    if _is_int(v):
        return int(v)
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return int(v)
    raise SpaceError(f"{owner}: {what} must be an integer, got {v!r}")


def _as_float(v: Any, what: str, owner: str) -> float:
    if not _is_real(v) or not math.isfinite(float(v)):
        raise SpaceError(f"{owner}: {what} must be a finite number, got {v!r}")
    return float(v)


def _key(v: Any) -> tuple[int, Any]:
    """Identity of an option: True and 1 are different options, 1 and 1.0 are the same."""
    t = type(v)
    if t is bool:
        return (0, v)
    if t is int or t is float:
        return (1, v)
    if t is str:
        return (2, v)
    return (3, v)


def _as_expression(when: Any, owner: str) -> Expression | None:
    if when is None:
        return None
    if isinstance(when, Expression):
        return when
    if isinstance(when, str):
        return Expression(when)
    raise SpaceError(f"{owner}: when= must be an expression string, got {type(when).__name__}")


class Param(ABC):
    """Abstract base of every parameter type.

    Subclasses define the domain and its operators: sampling, mutation, a deterministic
    neighbourhood, crossover, an encoding on the unit cube, and JSON conversion.

    Attributes:
        name: Set by :class:`~perftune.space.Space` from the dict key ("" before).
        default: The user's default value, or None (then :meth:`natural_default` is used).
        when: Condition that makes the parameter active, or None (always active).
        n_dims: Size of the unit-cube encoding.

    Example:
        >>> from perftune.space import Int
        >>> Int(1, 8, default=4).default_value()
        4
    """

    type_name: ClassVar[str] = ""
    n_dims: int = 1
    #: True when :meth:`sample` is uniform over a finite domain (then :meth:`mass` is constant).
    uniform_mass: ClassVar[bool] = True
    #: True when ``decode([u])`` with ``u`` uniform in [0, 1) has the distribution of :meth:`sample`
    #: (one-dimensional types): the space then samples many parameters with one numpy call.
    decode_is_sample: ClassVar[bool] = False

    name: str
    default: Any | None
    when: Expression | None

    def __init__(self, *, default: Any = None, when: str | Expression | None = None) -> None:
        self.name = ""
        self.when = _as_expression(when, self.label())
        self.default = None
        if default is not None:
            value = self.coerce_default(default)
            if not self.contains(value):
                raise self.error(f"default {default!r} is outside the domain {self.domain_text()}")
            self.default = value

    # -- naming and errors -------------------------------------------------------------------
    def label(self) -> str:
        """How error messages name this parameter."""
        return f"parameter {self.name!r}" if self.name else self._signature()

    def error(self, message: str) -> SpaceError:
        return SpaceError(f"{self.label()}: {message}")

    def _signature(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(a) for a in self._args())})"

    def _args(self) -> Sequence[Any]:
        return ()

    def domain_text(self) -> str:
        return self._signature()

    def __repr__(self) -> str:
        extra = []
        if self.default is not None:
            extra.append(f"default={self.default!r}")
        if self.when is not None:
            extra.append(f"when={self.when.text!r}")
        args = [repr(a) for a in self._args()] + extra
        return f"{type(self).__name__}({', '.join(args)})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Param):
            return NotImplemented
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    # -- values --------------------------------------------------------------------------------
    def coerce_default(self, value: Any) -> Any:
        """Turn a user-given default (maybe from JSON/TOML) into a value of this type."""
        return self.from_json_value(value)

    @abstractmethod
    def natural_default(self) -> Any:
        """The default when the user gave none."""

    def default_value(self) -> Any:
        """The user's default if given, else the natural default."""
        return self.natural_default() if self.default is None else self.default

    @abstractmethod
    def contains(self, value: Any) -> bool:
        """True when ``value`` is a legal value of this parameter."""

    def why_not(self, value: Any) -> str:
        """Why ``value`` is not a legal value (for one that :meth:`contains` refuses), in words."""
        return f"{value!r} is outside the domain {self.domain_text()}"

    def nearest(self, value: Any) -> Any:
        """A legal value close to ``value`` (the default when nothing sensible is close)."""
        return value if self.contains(value) else self.default_value()

    @abstractmethod
    def cardinality(self) -> int | None:
        """Number of distinct values, None if infinite."""

    def is_finite(self) -> bool:
        """True when the domain is finite (without counting it, where counting costs more)."""
        return self.cardinality() is not None

    def iter_values(self) -> Iterator[Any]:
        """Every value of a finite domain, in order (may be very many)."""
        if type(self).values is not Param.values:  # a subclass that only lists its values
            listed = self.values()
            if listed is not None:
                return iter(listed)
        raise SpaceError(f"{self.label()}: has infinitely many values")

    def values(self) -> list[Any] | None:
        """All values if finite and at most 10,000 of them, else None."""
        n = self.cardinality()
        if n is None or n > MAX_VALUES:
            return None
        return list(self.iter_values())

    # -- operators -----------------------------------------------------------------------------
    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Any:
        """A random value."""

    def mass(self, value: Any) -> float:
        """Probability (up to a constant) that :meth:`sample` returns ``value`` (finite domains)."""
        return 1.0

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> Any:
        """A random value near ``value``; ``scale`` is roughly a fraction of the range."""
        for _ in range(8):
            v = self.sample(rng)
            if v != value:
                return v
        return value

    def neighbors(self, value: Any) -> list[Any]:
        """A deterministic, small neighbourhood of ``value`` (not including it)."""
        return []

    def crossover(self, a: Any, b: Any, rng: np.random.Generator) -> Any:
        """Combine two values; by default, pick one of them at random."""
        return a if rng.random() < 0.5 else b

    @abstractmethod
    def encode(self, value: Any) -> np.ndarray:
        """Position of ``value`` in ``[0, 1] ** n_dims``."""

    @abstractmethod
    def decode(self, vec: Sequence[float] | np.ndarray) -> Any:
        """A legal value for any vector (clipped into the unit cube)."""

    # -- serialization -------------------------------------------------------------------------
    def to_json_value(self, value: Any) -> Any:
        """A JSON-compatible form of ``value``."""
        if isinstance(value, tuple):
            return list(value)
        return value

    def from_json_value(self, j: Any) -> Any:
        """Inverse of :meth:`to_json_value`."""
        return _normalize(j)

    def _fields(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        """Plain-data description; :func:`parameter_from_dict` inverts it.

        Example:
            >>> from perftune.space import Pow2
            >>> Pow2(16, 256, default=64).to_dict()
            {'type': 'pow2', 'lo': 16, 'hi': 256, 'default': 64}
        """
        d: dict[str, Any] = {"type": self.type_name, **self._fields()}
        if self.default is not None:
            d["default"] = self.to_json_value(self.default)
        if self.when is not None:
            d["when"] = self.when.text
        return d


def _check_options(options: Any, owner: str) -> tuple[Any, ...]:
    if isinstance(options, str | bytes) or not isinstance(options, Iterable):
        raise SpaceError(f"{owner}: options must be a list, got {type(options).__name__}")
    opts = tuple(_normalize(o) for o in options)
    if not opts:
        raise SpaceError(f"{owner}: empty list of options")
    seen: set[tuple[int, Any]] = set()
    for o in opts:
        if not isinstance(o, str | int | float | bool):
            raise SpaceError(f"{owner}: option {o!r} must be a str, int, float or bool")
        if isinstance(o, float) and not math.isfinite(o):
            # NaN equals nothing (not even itself after a JSON round trip) and JSON has neither.
            raise SpaceError(f"{owner}: option {o!r} is not a finite number")
        k = _key(o)
        if k in seen:
            raise SpaceError(f"{owner}: duplicate option {o!r}")
        seen.add(k)
    for o in opts:
        if type(o) is bool and (1, o) in seen:
            # A configuration holds values, and True == 1 (False == 0): the two would be one configuration.
            number = next(x for x in opts if type(x) is not bool and x == o)
            raise SpaceError(f"{owner}: {o!r} and {number!r} cannot both be options: a configuration "
                             f"does not tell them apart ({o!r} == {number!r}); use strings such as '{o}' "
                             f"and '{number}'")
    return opts

