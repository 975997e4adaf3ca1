"""tune_inputs(required_levels=...): every training input learned at other accuracy requirements too."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from perftune.adapt import AdaptError, AdaptiveObjective, tune_inputs
from perftune.adapt._tune import _relabel
from perftune.space import Choice, Space


@dataclass
class _Job:
    """A toy variable-accuracy problem: ``iters`` steps reach ``iters`` digits; a call needs ``digits``."""

    size: int
    digits: float


def _run(config, job: _Job) -> int:
    steps = int(config["iters"])
    total = 0
    for i in range(steps * 3000):  # work in proportion to the steps: more digits cost more time
        total += i
    return steps


def _digits(out: int, job: _Job) -> float:
    return float(out)


def _required(job: _Job) -> float:
    return job.digits


def _site(name: str) -> AdaptiveObjective:
    site = AdaptiveObjective(name, _run, Space({"iters": Choice([1, 4, 12], default=12)}))
    site.feature(_required, name="digits", cost="cheap")
    return site


def test_relabel_copies_every_input_per_level_with_ok_from_the_accuracy_reached():
    values = np.array([[3.0, 7.0], [10.0, 8.0]])  # column 0 is the requirement
    cost = np.array([[0.0, 1e-6], [0.0, 2e-6]])
    time_s = np.array([[1.0, 2.0], [1.5, 3.0]])
    # The first landmark missed the second input's own requirement (10 digits), so it did not answer
    # there; at 2 digits its 4 digits answer.
    answered = np.array([[True, True], [False, True]])
    stopped = np.array([[False, False], [False, True]])
    achieved = np.array([[4.0, 16.0], [4.0, -np.inf]])
    resampled = np.repeat(values[None], 2, axis=0)
    X, C, T, ok, R, groups = _relabel(0, [2.0, 8.0], values, cost, time_s, answered, stopped, achieved,
                                      resampled, ["a", "b"])
    assert X[:, 0].tolist() == [3.0, 10.0, 2.0, 2.0, 8.0, 8.0]
    assert X[:, 1].tolist() == [7.0, 8.0] * 3 and C.shape == (6, 2) and T.tolist() == time_s.tolist() * 3
    # The own requirement keeps what was measured; at 2 digits both landmarks serve; at 8 only the second,
    # and a stopped run stays an answer (at the cut's time), whatever its accuracy.
    assert ok.tolist() == [[True, True], [False, True], [True, True], [True, True], [False, True],
                           [False, True]]
    assert R.shape == (2, 6, 2) and R[:, 2:4, 0].tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert groups == ["a", "b"] * 3


def test_requirements_between_the_training_ones_get_a_landmark_accurate_enough():
    # Training asks for 2 or 10 digits only; the dispatcher is then asked for every requirement between.
    train = [_Job(100, d) for d in (2.0, 10.0) for _ in range(6)]
    site = _site("t-adapt-relabel")
    result = tune_inputs(site, train, budget=10, n_clusters=2, seed=0, repeats=1, accuracy=_digits,
                         required=_required, required_levels=range(1, 13), guard=False)
    assert result.accuracy_reached is not None
    reached = result.accuracy_reached
    steps = [int(dict(lm)["iters"]) for lm in result.landmarks]
    assert reached.shape == (len(train), len(steps))
    assert (reached == np.array(steps, dtype=float)[None, :]).all()
    d = result.dispatcher()
    for need in range(1, 13):
        chosen = steps[d.choose(_Job(100, float(need)))]
        assert chosen >= need, f"{need} digits needed, landmark with {chosen} steps chosen"
    # And not by running the longest landmark everywhere: where 4 steps are enough, 4 steps run.
    assert sorted(steps) == [4, 12]
    assert [steps[d.choose(_Job(100, float(need)))] for need in (1, 3, 4)] == [4, 4, 4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"required_levels": [3.0]}, "required_levels= needs accuracy= and required="),
        ({"accuracy": _digits, "required": lambda job: job.digits, "required_levels": [3.0]},
         "computed by required itself"),
        ({"accuracy": _digits, "required": _required, "required_levels": ["x"]},
         "required_levels must be numbers"),
        ({"accuracy": _digits, "required": _required, "required_levels": [float("nan")]},
         "required_levels must be one or more finite numbers"),
    ],
)
def test_required_levels_refuses_what_it_cannot_use(kwargs, message):
    train = [_Job(100, d) for d in (2.0, 10.0) for _ in range(3)]
    with pytest.raises(AdaptError, match=message):
        tune_inputs(_site("t-adapt-relabel-bad"), train, budget=6, n_clusters=2, seed=0, repeats=1, **kwargs)


def test_the_requirement_feature_must_be_cheap():
    site = AdaptiveObjective("t-adapt-relabel-measured", _run, Space({"iters": Choice([1, 4, 12])}))
    site.feature(_required, name="digits")
    train = [_Job(100, d) for d in (2.0, 10.0) for _ in range(3)]
    with pytest.raises(AdaptError, match="must be cheap"):
        tune_inputs(site, train, budget=6, n_clusters=2, seed=0, repeats=1, accuracy=_digits,
                    required=_required, required_levels=[3.0])
