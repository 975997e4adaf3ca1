"""Pareto dominance, non-dominated sorting, crowding distance and the exact hypervolume.

Everything here works on loss vectors: tuples of floats where lower is better in every coordinate
(:meth:`perftune.search.Objectives.losses` turns a trial's metrics into one, negating maximised ones).

Example:
    >>> points = [(1.0, 4.0), (2.0, 2.0), (3.0, 3.0), (4.0, 1.0)]
    >>> pareto_front(points)
    [0, 1, 3]
    >>> hypervolume([points[i] for i in pareto_front(points)], reference=(5.0, 5.0))
    11.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["crowding_distance", "dominates", "hypervolume", "non_dominated_sort", "pareto_front"]

LossVector = Sequence[float]


def dominates(a: LossVector, b: LossVector) -> bool:
    """True when ``a`` is at least as good as ``b`` everywhere and strictly better somewhere.

    Example:
        >>> dominates((1, 2), (1, 3)), dominates((1, 2), (1, 2)), dominates((0, 3), (1, 2))
        (True, False, False)
    """
    strictly = False
    for x, y in zip(a, b, strict=True):
        if x > y:
            return False
        if x < y:
            strictly = True
    return strictly


def pareto_front(points: Sequence[LossVector]) -> list[int]:
    """Indices of the non-dominated points, in input order (duplicates of a front point all stay).

    Example:
        >>> pareto_front([(1, 1), (0, 2), (2, 2), (1, 1)])
        [0, 1, 3]
    """
    order = sorted(range(len(points)), key=lambda i: tuple(points[i]))
    front: list[int] = []
    for i in order:
        p = points[i]
        # Sorted lexicographically, a point can only be dominated by one that comes before it.
        if not any(dominates(points[j], p) for j in front):
            front.append(i)
    return sorted(front)


def non_dominated_sort(points: Sequence[LossVector]) -> list[list[int]]:
    """Fronts of NSGA-II's fast non-dominated sort: ``[front 0 indices, front 1 indices, ...]``.

    Example:
        >>> non_dominated_sort([(1, 1), (2, 2), (0, 3), (3, 3)])
        [[0, 2], [1], [3]]
    """
    n = len(points)
    dominated_by: list[list[int]] = [[] for _ in range(n)]
    n_dominating = [0] * n
    for i in range(n):
        for j in range(i + 1, n):
            if dominates(points[i], points[j]):
                dominated_by[i].append(j)
                n_dominating[j] += 1
            elif dominates(points[j], points[i]):
                dominated_by[j].append(i)
                n_dominating[i] += 1
    fronts: list[list[int]] = []
    current = [i for i in range(n) if n_dominating[i] == 0]
    while current:
        fronts.append(sorted(current))
        nxt: list[int] = []
        for i in current:
            for j in dominated_by[i]:
                n_dominating[j] -= 1
                if n_dominating[j] == 0:
                    nxt.append(j)
        current = nxt
    return fronts


def crowding_distance(points: Sequence[LossVector]) -> list[float]:
    """NSGA-II's crowding distance of each point within one front (boundary points: infinity).

    Example:
        >>> crowding_distance([(0, 2), (1, 1), (2, 0)])
        [inf, 2.0, inf]
    """
    n = len(points)
    if n <= 2:
        return [math.inf] * n
    distance = [0.0] * n
    for k in range(len(points[0])):
        order = sorted(range(n), key=lambda i: points[i][k])
        lo, hi = points[order[0]][k], points[order[-1]][k]
        distance[order[0]] = distance[order[-1]] = math.inf
        span = hi - lo
        if span <= 0:
            continue
        for r in range(1, n - 1):
            distance[order[r]] += (points[order[r + 1]][k] - points[order[r - 1]][k]) / span
    return distance


def hypervolume(points: Sequence[LossVector], reference: LossVector) -> float:
    """The exact volume dominated by ``points`` and bounded by ``reference`` (all coordinates minimised).

    Points that do not strictly dominate the reference add nothing. Exact for any number of objectives
    (slicing along the last coordinate, a sweep in two dimensions): fine for the fronts of a tuning run
    (hundreds of points, two to four objectives).

    Example:
        >>> hypervolume([(1, 1, 1)], reference=(2, 2, 2))
        1.0
        >>> hypervolume([(0, 1), (1, 0)], reference=(2, 2))
        3.0
    """
    ref = tuple(float(r) for r in reference)
    inside = [tuple(float(x) for x in p) for p in points if all(x < r for x, r in zip(p, ref, strict=True))]
    if not inside:
        return 0.0
    front = [inside[i] for i in pareto_front(inside)]
    return _hv(sorted(set(front)), ref)


def _hv(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    m = len(ref)
    if m == 1:
        return ref[0] - min(p[0] for p in points)
    if m == 2:
        volume, y_prev = 0.0, ref[1]
        for x, y in sorted(points):
            if y < y_prev:
                volume += (ref[0] - x) * (y_prev - y)
                y_prev = y
        return volume
    by_last = sorted(points, key=lambda p: p[-1])
    volume = 0.0
    for i, p in enumerate(by_last):
        top = by_last[i + 1][-1] if i + 1 < len(by_last) else ref[-1]
        thickness = top - p[-1]
        if thickness <= 0:
            continue
        slab = [q[:-1] for q in by_last[: i + 1]]
        front = [slab[j] for j in pareto_front(slab)]
        volume += _hv(sorted(set(front)), ref[:-1]) * thickness
    return volume
