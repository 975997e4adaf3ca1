"""Dispatch that generalises: least regret among neighbours, the out-of-distribution guard, the robust
fallback and the leave-one-family-out model selection that decides between them."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    GuardedModel,
    NeighbourModel,
    TreeModel,
    fit_dispatch,
    robust_landmark,
    tune_inputs,
)
from perftune.adapt._model import model_from_dict
from perftune.space import Choice, Space

# Three families on one feature (x near 0, 1, 2); landmark k is 50 times slower than the best outside
# family k; landmark 3 is never more than 1.3 times the best (the robust one).
_FAST, _SLOW, _SAFE = 1.0, 50.0, 1.3


def _families(seed: int = 0, per_family: int = 6) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    X, T, groups = [], [], []
    for f in range(3):
        for _ in range(per_family):
            X.append([f + rng.normal(0, 0.03)])
            row = [_SLOW] * 3 + [_SAFE]
            row[f] = _FAST
            T.append(row)
            groups.append(f"family{f}")
    return np.array(X), np.array(T) * 1e-3, groups


def _choose(model, x: float) -> int:
    return model.choose(lambda column: x)


def test_robust_landmark_has_the_best_worst_case():
    _, T, _ = _families()
    ok = np.ones_like(T, dtype=bool)
    assert robust_landmark(T, ok) == 3
    # A wrong answer anywhere counts before any ratio: landmark 3 failing once loses to the others.
    ok[0, 3] = False
    assert robust_landmark(T, ok) != 3


def test_neighbours_pick_least_summed_regret_and_fall_back_far_away():
    ratio = [[1.0, 3.0, 1.2], [3.0, 1.0, 1.2], [1.0, 3.0, 1.2]]
    model = NeighbourModel(features=[0], center=[0.0], scale=[1.0], points=[[0.0], [1.0], [0.1]],
                           ratio=ratio, k=1, radius=2.0, fallback=2)
    assert _choose(model, 0.05) == 0
    assert _choose(model, 0.95) == 1
    assert _choose(model, 5.0) == 2  # farther than the radius from every training input
    # Two neighbours that disagree: the landmark never far off on either wins (1.2 + 1.2 < 1 + 3).
    between = NeighbourModel(features=[0], center=[0.0], scale=[1.0], points=[[0.0], [1.0]],
                             ratio=ratio[:2], k=2, radius=None, fallback=0)
    assert _choose(between, 0.5) == 2
    assert between.visited(lambda c: 0.5) == [0]


def test_guarded_tree_falls_back_out_of_distribution():
    tree = TreeModel(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0.0, 0.0],
                     leaf=[-1, 0, 1])
    model = GuardedModel(inner=tree, guard=[0, 1], center=[0.0, 0.0], scale=[1.0, 1.0],
                         points=[[0.0, 0.0], [1.0, 0.0]], radius=0.5, fallback=2)
    values = {0: 0.9, 1: 0.1}
    assert model.choose(values.__getitem__) == 1
    assert model.visited(values.__getitem__) == [0, 1]
    far = {0: 0.9, 1: 3.0}  # the tree's column looks familiar, the guard's second column does not
    assert model.choose(far.__getitem__) == 2
    assert tree.choose(far.__getitem__) == 1


def test_a_larger_input_is_not_out_of_distribution_for_its_size_alone():
    tree = TreeModel(left=[1, -1, -1], right=[2, -1, -1], feature=[1, -1, -1], threshold=[0.5, 0.0, 0.0],
                     leaf=[-1, 0, 1])
    # Column 0 is the size (standardised, training inputs up to 1.0); column 1 what the tree reads.
    points = [[0.0, 0.0], [1.0, 1.0]]
    plain = GuardedModel(inner=tree, guard=[0, 1], center=[0.0, 0.0], scale=[1.0, 1.0], points=points,
                         radius=0.5, fallback=2)
    clipped = GuardedModel(inner=tree, guard=[0, 1], center=[0.0, 0.0], scale=[1.0, 1.0], points=points,
                           radius=0.5, fallback=2, size_high=[1.0, None])
    bigger = {0: 30.0, 1: 1.0}.__getitem__  # like the largest training input, 30 times larger
    assert plain.choose(bigger) == 2 and clipped.choose(bigger) == 1
    unlike = {0: 30.0, 1: 4.0}.__getitem__  # larger, and unlike every training input besides
    assert clipped.choose(unlike) == 2
    nb = NeighbourModel(features=[0, 1], center=[0.0, 0.0], scale=[1.0, 1.0], points=points,
                        ratio=[[1.0, 5.0, 2.0], [5.0, 1.0, 2.0]], k=1, radius=0.5, fallback=2,
                        size_high=[1.0, None])
    assert nb.choose(bigger) == 1
    for model in (clipped, nb):
        assert model_from_dict(model.to_dict(), n_columns=2, n_landmarks=3) == model
    with pytest.raises(AdaptError, match="size_high needs one entry per guard column"):
        model_from_dict(dict(clipped.to_dict(), size_high=[1.0]), n_columns=2, n_landmarks=3)


def test_size_columns_are_the_columns_increasing_with_the_size():
    from perftune.adapt._tune import _size_columns

    sizes = [100, 100, 1000, 1000, 10_000]
    values = np.array([[6.6, 0.5, 1.0], [6.6, 0.7, 1.0], [10.0, 0.5, 0.5], [10.0, 0.1, 0.5],
                       [13.3, 0.9, 0.2]])
    # log size increases with the size; a sortedness does not; a decreasing column is no size either.
    assert _size_columns(values, sizes) == [0]
    assert _size_columns(values[:2], sizes[:2]) == []  # one size only: nothing to tell


def test_fit_options_are_what_tune_inputs_gives_the_learner():
    from perftune.adapt._tune import fit_options

    values = np.array([[6.6, 0.5], [10.0, 0.1], [13.3, 0.9]])
    shipped = fit_options("auto", ["a", "b", "c"], values, [100, 1000, 10_000], [[0], [1]])
    assert shipped == {"classifier": "families", "size_columns": [0], "column_groups": [[0], [1]]}
    # Unnamed inputs keep the cross-validated choice; without sizes there are no size columns.
    assert fit_options("auto", None, values, None, None) == {
        "classifier": "auto", "size_columns": None, "column_groups": None}


def test_new_models_survive_json_and_malformed_ones_are_refused():
    nb = NeighbourModel(features=[1], center=[0.5], scale=[2.0], points=[[0.0], [1.0]],
                        ratio=[[1.0, 2.0], [2.0, 1.0]], k=1, radius=None, fallback=1)
    tree = TreeModel.constant(0)
    guarded = GuardedModel(inner=tree, guard=[0], center=[0.0], scale=[1.0], points=[[0.0]], radius=1.0,
                           fallback=1)
    for model in (nb, guarded):
        again = model_from_dict(model.to_dict(), n_columns=2, n_landmarks=2)
        assert again == model
    with pytest.raises(AdaptError, match="ratios for 2 landmarks, expected 3"):
        model_from_dict(nb.to_dict(), n_columns=2, n_landmarks=3)
    bad = dict(nb.to_dict(), fallback=7)
    with pytest.raises(AdaptError, match=r"landmarks \[7\] out of range"):
        model_from_dict(bad, n_columns=2, n_landmarks=2)
    with pytest.raises(AdaptError, match="columns"):
        model_from_dict(dict(guarded.to_dict(), guard=[5]), n_columns=2, n_landmarks=2)
    with pytest.raises(AdaptError, match="malformed neighbours"):
        model_from_dict({k: v for k, v in nb.to_dict().items() if k != "ratio"}, n_columns=2, n_landmarks=2)


@pytest.mark.parametrize("classifier", ["auto", "tree", "neighbours"])
def test_leave_one_family_out_chooses_a_guard_that_sends_a_new_family_to_the_robust_landmark(classifier):
    X, T, groups = _families()
    ok = np.ones_like(T, dtype=bool)
    fit = fit_dispatch(X, np.zeros_like(X), T, ok, classifier=classifier, groups=groups, seed=0)
    # The families seen still get their own landmark...
    assert [_choose(fit.model, x) for x in (0.0, 1.0, 2.0)] == [0, 1, 2]
    # ...and one far from all of them gets the landmark that is never far off, not the nearest family's.
    assert _choose(fit.model, 6.0) == 3
    assert "guard" in fit.variant
    # Random folds alone never hold a family out: nothing there says the guard is worth having.
    plain = fit_dispatch(X, np.zeros_like(X), T, ok, classifier=classifier, seed=0, guard=False)
    assert _choose(plain.model, 6.0) == 2


def test_leaves_take_the_cheapest_landmark_in_total_not_the_majority():
    # One column, one leaf region holding 3 small inputs where landmark 0 wins by a hair and one large
    # input where it loses by far: the leaf must run landmark 1 (least total), not the majority's 0.
    X = np.array([[0.0], [0.01], [0.02], [0.03], [1.0], [1.01], [1.02], [1.03]] * 2)
    small, large = [1.0, 1.1, 5.0], [100.0, 10.0, 500.0]
    T = np.array(([small] * 3 + [large] + [[5.0, 5.0, 1.0]] * 4) * 2) * 1e-3
    fit = fit_dispatch(X, np.zeros_like(X), T, np.ones_like(T, dtype=bool), classifier="tree", max_depth=1,
                       seed=0, guard=False)
    assert _choose(fit.model, 0.0) == 1
    assert _choose(fit.model, 1.0) == 2


def test_fit_dispatch_rejects_bad_groups_and_classifier():
    X, T, groups = _families()
    ok = np.ones_like(T, dtype=bool)
    with pytest.raises(AdaptError, match="groups has 2 entries for 18 inputs"):
        fit_dispatch(X, np.zeros_like(X), T, ok, groups=groups[:2])
    with pytest.raises(AdaptError, match="classifier must be"):
        fit_dispatch(X, np.zeros_like(X), T, ok, classifier="svm")


def _sorting_site(name: str) -> AdaptiveObjective:
    def run(config, xs):
        return sorted(xs, reverse=config["order"] == "down")[:: -1 if config["order"] == "down" else 1]

    site = AdaptiveObjective(name, run, Space({"order": Choice(["up", "down"])}))
    site.feature(len, name="n", cost="cheap")
    return site


def test_tune_inputs_on_cpu_time_with_groups():
    site = _sorting_site("t-adapt-cpu")
    inputs = [list(range(n, 0, -1)) for n in (10, 100, 1000, 10_000)] * 2
    result = tune_inputs(site, inputs, budget=4, n_clusters=2, seed=0, repeats=1, clock="cpu",
                         groups=["a", "a", "b", "b"] * 2, check=lambda x, out: out == sorted(x))
    assert result.time_s.shape == (8, len(result.landmarks))
    assert (result.time_s >= 0).all() and result.time_s.max() > 0
    assert result.fit.variant


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clock": "sundial"}, "clock must be 'wall' or 'cpu', got 'sundial'"),
        ({"groups": ["a"]}, "groups has 1 labels for 8 inputs"),
    ],
)
def test_tune_inputs_bad_clock_or_groups_is_one_line(kwargs, message):
    site = _sorting_site("t-adapt-bad-clock")
    with pytest.raises(AdaptError, match=message) as info:
        tune_inputs(site, [[1, 2]] * 8, budget=4, **kwargs)
    assert "\n" not in str(info.value)


def test_a_cpu_limit_stops_computing_not_waiting():
    import time

    from perftune.adapt._limit import run_limited

    def spin() -> int:
        n = 0
        while True:
            n += 1

    seconds, out, stopped = run_limited(spin, 0.2, time.process_time)
    assert stopped and out is None and 0.15 < seconds < 2.0
    # Waiting (for a core on a loaded machine, here for a timer) is not computing: not stopped.
    seconds, out, stopped = run_limited(lambda: time.sleep(0.4) or "done", 0.1, time.process_time)
    assert (out, stopped) == ("done", False) and seconds < 0.1


def test_a_hanging_run_is_stopped_by_the_wall_backstop_under_a_cpu_limit():
    import time

    from perftune.adapt._limit import run_limited

    t0 = time.perf_counter()
    seconds, out, stopped = run_limited(lambda: time.sleep(30), 0.05, time.process_time)
    assert stopped and out is None and time.perf_counter() - t0 < 5


def test_linear_model_crosses_over_where_the_slowdowns_cross_and_clips_beyond_the_training_range():
    # Landmark 0 costs 1 + 4x, landmark 1 costs 3 - 2x: they cross at x = 1/3. Trained on inputs at
    # x = 0 and x = 1 only (two families, nothing in between), a tree puts its threshold wherever the gap
    # lets it; the linear model's predicted slowdowns cross near where the times do.
    X = np.array([[0.0]] * 6 + [[1.0]] * 6)
    T = np.stack([1 + 4 * X[:, 0], 3 - 2 * X[:, 0]], axis=1) * 1e-3
    ok = np.ones_like(T, dtype=bool)
    fit = fit_dispatch(X, np.zeros_like(X), T, ok, classifier="linear", seed=0)
    assert fit.variant == "linear slowdowns"
    assert [_choose(fit.model, x) for x in (0.0, 0.2, 0.6, 1.0)] == [0, 0, 1, 1]
    # Far beyond the training inputs the column is clipped to its range: the choice there is the edge's.
    assert _choose(fit.model, 50.0) == _choose(fit.model, 1.0) == 1
    assert _choose(fit.model, -50.0) == 0
    again = model_from_dict(fit.model.to_dict(), n_columns=1, n_landmarks=2)
    assert again == fit.model


def test_linear_model_files_are_checked():
    from perftune.adapt import LinearModel

    model = LinearModel(features=[0], center=[0.0], scale=[1.0], low=[-1.0], high=[1.0],
                        coef=[[0.0, 1.0], [0.0, -1.0]])
    doc = model.to_dict()
    with pytest.raises(AdaptError, match="2 landmarks, expected 3"):
        model_from_dict(doc, n_columns=1, n_landmarks=3)
    with pytest.raises(AdaptError, match="intercept and one slope"):
        model_from_dict(dict(doc, coef=[[0.0], [1.0]]), n_columns=1, n_landmarks=2)
    with pytest.raises(AdaptError, match="finite"):
        model_from_dict(dict(doc, coef=[[0.0, float("nan")], [0.0, 1.0]]), n_columns=1, n_landmarks=2)
    with pytest.raises(AdaptError, match="out of range"):
        model_from_dict(dict(doc, features=[4]), n_columns=1, n_landmarks=2)
    with pytest.raises(AdaptError, match="malformed linear"):
        model_from_dict({k: v for k, v in doc.items() if k != "low"}, n_columns=1, n_landmarks=2)
