"""The Python API's noise handling: tune(..., repeats=...) and non-finite objective values."""

from __future__ import annotations

import math

import numpy as np
import pytest

import perftune
from perftune import Status
from perftune.errors import PerftuneError
from perftune.measure import TimingSettings
from perftune.space import Int, Space


def space() -> Space:
    return Space({"n": Int(0, 9, default=0)})


def test_deterministic_objective_is_measured_once_per_configuration() -> None:
    calls: list[int] = []

    def accuracy(config):  # a count: the same value however often it is computed
        calls.append(config["n"])
        return float(abs(config["n"] - 6))

    result = perftune.tune(accuracy, space(), budget=10, seed=0, repeats="auto")
    assert result.best is not None and result.best.config["n"] == 6
    default, *later = result.trials
    # The first configuration: one warm-up and two identical samples reveal a deterministic objective.
    assert default.samples == [6.0, 6.0]
    assert all(t.samples == [t.value] for t in later)
    assert len(calls) == 3 + len(later)


def test_noisy_objective_gets_the_sequential_test_and_a_speedup_interval() -> None:
    rng = np.random.default_rng(0)
    calls: list[int] = []

    def timing(config):
        calls.append(config["n"])
        return (1.0 + 0.2 * abs(config["n"] - 6)) * float(np.exp(rng.normal(0.0, 0.05)))

    result = perftune.tune(timing, space(), budget=10, seed=0, repeats="auto")
    assert result.best is not None and result.best.config["n"] == 6
    assert len(result.default.samples) == TimingSettings().first_runs
    # A configuration that cannot win is stopped after a few runs; a new best gets a baseline's worth.
    assert min(len(t.samples) for t in result.trials) < 10
    assert len(result.best.samples) == TimingSettings().first_runs
    assert result.best.value == pytest.approx(float(np.median(result.best.samples)))
    ci = result.speedup()
    assert ci is not None and ci.lo < 2.2 < ci.hi and ci.lo > 1.0


def test_int_repeats_measures_exactly_that_often() -> None:
    calls: list[int] = []
    result = perftune.tune(lambda c: calls.append(1) or float(c["n"]), space(), budget=4, seed=0, repeats=3)
    assert all(len(t.samples) == 3 for t in result.trials) and len(calls) == 12


def test_without_repeats_the_objective_is_called_once() -> None:
    calls: list[int] = []
    result = perftune.tune(lambda c: calls.append(1) or 5.0, space(), budget=4, seed=0)
    assert len(calls) == 4 and all(t.samples == [5.0] for t in result.trials)
    assert result.speedup() is not None and result.speedup().estimate == 1.0


@pytest.mark.parametrize("bad", [0, -2, True, "often", 2.5])
def test_bad_repeats_is_one_clear_error(bad) -> None:
    with pytest.raises(PerftuneError, match="repeats must be"):
        perftune.tune(lambda c: 1.0, space(), budget=2, repeats=bad)


@pytest.mark.parametrize("repeats", [None, "auto"])
@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_value_is_a_failure_with_a_reason(bad: float, repeats) -> None:
    def objective(config):
        return bad if config["n"] == 3 else float(config["n"] + 1)

    result = perftune.tune(objective, space(), budget=10, seed=0, repeats=repeats,
                           seeds=[{"n": 3}])
    failed = [t for t in result.trials if t.config["n"] == 3]
    assert len(failed) == 1 and failed[0].status is Status.FAILED
    assert failed[0].reason == f"ValueError: objective value {bad} is not finite"
    assert result.best is not None and math.isfinite(result.best.value) and result.best.config["n"] != 3


def test_non_finite_metric_in_a_mapping_is_a_failure() -> None:
    result = perftune.tune(lambda c: {"time": -math.inf, "size": 1.0}, space(), budget=2, metric="time")
    assert {t.status for t in result.trials} == {Status.FAILED} and result.best is None
    assert "objective value -inf is not finite" in result.trials[0].reason


def test_worker_processes_share_what_was_learnt() -> None:
    result = perftune.tune(lambda c: float(c["n"] % 4), space(), budget=8, seed=0, repeats="auto",
                           workers=2)
    assert len(result.trials) == 8
    # At most the two configurations measured before the objective was known to be deterministic
    # take more than one sample.
    assert sum(len(t.samples) > 1 for t in result.trials) <= 2
