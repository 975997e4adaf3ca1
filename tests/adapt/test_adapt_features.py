"""The built-in sampled features, and the examples' inputs and checks they are meant to tell apart."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from perftune.adapt import (
    Feature,
    density,
    descending,
    divisibility,
    duplicates,
    far_order,
    local_inversions,
    monotone_runs,
    sample,
    sortedness,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "perftune" / "examples" / "adapt"


def test_sortedness_separates_the_sort_families_at_every_level():
    rng = np.random.default_rng(0)
    xs = rng.integers(0, 10**6, 5000)
    ordered = np.sort(xs).tolist()
    for level in (16, 128, 1024):
        assert sortedness(ordered, level) == 1.0
        assert sortedness(ordered[::-1], level) == 0.0
        assert descending(ordered[::-1], level) == 1.0
        assert 0.35 < sortedness(xs.tolist(), level) < 0.65
    assert sortedness([], 16) == 1.0 and sortedness([5], 16) == 1.0


def test_sortedness_sees_local_disorder_that_a_strided_sample_would_miss():
    # Sorted, with every 8th pair of neighbours swapped: far-apart elements are still in order.
    xs = list(range(4096))
    for i in range(0, 4096, 8):
        xs[i], xs[i + 1] = xs[i + 1], xs[i]
    assert sortedness(xs, 1024) < 0.95
    strided = sample(xs, 64)
    assert all(a < b for a, b in zip(strided, strided[1:], strict=False))


def test_long_range_features_see_runs_that_neighbours_cannot():
    rng = np.random.default_rng(4)
    n = 8000
    parts = np.array_split(rng.integers(0, 10**6, n), 8)
    sawtooth = np.concatenate([np.sort(p) for p in parts]).tolist()
    ordered = np.sort(rng.integers(0, 10**6, n)).tolist()
    shuffled = rng.integers(0, 10**6, n).tolist()
    organ = ordered[: n // 2] + ordered[n // 2 :][::-1]
    # Neighbours: the sawtooth looks as sorted as a sorted input ...
    assert sortedness(sawtooth, 1024) > 0.99
    # ... but pairs a quarter apart do not, and its windows are monotone as a sorted input's are.
    assert far_order(ordered, 128) == 1.0
    assert 0.3 < far_order(sawtooth, 128) < 0.7
    assert 0.3 < far_order(shuffled, 128) < 0.7
    assert monotone_runs(organ, 512) > 0.95 and monotone_runs(sawtooth, 512) > 0.95
    assert monotone_runs(shuffled, 512) < 0.05
    assert 0.4 < sortedness(organ, 1024) < 0.6


def test_local_inversions_grow_with_how_far_elements_moved():
    rng = np.random.default_rng(2)
    ordered = list(range(20000))
    assert local_inversions(ordered, 512) == 0.0
    assert local_inversions(ordered[::-1], 512) == pytest.approx(np.log2(1 + 7.5))

    def moved(rate: float, reach: int) -> list[int]:
        xs = list(ordered)
        for i in rng.integers(0, len(xs) - reach, int(rate * len(xs))):
            j = int(i + rng.integers(1, reach + 1))
            xs[i], xs[j] = xs[j], xs[i]
        return xs

    near, farther = local_inversions(moved(0.01, 4), 512), local_inversions(moved(0.05, 12), 512)
    shuffled = local_inversions(rng.permutation(20000).tolist(), 512)
    assert 0.0 < near < farther < shuffled < np.log2(1 + 7.5)
    # Sampled windows, not the whole input: other offsets read other windows of the same input.
    assert local_inversions(moved(0.05, 12), 64, offset=3) > 0.0
    assert local_inversions([1], 64) == 0.0 and local_inversions([], 64) == 0.0


def test_duplicates_and_sample():
    assert duplicates(list(range(100)), 50) == 0.0
    assert duplicates([3] * 100, 50) == pytest.approx(0.98)
    assert sample(list(range(10)), 20) == list(range(10))
    assert len(sample(list(range(1000)), 64)) == 64


def test_density_agrees_on_dense_and_sparse_matrices():
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    dense = (rng.uniform(size=(400, 400)) < 0.1) * 1.0
    assert density(sp.csr_matrix(dense), 400) == pytest.approx(dense.mean())
    assert density(sp.csr_matrix(dense), 64) == pytest.approx(dense.mean(), abs=0.03)
    assert density(dense.tolist(), 64) == pytest.approx(dense.mean(), abs=0.05)
    assert density(sp.identity(1000, format="csr"), 32) == pytest.approx(1e-3)


def test_divisibility():
    assert divisibility((96, 64)) == 5
    assert divisibility(1024) == 10
    assert divisibility((7, 64)) == 0
    assert divisibility((0, 8)) == 3


def test_a_sampled_feature_has_one_column_per_level():
    f = Feature("dup", duplicates, levels=(4, 64))
    fns = f.column_functions()
    assert f.columns == ("dup@4", "dup@64")
    data = [1, 1, 1, 1] + list(range(2, 62))
    assert [fn(data) for fn in fns] == [duplicates(data, 4), duplicates(data, 64)]


@pytest.fixture
def examples_on_path():
    sys.path.insert(0, str(EXAMPLES))
    yield
    sys.path.remove(str(EXAMPLES))


def test_every_sort_alternative_sorts_every_family(examples_on_path):
    import adaptive_sort as example

    from perftune.choice import ChoicesFile, use_choices
    from perftune.space import Levels

    use_choices(ChoicesFile())
    rng = np.random.default_rng(2)
    families = {**example.TRAIN_FAMILIES, **example.TEST_FAMILIES}
    for alt in example.sort_site.alternatives:
        for cut in ((), (24,)):
            lv = Levels(cut, ("insertion", alt) if cut else (alt,))
            for name, make in families.items():
                for n in (0, 1, 2, 57, 700):
                    xs = make(n, rng) if n else []
                    with example.sort_site.use(lv):
                        assert example.sort_site(xs) == sorted(xs), (alt, cut, name, n)


def test_solver_methods_reach_their_accuracy_where_they_should(examples_on_path):
    import adaptive_solve as example

    rng = np.random.default_rng(3)
    banded = example.Problem(example._banded(300, rng), rng.normal(size=300), 8.0)
    poisson = example.Problem(example._poisson(400, rng), rng.normal(size=400), 8.0)
    assert example.digits(example.run({"method": "dense", "iters": 1}, banded), banded) > 12
    assert example.digits(example.run({"method": "sparse", "iters": 1}, poisson), poisson) > 12
    # Jacobi converges on the diagonally dominant system, not in 4 sweeps on Poisson's.
    assert example.digits(example.run({"method": "jacobi", "iters": 200}, banded), banded) > 10
    assert example.digits(example.run({"method": "jacobi", "iters": 4}, poisson), poisson) < 3
    few = example.digits(example.run({"method": "cg", "iters": 4}, poisson), poisson)
    many = example.digits(example.run({"method": "cg", "iters": 200}, poisson), poisson)
    assert few < 3 < 10 < many
    assert example._dominance(banded, 64) > 1.0 > example._dominance(poisson, 64) - 1e-9
