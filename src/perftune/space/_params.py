"""Scalar parameter types and the abstract :class:`Param` interface.

Example:
    >>> import numpy as np
    >>> p = Pow2(16, 1024, default=64)
    >>> p.neighbors(64)
    [32, 128]
    >>> p.decode(p.encode(256))
    256
    >>> p.sample(np.random.default_rng(0)) in p.values()
    True
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from perftune.errors import SpaceError
from perftune.space._base import (
    Param,
    _as_float,
    _as_int,
    _bucket_decode,
    _bucket_encode,
    _check_options,
    _is_int,
    _is_real,
    _key,
    _unit,
)
from perftune.space._expression import Expression
from perftune.space._permutation import Permutation, Schedule
from perftune.space._selector import Selector
from perftune.space._sequence import PassSequence

__all__ = [
    "Bool",
    "Choice",
    "Float",
    "Int",
    "LogFloat",
    "LogInt",
    "Ordinal",
    "Param",
    "Pow2",
    "parameter_from_dict",
]



# ---------------------------------------------------------------------------------------------
# Numeric parameters
# ---------------------------------------------------------------------------------------------

# numpy draws integers below 2**63 - 1 at most; a wider Int (Int(0, 10**30)) composes its draw.
_INT64_MAX = 2**63 - 1


def _wide_integer(rng: np.random.Generator, n: int) -> int:
    """A uniform integer in ``[0, n)`` for any ``n >= 1``: 62-bit pieces, rejection above ``n``."""
    bits = (n - 1).bit_length()
    pieces = -(-bits // 62)
    while True:
        x = 0
        for piece in rng.integers(1 << 62, size=pieces).tolist():
            x = (x << 62) | piece
        x >>= pieces * 62 - bits
        if x < n:
            return x


class Int(Param):
    """An integer in ``[lo, hi]`` (inclusive), uniform.

    Example:
        >>> Int(1, 5).neighbors(5)
        [4]
    """

    type_name = "int"
    decode_is_sample = True

    def __init__(
        self, lo: int, hi: int, *, default: Any = None, when: str | Expression | None = None
    ) -> None:
        owner = f"{type(self).__name__}({lo!r}, {hi!r})"
        self.lo = _as_int(lo, "lo", owner)
        self.hi = _as_int(hi, "hi", owner)
        if self.lo > self.hi:
            raise SpaceError(f"{owner}: empty range (lo > hi)")
        self._validate()
        self._n = self.hi - self.lo + 1
        super().__init__(default=default, when=when)

    def _validate(self) -> None:
        pass

    def _args(self) -> Sequence[Any]:
        return (self.lo, self.hi)

    def domain_text(self) -> str:
        return f"[{self.lo}, {self.hi}]"

    def _fields(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi}

    def natural_default(self) -> int:
        return self.lo

    def contains(self, value: Any) -> bool:
        return (type(value) is int or _is_int(value)) and self.lo <= value <= self.hi

    def why_not(self, value: Any) -> str:
        if not _is_int(value):
            return f"must be an integer, got {value!r}"
        return super().why_not(value)

    def nearest(self, value: Any) -> Any:
        if self.contains(value):
            return value
        if _is_real(value) and math.isfinite(float(value)):
            return min(max(round(float(value)), self.lo), self.hi)
        return self.default_value()

    def cardinality(self) -> int:
        return self._n

    def iter_values(self) -> Iterator[int]:
        return iter(range(self.lo, self.hi + 1))

    def sample(self, rng: np.random.Generator) -> int:
        if self._n > _INT64_MAX:
            return self.lo + _wide_integer(rng, self._n)
        return self.lo + int(rng.integers(self._n))

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> int:
        if self._n == 1:
            return self.lo
        step = int(round(rng.normal(0.0, max(scale * self._n, 0.5))))
        if step == 0:
            step = 1 if rng.random() < 0.5 else -1
        v = int(value) + step
        if v < self.lo or v > self.hi:
            v = int(value) - step
        return min(max(v, self.lo), self.hi)

    def neighbors(self, value: Any) -> list[Any]:
        return [v for v in (value - 1, value + 1) if self.lo <= v <= self.hi]

    def encode(self, value: Any) -> np.ndarray:
        return np.array([self.encode1(value)])

    def encode1(self, value: Any) -> float:
        """The one coordinate of :meth:`encode` (one-dimensional types)."""
        return _bucket_encode(value - self.lo, self._n)

    def decode(self, vec: Sequence[float] | np.ndarray) -> int:
        return self.lo + _bucket_decode(vec[0], self._n)


class LogInt(Int):
    """An integer in ``[lo, hi]`` with ``lo >= 1``, sampled log-uniformly.

    Example:
        >>> p = LogInt(1, 1000)
        >>> p.decode(p.encode(37))
        37
    """

    type_name = "logint"
    uniform_mass = False

    def mass(self, value: Any) -> float:
        return math.log((value + 1) / value) / self._log_span if self._n > 1 else 1.0

    def _validate(self) -> None:
        if self.lo < 1:
            raise SpaceError(f"{self._signature()}: lo must be >= 1 for a log scale")
        self._log_lo = math.log(self.lo)
        self._log_span = math.log(self.hi + 1) - self._log_lo

    def sample(self, rng: np.random.Generator) -> int:
        return self.decode((rng.random(),))

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> int:
        if self._n == 1:
            return self.lo
        x = math.log(value + 0.5) + rng.normal(0.0, scale * self._log_span)
        v = int(math.floor(math.exp(min(x, 700.0))))
        v = min(max(v, self.lo), self.hi)
        if v == value:
            v = value + 1 if (rng.random() < 0.5 and value < self.hi) or value == self.lo else value - 1
        return v

    def neighbors(self, value: Any) -> list[Any]:
        out = []
        for v in (value // 2, value - 1, value + 1, value * 2):
            if self.lo <= v <= self.hi and v != value and v not in out:
                out.append(v)
        return out

    def encode1(self, value: Any) -> float:
        if self._n == 1:
            return 0.5
        mid = 0.5 * (math.log(value) + math.log(value + 1))
        return (mid - self._log_lo) / self._log_span

    def decode(self, vec: Sequence[float] | np.ndarray) -> int:
        x = _unit(vec[0])
        v = int(math.floor(math.exp(self._log_lo + x * self._log_span)))
        return min(max(v, self.lo), self.hi)


class Pow2(Int):
    """A power of two in ``[lo, hi]``; ``lo`` and ``hi`` must be powers of two.

    Neighbours are ``value * 2`` and ``value / 2`` (the multiplicative moves that block sizes want).

    Example:
        >>> Pow2(1, 8).values()
        [1, 2, 4, 8]
    """

    type_name = "pow2"

    def _validate(self) -> None:
        for what, v in (("lo", self.lo), ("hi", self.hi)):
            if v < 1 or v & (v - 1):
                raise SpaceError(f"{self._signature()}: {what}={v} is not a power of two")
        self._e_lo = self.lo.bit_length() - 1
        self._e_n = self.hi.bit_length() - self.lo.bit_length() + 1

    def domain_text(self) -> str:
        return f"powers of two in [{self.lo}, {self.hi}]"

    def contains(self, value: Any) -> bool:
        return _is_int(value) and self.lo <= value <= self.hi and not (value & (value - 1))

    def nearest(self, value: Any) -> Any:
        if self.contains(value):
            return value
        if _is_real(value) and math.isfinite(float(value)) and value > 0:
            e = round(math.log2(float(value)))
            e = min(max(e, self._e_lo), self._e_lo + self._e_n - 1)
            return 1 << e
        return self.default_value()

    def cardinality(self) -> int:
        return self._e_n

    def iter_values(self) -> Iterator[int]:
        return (1 << (self._e_lo + i) for i in range(self._e_n))

    def sample(self, rng: np.random.Generator) -> int:
        return 1 << (self._e_lo + int(rng.integers(self._e_n)))

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> int:
        if self._e_n == 1:
            return self.lo
        e = value.bit_length() - 1 - self._e_lo
        step = int(round(rng.normal(0.0, max(scale * self._e_n, 0.5))))
        if step == 0:
            step = 1 if rng.random() < 0.5 else -1
        e2 = e + step
        if not 0 <= e2 < self._e_n:
            e2 = e - step
        e2 = min(max(e2, 0), self._e_n - 1)
        return int(1 << (self._e_lo + e2))

    def neighbors(self, value: Any) -> list[Any]:
        return [v for v in (value // 2, value * 2) if self.lo <= v <= self.hi]

    def encode1(self, value: Any) -> float:
        return _bucket_encode(value.bit_length() - 1 - self._e_lo, self._e_n)

    def decode(self, vec: Sequence[float] | np.ndarray) -> int:
        return 1 << (self._e_lo + _bucket_decode(vec[0], self._e_n))


class Float(Param):
    """A real number in ``[lo, hi]``, uniform.

    Example:
        >>> Float(0.0, 1.0).decode([0.25])
        0.25
    """

    type_name = "float"
    decode_is_sample = True

    def __init__(
        self, lo: float, hi: float, *, default: Any = None, when: str | Expression | None = None
    ) -> None:
        owner = f"{type(self).__name__}({lo!r}, {hi!r})"
        self.lo = _as_float(lo, "lo", owner)
        self.hi = _as_float(hi, "hi", owner)
        if self.lo > self.hi:
            raise SpaceError(f"{owner}: empty range (lo > hi)")
        self._validate()
        self._digits = _tidy_digits(self.lo, self.hi)
        super().__init__(default=default, when=when)

    def _validate(self) -> None:
        self._span = self.hi - self.lo

    def _args(self) -> Sequence[Any]:
        return (self.lo, self.hi)

    def domain_text(self) -> str:
        return f"[{self.lo}, {self.hi}]"

    def _fields(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi}

    def coerce_default(self, value: Any) -> Any:
        return float(value) if _is_real(value) else value

    def natural_default(self) -> float:
        return self.lo

    def contains(self, value: Any) -> bool:
        return _is_real(value) and self.lo <= value <= self.hi

    def why_not(self, value: Any) -> str:
        if not _is_real(value):
            return f"must be a number, got {value!r}"
        return super().why_not(value)

    def nearest(self, value: Any) -> Any:
        if self.contains(value):
            return value
        if _is_real(value) and not math.isnan(float(value)):
            return min(max(float(value), self.lo), self.hi)
        return self.default_value()

    def cardinality(self) -> int | None:
        return 1 if self.lo == self.hi else None

    def iter_values(self) -> Iterator[float]:
        if self.lo == self.hi:
            return iter([self.lo])
        return super().iter_values()

    def _from_unit(self, x: float) -> float:
        if math.isinf(self._span):  # hi - lo overflows (Float(-1e308, 1e308)): scale each bound instead
            return _tidy(self.lo * (1.0 - x) + self.hi * x, self.lo, self.hi, self._digits)
        return _tidy(self.lo + x * self._span, self.lo, self.hi, self._digits)

    def _to_unit(self, value: float) -> float:
        if math.isinf(self._span):
            return min(max((value / 2 - self.lo / 2) / (self.hi / 2 - self.lo / 2), 0.0), 1.0)
        return 0.5 if self._span == 0 else (value - self.lo) / self._span

    def sample(self, rng: np.random.Generator) -> float:
        return self._from_unit(rng.random())

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> float:
        if self._span == 0:
            return self.lo
        x = self._to_unit(value) + rng.normal(0.0, scale)
        # Reflect at the bounds so that mass does not pile up on them.
        x = abs(x) % 2.0
        if x > 1.0:
            x = 2.0 - x
        return self._from_unit(x)

    def neighbors(self, value: Any) -> list[Any]:
        if self._span == 0:
            return []
        x = self._to_unit(value)
        out = []
        for dx in (-0.05, 0.05):
            v = self._from_unit(min(max(x + dx, 0.0), 1.0))
            if v != value and v not in out:
                out.append(v)
        return out

    def encode(self, value: Any) -> np.ndarray:
        return np.array([self._to_unit(value)])

    def encode1(self, value: Any) -> float:
        """The one coordinate of :meth:`encode`."""
        return self._to_unit(value)

    def decode(self, vec: Sequence[float] | np.ndarray) -> float:
        return self._from_unit(_unit(vec[0]))


def _tidy(value: float, lo: float, hi: float, digits: int = 12) -> float:
    """``value`` in ``[lo, hi]``, to ``digits`` significant digits (12, see :func:`_tidy_digits`): a value
    that went through the unit cube and back (an encoded measured configuration, a proposal next to it)
    comes out as the value itself, not one a rounding error away (0.0001 as 0.00010000000000000009), so
    that the cache knows it. ``digits`` 0: the value as it is."""
    value = min(max(value, lo), hi)
    if not digits:
        return value
    tidy = float(f"{value:.{digits}g}")
    return tidy if lo <= tidy <= hi else value


def _tidy_digits(lo: float, hi: float) -> int:
    """Significant digits :func:`_tidy` keeps in ``[lo, hi]``: 12, or more where 12 would be coarser than a
    millionth of the range (``Float(1e9, 1e9 + 1e-3)`` would collapse to one value); 0 (no rounding) where
    even 17 would."""
    span, big = hi - lo, max(abs(lo), abs(hi))
    if span == 0 or not math.isfinite(span) or big == 0:
        return 12
    top = math.floor(math.log10(big))
    for digits in range(12, 18):
        if 10.0 ** (top - digits + 1) <= 1e-6 * span:
            return digits
    return 0


class LogFloat(Float):
    """A positive real number in ``[lo, hi]``, log-uniform.

    Example:
        >>> round(LogFloat(1e-4, 1.0).decode([0.5]), 6)
        0.01
    """

    type_name = "logfloat"

    def _validate(self) -> None:
        if self.lo <= 0:
            raise SpaceError(f"{self._signature()}: lo must be > 0 for a log scale")
        self._log_lo = math.log(self.lo)
        self._span = math.log(self.hi) - self._log_lo

    def _from_unit(self, x: float) -> float:
        if x <= 0.0:
            return self.lo
        if x >= 1.0:
            return self.hi
        return _tidy(math.exp(self._log_lo + x * self._span), self.lo, self.hi, self._digits)

    def _to_unit(self, value: float) -> float:
        return 0.5 if self._span == 0 else (math.log(value) - self._log_lo) / self._span


# ---------------------------------------------------------------------------------------------
# Categorical parameters
# ---------------------------------------------------------------------------------------------




class Choice(Param):
    """One of a list of options (str, int, float or bool), unordered.

    Example:
        >>> Choice(["quick", "merge", "heap"]).neighbors("merge")
        ['quick', 'heap']
    """

    type_name = "choice"
    decode_is_sample = True

    def __init__(
        self, options: Sequence[Any], *, default: Any = None, when: str | Expression | None = None
    ) -> None:
        self.options = _check_options(options, f"{type(self).__name__}({options!r})")
        self._index = {_key(o): i for i, o in enumerate(self.options)}
        self._n = len(self.options)
        super().__init__(default=default, when=when)

    def _args(self) -> Sequence[Any]:
        return (list(self.options),)

    def domain_text(self) -> str:
        return repr(list(self.options))

    def _fields(self) -> dict[str, Any]:
        return {"options": list(self.options)}

    def index(self, value: Any) -> int:
        """Position of ``value`` among the options (ValueError if absent)."""
        try:
            return self._index[_key(value)]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not an option of {self.label()}") from None

    def natural_default(self) -> Any:
        return self.options[0]

    def contains(self, value: Any) -> bool:
        try:
            return _key(value) in self._index
        except TypeError:
            return False

    def cardinality(self) -> int:
        return self._n

    def iter_values(self) -> Iterator[Any]:
        return iter(self.options)

    def sample(self, rng: np.random.Generator) -> Any:
        return self.options[int(rng.integers(self._n))]

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> Any:
        if self._n == 1:
            return self.options[0]
        i = self.index(value) if self.contains(value) else 0
        j = int(rng.integers(self._n - 1))
        return self.options[j + 1 if j >= i else j]

    def neighbors(self, value: Any) -> list[Any]:
        i = self.index(value)
        return [o for j, o in enumerate(self.options) if j != i]

    def encode(self, value: Any) -> np.ndarray:
        return np.array([self.encode1(value)])

    def encode1(self, value: Any) -> float:
        """The one coordinate of :meth:`encode`."""
        return _bucket_encode(self.index(value), self._n)

    def decode(self, vec: Sequence[float] | np.ndarray) -> Any:
        return self.options[_bucket_decode(vec[0], self._n)]


class Ordinal(Choice):
    """One of a list of values, ordered as given (neighbours are the adjacent values).

    Example:
        >>> Ordinal(["O0", "O1", "O2", "O3"]).neighbors("O1")
        ['O0', 'O2']
    """

    type_name = "ordinal"

    def __init__(
        self, values: Sequence[Any], *, default: Any = None, when: str | Expression | None = None
    ) -> None:
        super().__init__(values, default=default, when=when)

    def _fields(self) -> dict[str, Any]:
        return {"values": list(self.options)}

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> Any:
        if self._n == 1:
            return self.options[0]
        i = self.index(value) if self.contains(value) else 0
        step = int(round(rng.normal(0.0, max(scale * self._n, 0.5))))
        if step == 0:
            step = 1 if rng.random() < 0.5 else -1
        j = i + step
        if not 0 <= j < self._n:
            j = i - step
        return self.options[min(max(j, 0), self._n - 1)]

    def neighbors(self, value: Any) -> list[Any]:
        i = self.index(value)
        return [self.options[j] for j in (i - 1, i + 1) if 0 <= j < self._n]


class Bool(Choice):
    """``False`` or ``True``.

    Example:
        >>> Bool(default=True).neighbors(True)
        [False]
    """

    type_name = "bool"

    def __init__(self, *, default: Any = None, when: str | Expression | None = None) -> None:
        super().__init__((False, True), default=default, when=when)

    def _args(self) -> Sequence[Any]:
        return ()

    def domain_text(self) -> str:
        return "{False, True}"

    def _fields(self) -> dict[str, Any]:
        return {}

    def coerce_default(self, value: Any) -> Any:
        return bool(value) if isinstance(value, bool | np.bool_) else value

    def contains(self, value: Any) -> bool:
        return type(value) is bool

    def nearest(self, value: Any) -> Any:
        if type(value) is bool:
            return value
        if isinstance(value, np.bool_) or (_is_int(value) and value in (0, 1)):
            return bool(value)
        return self.default_value()


# ---------------------------------------------------------------------------------------------
# Construction from plain data
# ---------------------------------------------------------------------------------------------

_ALIASES = {"min": "lo", "max": "hi"}


def _registry() -> dict[str, type[Param]]:
    classes: list[type[Param]] = [
        Int,
        Float,
        LogInt,
        LogFloat,
        Pow2,
        Choice,
        Ordinal,
        Bool,
        Permutation,
        Schedule,
        Selector,
        PassSequence,
    ]
    return {c.type_name: c for c in classes}


_POSITIONAL: dict[str, tuple[str, ...]] = {
    "int": ("lo", "hi"),
    "float": ("lo", "hi"),
    "logint": ("lo", "hi"),
    "logfloat": ("lo", "hi"),
    "pow2": ("lo", "hi"),
    "choice": ("options",),
    "ordinal": ("values",),
    "bool": (),
    "permutation": ("items",),
    "schedule": ("items",),
    "selector": ("choices",),
    "pass-sequence": ("options", "max_length"),
}
_KEYWORDS: dict[str, tuple[str, ...]] = {
    "permutation": ("crossover",),
    "schedule": ("after", "crossover"),
    "selector": ("max_levels", "size_range"),
}


def parameter_from_dict(d: dict[str, Any], name: str | None = None) -> Param:
    """Build a parameter from its :meth:`Param.to_dict` form.

    ``min``/``max`` are accepted as aliases of ``lo``/``hi``. With ``name``, error messages name the
    parameter.

    Raises:
        SpaceError: Unknown type, missing or unknown key, or an invalid definition.

    Example:
        >>> parameter_from_dict({"type": "int", "min": 1, "max": 8})
        Int(1, 8)
    """
    where = f"parameter {name!r}" if name else "parameter"
    if not isinstance(d, dict):
        raise SpaceError(f"{where}: expected a table/object, got {type(d).__name__}")
    registry = _registry()
    type_name = d.get("type")
    if type_name is None:
        raise SpaceError(f"{where}: missing 'type' (one of {', '.join(registry)})")
    cls = registry.get(str(type_name).lower())
    if cls is None:
        raise SpaceError(f"{where}: unknown parameter type {type_name!r} (one of {', '.join(registry)})")
    tname = cls.type_name
    positional = _POSITIONAL[tname]
    allowed = set(positional) | set(_KEYWORDS.get(tname, ())) | {"type", "default", "when"}
    fields: dict[str, Any] = {}
    for k, v in d.items():
        k2 = _ALIASES.get(k, k) if "lo" in positional else k
        if k2 not in allowed:
            raise SpaceError(
                f"{where}: unknown key {k!r} for type {tname!r} "
                f"(allowed: {', '.join(sorted(allowed - {'type'}))})"
            )
        if k2 in fields:
            raise SpaceError(f"{where}: {k2!r} given twice")
        fields[k2] = v
    missing = [k for k in positional if k not in fields]
    if missing:
        raise SpaceError(f"{where}: type {tname!r} needs {', '.join(repr(m) for m in missing)}")
    args = [fields.pop(k) for k in positional]
    fields.pop("type")
    try:
        param = cls(*args, **fields)
    except SpaceError as e:
        if name:
            msg = str(e)
            raise SpaceError(f"{where}: {msg.split(': ', 1)[1] if ': ' in msg else msg}") from None
        raise
    return param
