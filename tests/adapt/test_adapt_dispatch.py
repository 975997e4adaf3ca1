"""The dispatcher: its file (round trip, missing, stale, corrupt), its models, and what it computes."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    AdaptiveSite,
    CentroidModel,
    Dispatcher,
    DispatchFile,
    DispatchFileWarning,
    ForestModel,
    TreeModel,
    fit_dispatch,
    use_dispatch,
)
from perftune.choice import AlgorithmSite, ChoicesFile, use_choices
from perftune.space import Choice, Int, Space


@pytest.fixture(autouse=True)
def _no_dispatch_file_after():
    yield
    use_dispatch(DispatchFile())  # the next test starts from an empty, in-memory dispatcher file


def _objective(name: str = "t-adapt-obj", options: tuple[str, ...] = ("a", "b", "c")) -> AdaptiveObjective:
    site = AdaptiveObjective(name, lambda config, x: config["k"], Space({"k": Choice(list(options))}))
    site.feature(lambda x: x[0], name="first", cost="cheap")
    site.feature(lambda x, level: sum(x[:level]), name="head", levels=(2, 4))
    return site


def _entry(site: AdaptiveObjective, model: dict, landmarks: list[dict]) -> dict:
    return {
        "target": "objective",
        "fingerprint": site.fingerprint(),
        "columns": list(site.columns),
        "landmarks": landmarks,
        "model": model,
    }


# A tree: first <= 0.5 -> landmark 0 ("a"); else head@4 <= 10 -> landmark 1 ("b"), else landmark 2 ("c").
TREE = {"kind": "tree", "left": [1, -1, 3, -1, -1], "right": [2, -1, 4, -1, -1],
        "feature": [0, -1, 2, -1, -1],
        "threshold": [0.5, 0.0, 10.0, 0.0, 0.0], "leaf": [-1, 0, -1, 1, 2]}
LANDMARKS = [{"k": "a"}, {"k": "b"}, {"k": "c"}]


def _write(tmp_path, doc) -> str:
    path = tmp_path / "perftune-dispatch.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return str(path)


def _calls_with_warnings(site, inputs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [site(x) for x in inputs]
    return results, [w for w in caught if issubclass(w.category, DispatchFileWarning)]


INPUTS = [[0, 0, 0, 0], [1, 1, 1, 1], [1, 5, 5, 5], [2, 9, 9, 9]]


def test_file_round_trip_dispatches_as_the_tree_says(tmp_path):
    site = _objective()
    doc = DispatchFile()
    doc.dispatchers[site.name] = _entry(site, TREE, LANDMARKS)
    path = doc.write(tmp_path / "d.json")
    again = DispatchFile.read(path)
    assert again.to_dict() == doc.to_dict()
    use_dispatch(path, strict=True)
    results, caught = _calls_with_warnings(site, INPUTS)
    assert caught == []
    assert site.source == "file"
    # [0,..]: first 0 <= .5 -> a; [1,1,1,1]: head@4 = 4 -> b; [1,5,5,5]: 16 -> c; [2,9,9,9]: 29 -> c
    assert results == ["a", "b", "c", "c"]


def test_missing_file_falls_back_to_the_default_with_one_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(tmp_path / "nowhere.json")
        site = _objective("t-adapt-missing")
        other = _objective("t-adapt-missing-2")
        results = [s(x) for x in INPUTS * 3 for s in (site, other)]
    mine = [w for w in caught if issubclass(w.category, DispatchFileWarning)]
    assert results == ["a"] * 24  # the space's default: its first option
    assert len(mine) == 1 and "not found" in str(mine[0].message)


def test_corrupt_file_falls_back_with_one_warning(tmp_path):
    path = _write(tmp_path, '{"format": "perftune-dispatch", "version": 1, "dispatchers": {')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use_dispatch(path)
        site = _objective("t-adapt-corrupt")
        results = [site(x) for x in INPUTS * 2]
    mine = [w for w in caught if issubclass(w.category, DispatchFileWarning)]
    assert results == ["a"] * 8
    assert len(mine) == 1 and "not valid JSON" in str(mine[0].message)


def test_stale_entry_falls_back_with_one_warning(tmp_path):
    old = _objective("t-adapt-stale", options=("a", "b", "c"))
    doc = DispatchFile()
    doc.dispatchers[old.name] = _entry(old, TREE, LANDMARKS)
    use_dispatch(doc.write(tmp_path / "d.json"))
    # The program changed: the space has a new option, so the fingerprint no longer matches.
    new = _objective("t-adapt-stale", options=("a", "b", "c", "d"))
    results, caught = _calls_with_warnings(new, INPUTS * 3)
    assert results == ["a"] * 12
    assert len(caught) == 1 and "stale" in str(caught[0].message)
    assert new.source == "default"


def test_stale_features_are_detected(tmp_path):
    old = _objective("t-adapt-stale-features")
    doc = DispatchFile()
    doc.dispatchers[old.name] = _entry(old, TREE, LANDMARKS)
    use_dispatch(doc.write(tmp_path / "d.json"))
    new = _objective("t-adapt-stale-features")
    new.feature(lambda x: len(x), name="n", cost="cheap")
    _, caught = _calls_with_warnings(new, INPUTS)
    assert len(caught) == 1 and "stale" in str(caught[0].message)


@pytest.mark.parametrize(
    ("model", "landmarks", "message"),
    [
        ({**TREE, "leaf": [-1, 0, -1, 1, 7]}, LANDMARKS, "landmarks [7] out of range"),
        ({**TREE, "feature": [0, -1, 9, -1, -1]}, LANDMARKS, "columns [9] out of range"),
        ({**TREE, "kind": "svm"}, LANDMARKS, "kind 'svm'"),
        ({"kind": "tree", "left": [1]}, LANDMARKS, "malformed tree"),
        (TREE, [{"k": "a"}, {"k": "zz"}, {"k": "c"}], "not valid in the space"),
    ],
)
def test_malformed_entry_falls_back_with_one_warning(tmp_path, model, landmarks, message):
    site = _objective("t-adapt-malformed")
    doc = DispatchFile()
    doc.dispatchers[site.name] = _entry(site, model, landmarks)
    use_dispatch(doc.write(tmp_path / "d.json"))
    results, caught = _calls_with_warnings(site, INPUTS * 2)
    assert results == ["a"] * 8
    assert len(caught) == 1 and message in str(caught[0].message)
    assert "\n" not in str(caught[0].message)


def test_file_without_this_site_warns_once(tmp_path):
    use_dispatch(DispatchFile().write(tmp_path / "d.json"))
    site = _objective("t-adapt-absent")
    results, caught = _calls_with_warnings(site, INPUTS * 2)
    assert results == ["a"] * 8
    assert len(caught) == 1 and "no dispatcher for site 't-adapt-absent'" in str(caught[0].message)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected a JSON object"),
        ({"format": "other", "version": 1, "dispatchers": {}}, "format 'other'"),
        ({"format": "perftune-dispatch", "version": 9, "dispatchers": {}}, "version 9 is not supported"),
        ({"format": "perftune-dispatch", "version": 1, "dispatchers": {"s": {"target": "site"}}},
         "dispatcher 's': missing fingerprint, columns, landmarks, model"),
    ],
)
def test_strict_read_names_the_problem_in_one_line(tmp_path, doc, message):
    path = _write(tmp_path, doc)
    with pytest.raises(AdaptError, match=message) as info:
        use_dispatch(path, strict=True)
    assert "\n" not in str(info.value)


def test_only_the_features_on_the_path_are_computed():
    calls = {"cheap": 0, "dear": 0}

    def cheap(x):
        calls["cheap"] += 1
        return x

    def dear(x):
        calls["dear"] += 1
        return x

    site = AdaptiveObjective("t-adapt-lazy", lambda c, x: c["k"], Space({"k": Choice(["a", "b", "c"])}))
    site.feature(cheap, cost="cheap")
    site.feature(dear)
    tree = TreeModel(left=[1, -1, 3, -1, -1], right=[2, -1, 4, -1, -1], feature=[0, -1, 1, -1, -1],
                     threshold=[0.5, 0, 5.0, 0, 0], leaf=[-1, 0, -1, 1, 2])
    landmarks = [{"k": "a"}, {"k": "b"}, {"k": "c"}]
    site.use_dispatcher(Dispatcher(site.columns, site.column_functions(), tree, landmarks))
    assert site(0) == "a"
    assert calls == {"cheap": 1, "dear": 0}  # the left branch never reads the dear feature
    site(9)
    assert calls == {"cheap": 2, "dear": 1}  # read once, though the walk may test it again
    assert site.dispatcher.visited(0) == ["cheap"]
    assert site.dispatcher.visited(9) == ["cheap", "dear"]


def test_exported_sklearn_tree_and_forest_agree_with_sklearn():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int) + (X[:, 2] > 0.5).astype(int) * 2  # labels 0..3
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    exported = TreeModel.from_sklearn(tree, [0, 1, 2], [int(c) for c in tree.classes_])
    again = TreeModel(**{k: v for k, v in exported.to_dict().items() if k != "kind"})
    points = rng.normal(size=(200, 3))
    assert [again.choose(lambda c, p=p: float(p[c])) for p in points] == tree.predict(points).tolist()
    forest = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    model = ForestModel([TreeModel.from_sklearn(t, [0, 1, 2], [int(c) for c in forest.classes_])
                         for t in forest.estimators_])
    votes = np.array([[int(t.predict(points[i : i + 1])[0]) for t in forest.estimators_] for i in range(200)])
    expected = [int(forest.classes_[np.bincount(v, minlength=4).argmax()]) for v in votes]
    assert [model.choose(lambda c, p=p: float(p[c])) for p in points] == expected


def test_centroid_model_runs_the_nearest_cluster_landmark():
    model = CentroidModel(center=[10.0], scale=[2.0], centroids=[[-1.0], [1.0]], landmark=[1, 0])
    assert model.choose(lambda c: 8.5) == 1  # z = -0.75: nearer -1
    assert model.choose(lambda c: 11.0) == 0


def test_the_learner_leaves_out_a_feature_that_costs_more_than_it_saves():
    rng = np.random.default_rng(0)
    n = 40
    x = rng.uniform(size=(n, 1))
    # Landmark 0 is right for x <= .5, landmark 1 above; a wrong choice costs 1 ms.
    T = np.where(x <= 0.5, [[1e-3, 2e-3]], [[2e-3, 1e-3]])
    ok = np.ones_like(T, dtype=bool)
    cheap = fit_dispatch(x, np.full_like(x, 1e-6), T, ok, seed=0)
    assert cheap.selected == [0]
    dear = fit_dispatch(x, np.full_like(x, 5e-3), T, ok, seed=0)
    assert dear.selected == [] and dear.model.columns == set()


def test_the_learner_prefers_a_cheap_column_to_an_equally_good_dear_one():
    rng = np.random.default_rng(1)
    n = 40
    x = rng.uniform(size=n)
    X = np.column_stack([x, x])  # the same information, at two sampling levels
    cost = np.column_stack([np.full(n, 1e-4), np.full(n, 1e-5)])
    T = np.where(x[:, None] <= 0.5, [[1e-3, 3e-3]], [[3e-3, 1e-3]])
    fit = fit_dispatch(X, cost, T, np.ones_like(T, dtype=bool), seed=0)
    assert fit.selected == [1]


def test_a_wrong_answer_counts_before_any_time():
    n = 20
    x = np.linspace(0, 1, n)[:, None]
    T = np.tile([[1e-3, 5e-3]], (n, 1))  # landmark 0 is faster everywhere ...
    ok = np.column_stack([x[:, 0] <= 0.5, np.ones(n, dtype=bool)])  # ... but wrong above .5
    fit = fit_dispatch(x, np.full_like(x, 1e-3), T, ok, seed=0)
    picks = [fit.model.choose(lambda c, v=v: float(v)) for v in x[:, 0]]
    assert all(ok[i, k] for i, k in enumerate(picks))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda s: s.feature(lambda x: 1, name="a@b"), "without '@'"),
        (lambda s: s.feature(lambda x: 1, name="f", cost="free"), "cost must be 'cheap' or 'measured'"),
        (lambda s: s.feature(lambda x, v: 1, name="f", levels=(8, 4)), "levels must strictly increase"),
        (lambda s: s.feature(lambda x, v: 1, name="f", levels=(0,)), "positive integers"),
        (lambda s: [s.feature(lambda x: 1, name="g"), s.feature(lambda x: 2, name="g")], "registered twice"),
    ],
)
def test_bad_features_are_one_line_errors(make, message):
    site = AdaptiveObjective("t-adapt-badfeat", lambda c, x: x, Space({"k": Int(1, 3)}))
    with pytest.raises(AdaptError, match=message) as info:
        make(site)
    assert "\n" not in str(info.value)


def test_adaptive_site_installs_the_landmark_selector_for_recursive_calls():
    use_choices(ChoicesFile())  # no tuned-choices file: the inner site's own selector is its default
    inner = AlgorithmSite("t-adapt-recursive", default="plain")
    seen: list[str] = []

    @inner.alternative("plain")
    def plain(xs):
        seen.append("plain")
        return sorted(xs)

    @inner.alternative("halves")
    def halves(xs):
        seen.append("halves")
        if len(xs) <= 1:
            return list(xs)
        a, b = inner(xs[: len(xs) // 2]), inner(xs[len(xs) // 2 :])
        return sorted(a + b)

    site = AdaptiveSite(inner)
    site.feature(lambda xs: len(xs), name="n", cost="cheap")
    site.use_dispatcher(site.constant_dispatcher({"cutoffs": [3], "choices": ["plain", "halves"]}))
    assert site([4, 3, 2, 1]) == [1, 2, 3, 4]
    assert seen == ["halves", "plain", "plain"]  # 4 -> halves; the two halves of 2 -> plain
    seen.clear()
    assert inner([2, 1, 0, 5]) == [0, 1, 2, 5]  # outside the call the site's own selector is back
    assert seen == ["plain"]


def test_adaptive_site_rejects_what_is_not_a_choice_site():
    with pytest.raises(AdaptError, match="needs a perftune.choice.AlgorithmSite"):
        AdaptiveSite(sorted)
