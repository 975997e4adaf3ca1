"""``PassSequence``: a search-space parameter whose value is a sequence of passes.

A pass sequence is neither a permutation (passes repeat, the length varies) nor a set of
independent choices (inserting a pass shifts everything after it). This parameter type gives the
search techniques sequence-aware operators: mutation by insert, delete, replace, swap and
block duplication; one-point crossover with independent cut points; a neighbourhood of single
deletions, adjacent swaps and duplications. Its unit-cube encoding has one dimension per position
(the first bin of each dimension means "no pass"), so vector techniques (DE, PSO, models) work too.

Example:
    >>> import numpy as np
    >>> seq = PassSequence(["a", "b", "c"], max_length=4, default=("a", "b"))
    >>> seq.contains(("c", "c", "a")), seq.contains(("a",) * 5)
    (True, False)
    >>> seq.decode(seq.encode(("b", "c")))
    ('b', 'c')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perftune.space import Param

__all__ = ["PassSequence"]


class PassSequence(Param):
    """A sequence of 0..``max_length`` items drawn (with repetition) from ``options``.

    Args:
        options: The items (pass names).
        max_length: Longest sequence.
        default: Default sequence (a tuple of options).
    """

    type_name = "pass-sequence"

    def __init__(
        self, options: Sequence[str], *, max_length: int, default: Any = None, when: Any = None
    ) -> None:
        self.options = tuple(str(o) for o in options)
        if not self.options:
            raise ValueError("PassSequence: needs at least one option")
        if len(set(self.options)) != len(self.options):
            raise ValueError("PassSequence: duplicate options")
        if max_length < 1:
            raise ValueError("PassSequence: max_length must be >= 1")
        self.max_length = int(max_length)
        self._index = {o: i for i, o in enumerate(self.options)}
        self.n_dims = self.max_length
        super().__init__(default=default, when=when)

    def _args(self) -> Sequence[Any]:
        return (list(self.options),)

    def _fields(self) -> dict[str, Any]:
        return {"options": list(self.options), "max_length": self.max_length}

    def domain_text(self) -> str:
        return f"sequences of at most {self.max_length} of {len(self.options)} passes"

    def coerce_default(self, value: Any) -> Any:
        return tuple(value)

    def natural_default(self) -> tuple[str, ...]:
        return ()

    def contains(self, value: Any) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) <= self.max_length
            and all(isinstance(v, str) and v in self._index for v in value)
        )

    def cardinality(self) -> int | None:
        return None  # astronomically many

    def sample(self, rng: np.random.Generator) -> tuple[str, ...]:
        length = int(rng.integers(1, self.max_length + 1))
        return tuple(self.options[int(i)] for i in rng.integers(len(self.options), size=length))

    # -- operators ---------------------------------------------------------------------------
    def _random_item(self, rng: np.random.Generator) -> str:
        return self.options[int(rng.integers(len(self.options)))]

    def _move(self, seq: list[str], rng: np.random.Generator) -> list[str]:
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

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> tuple[str, ...]:
        """One to a few random insert/delete/replace/swap/duplicate moves (more for a larger scale)."""
        original = tuple(value)
        n_moves = max(1, int(rng.geometric(1.0 / (1.0 + 10.0 * max(scale, 0.0)))))
        for _ in range(16):  # a move can be a no-op (swapping equal passes): try again
            seq = list(original)
            for _ in range(n_moves):
                seq = self._move(seq, rng)
            if tuple(seq) != original:
                return tuple(seq)
        return tuple(seq)

    def neighbors(self, value: Any) -> list[tuple[str, ...]]:
        """Single deletions and adjacent swaps (deterministic)."""
        seq = tuple(value)
        out: list[tuple[str, ...]] = []
        seen = {seq}
        for i in range(len(seq)):
            for cand in (
                seq[:i] + seq[i + 1 :],
                seq[:i] + seq[i + 1 : i + 2] + seq[i : i + 1] + seq[i + 2 :] if i + 1 < len(seq) else None,
            ):
                if cand is not None and cand not in seen:
                    seen.add(cand)
                    out.append(cand)
        return out

    def crossover(self, a: Any, b: Any, rng: np.random.Generator) -> tuple[str, ...]:
        """``a[:i] + b[j:]`` with independent cut points."""
        i = int(rng.integers(len(a) + 1))
        j = int(rng.integers(len(b) + 1))
        return (tuple(a[:i]) + tuple(b[j:]))[: self.max_length]

    # -- encoding ----------------------------------------------------------------------------
    def encode(self, value: Any) -> np.ndarray:
        bins = len(self.options) + 1
        vec = np.full(self.max_length, 0.5 / bins)
        for position, item in enumerate(value):
            vec[position] = (self._index[item] + 1.5) / bins
        return vec

    def decode(self, vec: Sequence[float] | np.ndarray) -> tuple[str, ...]:
        bins = len(self.options) + 1
        out = []
        for v in np.clip(np.asarray(vec, dtype=float), 0.0, 1.0)[: self.max_length]:
            k = min(int(v * bins), bins - 1)
            if k > 0:
                out.append(self.options[k - 1])
        return tuple(out)

    def to_json_value(self, value: Any) -> Any:
        return list(value)

    def from_json_value(self, j: Any) -> Any:
        return tuple(j)
