"""Permutations (orders of items) and schedules (orders that respect precedence).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> p = Permutation(["a", "b", "c", "d"])
    >>> sorted(p.sample(rng))
    ['a', 'b', 'c', 'd']
    >>> s = Schedule(["load", "compute", "store"], after={"store": ["compute"], "compute": ["load"]})
    >>> s.default_value()
    ('load', 'compute', 'store')
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from perftune.errors import SpaceError
from perftune.space._base import Param, _normalize, _unit
from perftune.space._expression import Expression

__all__ = ["Permutation", "Schedule"]

_CROSSOVERS = ("pmx", "ox", "cx")
# Counting a Schedule's orders exactly (a dynamic program over the placed-item sets of each connected
# part of its precedence graph) stops after this many steps in all; a part it did not count is bounded
# by its chains: k items in a fixed order leave k!-fold fewer orders.
_MAX_COUNT_WORK = 200_000


class Permutation(Param):
    """An order of distinct items; the value is a tuple of all the items.

    Moves: :meth:`swap`, :meth:`insert` and :meth:`invert`. Crossovers: :meth:`pmx`, :meth:`ox`
    and :meth:`cx`; :meth:`crossover` uses the one named by ``crossover=``. The unit-cube encoding
    is random keys: one number per item, and the order is the order of the keys.

    Args:
        items: The distinct items (str, int, float or bool).
        crossover: ``"ox"`` (default), ``"pmx"`` or ``"cx"``.

    Example:
        >>> p = Permutation([1, 2, 3])
        >>> p.decode(p.encode((3, 1, 2)))
        (3, 1, 2)
        >>> p.neighbors((1, 2, 3))
        [(2, 1, 3), (1, 3, 2)]
    """

    type_name = "permutation"

    def __init__(
        self,
        items: Sequence[Any],
        *,
        crossover: str = "ox",
        default: Any = None,
        when: str | Expression | None = None,
    ) -> None:
        owner = f"{type(self).__name__}({items!r})"
        if isinstance(items, str | bytes) or not isinstance(items, Sequence | np.ndarray):
            raise SpaceError(f"{owner}: items must be a list")
        self.items: tuple[Any, ...] = tuple(_normalize(i) for i in items)
        if not self.items:
            raise SpaceError(f"{owner}: empty list of items")
        for it in self.items:
            if not isinstance(it, str | int | float | bool):
                raise SpaceError(f"{owner}: item {it!r} must be a str, int, float or bool")
            if isinstance(it, float) and not math.isfinite(it):
                raise SpaceError(f"{owner}: item {it!r} is not a finite number")
        if len(set(self.items)) != len(self.items):
            dup = next(x for i, x in enumerate(self.items) if x in self.items[:i])
            raise SpaceError(f"{owner}: duplicate item {dup!r}")
        if crossover not in _CROSSOVERS:
            raise SpaceError(f"{owner}: unknown crossover {crossover!r} (one of {', '.join(_CROSSOVERS)})")
        self.crossover_method = crossover
        self._n = len(self.items)
        self._pos = {x: i for i, x in enumerate(self.items)}
        self._itemset = frozenset(self.items)
        self.n_dims = self._n
        self._setup()
        super().__init__(default=default, when=when)

    def _setup(self) -> None:
        pass

    def _args(self) -> Sequence[Any]:
        return (list(self.items),)

    def _signature(self) -> str:
        return f"{type(self).__name__}({list(self.items)!r})"

    def domain_text(self) -> str:
        return f"orders of {list(self.items)!r}"

    def _fields(self) -> dict[str, Any]:
        d: dict[str, Any] = {"items": list(self.items)}
        if self.crossover_method != "ox":
            d["crossover"] = self.crossover_method
        return d

    def natural_default(self) -> tuple[Any, ...]:
        return self.items

    def _is_order(self, value: Any) -> bool:
        return (
            isinstance(value, tuple | list)
            and len(value) == self._n
            and len(set(value)) == self._n
            and self._itemset.issuperset(value)
        )

    def contains(self, value: Any) -> bool:
        try:
            return self._is_order(value)
        except TypeError:
            return False

    def nearest(self, value: Any) -> Any:
        if self.contains(value):
            return tuple(value)
        if isinstance(value, tuple | list):
            # Keep the known items in their order, append the missing ones.
            try:
                seen = [x for x in dict.fromkeys(value) if x in self._itemset]
            except TypeError:
                return self.default_value()
            rest = [x for x in self.items if x not in set(seen)]
            return self._legal(tuple(seen + rest))
        return self.default_value()

    def _legal(self, order: tuple[Any, ...]) -> tuple[Any, ...]:
        return order

    def cardinality(self) -> int:
        return math.factorial(self._n)

    def is_finite(self) -> bool:
        return True

    def iter_values(self) -> Iterator[tuple[Any, ...]]:
        return itertools.permutations(self.items)

    def sample(self, rng: np.random.Generator) -> tuple[Any, ...]:
        items = self.items
        return tuple(items[i] for i in rng.permutation(self._n))

    # -- moves -------------------------------------------------------------------------------
    def _two_points(self, rng: np.random.Generator) -> tuple[int, int]:
        i, j = rng.choice(self._n, size=2, replace=False)
        return int(i), int(j)

    def swap(self, value: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Exchange two random items."""
        v = list(value)
        if self._n < 2:
            return tuple(v)
        i, j = self._two_points(rng)
        v[i], v[j] = v[j], v[i]
        return self._legal(tuple(v))

    def insert(self, value: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Move one random item to another random position."""
        v = list(value)
        if self._n < 2:
            return tuple(v)
        i, j = self._two_points(rng)
        v.insert(j, v.pop(i))
        return self._legal(tuple(v))

    def invert(self, value: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Reverse a random segment (2-opt)."""
        v = list(value)
        if self._n < 2:
            return tuple(v)
        i, j = sorted(self._two_points(rng))
        v[i : j + 1] = v[i : j + 1][::-1]
        return self._legal(tuple(v))

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> tuple[Any, ...]:
        if self._n < 2:
            return tuple(value)
        moves = (self.swap, self.insert, self.invert)
        n_moves = max(1, int(round(scale * self._n / 2)))
        v = tuple(value)
        for _ in range(4):
            out = v
            for _ in range(n_moves):
                out = moves[int(rng.integers(3))](out, rng)
            if out != v:
                return out
        return out

    def neighbors(self, value: Any) -> list[Any]:
        v = list(value)
        out = []
        for i in range(self._n - 1):
            w = v.copy()
            w[i], w[i + 1] = w[i + 1], w[i]
            out.append(tuple(w))
        return out

    # -- crossovers --------------------------------------------------------------------------
    def crossover(self, a: Any, b: Any, rng: np.random.Generator) -> tuple[Any, ...]:
        return getattr(self, self.crossover_method)(a, b, rng)  # type: ignore[no-any-return]

    def pmx(self, a: Sequence[Any], b: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Partially mapped crossover: a segment of ``a``, the rest from ``b`` through the mapping."""
        n = self._n
        if n < 2:
            return tuple(a)
        i, j = sorted(self._two_points(rng))
        child: list[Any] = [None] * n
        child[i : j + 1] = a[i : j + 1]
        in_segment = set(a[i : j + 1])
        pos_b = {x: k for k, x in enumerate(b)}
        for k in range(i, j + 1):
            x = b[k]
            if x in in_segment:
                continue
            # Follow the mapping a[k] -> position in b until the slot lies outside the segment.
            pos = k
            while i <= pos <= j:
                pos = pos_b[a[pos]]
            child[pos] = x
        for k in range(n):
            if child[k] is None and not (i <= k <= j):
                child[k] = b[k]
        # Items equal to None cannot occur: items are validated, None is not allowed.
        return self._legal(tuple(child))

    def ox(self, a: Sequence[Any], b: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Order crossover: a segment of ``a``; the remaining items in ``b``'s order after it."""
        n = self._n
        if n < 2:
            return tuple(a)
        i, j = sorted(self._two_points(rng))
        segment = list(a[i : j + 1])
        taken = set(segment)
        rest = [b[(j + 1 + k) % n] for k in range(n)]
        rest = [x for x in rest if x not in taken]
        child: list[Any] = [None] * n
        child[i : j + 1] = segment
        positions = [(j + 1 + k) % n for k in range(n - len(segment))]
        for p, x in zip(positions, rest, strict=True):
            child[p] = x
        return self._legal(tuple(child))

    def cx(self, a: Sequence[Any], b: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Cycle crossover: every item keeps the position it has in one of the parents."""
        n = self._n
        if n < 2:
            return tuple(a)
        pos_a = {x: k for k, x in enumerate(a)}
        child: list[Any] = [None] * n
        start = int(rng.integers(n))
        cycle = 0
        # Alternate parents cycle by cycle, starting from a random position.
        order = list(range(start, n)) + list(range(start))
        for s in order:
            if child[s] is not None:
                continue
            src = a if cycle % 2 == 0 else b
            k = s
            while child[k] is None:
                child[k] = src[k]
                k = pos_a[b[k]]
            cycle += 1
        return self._legal(tuple(child))

    # -- encoding ------------------------------------------------------------------------------
    def encode(self, value: Any) -> np.ndarray:
        vec = np.empty(self._n)
        n = self._n
        pos = self._pos
        for p, x in enumerate(value):
            vec[pos[x]] = (p + 0.5) / n
        return vec

    def decode(self, vec: Sequence[float] | np.ndarray) -> tuple[Any, ...]:
        keys = np.asarray([_unit(x) for x in vec[: self._n]], dtype=float)
        order = np.argsort(keys, kind="stable")
        return self._legal(tuple(self.items[int(i)] for i in order))

    def to_json_value(self, value: Any) -> Any:
        return list(value)

    def from_json_value(self, j: Any) -> Any:
        if isinstance(j, list | tuple):
            return tuple(_normalize(x) for x in j)
        return _normalize(j)

    def coerce_default(self, value: Any) -> Any:
        return self.from_json_value(value)


class Schedule(Permutation):
    """A permutation that respects precedence: ``after={item: [items that must come earlier]}``.

    Sampling, moves, crossovers and decoding always return orders that respect the precedence: a
    candidate order is repaired to the topological order closest to it (items are placed as early
    as their original position allows, ties broken by position).

    Example:
        >>> s = Schedule(["a", "b", "c"], after={"a": ["c"]})
        >>> s.contains(("c", "a", "b")), s.contains(("a", "c", "b"))
        (True, False)
        >>> s.cardinality()
        3
    """

    type_name = "schedule"

    def __init__(
        self,
        items: Sequence[Any],
        after: Mapping[Any, Sequence[Any]] | None = None,
        *,
        crossover: str = "ox",
        default: Any = None,
        when: str | Expression | None = None,
    ) -> None:
        self._after_raw = after
        super().__init__(items, crossover=crossover, default=default, when=when)

    def _setup(self) -> None:
        after = self._after_raw or {}
        owner = self._signature()
        if isinstance(after, list | tuple) and all(
            isinstance(e, list | tuple) and len(e) == 2 for e in after
        ):
            after = {_normalize(k): v for k, v in after}
        if not isinstance(after, Mapping):
            raise SpaceError(f"{owner}: after= must be a mapping item -> [items that come earlier]")
        n = self._n
        preds: list[set[int]] = [set() for _ in range(n)]
        for item, earlier in after.items():
            item = _normalize(item)
            if item not in self._pos:
                raise SpaceError(f"{owner}: after= names unknown item {item!r}")
            if isinstance(earlier, str | int | float | bool):
                earlier = [earlier]
            for e in earlier:
                e = _normalize(e)
                if e not in self._pos:
                    raise SpaceError(f"{owner}: after[{item!r}] names unknown item {e!r}")
                if e == item:
                    raise SpaceError(f"{owner}: item {item!r} cannot come after itself")
                preds[self._pos[item]].add(self._pos[e])
        self._preds: tuple[frozenset[int], ...] = tuple(frozenset(p) for p in preds)
        succs: list[list[int]] = [[] for _ in range(n)]
        for i, ps in enumerate(self._preds):
            for p in ps:
                succs[p].append(i)
        self._succs: tuple[tuple[int, ...], ...] = tuple(tuple(sorted(s)) for s in succs)
        self._edges = tuple((p, i) for i, ps in enumerate(self._preds) for p in sorted(ps))
        self._indeg = tuple(len(p) for p in self._preds)
        order = self._topological(list(range(n)))
        if len(order) != n:
            stuck = [self.items[i] for i in range(n) if i not in set(order)]
            raise SpaceError(f"{owner}: precedence cycle among {stuck!r}")
        self._natural = tuple(self.items[i] for i in order)
        self._count: int | None = None

    def _topological(self, priority: Sequence[float]) -> list[int]:
        """Kahn's algorithm, always taking the ready item of smallest priority."""
        indeg = list(self._indeg)
        ready = [(priority[i], i) for i in range(self._n) if indeg[i] == 0]
        heapq.heapify(ready)
        out: list[int] = []
        succs = self._succs
        while ready:
            _, i = heapq.heappop(ready)
            out.append(i)
            for s in succs[i]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(ready, (priority[s], s))
        return out

    def _legal(self, order: tuple[Any, ...]) -> tuple[Any, ...]:
        if not self._edges:
            return order
        pos = self._pos
        where = [0] * self._n
        for p, x in enumerate(order):
            where[pos[x]] = p
        if all(where[a] < where[b] for a, b in self._edges):
            return order
        return tuple(self.items[i] for i in self._topological(where))

    def _fields(self) -> dict[str, Any]:
        d = super()._fields()
        after = {self.items[i]: [self.items[p] for p in sorted(ps)] for i, ps in enumerate(self._preds) if ps}
        if after:
            d["after"] = after
        return d

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        # JSON object keys must be strings; keep non-string items as a list of pairs.
        if "after" in d and not all(isinstance(k, str) for k in d["after"]):
            d["after"] = [[k, v] for k, v in d["after"].items()]
        return d

    def natural_default(self) -> tuple[Any, ...]:
        return self._natural

    def contains(self, value: Any) -> bool:
        try:
            if not self._is_order(value):
                return False
        except TypeError:
            return False
        pos = self._pos
        where = [0] * self._n
        for p, x in enumerate(value):
            where[pos[x]] = p
        return all(where[a] < where[b] for a, b in self._edges)

    def cardinality(self) -> int:
        """Number of orders that respect the precedence.

        Exact when every connected part of the precedence graph is counted within the work limit
        (independent pairs or chains of any number of items are); a part that is not is bounded by a
        partition of it into chains, ``k!`` fewer orders for each chain of ``k`` items (exact for chains).
        Computed once, on first use.
        """
        if self._count is None:
            self._count = self._count_extensions()
        return self._count

    def _components(self) -> list[list[int]]:
        """The items of each connected part of the precedence graph (an item without edges: one part)."""
        parent = list(range(self._n))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for a, b in self._edges:
            parent[root(a)] = root(b)
        parts: dict[int, list[int]] = {}
        for i in range(self._n):
            parts.setdefault(root(i), []).append(i)
        return list(parts.values())

    def _count_part(self, part: list[int], budget: list[int]) -> int | None:
        """Orders of one connected part (its items in a topological order), or None past the budget."""
        local = {item: k for k, item in enumerate(part)}
        pred_mask = [sum(1 << local[p] for p in self._preds[i]) for i in part]
        m = len(part)
        counts: dict[int, int] = {0: 1}
        for _ in range(m):  # breadth-first over placed-item sets (downsets), layer by layer
            nxt: dict[int, int] = {}
            for placed, c in counts.items():
                budget[0] -= m
                if budget[0] < 0:
                    return None
                for k in range(m):
                    bit = 1 << k
                    if not placed & bit and pred_mask[k] & placed == pred_mask[k]:
                        nxt[placed | bit] = nxt.get(placed | bit, 0) + c
            counts = nxt
        return counts.get((1 << m) - 1, 0)

    def _chain_bound(self, part: list[int]) -> int:
        """An upper bound of one part's orders: ``m! / prod(k!)`` over a partition of it into chains."""
        left = set(part)
        bound = math.factorial(len(part))
        order = [i for i in self._topological(list(range(self._n))) if i in left]
        while left:
            # The longest path among the items left (a chain: each item comes after the previous one).
            best: dict[int, tuple[int, int]] = {}
            for i in order:
                if i in left:
                    prev = max(((best[p][0], p) for p in self._preds[i] if p in left), default=(0, -1))
                    best[i] = (prev[0] + 1, prev[1])
            i = max((v[0], k) for k, v in best.items())[1]
            length = best[i][0]
            while i != -1:
                left.discard(i)
                i = best[i][1]
            bound //= math.factorial(length)
        return bound

    def _count_extensions(self) -> int:
        n = self._n
        if not self._edges:
            return math.factorial(n)
        # Orders of independent parts interleave freely: n! / prod(m_i!) interleavings of their orders.
        budget = [_MAX_COUNT_WORK]
        total = math.factorial(n)
        for part in self._components():
            m = len(part)
            total //= math.factorial(m)
            if m == 1:
                continue
            count = self._count_part(part, budget)
            total *= count if count is not None else self._chain_bound(part)
        return total

    def iter_values(self) -> Iterator[tuple[Any, ...]]:
        n = self._n
        preds = self._preds
        items = self.items

        def rec(prefix: list[int], placed: int) -> Iterator[tuple[Any, ...]]:
            if len(prefix) == n:
                yield tuple(items[i] for i in prefix)
                return
            for i in range(n):
                if not placed >> i & 1 and all(placed >> p & 1 for p in preds[i]):
                    prefix.append(i)
                    yield from rec(prefix, placed | 1 << i)
                    prefix.pop()

        return rec([], 0)

    def sample(self, rng: np.random.Generator) -> tuple[Any, ...]:
        order = self._topological(rng.random(self._n).tolist())
        return tuple(self.items[i] for i in order)

    def insert(self, value: Sequence[Any], rng: np.random.Generator) -> tuple[Any, ...]:
        """Move one random item to a random position inside the window its precedence allows."""
        v = list(value)
        n = self._n
        if n < 2:
            return tuple(v)
        pos = self._pos
        for _ in range(4):
            k = int(rng.integers(n))
            idx = pos[v[k]]
            w = v[:k] + v[k + 1 :]
            where = {pos[x]: p for p, x in enumerate(w)}
            lo = max((where[p] + 1 for p in self._preds[idx]), default=0)
            hi = min((where[s] for s in self._succs[idx]), default=n - 1)
            choices = [p for p in range(lo, hi + 1) if p != k]
            if choices:
                j = choices[int(rng.integers(len(choices)))]
                w.insert(j, v[k])
                return tuple(w)
        return tuple(v)

    def mutate(self, value: Any, rng: np.random.Generator, scale: float = 0.1) -> tuple[Any, ...]:
        out = super().mutate(value, rng, scale)
        if out == tuple(value):
            out = self.insert(value, rng)
        return out

    def neighbors(self, value: Any) -> list[Any]:
        v = list(value)
        pos = self._pos
        out = []
        for i in range(self._n - 1):
            if pos[v[i]] in self._preds[pos[v[i + 1]]]:
                continue
            w = v.copy()
            w[i], w[i + 1] = w[i + 1], w[i]
            out.append(tuple(w))
        return out

    def decode(self, vec: Sequence[float] | np.ndarray) -> tuple[Any, ...]:
        keys = [_unit(x) for x in vec[: self._n]]
        return tuple(self.items[i] for i in self._topological(keys))
