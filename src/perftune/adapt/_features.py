"""Input features: functions of an input, registered with a cost, some computed on samples.

A feature maps one input to one number. Its cost is either declared ``"cheap"`` (free: the length of
a list, the shape of an array, a field of a request) or measured on the training inputs
(``"measured"``, the default), so that the dispatcher learns which features pay for themselves. A
*sampled* feature takes a sampling level as its second argument (how many elements to look at) and
is offered to the learner once per level, as PetaBricks does: ``sortedness@64`` is cheap and rough,
``sortedness@4096`` costly and precise.

The sampled features below read an evenly strided sample, without randomness, so a feature is a
pure function of its input (the dispatcher must decide the same way twice).

Example:
    >>> sortedness([1, 2, 3, 5, 4], 8)
    0.75
    >>> duplicates([7, 7, 7, 1], 4)
    0.5
    >>> divisibility((96, 64))
    5
"""

from __future__ import annotations

import bisect
import functools
import inspect
import math
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from typing import Any

from perftune.errors import PerftuneError

__all__ = [
    "CHEAP",
    "MEASURED",
    "AdaptError",
    "Feature",
    "density",
    "descending",
    "divisibility",
    "duplicates",
    "far_order",
    "local_inversions",
    "log_size",
    "monotone_runs",
    "sample",
    "sortedness",
]

CHEAP = "cheap"
MEASURED = "measured"


class AdaptError(PerftuneError):
    """A feature, dispatcher, dispatcher file or ``tune_inputs`` call is used wrongly."""


@dataclass(frozen=True)
class Feature:
    """One registered feature.

    Attributes:
        name: Unique within its site; the column is ``name`` or ``name@level``.
        fn: ``fn(input)``, or ``fn(input, level)`` for a sampled feature; returns a number.
        cost: ``"cheap"`` (counted as free) or ``"measured"`` (timed on every training input).
        levels: Sampling levels (positive integers), empty for an unsampled feature.

    A sampled feature whose function also takes ``offset=`` (every built-in one does) can be read again
    at other places of the same input: :func:`perftune.adapt.tune_inputs` does so to measure each
    level's noise, and the learner scores a dispatcher on those repeated samples too, so a level too
    noisy to be trusted is not read.

    Example:
        >>> f = Feature("n", len, cost="cheap")
        >>> f.columns
        ('n',)
        >>> Feature("sorted", sortedness, levels=(16, 256)).columns
        ('sorted@16', 'sorted@256')
    """

    name: str
    fn: Callable[..., Any]
    cost: str = MEASURED
    levels: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "@" in self.name:
            raise AdaptError(f"feature name must be a non-empty string without '@', got {self.name!r}")
        if not callable(self.fn):
            raise AdaptError(f"feature {self.name!r}: {self.fn!r} is not callable")
        if self.cost not in (CHEAP, MEASURED):
            raise AdaptError(f"feature {self.name!r}: cost must be 'cheap' or 'measured', got {self.cost!r}")
        levels = tuple(self.levels)
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in levels):
            raise AdaptError(f"feature {self.name!r}: levels must be positive integers, got {list(levels)}")
        if list(levels) != sorted(set(levels)):
            raise AdaptError(f"feature {self.name!r}: levels must strictly increase, got {list(levels)}")
        object.__setattr__(self, "levels", levels)

    @property
    def columns(self) -> tuple[str, ...]:
        """The learner's columns: one per sampling level (or the bare name)."""
        if not self.levels:
            return (self.name,)
        return tuple(f"{self.name}@{v}" for v in self.levels)

    def column_functions(self) -> list[Callable[[Any], float]]:
        """One ``f(input) -> float`` per column, in the order of :attr:`columns`."""
        fn = self.fn
        if not self.levels:
            return [functools.partial(_as_float, fn)]  # a partial, not a lambda: it pickles
        return [functools.partial(_at_level, fn, v) for v in self.levels]

    @property
    def resamples(self) -> bool:
        """Whether this is a sampled feature whose function takes ``offset=`` (repeated samples)."""
        if not self.levels:
            return False
        try:
            params = inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return False
        return "offset" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

    def resample_functions(self) -> list[Callable[[Any, int], float]] | None:
        """One ``f(input, offset) -> float`` per column, or None when the feature cannot resample."""
        if not self.resamples:
            return None
        fn = self.fn
        return [functools.partial(_at_level_offset, fn, v) for v in self.levels]


def _as_float(fn: Callable[..., Any], x: Any) -> float:
    return float(fn(x))


def _at_level(fn: Callable[..., Any], level: int, x: Any) -> float:
    return float(fn(x, level))


def _at_level_offset(fn: Callable[..., Any], level: int, x: Any, offset: int) -> float:
    return float(fn(x, level, offset=offset))


def sample(xs: Sequence[Any], n: int, offset: int = 0) -> Sequence[Any]:
    """At most ``n`` elements of ``xs``, evenly strided (the whole sequence when it is short).

    ``offset`` shifts where the stride starts (taken modulo the stride): the same level read at other
    offsets is a repeated sample, whose spread is the sample's noise (the learner measures it).

    Example:
        >>> sample(list(range(10)), 3)
        [0, 3, 6]
        >>> sample(list(range(10)), 3, offset=1)
        [1, 4, 7]
    """
    size = len(xs)
    if size <= n:
        return xs
    step = size // n
    start = offset % step
    return xs[start : start + step * n : step]


