"""The family model: an input is read as the training family it most resembles, at its size and
accuracy requirement, and runs what was best there."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perftune.adapt import AdaptError, DispatchFile, FamilyModel, fit_dispatch, use_dispatch
from perftune.adapt._learn import _families, _family_columns
from perftune.adapt._model import model_from_dict
from perftune.adapt._tune import model_kind

# Three families on two shape columns (1, 2); column 0 is the size (log2 n). Landmark k is fast on
# family k; landmark 3 is never more than 1.5 times the best.
_CENTRES = {"a": (0.0, 0.0), "b": (1.0, 0.0), "c": (1.0, 1.0)}


def _table(sizes: tuple[float, ...] = (7.0, 10.0), per: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X, T, groups = [], [], []
    for g, (u, v) in enumerate(_CENTRES.values()):
        for n in sizes:
            for _ in range(per):
                X.append([n, u + rng.normal(0, 0.02), v + rng.normal(0, 0.02)])
                row = [40.0, 40.0, 40.0, 1.5]
                row[g] = 1.0
                T.append([t * 2.0 ** n * 1e-6 for t in row])
                groups.append(list(_CENTRES)[g])
    X, T = np.array(X), np.array(T)
    return X, T, np.ones_like(T, dtype=bool), np.array(groups)


def _value(x):
    return lambda column: float(x[column])


def test_an_input_goes_to_the_family_it_resembles_on_every_column():
    X, T, ok, groups = _table()
    model = _families(X, np.zeros_like(X), T, ok, [1, 2], np.arange(len(X)), groups, [0], None)
    assert isinstance(model, FamilyModel)
    assert model.choose(_value([10.0, 0.1, -0.1])) == 0
    assert model.choose(_value([10.0, 0.9, 0.1])) == 1
    assert model.choose(_value([10.0, 1.1, 0.8])) == 2
    # Between a and b on column 1, on a's side of column 2 as well: a, whatever a threshold on column 1 says.
    assert model.choose(_value([10.0, 0.45, 0.0])) == 0
    assert model.visited(_value([10.0, 0.45, 0.0])) == [1, 2, 0]


def test_the_landmark_is_the_one_best_at_the_nearest_training_size():
    X, T, ok, groups = _table()
    small = X[:, 0] == 7.0
    T[small & (groups == "a"), 0] *= 100  # on family a's small inputs landmark 0 is slow: 3 wins there
    model = _families(X, np.zeros_like(X), T, ok, [1, 2], np.arange(len(X)), groups, [0], None)
    assert model.choose(_value([6.0, 0.0, 0.0])) == 3
    assert model.choose(_value([8.0, 0.0, 0.0])) == 3
    assert model.choose(_value([9.0, 0.0, 0.0])) == 0
    assert model.choose(_value([30.0, 0.0, 0.0])) == 0  # beyond the training sizes: the largest


def test_families_the_columns_cannot_tell_apart_share_their_choice():
    X, T, ok, groups = _table()
    X[groups != "c", 2] = 0.0
    # Column 2 alone: a and b both read 0, so neither's own landmark (40x on the other) but the robust one.
    model = _families(X, np.zeros_like(X), T, ok, [2], np.arange(len(X)), groups, [0], None)
    assert model.nearest(_value([10.0, 0.0, 0.0])) == [0, 1]
    assert model.choose(_value([10.0, 0.0, 0.0])) == 3
    assert model.choose(_value([10.0, 0.0, 1.0])) == 2


def test_a_requirement_takes_the_family_inputs_that_needed_as_much():
    # One family, two landmarks: 0 fast but reaching 4 digits, 1 slower reaching 12; rows at levels 2..12.
    X, T, ok, groups = [], [], [], []
    for fam, centre in (("p", 0.0), ("q", 1.0)):
        for level in (2.0, 4.0, 8.0, 12.0):
            X.append([10.0, level, centre])
            T.append([1e-3, 3e-3])
            ok.append([level <= 4.0, True])
            groups.append(fam)
    X, T, ok, groups = np.array(X), np.array(T), np.array(ok), np.array(groups)
    model = _families(X, np.zeros_like(X), T, ok, [2], np.arange(len(X)), groups, [0], 1)
    assert model.choose(_value([10.0, 3.0, 0.0])) == 0
    assert model.choose(_value([10.0, 6.0, 0.0])) == 1
    assert model.choose(_value([10.0, 30.0, 1.0])) == 1  # stricter than any training row: the strictest
    assert set(model.visited(_value([10.0, 6.0, 0.0]))) == {0, 1, 2}


def test_where_features_cost_more_than_they_save_they_are_not_read():
    X, T, ok, groups = _table(sizes=(4.0, 12.0))
    cost = np.zeros_like(X)
    cost[:, 1:] = 2e-4  # as much as the work on the small inputs, nothing beside the large ones
    model = _families(X, cost, T, ok, [1, 2], np.arange(len(X)), groups, [0], None)
    assert model.bare_at == [[4.0]] and model.bare_landmark == [3]
    assert model.choose(_value([4.5, 1.0, 1.0])) == 3
    assert model.visited(_value([4.5, 1.0, 1.0])) == [0]
    assert model.choose(_value([11.0, 1.0, 1.0])) == 2
    # Free features are always worth reading.
    free = _families(X, np.zeros_like(X), T, ok, [1, 2], np.arange(len(X)), groups, [0], None)
    assert not free.bare_at and free.choose(_value([4.5, 1.0, 1.0])) == 2


def test_family_columns_are_one_steady_level_of_every_feature():
    noise = np.array([0.0, 0.2, 0.005, 0.001, 0.3, 0.1, 0.0])
    cost = np.array([0.0, 1e-6, 1e-5, 1e-4, 1e-6, 1e-5, 1e-6])
    varies = np.array([True, True, True, True, True, True, False])
    groups = [[0], [1, 2, 3], [4, 5], [6]]
    # Size column 0 aside; feature 1: the cheapest steady level (2, not the steadier but dearer 3);
    # feature 2: none steady, the steadiest (5); feature 3 is the same on every input.
    assert _family_columns(groups, 7, noise, cost, frozenset({0}), None, varies) == [2, 5]
    assert _family_columns(None, 7, noise, cost, frozenset({0}), 3, varies) == [1, 2, 4, 5]


def test_fit_dispatch_families_and_its_file():
    X, T, ok, groups = _table(seed=1)
    fit = fit_dispatch(X, np.zeros_like(X), T, ok, classifier="families", groups=groups, size_columns=[0],
                       column_groups=[[0], [1], [2]], seed=0)
    model = fit.model
    assert isinstance(model, FamilyModel) and fit.variant == "least regret on the nearest family"
    assert model.families == ["a", "b", "c"] and model.features == [1, 2]
    assert [model.choose(_value(x)) for x in ([10, 0, 0], [10, 1, 0], [10, 1, 1])] == [0, 1, 2]
    doc = json.loads(json.dumps(model.to_dict()))
    again = model_from_dict(doc, n_columns=3, n_landmarks=4)
    assert isinstance(again, FamilyModel) and again.to_dict() == model.to_dict()
    with pytest.raises(AdaptError, match="regrets for 4 landmarks, expected 5"):
        model_from_dict(doc, n_columns=3, n_landmarks=5)
    with pytest.raises(AdaptError, match="out of range"):
        model_from_dict(doc, n_columns=2, n_landmarks=4)
    broken = dict(doc, at=doc["at"][:2])
    with pytest.raises(AdaptError, match="one entry per family"):
        model_from_dict(broken, n_columns=3, n_landmarks=4)
    with pytest.raises(AdaptError, match="malformed families"):
        model_from_dict({k: v for k, v in doc.items() if k != "centroids"}, n_columns=3, n_landmarks=4)


def test_families_need_groups_and_auto_uses_them_for_three_named_families():
    X, T, ok, _ = _table()
    with pytest.raises(AdaptError, match="needs groups naming at least two families"):
        fit_dispatch(X, np.zeros_like(X), T, ok, classifier="families")
    assert model_kind("auto", ["a", "b", "c", "a"]) == "families"
    assert model_kind("auto", ["a", "b", "a"]) == "auto"
    assert model_kind("auto", None) == "auto"
    assert model_kind("tree", ["a", "b", "c"]) == "tree"


def _busy_site(name: str):
    """An objective whose configuration ``algo`` must match the input's kind: 30 times the work if not."""
    from perftune.adapt import AdaptiveObjective
    from perftune.space import Choice, Space

    def run(config, x):
        kind, n = x
        total = 0
        for i in range(n * (1 if config["algo"] == kind else 30)):
            total += i
        return total

    site = AdaptiveObjective(name, run, Space({"algo": Choice(["a", "b", "c"])}), size=lambda x: x[1])
    site.feature(lambda x: float(x[1]), name="n", cost="cheap")
    site.feature(lambda x: float("abc".index(x[0])), name="kind", cost="cheap")
    return site


