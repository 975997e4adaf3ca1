"""Algorithmic choice: a selector picks a choice per input-size range (PetaBricks style).

Example:
    >>> levels = Levels(cutoffs=(16, 1024), choices=("insertion", "merge", "radix"))
    >>> levels.choose(10), levels.choose(16), levels.choose(10**6)
    ('insertion', 'merge', 'radix')
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perftune.errors import SpaceError
from perftune.space._base import (
    Param,
    _as_int,
    _bucket_decode,
    _bucket_encode,
    _check_options,
    _key,
    _normalize,
    _unit,
)
from perftune.space._expression import Expression

__all__ = ["Levels", "Selector"]


@dataclass(frozen=True)
class Levels:
    """The value of a :class:`Selector`: choice ``i`` serves sizes ``n < cutoffs[i]``.

    The last choice serves every size at or above the last cutoff.

    Attributes:
        cutoffs: Strictly increasing size cutoffs.
        choices: One more choice than cutoffs.

    Example:
        >>> Levels((), ("quick",)).choose(5)
        'quick'
        >>> Levels((100,), ("insertion", "quick")).to_json()
        {'cutoffs': [100], 'choices': ['insertion', 'quick']}
    """

    cutoffs: tuple[int, ...]
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        cutoffs = tuple(_normalize(c) for c in self.cutoffs)
        choices = tuple(_normalize(c) for c in self.choices)
        object.__setattr__(self, "cutoffs", cutoffs)
        object.__setattr__(self, "choices", choices)
        if len(choices) != len(cutoffs) + 1:
            raise SpaceError(
                "Levels: needs one more choice than cutoffs, "
                f"got {len(cutoffs)} cutoffs and {len(choices)} choices"
            )
        for c in cutoffs:
            if type(c) is not int:
                raise SpaceError(f"Levels: cutoff {c!r} is not an integer")
        for a, b in itertools.pairwise(cutoffs):
            if not a < b:
                raise SpaceError(f"Levels: cutoffs {list(cutoffs)} are not strictly increasing")

    @property
    def n_levels(self) -> int:
        """Number of levels (choices)."""
        return len(self.choices)

    def choose(self, n: int) -> Any:
        """The choice that serves input size ``n``."""
        return self.choices[bisect.bisect_right(self.cutoffs, n)]

    def to_json(self) -> dict[str, Any]:
        return {"cutoffs": list(self.cutoffs), "choices": list(self.choices)}

    @classmethod
    def from_json(cls, d: Any) -> Levels:
        if isinstance(d, Levels):
            return d
        if not isinstance(d, dict) or set(d) != {"cutoffs", "choices"}:
            raise SpaceError(f"Levels: expected an object with 'cutoffs' and 'choices', got {d!r}")
        return cls(tuple(d["cutoffs"]), tuple(d["choices"]))

    def __str__(self) -> str:
        parts = [repr(self.choices[0])]
        for c, ch in zip(self.cutoffs, self.choices[1:], strict=True):
            parts.append(f"<{c}> {ch!r}")
        return " ".join(parts)


class Selector(Param):
    """Choose an algorithm per input-size range: up to ``max_levels`` (cutoff, choice) levels.

    Cutoffs are integers inside ``size_range`` and are sampled log-uniformly. The unit-cube
    encoding has ``2 * max_levels`` dimensions: one choice per level, the number of levels, and
    ``max_levels - 1`` cutoff keys.

    Args:
        choices: The algorithms (str, int, float or bool).
        max_levels: The most levels (choices) a value may have; 1 makes this a plain choice.
        size_range: ``(lo, hi)`` input sizes a cutoff may take, ``1 <= lo <= hi``.

    Example:
        >>> sel = Selector(["insertion", "merge"], max_levels=3, size_range=(1, 10_000))
        >>> sel.default_value()
        Levels(cutoffs=(), choices=('insertion',))
        >>> v = Levels((64,), ("insertion", "merge"))
        >>> sel.decode(sel.encode(v)) == v
        True
    """

    type_name = "selector"

    def __init__(
        self,
        choices: Sequence[Any],
        *,
        max_levels: int = 4,
        size_range: Sequence[int] = (1, 1 << 20),
        default: Any = None,
        when: str | Expression | None = None,
    ) -> None:
        owner = f"Selector({choices!r})"
        self.choices = _check_options(choices, owner)
        self.max_levels = _as_int(max_levels, "max_levels", owner)
        if self.max_levels < 1:
            raise SpaceError(f"{owner}: max_levels must be >= 1, got {max_levels!r}")
        if isinstance(size_range, str | bytes) or len(size_range) != 2:
            raise SpaceError(f"{owner}: size_range must be (lo, hi), got {size_range!r}")
        lo = _as_int(size_range[0], "size_range lo", owner)
        hi = _as_int(size_range[1], "size_range hi", owner)
        if lo < 1:
            raise SpaceError(f"{owner}: size_range lo must be >= 1 (cutoffs are sampled on a log scale)")
        if lo > hi:
            raise SpaceError(f"{owner}: empty size_range (lo > hi)")
        self.size_range = (lo, hi)
        self._index = {_key(c): i for i, c in enumerate(self.choices)}
        self._nc = len(self.choices)
        self._n_cut_values = hi - lo + 1
        # More levels than distinct cutoffs cannot exist.
        self._max_levels_eff = min(self.max_levels, self._n_cut_values + 1)
        self._log_lo = math.log(lo)
        self._log_span = math.log(hi + 1) - self._log_lo
        self.n_dims = 2 * self.max_levels
        super().__init__(default=default, when=when)

    def _args(self) -> Sequence[Any]:
        return (list(self.choices),)

    def _signature(self) -> str:
        return f"Selector({list(self.choices)!r})"

    def __repr__(self) -> str:
        base = super().__repr__()[:-1]
        return f"{base}, max_levels={self.max_levels}, size_range={self.size_range})"

    def domain_text(self) -> str:
        return (
            f"levels of {list(self.choices)!r} (at most {self.max_levels}, cutoffs in "
            f"[{self.size_range[0]}, {self.size_range[1]}])"
        )

    def _fields(self) -> dict[str, Any]:
        return {
            "choices": list(self.choices),
            "max_levels": self.max_levels,
            "size_range": list(self.size_range),
        }

    def natural_default(self) -> Levels:
        return Levels((), (self.choices[0],))

    def coerce_default(self, value: Any) -> Any:
        if isinstance(value, Levels):
            return value
        if isinstance(value, dict):
            return Levels.from_json(value)
        return value

    def contains(self, value: Any) -> bool:
        if not isinstance(value, Levels) or len(value.choices) > self.max_levels:
            return False
        lo, hi = self.size_range
        if value.cutoffs and (value.cutoffs[0] < lo or value.cutoffs[-1] > hi):
            return False
        try:
            return all(_key(c) in self._index for c in value.choices)
        except TypeError:
            return False

    def cardinality(self) -> int:
        m = self._n_cut_values
        return sum(math.comb(m, k) * self._nc ** (k + 1) for k in range(self._max_levels_eff))

    def iter_values(self) -> Iterator[Levels]:
        lo, hi = self.size_range
        for k in range(self._max_levels_eff):
            for cuts in itertools.combinations(range(lo, hi + 1), k):
                for chs in itertools.product(self.choices, repeat=k + 1):
                    yield Levels(cuts, chs)

    # -- helpers -------------------------------------------------------------------------------
    def _cutoff_from_unit(self, x: float) -> int:
        v = int(math.floor(math.exp(self._log_lo + x * self._log_span)))
        return min(max(v, self.size_range[0]), self.size_range[1])

    def _cutoff_to_unit(self, c: int) -> float:
        if self._n_cut_values == 1:
            return 0.5
        mid = 0.5 * (math.log(c) + math.log(c + 1))
        return (mid - self._log_lo) / self._log_span

    def _fix(self, cutoffs: list[int], choices: list[Any]) -> Levels:
        """Make cutoffs strictly increasing inside the range, dropping levels that do not fit."""
        lo, hi = self.size_range
        cutoffs = sorted(cutoffs)
        out: list[int] = []
        for c in cutoffs:
            c = max(c, lo, out[-1] + 1 if out else lo)
            if c > hi:
                break
            out.append(c)
        return Levels(tuple(out), tuple(choices[: len(out) + 1]))

    def _random_choice(self, rng: np.random.Generator, avoid: Any = None) -> Any:
        if self._nc > 1 and avoid is not None:
            i = self._index[_key(avoid)]
            j = int(rng.integers(self._nc - 1))
            return self.choices[j + 1 if j >= i else j]
        return self.choices[int(rng.integers(self._nc))]

    # -- operators -----------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Levels:
        k = int(rng.integers(1, self._max_levels_eff + 1))
        cut: set[int] = set()
        for _ in range(8 * k):
            if len(cut) >= k - 1:
                break
            cut.add(self._cutoff_from_unit(rng.random()))
        cutoffs = sorted(cut)[: k - 1]
        choices: list[Any] = []
        for _ in range(len(cutoffs) + 1):
            # Adjacent levels with the same choice are redundant: avoid them when possible.
            choices.append(self._random_choice(rng, choices[-1] if choices else None))
        return Levels(tuple(cutoffs), tuple(choices))

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> Levels:
        for _ in range(8):
            out = self._mutate_once(value, rng, scale)
            if out != value:
                return out
        return value  # type: ignore[no-any-return]

    def _mutate_once(self, value: Levels, rng: np.random.Generator, scale: float) -> Levels:
        cutoffs = list(value.cutoffs)
        choices = list(value.choices)
        k = len(choices)
        op = int(rng.integers(4))
        if op == 0 and cutoffs:  # move a cutoff on the log scale
            i = int(rng.integers(len(cutoffs)))
            x = self._cutoff_to_unit(cutoffs[i]) + rng.normal(0.0, scale)
            c = self._cutoff_from_unit(_unit(x))
            lo = cutoffs[i - 1] + 1 if i > 0 else self.size_range[0]
            hi = cutoffs[i + 1] - 1 if i + 1 < len(cutoffs) else self.size_range[1]
            cutoffs[i] = min(max(c, lo), hi)
            return Levels(tuple(cutoffs), tuple(choices))
        if op == 1 and self._nc > 1:  # change one level's choice
            i = int(rng.integers(k))
            choices[i] = self._random_choice(rng, choices[i])
            return Levels(tuple(cutoffs), tuple(choices))
        if op == 2 and k < self._max_levels_eff:  # split a level with a new cutoff
            c = self._cutoff_from_unit(rng.random())
            if c in cutoffs:
                return value
            i = bisect.bisect_left(cutoffs, c)
            cutoffs.insert(i, c)
            # The new level i+1 starts at c; give one side a new choice.
            choices.insert(i + 1, self._random_choice(rng, choices[i]))
            return Levels(tuple(cutoffs), tuple(choices))
        if op == 3 and k > 1:  # merge two adjacent levels
            i = int(rng.integers(len(cutoffs)))
            del cutoffs[i]
            del choices[i if rng.random() < 0.5 else i + 1]
            return Levels(tuple(cutoffs), tuple(choices))
        return self.sample(rng) if k == 1 and self._max_levels_eff == 1 else value

    def neighbors(self, value: Any) -> list[Any]:
        out: list[Levels] = []
        cutoffs = list(value.cutoffs)
        choices = list(value.choices)
        lo, hi = self.size_range
        for i, c in enumerate(cutoffs):
            below = cutoffs[i - 1] if i > 0 else lo - 1
            above = cutoffs[i + 1] if i + 1 < len(cutoffs) else hi + 1
            for c2 in (c // 2, c * 2):
                if below < c2 < above and c2 != c:
                    cs = cutoffs.copy()
                    cs[i] = c2
                    out.append(Levels(tuple(cs), value.choices))
        for i, ch in enumerate(choices):
            for other in self.choices:
                if _key(other) != _key(ch):
                    chs = choices.copy()
                    chs[i] = other
                    out.append(Levels(value.cutoffs, tuple(chs)))
        for i in range(len(cutoffs)):
            for drop in (i, i + 1):
                cs = cutoffs.copy()
                del cs[i]
                chs = choices.copy()
                del chs[drop]
                lv = Levels(tuple(cs), tuple(chs))
                if lv not in out:
                    out.append(lv)
        if len(choices) < self._max_levels_eff:
            # A new top level starting halfway (on the log scale) between the last cutoff and hi.
            start = cutoffs[-1] if cutoffs else lo
            c = int(math.sqrt(start * hi)) if start < hi else hi
            if (not cutoffs or c > cutoffs[-1]) and lo <= c <= hi:
                for other in self.choices:
                    if _key(other) != _key(choices[-1]):
                        out.append(Levels((*cutoffs, c), (*choices, other)))
        return out

    def crossover(self, a: Any, b: Any, rng: np.random.Generator) -> Levels:
        """Sizes below a random split come from ``a``, sizes from the split on come from ``b``."""
        s = self._cutoff_from_unit(rng.random())
        cut_a = [c for c in a.cutoffs if c < s]
        cut_b = [c for c in b.cutoffs if c > s]
        cutoffs = [*cut_a, s, *cut_b]
        choices = [*a.choices[: len(cut_a) + 1], *b.choices[len(b.cutoffs) - len(cut_b) :]]
        # Merge adjacent levels with the same choice, then drop random levels beyond the maximum.
        i = 0
        while i < len(cutoffs):
            if _key(choices[i]) == _key(choices[i + 1]):
                del cutoffs[i]
                del choices[i + 1]
            else:
                i += 1
        while len(choices) > self._max_levels_eff:
            i = int(rng.integers(len(cutoffs)))
            del cutoffs[i]
            del choices[i + 1]
        return Levels(tuple(cutoffs), tuple(choices))

    # -- encoding ------------------------------------------------------------------------------
    def encode(self, value: Any) -> np.ndarray:
        L = self.max_levels
        vec = np.full(self.n_dims, 0.5)
        for i, ch in enumerate(value.choices):
            vec[i] = _bucket_encode(self._index[_key(ch)], self._nc)
        vec[L] = _bucket_encode(len(value.choices) - 1, L)
        for i, c in enumerate(value.cutoffs):
            vec[L + 1 + i] = self._cutoff_to_unit(c)
        return vec

    def decode(self, vec: Sequence[float] | np.ndarray) -> Levels:
        L = self.max_levels
        k = min(_bucket_decode(vec[L], L) + 1, self._max_levels_eff)
        cutoffs = [self._cutoff_from_unit(_unit(vec[L + 1 + i])) for i in range(k - 1)]
        choices = [self.choices[_bucket_decode(vec[i], self._nc)] for i in range(k)]
        return self._fix(cutoffs, choices)

    def to_json_value(self, value: Any) -> Any:
        return value.to_json() if isinstance(value, Levels) else value

    def from_json_value(self, j: Any) -> Any:
        if isinstance(j, dict | Levels):
            return Levels.from_json(j)
        return j
