"""``PassSequence``: a parameter whose value is a sequence of items drawn, with repetition, from options.

A sequence of compiler passes is the motivating case (hence the name and the stored type name
``"pass-sequence"``), but nothing here knows about compilers: any ordered list of steps of varying
length, where a step may repeat, fits. Such a value is neither a permutation (items repeat, the length
varies) nor a set of independent choices (inserting an item shifts everything after it), so the type
gives search techniques sequence-aware operators: mutation by insert, delete, replace, swap and block
duplication; one-point crossover with independent cut points; a neighbourhood of single deletions and
adjacent swaps. Its unit-cube encoding has one dimension per position (the first bin of each dimension
means "no item"), so vector techniques (DE, PSO, models) work too.

Example:
    >>> seq = PassSequence(["a", "b", "c"], max_length=4, default=("a", "b"))
    >>> seq.contains(("c", "c", "a")), seq.contains(("a",) * 5)
    (True, False)
    >>> seq.decode(seq.encode(("b", "c")))
    ('b', 'c')
    >>> seq.to_dict()
    {'type': 'pass-sequence', 'options': ['a', 'b', 'c'], 'max_length': 4, 'default': ['a', 'b']}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perftune.errors import SpaceError
from perftune.space._base import Param, _as_int, _check_options, _key, _normalize, _unit
from perftune.space._expression import Expression

__all__ = ["PassSequence"]


class PassSequence(Param):
    """A sequence of 0..``max_length`` items drawn (with repetition) from ``options``.

    The value is a tuple of options, e.g. ``("mem2reg", "instcombine", "instcombine")``; the empty
    tuple (no pass at all) is the natural default.

    Args:
        options: The distinct items (str, int, float or bool), e.g. pass names.
        max_length: Longest sequence (at least 1).
        default: Default sequence (a tuple or list of options).
        when: Condition that makes the parameter active.

    Raises:
        SpaceError: No options, a duplicate option, ``max_length`` below 1, or a default outside the
            domain.

    Example:
        >>> import numpy as np
        >>> seq = PassSequence(["dce", "gvn"], max_length=3)
        >>> seq.default_value()
        ()
        >>> seq.contains(seq.mutate(("dce",), np.random.default_rng(0)))
        True
        >>> seq.neighbors(("dce", "gvn"))
        [('gvn',), ('gvn', 'dce'), ('dce',)]
    """

    type_name = "pass-sequence"

    def __init__(
        self,
        options: Sequence[Any],
        max_length: int,
        *,
        default: Any = None,
        when: str | Expression | None = None,
    ) -> None:
        owner = f"{type(self).__name__}({options!r})"
        self.options: tuple[Any, ...] = _check_options(options, owner)
        length = _as_int(max_length, "max_length", owner)
        if length < 1:
            raise SpaceError(f"{owner}: max_length must be at least 1, got {length}")
        self.max_length = length
        self._index = {_key(o): i for i, o in enumerate(self.options)}
        self.n_dims = self.max_length
        super().__init__(default=default, when=when)

    def _args(self) -> Sequence[Any]:
        return (list(self.options), self.max_length)

    def _signature(self) -> str:
        return f"{type(self).__name__}({list(self.options)!r}, max_length={self.max_length})"

    def _fields(self) -> dict[str, Any]:
        return {"options": list(self.options), "max_length": self.max_length}

    def domain_text(self) -> str:
        return f"sequences of at most {self.max_length} of {list(self.options)!r}"

    def coerce_default(self, value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
            raise self.error(f"default {value!r} must be a list of options")
        return _normalize(tuple(value))

    def natural_default(self) -> tuple[Any, ...]:
        return ()

    def contains(self, value: Any) -> bool:
        try:
            return (
                isinstance(value, tuple)
                and len(value) <= self.max_length
                and all(_key(v) in self._index for v in value)
            )
        except TypeError:  # an unhashable item is no option
            return False

    def nearest(self, value: Any) -> Any:
        if self.contains(value):
            return value
        if isinstance(value, tuple | list):
            # Keep the known items in their order, drop the rest, cut at the longest length.
            try:
                kept = [self.options[self._index[_key(v)]] for v in value if _key(v) in self._index]
            except TypeError:
                return self.default_value()
            return tuple(kept[: self.max_length])
        return self.default_value()

    def cardinality(self) -> int | None:
        return None  # sum of len(options) ** k for k <= max_length: astronomically many

    def sample(self, rng: np.random.Generator) -> tuple[Any, ...]:
        length = int(rng.integers(1, self.max_length + 1))
        return tuple(self.options[int(i)] for i in rng.integers(len(self.options), size=length))

    # -- operators ---------------------------------------------------------------------------
    def _random_item(self, rng: np.random.Generator) -> Any:
        return self.options[int(rng.integers(len(self.options)))]

    def _move(self, seq: list[Any], rng: np.random.Generator) -> list[Any]:
        kind = rng.random()
        n = len(seq)
        if n == 0 or (kind < 0.3 and n < self.max_length):  # insert
            seq.insert(int(rng.integers(n + 1)), self._random_item(rng))
        elif kind < 0.5:  # delete
            del seq[int(rng.integers(n))]
        elif kind < 0.75:  # replace
            seq[int(rng.integers(n))] = self._random_item(rng)
        elif kind < 0.9 and n >= 2:  # swap two positions
            i, j = (int(x) for x in rng.choice(n, size=2, replace=False))
            seq[i], seq[j] = seq[j], seq[i]
        else:  # duplicate a short block (passes often pay off when repeated)
            i = int(rng.integers(n))
            j = min(n, i + int(rng.integers(1, 5)))
            block = seq[i:j]
            at = int(rng.integers(n + 1))
            seq[at:at] = block
            del seq[self.max_length :]
        return seq

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> tuple[Any, ...]:
        """One to a few random insert/delete/replace/swap/duplicate moves (more for a larger scale)."""
        original = tuple(value)
        n_moves = max(1, int(rng.geometric(1.0 / (1.0 + 10.0 * max(scale, 0.0)))))
        seq = list(original)
        for _ in range(16):  # a move can be a no-op (swapping equal items): try again
            seq = list(original)
            for _ in range(n_moves):
                seq = self._move(seq, rng)
            if tuple(seq) != original:
                break
        return tuple(seq)

    def neighbors(self, value: Any) -> list[tuple[Any, ...]]:
        """Single deletions and adjacent swaps, in position order (deterministic)."""
        seq = tuple(value)
        out: list[tuple[Any, ...]] = []
        seen = {seq}
        for i in range(len(seq)):
            candidates = [seq[:i] + seq[i + 1 :]]
            if i + 1 < len(seq):
                candidates.append(seq[:i] + seq[i + 1 : i + 2] + seq[i : i + 1] + seq[i + 2 :])
            for cand in candidates:
                if cand not in seen:
                    seen.add(cand)
                    out.append(cand)
        return out

    def crossover(self, a: Any, b: Any, rng: np.random.Generator) -> tuple[Any, ...]:
        """``a[:i] + b[j:]`` with independent cut points, cut at ``max_length``."""
        i = int(rng.integers(len(a) + 1))
        j = int(rng.integers(len(b) + 1))
        return (tuple(a[:i]) + tuple(b[j:]))[: self.max_length]

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, value: Any) -> np.ndarray:
        bins = len(self.options) + 1
        vec = np.full(self.max_length, 0.5 / bins)
        for position, item in enumerate(value):
            vec[position] = (self._index[_key(item)] + 1.5) / bins
        return vec

    def decode(self, vec: Sequence[float] | np.ndarray) -> tuple[Any, ...]:
        bins = len(self.options) + 1
        out = []
        for v in list(vec)[: self.max_length]:
            k = min(int(_unit(v) * bins), bins - 1)
            if k > 0:
                out.append(self.options[k - 1])
        return tuple(out)

    def to_json_value(self, value: Any) -> Any:
        return list(value)

    def from_json_value(self, j: Any) -> Any:
        return _normalize(tuple(j))

