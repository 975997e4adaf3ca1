"""perftune's own regression forest (the model technique's surrogate), against its definition and
against scikit-learn's trees where both must agree."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.search._forest import grow_forest


def _data(n: int = 120, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(np.float32)
    y = np.sin(6 * x[:, 0]) + x[:, min(1, d - 1)] ** 2 + 0.1 * rng.standard_normal(n)
    return x, y


def test_a_full_tree_fits_its_training_data_exactly() -> None:
    x, y = _data()
    forest = grow_forest(x, y, seed=1, n_trees=1, splitter="best")
    assert forest.predict(x).shape == (1, len(y))
    np.testing.assert_allclose(forest.predict(x)[0], y)


@pytest.mark.parametrize(("d", "leaf"), [(1, 1), (3, 8)])
def test_best_splits_grow_the_tree_scikit_learn_grows(d: int, leaf: int) -> None:
    # Continuous values and nodes large enough that no two features split a node into the same two
    # halves: the best split of each node is unique, so both implementations grow the same tree and
    # predict the same values everywhere. (Where two features do tie, both pick one at random.)
    tree_mod = pytest.importorskip("sklearn.tree")
    x, y = _data(n=150, d=d, seed=3)
    ours = grow_forest(x, y, seed=0, n_trees=1, splitter="best", min_samples_leaf=leaf)
    theirs = tree_mod.DecisionTreeRegressor(random_state=0, min_samples_leaf=leaf).fit(x, y)
    assert ours.n_nodes == theirs.tree_.node_count
    probe = np.random.default_rng(9).random((2000, d)).astype(np.float32)
    np.testing.assert_allclose(ours.predict(probe)[0], theirs.predict(probe))


@pytest.mark.parametrize("splitter", ["best", "random"])
def test_leaves_hold_at_least_min_samples_leaf_training_rows(splitter: str) -> None:
    x, y = _data(n=200)
    forest = grow_forest(x, y, seed=4, n_trees=3, splitter=splitter, min_samples_leaf=5, max_features=0.6)
    leaves = forest.apply(x)
    for tree in leaves:
        counts = np.unique(tree, return_counts=True)[1]
        assert counts.min() >= 5
        assert len(counts) > 3  # it did split


@pytest.mark.parametrize("splitter", ["best", "random"])
def test_the_same_seed_grows_the_same_forest_and_another_seed_another(splitter: str) -> None:
    x, y = _data()
    rng = np.random.default_rng(0)
    samples = [rng.integers(0, len(y), len(y)) for _ in range(8)]
    one = grow_forest(x, y, seed=[5, 6], n_trees=8, samples=samples, splitter=splitter, max_features=0.5)
    two = grow_forest(x, y, seed=[5, 6], n_trees=8, samples=samples, splitter=splitter, max_features=0.5)
    other = grow_forest(x, y, seed=[7], n_trees=8, samples=samples, splitter=splitter, max_features=0.5)
    probe = np.random.default_rng(1).random((300, x.shape[1]))
    np.testing.assert_array_equal(one.predict(probe), two.predict(probe))
    assert not np.array_equal(one.predict(probe), other.predict(probe))


def test_a_bootstrap_tree_predicts_only_values_of_its_own_sample() -> None:
    x, y = _data(n=60)
    sample = np.random.default_rng(2).integers(0, 60, 60)
    forest = grow_forest(x, y, seed=0, n_trees=1, samples=[sample], splitter="best")
    # Fully grown: every leaf is pure, so every prediction is the value of a row the tree was given.
    assert set(np.round(forest.predict(x)[0], 12)) <= set(np.round(y[sample], 12))


def test_a_forest_learns_a_function_as_well_as_scikit_learns() -> None:
    ensemble = pytest.importorskip("sklearn.ensemble")
    x, y = _data(n=300, d=6, seed=5)
    probe = np.random.default_rng(6).random((3000, 6)).astype(np.float32)
    truth = np.sin(6 * probe[:, 0]) + probe[:, 1] ** 2
    for splitter, cls in (("best", ensemble.RandomForestRegressor), ("random", ensemble.ExtraTreesRegressor)):
        rng = np.random.default_rng(0)
        samples = [rng.integers(0, 300, 300) for _ in range(32)] if splitter == "best" else None
        ours = grow_forest(x, y, seed=0, n_trees=32, samples=samples, splitter=splitter, max_features=0.8)
        theirs = cls(n_estimators=32, max_features=0.8, random_state=0).fit(x, y)
        err_ours = np.sqrt(np.mean((ours.predict(probe).mean(axis=0) - truth) ** 2))
        err_theirs = np.sqrt(np.mean((theirs.predict(probe) - truth) ** 2))
        assert err_ours < 1.15 * err_theirs, (splitter, err_ours, err_theirs)
        assert err_ours < 0.5 * truth.std()


def test_nothing_to_split_gives_one_leaf_per_tree() -> None:
    x = np.ones((10, 3), dtype=np.float32)  # every feature constant
    y = np.arange(10.0)
    forest = grow_forest(x, y, seed=0, n_trees=2, splitter="best")
    assert forest.n_nodes == 2
    np.testing.assert_allclose(forest.predict(x), np.full((2, 10), 4.5))
    pure = grow_forest(np.random.default_rng(0).random((10, 3)), np.full(10, 2.0), seed=0, n_trees=1)
    assert pure.n_nodes == 1
    no_features = grow_forest(np.empty((4, 0)), np.arange(4.0), seed=0, n_trees=1)
    np.testing.assert_allclose(no_features.predict(np.empty((2, 0))), [[1.5, 1.5]])


def test_a_bad_splitter_is_refused() -> None:
    x, y = _data(n=10)
    with pytest.raises(ValueError, match="splitter"):
        grow_forest(x, y, seed=0, n_trees=1, splitter="fancy")
