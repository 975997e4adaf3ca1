"""Inputs beyond the training sizes: the asymptotic check of the landmarks, the landmark budget spent
where the time goes, and sampled features scored on repeated samples."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from perftune.adapt import (
    AdaptError,
    AdaptiveObjective,
    DispatchFile,
    DispatchFileWarning,
    Feature,
    GrowthCheck,
    duplicates,
    fit_dispatch,
    fit_growth,
    sample,
    sortedness,
    tune_inputs,
    use_dispatch,
)
from perftune.adapt._tune import _weighted_budgets
from perftune.space import Choice, Space

# ---- the asymptotic check -------------------------------------------------------------------------


def test_growth_check_replaces_a_steeper_landmark_only_beyond_the_training_sizes():
    # Landmark 0 grows as n^2 and is the faster one up to n = 1000; landmark 1 grows linearly.
    quad, lin = [np.log(1e-8), 2.0], [np.log(2e-5), 1.0]
    check = GrowthCheck(max_size=[1000.0, 1000.0], fits=[[quad, lin], [quad, lin]])
    assert check.adjust(0, 1000.0) == 0  # measured there: the model's choice stands
    assert check.adjust(0, 1500.0) == 0  # beyond, but still predicted faster (0.0225 s against 0.03)
    assert check.adjust(0, 10_000.0) == 1  # predicted 1 s against 0.2: the quadratic one is not run
    assert check.adjust(1, 10**6) == 1  # the flatter one is never replaced by a steeper one
    # Within the margin, no switch: predicted 5% slower is noise, not growth.
    close = GrowthCheck(max_size=[100.0, 100.0], fits=[[[0.0, 1.01], [0.0, 1.0]]] * 2, margin=0.1)
    assert close.adjust(0, 1e3) == 0
    # By default a switch needs a predicted gain of more than 1.5x: a law fitted on two sizes and
    # extrapolated tenfold is not precise to 20% (it once sent random inputs to merge sort, 2.6x slower).
    # Landmark 0 grows as n^1.1 and is 1.4x faster at the largest training size, 100.
    fits = [[[0.0, 1.1], [np.log(1.4) + 0.1 * np.log(100.0), 1.0]]] * 2
    default = GrowthCheck(max_size=[100.0, 100.0], fits=fits)
    assert default.adjust(0, 1e4) == 0  # predicted 1.13x slower there: kept
    assert default.adjust(0, 1e6) == 1  # predicted 1.79x slower: replaced
    assert GrowthCheck(max_size=[100.0, 100.0], fits=fits, margin=0.1).adjust(0, 1e4) == 1


def test_a_slope_below_linear_is_a_fading_fixed_cost_not_a_growth_to_extrapolate():
    # Landmark 1 is 1.7x slower at the largest training size, and its fitted slope of 0.5 would make it
    # the faster one at 10^6; read as linear, it stays behind.
    fits = [[[0.0, 1.0], [4.0, 0.5]], [None, None]]
    assert GrowthCheck(max_size=[1000.0, 0.0], fits=fits).adjust(0, 1e6) == 0
    assert GrowthCheck(max_size=[1000.0, 0.0], fits=fits, min_slope=0.0).adjust(0, 1e6) == 1


def test_growth_check_keeps_the_choice_without_a_fit_and_survives_json():
    check = GrowthCheck(max_size=[10.0, 0.0], fits=[[None, [0.0, 1.0]], [None, None]])
    assert check.adjust(0, 1e9) == 0  # no fit for the chosen landmark: nothing to compare
    again = GrowthCheck.from_dict(json.loads(json.dumps(check.to_dict())), n_landmarks=2)
    assert again == check
    with pytest.raises(AdaptError, match="for 2 landmarks, expected 3"):
        GrowthCheck.from_dict(check.to_dict(), n_landmarks=3)
    with pytest.raises(AdaptError, match="malformed"):
        GrowthCheck.from_dict({"fits": []}, n_landmarks=2)


def test_fit_growth_finds_the_slopes_within_families():
    sizes, T, groups = [], [], []
    for family, scale in (("a", 1.0), ("b", 3.0)):  # family b is 3x slower for both: same growth
        for n in (10, 100, 1000):
            sizes.append(n)
            T.append([scale * 1e-8 * n**2, scale * 2e-5 * n])
            groups.append(family)
    T_a = np.array(T)
    ok = np.ones_like(T_a, dtype=bool)
    check = fit_growth([0] * len(sizes), sizes, T_a, ok, groups)
    assert check.max_size[0] == 1000.0
    assert check.fits[0][0] is not None and check.fits[0][0][1] == pytest.approx(2.0)
    assert check.fits[0][1] is not None and check.fits[0][1][1] == pytest.approx(1.0)
    assert check.fits[1] == [None, None]  # the model never picks landmark 1: no region
    assert check.adjust(0, 10**4) == 1
    # A landmark that gave no answer on an input of the region gets no fit, and cannot replace another.
    ok[1, 1] = False
    assert fit_growth([0] * len(sizes), sizes, T_a, ok, groups).adjust(0, 10**4) == 0
    # A stopped run's time (a lower bound) counts for the chosen landmark, never for a replacement.
    ok[1, 1], ok[2, 0] = True, False
    bound = np.zeros_like(ok)
    bound[2, 0] = True
    assert fit_growth([0] * len(sizes), sizes, T_a, ok, groups).adjust(0, 10**4) == 0
    assert fit_growth([0] * len(sizes), sizes, T_a, ok, groups, bound=bound).adjust(0, 10**4) == 1
    bound[2, 0], ok[2, 0], ok[2, 1], bound[2, 1] = False, True, False, True
    assert fit_growth([0] * len(sizes), sizes, T_a, ok, groups, bound=bound).adjust(0, 10**4) == 0


class _Modelled(AdaptiveObjective):
    """An objective whose measured time is a formula of the configuration and the size: the tables
    tune_inputs builds are then known exactly, whatever the machine does."""

    def measure(self, landmark, x, timer=None):
        return _seconds(landmark["algo"], len(x)), self.run(landmark, x)


def _seconds(algo: str, n: int) -> float:
    # "quad" is the fastest up to about 2000 elements, "lin" beyond.
    return 1e-8 * n**2 if algo == "quad" else 2e-5 * n


def _modelled(name: str, size: bool = True) -> _Modelled:
    site = _Modelled(name, lambda config, xs: sorted(xs), Space({"algo": Choice(["lin", "quad"])}),
                     default={"algo": "lin"}, size=len if size else None)
    site.feature(len, name="n", cost="cheap")
    return site


def test_tune_inputs_learns_the_growth_and_the_dispatcher_file_keeps_it(tmp_path):
    site = _modelled("t-adapt-growth")
    inputs = [list(range(n)) for n in (10, 100, 1000)] * 2
    result = tune_inputs(site, inputs, budget=6, n_clusters=1, seed=0, repeats=1, groups=["f"] * 6)
    quad = next(k for k, lm in enumerate(result.landmarks) if lm["algo"] == "quad")
    lin = next(k for k, lm in enumerate(result.landmarks) if lm["algo"] == "lin")
    assert result.growth is not None
    d = result.dispatcher()
    assert d.choose(list(range(1000))) == quad  # the training says so
    assert d.choose(list(range(20_000))) == lin  # 2x slower there by the fitted growth
    assert result.dispatcher(one_level=True).growth is None
    # Saved and read back as a program would: the same decisions.
    path = result.save(tmp_path / "dispatch.json")
    use_dispatch(path, strict=True)
    assert site.landmark_for(list(range(20_000)))["algo"] == "lin"
    assert site.landmark_for(list(range(1000)))["algo"] == "quad"
    # A malformed growth entry is a malformed entry: the default configuration, one warning.
    doc = json.loads(path.read_text())
    doc["dispatchers"]["t-adapt-growth"]["growth"] = {"max_size": [1.0]}
    path.write_text(json.dumps(doc))
    use_dispatch(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert site.landmark_for(list(range(20_000))) is None
    assert [w.category for w in caught] == [DispatchFileWarning]


@pytest.fixture(autouse=True)
def _empty_dispatch_file():
    yield
    use_dispatch(DispatchFile())  # the next test starts from an empty, in-memory dispatcher file


def test_without_a_size_or_with_the_check_off_nothing_changes():
    inputs = [list(range(n)) for n in (10, 100, 1000)] * 2
    for site, kwargs in ((_modelled("t-adapt-nosize", size=False), {}),
                         (_modelled("t-adapt-checkoff"), {"asymptotic": False})):
        result = tune_inputs(site, inputs, budget=6, n_clusters=1, seed=0, repeats=1, **kwargs)
        assert result.growth is None
        d = result.dispatcher()
        assert result.landmarks[d.choose(list(range(20_000)))]["algo"] == "quad"


# ---- the landmark budget --------------------------------------------------------------------------


def test_budget_goes_where_the_time_goes_with_a_floor_for_every_search():
    shares = _weighted_budgets(60, [1.0, 9.0, 0.0], floor=4)
    evals = [b.evals for b in shares]
    assert sum(evals) == 60
    assert min(evals) >= 4 and evals[1] > evals[0] >= evals[2]
    assert [b.evals for b in _weighted_budgets(9, [1.0, 1.0, 1.0], floor=4)] == [3, 3, 3]
    timed = _weighted_budgets("60s", [1.0, 3.0], floor=4)
    assert sum(b.seconds for b in timed) == pytest.approx(60.0)
    assert timed[1].seconds > timed[0].seconds >= 15.0


def test_a_landmark_search_tunes_on_the_largest_inputs_of_its_cluster():
    # "quad" wins on the small inputs, "lin" on the largest: one cluster, one representative: the
    # landmark must be what the largest input needs (it is most of the cluster's time). The only feature
    # falls as the input grows: "largest" is the input's size, not its largest feature value.
    site = _Modelled("t-adapt-reps", lambda config, xs: sorted(xs), Space({"algo": Choice(["lin", "quad"])}),
                     default={"algo": "lin"}, size=len)
    site.feature(lambda xs: -len(xs), name="shortness", cost="cheap")
    inputs = [list(range(n)) for n in (10, 20, 30, 40, 50, 6000)]
    result = tune_inputs(site, inputs, budget=4, n_clusters=1, seed=0, repeats=1, n_representatives=1,
                         seed_landmarks=False)
    assert [lm["algo"] for lm in result.landmarks] == ["lin"]


# ---- sampled features on repeated samples ---------------------------------------------------------


def test_sampled_features_take_an_offset_and_say_so():
    xs = list(range(100))
    assert sample(xs, 10, offset=3) == list(range(3, 100, 10))
    assert sample(xs, 10, offset=13) == sample(xs, 10, offset=3)  # modulo the stride
    assert Feature("s", sortedness, levels=(16,)).resamples
    assert not Feature("s", lambda xs, n: 0.0, levels=(16,)).resamples
    assert not Feature("n", len).resamples
    # Another offset is another sample: on random data the values differ, on sorted data they do not.
    rng = np.random.default_rng(0)
    shuffled = rng.integers(0, 1000, 10_000).tolist()
    assert len({sortedness(shuffled, 16, offset=o) for o in range(0, 4000, 500)}) > 1
    assert {duplicates(sorted(set(shuffled)), 64, offset=o) for o in range(0, 400, 50)} == {0.0}


def test_tune_inputs_reads_resampleable_columns_again():
    site = AdaptiveObjective("t-adapt-resample", lambda c, xs: sorted(xs), Space({"o": Choice(["a"])}))
    site.feature(sortedness, name="up", levels=(8,))
    site.feature(lambda xs, n: float(len(xs) % n), name="plain", levels=(8,))
    rng = np.random.default_rng(1)
    inputs = [rng.integers(0, 100, 400).tolist() for _ in range(6)]
    result = tune_inputs(site, inputs, budget=2, n_clusters=1, seed=0, repeats=1)
    assert result.resampled is not None and result.resampled.shape[1:] == result.values.shape
    assert (result.resampled[:, :, 1] == result.values[:, 1]).all()  # cannot resample: its own value
    assert (result.resampled[:, :, 0] != result.values[:, 0]).any()


def test_a_cheap_column_too_noisy_for_its_threshold_is_not_read():
    # Two families, each with its own fast landmark (1 ms against 10). Column 0 tells them apart exactly
    # and costs 0.5 ms; column 1 costs almost nothing but its repeated samples land on the other side of
    # any threshold between the families for a third of the inputs.
    rng = np.random.default_rng(0)
    n = 24
    family = np.arange(n) % 2
    X = np.stack([family.astype(float), 0.3 + 0.4 * family + rng.normal(0, 0.02, n)], axis=1)
    cost = np.tile([5e-4, 1e-6], (n, 1))
    T = np.where(family[:, None] == np.arange(2)[None, :], 1e-3, 1e-2)
    ok = np.ones_like(T, dtype=bool)
    resampled = np.repeat(X[None], 3, axis=0)
    for r in range(3):
        flip = (np.arange(n) // 2) % 3 == r  # each input misread in one sample of three
        resampled[r, flip, 1] = 1.0 - resampled[r, flip, 1]
    kw = {"classifier": "tree", "guard": False, "seed": 0, "groups": family.tolist()}
    blind = fit_dispatch(X, cost, T, ok, **kw)
    assert blind.selected == [1]
    aware = fit_dispatch(X, cost, T, ok, resampled=resampled, **kw)
    assert aware.selected == [0]
    with pytest.raises(AdaptError, match="resampled"):
        fit_dispatch(X, cost, T, ok, resampled=resampled[0], **kw)


def test_of_two_columns_that_score_the_same_the_steadier_is_read():
    # Both columns tell the two families apart at the same cost; column 0's repeated samples wander
    # (without crossing the threshold), column 1's agree. Without repeated samples, the first one wins.
    n = 24
    family = np.arange(n) % 2
    X = np.stack([family * 1.0, family * 1.0], axis=1)
    cost = np.full((n, 2), 1e-5)
    T = np.where(family[:, None] == np.arange(2)[None, :], 1e-3, 1e-2)
    ok = np.ones_like(T, dtype=bool)
    resampled = np.repeat(X[None], 3, axis=0)
    resampled[:, :, 0] += np.array([-0.2, 0.1, 0.2])[:, None]
    kw = {"classifier": "tree", "guard": False, "seed": 0, "groups": family.tolist()}
    assert fit_dispatch(X, cost, T, ok, **kw).selected == [0]
    assert fit_dispatch(X, cost, T, ok, resampled=resampled, **kw).selected == [1]


def test_cpu_limited_runs_are_timed_by_a_clock_that_sees_short_runs():
    # Under the CPU-time limit (ITIMER_PROF) the process clock moves at scheduler ticks, and a run of
    # a fraction of a millisecond reads as 0; tune_inputs' CPU clock must not.
    import time

    from perftune.adapt._limit import run_limited

    def work() -> int:
        return sum(range(20_000))

    readings = [run_limited(work, 5.0, time.thread_time)[0] for _ in range(6)]
    assert all(seconds > 0 for seconds in readings)
    site = AdaptiveObjective("t-adapt-clock", lambda c, xs: sorted(xs), Space({"o": Choice(["a"])}))
    site.feature(len, name="n", cost="cheap")
    result = tune_inputs(site, [list(range(20_000))] * 4, budget=2, n_clusters=1, seed=0, repeats=1,
                         clock="cpu")
    assert (result.time_s > 0).all()
