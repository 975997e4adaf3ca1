"""``parzen``: proposals where the good results are dense and the others are not (the conformance suite
covers validity, seeding, checkpoints and failures for every technique; these test what is its own)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from perftune.errors import PerftuneError
from perftune.search import Parzen, ParzenSettings, StagedBandit
from perftune.space import Choice, Config, Float, Int, Ordinal, Permutation, Space
from perftune.trial import Status, Trial


def _tell(tech: Parzen, config: Config, loss: float | None, i: int, status: Status = Status.OK) -> None:
    if loss is None and status is Status.OK:
        status = Status.FAILED
    tech.tell([Trial(id=i, config=config, status=status, value=loss, loss=loss)])


def _run(tech: Parzen, f, n: int, start: int = 0) -> list[Config]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(start, start + n):
        (config,) = tech.ask(1)
        out.append(config)
        _tell(tech, config, f(config), i)
    return out


def test_proposals_gather_where_the_good_results_are() -> None:
    # 1-D, optimum at 50 of 0..63: after 20 random results, the proposals crowd around it.
    space = Space({"x": Int(0, 63)})
    tech = Parzen(space, seed=1)
    rng = np.random.default_rng(0)
    for i, x in enumerate(rng.choice(64, 20, replace=False)):
        _tell(tech, Config({"x": int(x)}), float(abs(int(x) - 50)), i)
    later = _run(tech, lambda c: float(abs(c["x"] - 50)), 20, start=20)
    distances = [abs(c["x"] - 50) for c in later]
    # Uniform proposals would be 16 away from 50 in the median; these are within a few values.
    assert statistics.median(distances) <= 6, distances


def test_failures_count_as_the_worst_results() -> None:
    # Below 32 everything fails; the few successes above are all equal: proposals avoid the failing half.
    space = Space({"x": Int(0, 63)})
    tech = Parzen(space, seed=2)
    for i, x in enumerate(range(0, 64, 3)):
        _tell(tech, Config({"x": x}), None if x < 32 else 1.0, i)
    later = _run(tech, lambda c: None if c["x"] < 32 else 1.0, 16, start=100)
    assert sum(c["x"] >= 32 for c in later) >= 12, [c["x"] for c in later]


def test_cancelled_trials_are_not_counted() -> None:
    space = Space({"x": Int(0, 9)})
    tech = Parzen(space, seed=0)
    _tell(tech, Config({"x": 1}), None, 0, status=Status.CANCELLED)
    assert tech._n_rows == 0 and tech._ranked == []
    _tell(tech, Config({"x": 2}), 3.0, 1)
    assert tech._n_rows == 1 and tech._ranked == [(3.0, 0)]


def test_unordered_choice_is_not_smoothed_and_large_ranges_are_binned() -> None:
    space = Space({
        "algo": Choice(["a", "b", "c", "d"]),
        "block": Int(0, 100_000),
        "rate": Float(0.0, 1.0),
        "unroll": Ordinal([1, 2, 4, 8]),
        "order": Permutation([0, 1, 2]),
    })
    tech = Parzen(space, seed=5, settings=ParzenSettings(max_bins=16))
    axes = {a.name: a for a in tech._axes}
    assert set(axes) == {"algo", "block", "rate", "unroll"}  # the permutation is sampled, not counted
    assert axes["algo"].values == ["a", "b", "c", "d"] and not axes["algo"].ordered
    assert axes["unroll"].values == [1, 2, 4, 8] and axes["unroll"].ordered
    assert axes["block"].values is None and axes["block"].n_bins == 16
    # The good results all have algo "c" and a small block: proposals follow, and stay valid.
    def f(c: Config) -> float:
        return (0.0 if c["algo"] == "c" else 5.0) + c["block"] / 100_000
    configs = _run(tech, f, 60)
    late = configs[30:]
    assert all(space.is_valid(c) for c in configs)
    assert sum(c["algo"] == "c" for c in late) >= 20
    assert statistics.median(c["block"] for c in late) < 25_000


def test_good_density_is_the_smoothed_histogram_plus_the_prior() -> None:
    space = Space({"x": Ordinal(list(range(10))), "algo": Choice(["a", "b"])})
    tech = Parzen(space, seed=0)
    x_axis, algo_axis = tech._axes
    counts = np.zeros(10)
    counts[4] = 3.0
    density = tech._density(x_axis, counts)
    assert density.sum() == pytest.approx(1.0)
    assert int(np.argmax(density)) == 4 and density[3] > density[0] and density[5] > density[9]
    d_algo = tech._density(algo_axis, np.array([2.0, 0.0]))
    assert d_algo[0] == pytest.approx(2.5 / 3.0) and d_algo[1] == pytest.approx(0.5 / 3.0)


def test_counted_work_is_deterministic() -> None:
    space = Space({"x": Int(0, 63), "y": Ordinal([1, 2, 4, 8])})

    def f(c: Config) -> float:
        return abs(c["x"] - 20) + c["y"]

    a, b = Parzen(space, seed=9), Parzen(space, seed=9)
    assert _run(a, f, 30) == _run(b, f, 30)
    assert a.work_done == b.work_done > 30


@pytest.mark.parametrize(
    ("field", "value"),
    [("gamma", 0.0), ("gamma", 1.0), ("n_candidates", 0), ("min_results", 0), ("max_bins", 1)],
)
def test_bad_settings_are_rejected(field: str, value: float) -> None:
    with pytest.raises(PerftuneError, match=f"ParzenSettings.{field}"):
        ParzenSettings(**{field: value})


def test_the_default_search_has_parzen_in_its_portfolio() -> None:
    tech = StagedBandit(Space({"x": Int(0, 63), "y": Ordinal([1, 2, 4, 8])}), seed=0)
    assert "parzen" in tech.bandit.names and "greedy-uniform" not in tech.bandit.names
