"""Variable-accuracy tables: per-bin winners, monotonicity, held-back verification, bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from perftune.space import Choice, Config, LogInt, Space
from perftune.targets.choice import (
    AccuracyMetricWarning,
    AccuracyTable,
    ChoiceError,
    UnreachableTargetWarning,
    accuracy_config,
    tune_accuracy,
    use_choices,
)

TARGETS = [2.0, 4.0, 6.0, 8.0]


class Integrand:
    """a * exp(b x) on [0, 1], with its exact integral."""

    def __init__(self, rng):
        self.a, self.b = rng.uniform(0.5, 2.0), rng.uniform(-2.0, 3.0)

    def __call__(self, x):
        return self.a * np.exp(self.b * x)

    @property
    def exact(self):
        return self.a * (math.exp(self.b) - 1) / self.b


def integrate(config, f):
    n = config["n"]
    if config["rule"] == "trapezoid":
        x = np.linspace(0, 1, n + 1)
        y = f(x)
        return (y.sum() - 0.5 * (y[0] + y[-1])) / n
    n += n % 2
    x = np.linspace(0, 1, n + 1)
    y = f(x)
    return (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()) / (3 * n)


def digits(out, f):
    err = abs(out - f.exact) / abs(f.exact)
    return 16.0 if err == 0 else -math.log10(err)


def space():
    return Space({"rule": Choice(["trapezoid", "simpson"]), "n": LogInt(2, 20000)})


def problems(seed, n):
    rng = np.random.default_rng(seed)
    return [Integrand(rng) for _ in range(n)]


@pytest.fixture(scope="module")
def table():
    return tune_accuracy(
        integrate,
        space(),
        accuracy=digits,
        targets=TARGETS,
        inputs=problems(1, 3),
        held_out=problems(2, 6),
        budget=60,
        seed=3,
        name="integral",
        margin=0.1,
    )


def test_one_run_gives_every_bin_loosest_first(table):
    assert [b.target for b in table.bins] == TARGETS
    assert all(b.reached for b in table.bins)
    # One shared run: at most `budget` configurations were measured for all four bins together.
    assert table.n_candidates <= 60


def test_every_cell_meets_its_target_on_fresh_held_back_inputs(table):
    held = problems(2, 6)
    fresh = problems(99, 20)
    for b in table.bins:
        assert min(digits(integrate(b.config, f), f) for f in held) >= b.target
        worst = min(digits(integrate(b.config, f), f) for f in fresh)
        assert worst >= b.target, (b.target, b.config, worst)
        assert b.verified_accuracy >= b.target


def test_table_is_monotone(table):
    times = [b.time_s for b in table.bins]
    assert all(t_loose <= t_tight for t_loose, t_tight in zip(times, times[1:], strict=False))


def test_runtime_lookup_round_trips_through_file(table, tmp_path):
    path = table.save(tmp_path / "choices.json")
    use_choices(path, strict=True)
    assert accuracy_config("integral", 5.0) == table.bins[2].config
    assert accuracy_config("integral", 0.1) == table.bins[0].config
    back = AccuracyTable.from_dict("integral", table.to_dict())
    assert back.bins == table.bins
    with pytest.raises(ChoiceError, match="no tuned configuration reaches digits 12"):
        accuracy_config("integral", 12.0)


def test_missing_table_uses_default_or_says_so():
    assert accuracy_config("nope", 3.0, default={"n": 4}) == {"n": 4}
    with pytest.raises(ChoiceError, match="'nope' is not in the tuned-choices file"):
        accuracy_config("nope", 3.0)


def test_unreachable_target_is_reported_with_best_accuracy():
    small = Space({"rule": Choice(["trapezoid"]), "n": LogInt(2, 50)})
    with pytest.warns(
        UnreachableTargetWarning, match=r"no configuration reached digits \[9.0\] \(best digits found: "
    ):
        t = tune_accuracy(
            integrate,
            small,
            accuracy=digits,
            targets=[2.0, 9.0],
            inputs=problems(1, 2),
            budget=20,
            seed=0,
            name="weak",
        )
    assert t.bins[0].reached and not t.bins[1].reached
    assert t.bins[1].best_accuracy < 9.0
    with pytest.raises(ChoiceError, match="best digits found"):
        t.config_for(9.0)


def test_metric_that_raises_sometimes_is_reported_once_and_tuning_goes_on():
    def picky(out, f):
        if f.b < 0:
            raise ValueError("cannot score decaying integrands")
        return digits(out, f)

    rng = np.random.default_rng(5)
    inputs = [Integrand(rng) for _ in range(3)]
    inputs[0].b = -1.0
    with (
        pytest.warns(AccuracyMetricWarning, match="'picky' raised .*ValueError: cannot score") as rec,
        pytest.raises(ChoiceError, match="every candidate failed; first failure: accuracy metric 'picky'"),
    ):
        tune_accuracy(integrate, space(), accuracy=picky, targets=[2.0], inputs=inputs, budget=5, seed=0)
    assert len(rec) == 1


def test_metric_raising_for_some_configs_still_gives_a_table():
    def fussy(out, f):
        if out > 1e9:
            raise OverflowError("too big")
        return digits(out, f)

    def prog(config, f):
        return 1e12 if config["rule"] == "simpson" and config["n"] < 8 else integrate(config, f)

    seeds = [Config({"rule": "simpson", "n": 4})]
    with pytest.warns(AccuracyMetricWarning, match="OverflowError: too big"):
        t = tune_accuracy(
            prog,
            space(),
            accuracy=fussy,
            targets=[3.0],
            inputs=problems(1, 2),
            budget=25,
            seed=1,
            seeds=seeds,
        )
    assert t.bins[0].reached and t.failures


def test_error_metric_lower_is_better():
    def rel_error(out, f):
        return abs(out - f.exact) / abs(f.exact)

    t = tune_accuracy(
        integrate,
        space(),
        accuracy=rel_error,
        targets=[1e-3, 1e-6],
        higher_is_better=False,
        inputs=problems(1, 2),
        held_out=problems(4, 2),
        budget=40,
        seed=2,
    )
    assert [b.target for b in t.bins] == [1e-3, 1e-6]
    assert all(b.accuracy <= b.target for b in t.bins)
    assert t.config_for(1e-4) == t.bins[1].config


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"targets": []}, "no accuracy targets"),
        ({"inputs": []}, "no training inputs"),
        ({"budget": 0}, "budget must be an integer >= 1"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = {"accuracy": digits, "targets": [1.0], "inputs": problems(1, 1), "budget": 5}
    args.update(kwargs)
    with pytest.raises(ChoiceError, match=match):
        tune_accuracy(integrate, space(), **args)


def test_no_warning_when_all_reached(table):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert table.config_for(8.0) == table.bins[3].config