def test_tune_inputs_with_named_families_learns_the_family_model_and_saves_it(tmp_path):
    from perftune.adapt import tune_inputs

    site = _busy_site("t-adapt-families")
    inputs = [(kind, n) for kind in "abc" for n in (2000, 8000) for _ in range(2)]
    groups = [kind for kind, _ in inputs]
    # Medians of 3: on a loaded machine one run of a few hundred microseconds can be stalled longer.
    result = tune_inputs(site, inputs, budget=12, n_clusters=3, seed=0, repeats=3, groups=groups)
    assert result.fit.variant == "least regret on the nearest family"
    assert isinstance(result.model, FamilyModel) and result.model.families == ["a", "b", "c"]
    assert "families: ['a', 'b', 'c']" in result.summary()
    path = result.save(tmp_path / "dispatch.json")  # and reads it back: the site dispatches from the file
    try:
        doc = json.loads(path.read_text())  # plain JSON, no pickle
        assert doc["dispatchers"]["t-adapt-families"]["model"]["kind"] == "families"
        largest = np.array([n == 8000 for _, n in inputs])
        for kind in "abc":
            # A size no training input had: the least summed regret (ratios capped at 20x, as documented)
            # on the family's largest inputs, as measured.
            t = result.time_s[largest & (np.array(groups) == kind)]
            fastest = int(np.argmin(np.log(np.clip(t / t.min(axis=1, keepdims=True), 1, 20)).sum(axis=0)))
            landmark = site.landmark_for((kind, 30000))
            assert landmark == result.landmarks[fastest]
            assert site((kind, 30000)) == sum(range(30000 * (1 if landmark["algo"] == kind else 30)))
    finally:
        use_dispatch(DispatchFile())
    # Each landmark is 30x faster on its own family than the others: where every family got its own
    # landmark there is no near tie to report. A budget of 12 does not always give family c one (the
    # searches measure times: about one run in three ends with landmarks a and b only, here and before
    # this test was changed); then a and b are equally slow on c, a near tie on c and on no other family.
    algos = {landmark["algo"] for landmark in result.landmarks}
    assert set(result.model.near_ties()) <= {"a", "b", "c"} - algos
    if algos == {"a", "b", "c"}:
        assert "near ties" not in result.summary()
    # With a model that has one, the summary names it.
    result.model = _model_with([[0.0, 0.01, 0.3], [0.01, 0.0, 0.3]], [10.0, 10.0])
    assert "near ties" in result.summary() and "a: landmark 0 ~ 1" in result.summary()


