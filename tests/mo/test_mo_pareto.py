"""Dominance, sorting and the exact hypervolume against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from perftune.search import crowding_distance, dominates, hypervolume, non_dominated_sort, pareto_front


def _brute_front(points: list[tuple[float, ...]]) -> list[int]:
    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


def _grid_volume(points: list[tuple[float, ...]], ref: tuple[float, ...], step: float) -> float:
    """The dominated volume counted on a grid of cell centres (exact for points on the grid)."""
    axes = [np.arange(step / 2, r, step) for r in ref]
    count = 0
    for cell in itertools.product(*axes):
        if any(all(p[k] <= cell[k] for k in range(len(ref))) for p in points):
            count += 1
    return count * step ** len(ref)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_pareto_front_matches_brute_force(m: int) -> None:
    rng = np.random.default_rng(m)
    for _ in range(20):
        points = [tuple(float(x) for x in row) for row in rng.integers(0, 6, size=(30, m))]
        assert pareto_front(points) == _brute_front(points)


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_is_exact_on_grid_points(m: int) -> None:
    rng = np.random.default_rng(10 + m)
    ref = (6.0,) * m
    for _ in range(5):
        points = [tuple(float(x) for x in row) for row in rng.integers(0, 6, size=(12, m))]
        assert hypervolume(points, ref) == pytest.approx(_grid_volume(points, ref, 1.0))


def test_hypervolume_ignores_points_outside_the_reference_box() -> None:
    assert hypervolume([(3.0, 0.0), (0.0, 3.0)], reference=(2.0, 2.0)) == 0.0
    assert hypervolume([(1.0, 1.0), (2.5, 0.0)], reference=(2.0, 2.0)) == 1.0


def test_hypervolume_grows_with_a_non_dominated_point_only() -> None:
    front = [(1.0, 3.0), (3.0, 1.0)]
    base = hypervolume(front, (4.0, 4.0))
    assert hypervolume([*front, (3.5, 3.5)], (4.0, 4.0)) == base  # dominated: nothing gained
    assert hypervolume([*front, (2.0, 2.0)], (4.0, 4.0)) > base


def test_non_dominated_sort_and_crowding() -> None:
    points = [(0.0, 4.0), (1.0, 3.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0), (4.0, 0.0)]
    fronts = non_dominated_sort(points)
    assert fronts == [[0, 1, 2, 5], [3], [4]]
    distance = crowding_distance([points[i] for i in fronts[0]])
    assert distance[0] == distance[3] == float("inf")
    assert all(0 < d < float("inf") for d in distance[1:3])
