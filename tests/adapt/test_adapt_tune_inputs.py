"""tune_inputs end to end, on real (timed) Python code whose best configuration depends on the input.

Insertion sort is linear on sorted input and quadratic on reversed input; "reverse, then insertion"
is the opposite. At 600 elements the wrong choice is about a hundred times slower, so the learned
dispatcher must tell the two apart from the sortedness feature, even on a loaded machine.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    AdaptiveSite,
    DispatchFile,
    DispatchFileWarning,
    sortedness,
    tune_inputs,
    use_dispatch,
)
from perftune.choice import AlgorithmSite, ChoicesFile, use_choices
from perftune.space import Choice, Space


@pytest.fixture(autouse=True)
def _clean_files():
    use_choices(ChoicesFile())
    yield
    use_dispatch(DispatchFile())


def _insertion(xs):
    out = list(xs)
    for i in range(1, len(out)):
        x = out[i]
        j = i - 1
        while j >= 0 and out[j] > x:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = x
    return out


def _reverse_insertion(xs):
    return _insertion(xs[::-1])


def _inputs(seed: int, n: int = 600) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(4):
        base = sorted(rng.integers(0, 10**6, n).tolist())
        out += [base, base[::-1]]
    return out


def _objective(name: str) -> AdaptiveObjective:
    def run(config, xs):
        return _insertion(xs) if config["algo"] == "forward" else _reverse_insertion(xs)

    site = AdaptiveObjective(name, run, Space({"algo": Choice(["forward", "backward"])}))
    site.feature(lambda xs: len(xs), name="n", cost="cheap")
    site.feature(sortedness, levels=(16, 256))
    return site


def _is_sorted(data, out):
    return out == sorted(data)


def test_learned_dispatcher_picks_per_input_and_survives_the_file(tmp_path):
    site = _objective("t-adapt-e2e")
    result = tune_inputs(site, _inputs(0), budget=6, n_clusters=2, seed=0, repeats=1, check=_is_sorted)
    assert len(result.landmarks) == 2
    assert {dict(lm)["algo"] for lm in result.landmarks} == {"forward", "backward"}
    assert result.fit.selected
    assert all(result.columns[c].startswith("sortedness") for c in result.fit.selected)
    # The tree's choice on unseen inputs is the fast configuration for each.
    result.apply()
    fresh = _inputs(1)
    for xs in fresh:
        want = "forward" if xs[0] <= xs[-1] else "backward"
        assert dict(site.config_for(xs))["algo"] == want
    totals = result.training_totals()
    assert totals["two_level_s"] < 0.5 * totals["best_single_s"]
    # Saved as JSON (no pickle), read back by a new process's site of the same shape.
    path = result.save(tmp_path / "perftune-dispatch.json")
    doc = json.loads(path.read_text())
    assert doc["dispatchers"]["t-adapt-e2e"]["model"]["kind"] == "tree"
    again = _objective("t-adapt-e2e")
    use_dispatch(path, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DispatchFileWarning)
        assert [dict(again.config_for(xs))["algo"] for xs in fresh] == [
            dict(site.config_for(xs))["algo"] for xs in fresh
        ]
        assert again(fresh[1]) == sorted(fresh[1])
    assert again.source == "file"


def test_choice_site_landmarks_are_selectors():
    inner = AlgorithmSite("t-adapt-choice-e2e", {"forward": _insertion, "backward": _reverse_insertion})
    site = AdaptiveSite(inner, max_levels=1)
    site.feature(sortedness, levels=(32,))
    result = tune_inputs(site, _inputs(2), budget=6, n_clusters=2, seed=0, repeats=1, check=_is_sorted)
    result.apply()
    for xs in _inputs(3):
        want = "forward" if xs[0] <= xs[-1] else "backward"
        assert site.landmark_for(xs).choices == (want,)
        assert site(xs) == sorted(xs)


def test_the_feature_costs_are_measured_and_cheap_ones_are_free():
    site = _objective("t-adapt-costs")
    result = tune_inputs(site, _inputs(4), budget=6, n_clusters=2, seed=0, repeats=2, check=_is_sorted)
    n_col = result.columns.index("n")
    s256 = result.columns.index("sortedness@256")
    s16 = result.columns.index("sortedness@16")
    assert (result.cost_s[:, n_col] == 0).all()
    assert (result.cost_s[:, s256] > 0).all()
    assert np.median(result.cost_s[:, s256]) > np.median(result.cost_s[:, s16])
    # The reported total counts what the tree reads: at least the cost of its root's column.
    root = result.model.feature[0]
    assert root >= 0
    landmark_time = sum(result.time_s[i, result.model.choose(lambda c, i=i: result.values[i, c])]
                        for i in range(len(result.clusters)))
    assert result.training_totals()["two_level_s"] >= landmark_time + result.cost_s[:, root].sum() - 1e-12


def test_wrong_landmark_outputs_are_never_chosen():
    def run(config, xs):
        if config["algo"] == "broken":
            return list(xs[1:])  # fast, and always wrong (an element is lost)
        return _insertion(xs) if config["algo"] == "forward" else _reverse_insertion(xs)

    site = AdaptiveObjective("t-adapt-wrong", run, Space({"algo": Choice(["forward", "backward", "broken"])}))
    site.feature(sortedness, levels=(16,))
    result = tune_inputs(site, _inputs(5), budget=9, n_clusters=2, seed=0, repeats=1, check=_is_sorted)
    assert all(dict(lm)["algo"] != "broken" for lm in result.landmarks)


DISTINCT = [[i, 2] for i in range(8)]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: tune_inputs(sorted, [[1]] * 8, budget=4), "expected an AdaptiveSite or AdaptiveObjective"),
        (lambda s: tune_inputs(AdaptiveObjective("t-nofeat", lambda c, x: x, Space({"a": Choice([1, 2])})),
                               [[1]] * 8, budget=4), "has no features"),
        (lambda s: tune_inputs(s, DISTINCT[:3], budget=4), "at least 4 training inputs"),
        (lambda s: tune_inputs(s, DISTINCT, budget=4, repeats=0), "repeats must be a positive integer"),
        (lambda s: tune_inputs(s, DISTINCT, budget=4, n_clusters=99), "n_clusters must be an integer"),
        (lambda s: tune_inputs(s, DISTINCT, budget=3, n_clusters=2), "budget 3 is too small"),
        (lambda s: tune_inputs(s, DISTINCT, budget=8, required=lambda x: 1.0), "required= needs accuracy="),
        (lambda s: tune_inputs(s, DISTINCT, budget=8, classifier="svm"), "classifier must be 'auto', 'tree'"),
        (lambda s: tune_inputs(s, DISTINCT[:7] + [[]], budget=8), "'first' on input 7 raised IndexError"),
    ],
)
def test_bad_calls_are_one_line_errors(call, message):
    site = AdaptiveObjective("t-adapt-bad", lambda c, x: x, Space({"a": Choice([1, 2])}))
    site.feature(lambda xs: xs[0], name="first")
    with pytest.raises(AdaptError, match=message) as info:
        call(site)
    assert "\n" not in str(info.value)


def test_a_hopeless_run_is_stopped_not_waited_for():
    import time

    from perftune.adapt._limit import run_limited

    t0 = time.perf_counter()
    seconds, out, stopped = run_limited(lambda: time.sleep(30), 0.2)
    assert stopped and out is None and time.perf_counter() - t0 < 5

    def run(config, xs):
        if config["algo"] == "hang":
            time.sleep(600)  # a configuration that never finishes in time on any input
        return sorted(xs)

    site = AdaptiveObjective("t-adapt-hang", run, Space({"algo": Choice(["fast", "hang"])}))
    site.feature(lambda xs: len(xs), name="n", cost="cheap")
    t0 = time.perf_counter()
    result = tune_inputs(site, [list(range(n)) for n in (10, 20, 30, 40)], budget=4, n_clusters=2, seed=0,
                         repeats=1, search_repeats=None)
    assert time.perf_counter() - t0 < 150  # waiting for it even once would take 600 s
    assert [dict(lm)["algo"] for lm in result.landmarks] == ["fast"]


def test_a_small_forest_is_saved_and_walked_like_a_tree(tmp_path):
    site = _objective("t-adapt-forest")
    result = tune_inputs(site, _inputs(6), budget=6, n_clusters=2, seed=0, repeats=1, check=_is_sorted,
                         classifier="forest")
    path = result.save(tmp_path / "d.json")
    assert json.loads(path.read_text())["dispatchers"]["t-adapt-forest"]["model"]["kind"] == "forest"
    again = _objective("t-adapt-forest")
    use_dispatch(path, strict=True)
    for xs in _inputs(7):
        want = "forward" if xs[0] <= xs[-1] else "backward"
        assert dict(again.config_for(xs))["algo"] == want


def _two_level_site(name: str, max_levels: int = 2) -> AdaptiveSite:
    """A recursive site: ``halves`` splits through the site, ``insertion`` sorts in place."""
    inner = AlgorithmSite(name, {"insertion": _insertion}, size_range=(2, 1 << 16))

    @inner.alternative("halves")
    def halves(xs):
        if len(xs) <= 1:
            return list(xs)
        mid = len(xs) // 2
        return sorted(inner(xs[:mid]) + inner(xs[mid:]))

    site = AdaptiveSite(inner, max_levels=max_levels)
    site.feature(lambda xs: len(xs), name="n", cost="cheap")
    return site


def _sizes_inputs() -> list[list[int]]:
    rng = np.random.default_rng(8)
    return [rng.integers(0, 1000, n).tolist() for n in (12, 12, 12, 200, 200, 200, 400, 400)]


def test_two_level_seeds_join_the_landmarks():
    from perftune.space import Levels

    inputs = _sizes_inputs()
    site = _two_level_site("t-adapt-compose")
    result = tune_inputs(site, inputs, budget=8, n_clusters=2, seed=0, repeats=1, check=_is_sorted)
    pure = {lm.choices[0]: k for k, lm in enumerate(result.landmarks) if not lm.cutoffs}
    assert set(pure) == {"insertion", "halves"}
    # The smallest quarter of the inputs (two of size 12) names the algorithm below the cutoffs 13 and
    # 4 (isqrt(12) + 1): the one that was fastest there; the other algorithm runs above it.
    small = [0, 1]
    below = min(pure, key=lambda a: result.time_s[small, pure[a]].sum())
    above = "halves" if below == "insertion" else "insertion"
    for cutoff in (4, 13):
        composed = Levels((cutoff,), (below, above))
        assert composed in result.landmarks
        k = result.landmarks.index(composed)
        assert np.isfinite(result.time_s[:, k]).all() and result.ok[:, k].all()


def test_two_level_seeds_need_two_levels_and_a_choice_site():
    from perftune.space import Levels

    one = _two_level_site("t-adapt-compose-one", max_levels=1)
    below = {one.name: Levels((), ("insertion",))}
    assert one.composes is False and one.composed_seeds(below, 50) == []
    two = _two_level_site("t-adapt-compose-two")
    below = {two.name: Levels((), ("insertion",))}
    assert two.composed_seeds(below, 50) == [{two.name: Levels((50,), ("insertion", "halves"))}]
    assert two.composed_seeds(below, 3) == []  # no size between the site's smallest and the cutoff
    assert two.composed_seeds({two.name: Levels((9,), ("insertion", "halves"))}, 50) == []
    assert _objective("t-adapt-compose-objective").composes is False


def test_a_landmark_search_without_an_answer_keeps_the_seed_that_answered_before():
    """A loaded machine can stop every run of one landmark search at its time limit: the cluster then
    keeps the configuration that answered its inputs when the seeds were timed (with a warning), instead
    of the whole tuning failing."""
    from perftune.errors import RunWarning

    searching = [False]

    def run(config, xs):
        if searching[0]:
            return list(xs[1:])  # during the first landmark search, every answer is wrong
        return _insertion(xs) if config["algo"] == "forward" else _reverse_insertion(xs)

    def progress(event, done, total, best):
        if event == "landmark":
            searching[0] = done == 0  # only the first search (after it, answers are right again)

    site = AdaptiveObjective("t-adapt-noanswer", run, Space({"algo": Choice(["forward", "backward"])}))
    site.feature(sortedness, levels=(16,))
    with pytest.warns(RunWarning, match="search of cluster 0 .* measured no configuration correctly"):
        result = tune_inputs(site, _inputs(7), budget=8, n_clusters=2, seed=0, repeats=1, check=_is_sorted,
                             on_progress=progress)
    assert {dict(lm)["algo"] for lm in result.landmarks} <= {"forward", "backward"}
    assert result.landmarks