def _runs(xs: Sequence[Any], n: int, offset: int = 0) -> tuple[int, int, int]:
    # Adjacent pairs are read in short contiguous windows spread over the input, so that "nearly
    # sorted" (rare local swaps) is seen as such; a strided sample would compare far-apart elements.
    size = len(xs)
    if size < 2:
        return 0, 0, 0
    n = max(2, min(n, size))
    window = 8 if n >= 16 else n
    n_windows = max(1, n // window)
    step = max(window, size // n_windows)
    up = down = total = 0
    for start in range(offset % step, size - 1, step):
        block = xs[start : start + window + 1]
        for a, b in zip(block, block[1:], strict=False):
            total += 1
            if a < b:
                up += 1
            elif a > b:
                down += 1
        if total >= n:
            break
    return up, down, total


def sortedness(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """Fraction of ascending adjacent pairs (ties count as half) in about ``n`` sampled pairs.

    1.0 for sorted input, 0.0 for reversed, about 0.5 for random order. ``offset`` shifts the sampled
    windows (a repeated sample, see :func:`sample`).
    """
    up, down, total = _runs(xs, n, offset)
    if total == 0:
        return 1.0
    return (up + 0.5 * (total - up - down)) / total


def monotone_runs(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """Fraction of short windows (8 neighbours, about ``n`` pairs in all) that are monotone, either way.

    1.0 for sorted, reversed, organ-pipe and sawtooth inputs (long runs), near 0 for random order.
    """
    size = len(xs)
    if size < 3:
        return 1.0
    window = 8
    n_windows = max(1, n // window)
    step = max(window, size // n_windows)
    monotone = total = 0
    for start in range(offset % step, max(1, size - window), step):
        block = xs[start : start + window]
        pairs = list(zip(block, block[1:], strict=False))
        total += 1
        if all(a <= b for a, b in pairs) or all(a >= b for a, b in pairs):
            monotone += 1
        if total >= n_windows:
            break
    return monotone / total


def far_order(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """Fraction of about ``n`` pairs a quarter of the input apart that are in ascending order.

    Long-range order, which neighbour-based :func:`sortedness` cannot see: a sawtooth (sorted runs
    one after another) and a nearly sorted input have the same neighbours, but here the sawtooth
    scores about 0.5 and the nearly sorted input about 1.0.
    """
    size = len(xs)
    gap = size // 4
    if gap == 0:
        return 1.0
    step = max(1, (size - gap) // n)
    up = total = 0
    for i in range(offset % step, size - gap, step):
        a, b = xs[i], xs[i + gap]
        total += 1
        up += 1 if a < b else 0 if a > b else 0.5  # type: ignore[assignment]
    return up / total


def local_inversions(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """log2(1 + inversions per element) within short windows (16 neighbours, about ``n`` elements in all).

    What insertion sort pays per element on inputs whose disorder is local: 0 for sorted input, small
    for one whose elements were moved a few places, about 2.2 for random order (3.75 inversions per
    element in a window of 16) and 3.1 for reversed (7.5, the most there can be). The log
    keeps rare and frequent disorder apart on one scale, so a model that is linear in it interpolates
    between inputs that are nearly sorted and inputs that are not.

    Example:
        >>> local_inversions(list(range(64)), 64)
        0.0
        >>> round(local_inversions(list(range(16))[::-1], 16), 2)
        3.09
    """
    size = len(xs)
    if size < 2:
        return 0.0
    window = min(16, size)
    n_windows = max(1, min(n, size) // window)
    step = max(window, size // n_windows)
    inversions = elements = 0
    for start in range(offset % step, size - window + 1, step):
        seen: list[Any] = []
        for i, x in enumerate(xs[start : start + window]):
            # The elements before x that are greater than it: what insertion sort moves past x.
            inversions += i - bisect.bisect_right(seen, x)
            bisect.insort(seen, x)
        elements += window
        if elements >= n:
            break
    return math.log2(1.0 + inversions / elements) if elements else 0.0


def descending(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """Fraction of strictly descending adjacent pairs in about ``n`` sampled pairs."""
    _, down, total = _runs(xs, n, offset)
    return down / total if total else 0.0


def duplicates(xs: Sequence[Any], n: int, offset: int = 0) -> float:
    """Fraction of repeated values in a sample of ``n`` elements (0: all differ; near 1: few values)."""
    s = sample(xs, n, offset)
    if len(s) == 0:
        return 0.0
    return 1.0 - len(set(s)) / len(s)


def density(matrix: Any, n: int, offset: int = 0) -> float:
    """Fraction of non-zero entries, from about ``n`` sampled rows of a dense or scipy-sparse matrix."""
    if hasattr(matrix, "nnz") and hasattr(matrix, "shape"):
        rows, cols = matrix.shape
        if rows == 0 or cols == 0:
            return 0.0
        if rows <= n:
            return float(matrix.nnz) / float(rows * cols)
        indptr = matrix.tocsr().indptr if not hasattr(matrix, "indptr") else matrix.indptr
        step = rows // n
        picked = range(offset % step, step * n, step)
        return float(sum(int(indptr[r + 1] - indptr[r]) for r in picked)) / float(len(picked) * cols)
    rows = len(matrix)
    if rows == 0:
        return 0.0
    picked_rows = sample(matrix, n, offset)
    total = nonzero = 0
    for row in picked_rows:
        for value in sample(row, max(1, n)):
            total += 1
            nonzero += value != 0
    return nonzero / total if total else 0.0


def divisibility(shape: Sequence[int] | int) -> int:
    """The largest ``k`` such that ``2**k`` divides every dimension of ``shape`` (capped at 30)."""
    dims = [shape] if isinstance(shape, int) else list(shape)
    k = 30
    for d in dims:
        d = int(d)
        if d == 0:
            continue
        k = min(k, (d & -d).bit_length() - 1)
    return k


def log_size(xs: Sized) -> float:
    """log2 of ``len(xs) + 1``: the size of an input as a cheap feature."""
    return math.log2(len(xs) + 1)
