"""Ask/tell and Budget take what Optuna users pass them: a NaN told is a failed trial (as an objective's
NaN is in tune()), contradictory input is one error, and a budget of the wrong type is refused at once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perftune import Budget, PerftuneError, Status
from perftune.drive import Tuner
from perftune.errors import BudgetError
from perftune.space import Int, Space

SPACE = Space({"x": Int(0, 9)})


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_told_is_a_failed_trial_and_frees_its_slot(bad: float) -> None:
    tuner = Tuner(SPACE, seed=1, budget=2)
    first = tuner.ask()
    told = tuner.tell(first, bad)
    assert told.status is Status.FAILED and "not finite" in (told.reason or "")
    second = tuner.ask()
    assert second is not None
    tuner.tell(second, 1.0)
    assert tuner.ask() is None  # both trials counted: the NaN one is not left in flight


def test_a_non_finite_value_beside_metrics_or_in_samples_is_a_failure_too() -> None:
    tuner = Tuner(SPACE, seed=1)
    assert tuner.tell(tuner.ask(), math.nan, metrics={"size": 3.0}).status is Status.FAILED
    assert tuner.tell(tuner.ask(), 1.0, samples=[1.0, math.nan]).status is Status.FAILED


def test_a_value_and_an_error_at_once_is_refused() -> None:
    tuner = Tuner(SPACE, seed=1)
    trial = tuner.ask()
    with pytest.raises(PerftuneError, match="one or the other"):
        tuner.tell(trial, 1.0, error="boom")
    with pytest.raises(PerftuneError, match="one or the other"):
        tuner.tell(trial, 1.0, status=Status.TIMEOUT)
    assert tuner.tell(trial, error="boom").status is Status.FAILED  # still in flight after the refusal


@pytest.mark.parametrize("kwargs", [
    {"evals": 10, "target": "2"}, {"seconds": "10"}, {"patience": 2.5}, {"evals": True},
    {"seconds": math.nan}, {"target": math.inf}, {"patience": 0},
])
def test_a_budget_of_the_wrong_type_is_one_error_at_once(kwargs: dict) -> None:
    with pytest.raises(BudgetError, match="^budget: "):
        Budget(**kwargs)


def test_numpy_numbers_make_a_budget() -> None:
    b = Budget(evals=np.int64(5), seconds=np.float64(2.5), target=np.float32(1.5))
    assert (b.evals, b.seconds) == (5, 2.5)


def test_hypervolume_says_what_its_reference_should_be() -> None:
    import perftune

    result = perftune.tune(lambda c: {"time": 5.0 - c["x"], "acc": c["x"] / 10}, SPACE, budget=6, seed=0,
                           goal={"time": "min", "acc": "max"})
    with pytest.raises(PerftuneError, match=r"expected a mapping \{objective: value\} .* time, acc"):
        result.hypervolume([3, 0.0])  # type: ignore[arg-type]
    with pytest.raises(PerftuneError, match="no value for acc; not an objective: 'accuracy'"):
        result.hypervolume({"time": 6, "accuracy": 0})
    assert result.hypervolume({"time": 6, "acc": 0}) > 0


def test_metrics_may_go_with_a_failure_and_are_kept() -> None:
    # The online racer tells a lost candidate as failed with its wins and races.
    tuner = Tuner(SPACE, seed=1)
    told = tuner.tell(tuner.ask(), error="lost the race", metrics={"wins": 2, "races": 5})
    assert told.status is Status.FAILED and told.metrics == {"wins": 2.0, "races": 5.0}


def test_a_hypervolume_reference_that_only_names_too_much_says_so() -> None:
    import perftune

    result = perftune.tune(lambda c: {"time": 5.0 - c["x"], "acc": c["x"] / 10}, SPACE, budget=4, seed=0,
                           goal={"time": "min", "acc": "max"})
    with pytest.raises(PerftuneError) as raised:
        result.hypervolume({"time": 6, "acc": 0, "x": 1})
    assert str(raised.value) == ("hypervolume(): reference names 'x', which is not an objective "
                                 "(the objectives: time, acc)")