def _model_with(regret_a: list[list[float]], sizes_a: list[float]) -> FamilyModel:
    """Two families on one column (size column 0); family b's inputs (at the largest size) give
    landmark 1 a regret of 3 (20x) and landmark 2 one of 0.02."""
    return FamilyModel(
        features=[1], center=[0.0], scale=[1.0], centroids=[[0.0], [1.0]], families=["a", "b"], sizes=[0],
        required=None, at=[[[s] for s in sizes_a], [[10.0], [10.0]]],
        level=[[0.0] * len(sizes_a), [0.0, 0.0]],
        regret=[regret_a, [[0.0, 3.0, 0.02], [0.0, 3.0, 0.02]]])


def test_near_ties_name_landmarks_the_training_inputs_cannot_tell_apart():
    # On family a's largest inputs (size 10), landmarks 0 and 1 have the same mean regret and landmark 2
    # is 2% behind them; on family b landmark 1 is 20x slower than landmark 0 and landmark 2 never 2x
    # apart from it: only 0 ~ 1.
    tied = _model_with([[0.5, 0.0, 0.0], [0.02, 0.0, 0.03], [0.0, 0.02, 0.03]], [7.0, 10.0, 10.0])
    assert tied.near_ties() == {"a": [0, 1]}
    assert tied.choose(_value([10.0, 0.0])) == 0  # the tie broken as choose breaks it, landmark first
    # Landmark 0 is far behind on the smaller input; were that input of the largest size, landmark 1
    # would run and only landmark 2 (2x apart from it on family b) would tie it.
    rows = [[0.5, 0.0, 0.0], [0.02, 0.0, 0.03], [0.0, 0.02, 0.03]]
    assert _model_with(rows, [10.0, 10.0, 10.0]).near_ties() == {"a": [1, 2]}
    # A clear winner on family a is no tie.
    clear = _model_with([[0.0, 0.3, 0.3], [0.0, 0.3, 0.3]], [10.0, 10.0])
    assert clear.near_ties() == {}


def test_a_learned_family_model_names_its_near_ties():
    X, T, ok, groups = _table()
    # Landmark k is best on family k by 1.5x at least: no ties.
    fit = fit_dispatch(X, np.zeros_like(X), T, ok, classifier="families", groups=groups, size_columns=[0])
    assert isinstance(fit.model, FamilyModel)
    assert fit.model.near_ties() == {}
    # Landmark 3 made as fast as landmark 0 on family a: a tie there, and 26x apart on families b and c.
    T[groups == "a", 3] = T[groups == "a", 0]
    fit = fit_dispatch(X, np.zeros_like(X), T, ok, classifier="families", groups=groups, size_columns=[0])
    assert isinstance(fit.model, FamilyModel)
    assert fit.model.near_ties() == {"a": [0, 3]}
