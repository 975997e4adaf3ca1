"""The default fidelity path: Hyperband-style brackets for a bounded ladder, random configurations first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.drive import ASHA
from perftune.errors import PerftuneError
from perftune.space import Float, Space
from perftune.trial import Status

SPACE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})


def curve(config: Any, trial: Any) -> float:
    """A 27-step learning curve whose final value is (x - 0.3)^2 + (y - 0.6)^2."""
    value = 0.0
    for step in range(1, 28):
        value = (config["x"] - 0.3) ** 2 + (config["y"] - 0.6) ** 2 + 1.0 / step
        trial.report(step, value)
        if trial.should_prune():
            raise perftune.Pruned()
    return value


def test_a_bounded_ladder_gets_one_bracket_per_rung_with_hyperband_shares() -> None:
    pruner = ASHA(max_steps=27)
    assert (pruner.brackets, pruner.allocation, pruner.random_starts) == (3, "hyperband", 9)
    # Every bracket prunes at least once: none starts at max_steps.
    assert [pruner.rung_steps(b) for b in range(3)] == [(1, 3, 9), (3, 9), (9,)]
    counts = [0, 0, 0]
    for i in range(330):
        counts[pruner.bracket_of(i)] += 1
    assert counts[0] > counts[1] > counts[2] > 0  # Hyperband's shares: 9, 4.5 and 3 of 16.5
    assert ASHA(eta=2, max_steps=4).brackets == 2  # rungs at 1 and 2
    assert ASHA(max_steps=3).brackets == 1  # one rung (step 1): plain ASHA


def test_an_open_ladder_explicit_rungs_or_explicit_brackets_keep_the_former_rule() -> None:
    assert (ASHA().brackets, ASHA().allocation) == (1, "even")
    assert ASHA(rungs=(1, 2, 3), max_steps=27).brackets == 1  # task files: explicit levels
    explicit = ASHA(max_steps=27, brackets=2)
    assert (explicit.brackets, explicit.allocation) == (2, "even")
    assert ASHA(max_steps=27, brackets=1).allocation == "even"
    assert ASHA(eta=2).random_starts == 4 and ASHA(random_starts=0).random_starts == 0
    assert ASHA(max_steps=27).to_dict() == {"eta": 3, "min_steps": 1, "max_steps": 27, "brackets": 3,
                                            "rungs": None, "allocation": "hyperband", "random_starts": 9}
    assert ASHA(max_steps=27) == ASHA(max_steps=27, brackets=3, allocation="hyperband", random_starts=9)


def test_bad_random_starts_are_refused() -> None:
    with pytest.raises(PerftuneError, match="random_starts must be an integer of at least 0, got -1"):
        ASHA(random_starts=-1)


def test_a_fresh_pruning_run_starts_with_random_configurations_then_the_default() -> None:
    result = perftune.tune(curve, SPACE, budget=12, seed=3, pruner=ASHA(max_steps=27, random_starts=5))
    trials = sorted(result.trials, key=lambda t: t.id)
    assert [t.technique for t in trials[:5]] == ["random"] * 5
    assert trials[5].technique == "default" and trials[5].config == SPACE.default()
    assert len({t.config for t in trials}) == len(trials)
    # Judged among the random starts, most later trials are pruned; the best is a full evaluation.
    assert result.best is not None and result.best.ok
    # Seeded: the same random starts again.
    again = perftune.tune(curve, SPACE, budget=12, seed=3, pruner=ASHA(max_steps=27, random_starts=5))
    assert [t.config for t in sorted(again.trials, key=lambda t: t.id)[:6]] == [t.config for t in trials[:6]]


def test_no_random_starts_when_asked_or_without_a_pruner() -> None:
    none = perftune.tune(curve, SPACE, budget=4, seed=0, pruner=ASHA(random_starts=0))
    assert min(none.trials, key=lambda t: t.id).technique == "default"
    never = perftune.tune(curve, SPACE, budget=4, seed=0, pruner=False)  # records, never prunes
    assert min(never.trials, key=lambda t: t.id).technique == "default"
    assert all(t.status is Status.OK for t in never.trials)


def test_a_second_run_of_the_same_tuner_does_not_start_again() -> None:
    tuner = perftune.Tuner(SPACE, seed=1)
    tuner.run(curve, budget=2, pruner=ASHA(max_steps=27, random_starts=4))
    tuner.run(curve, budget=10, pruner=ASHA(max_steps=27, random_starts=4))
    # The starts queued by the first run are measured (what was left of them by the second), once.
    assert sum(t.technique == "random" for t in tuner.trials) == 4
    assert sum(t.technique == "default" for t in tuner.trials) == 1



def test_a_task_files_ladder_keeps_one_bracket_and_its_default_first(public_tmp_path: Path) -> None:
    from test_fidelity_task import TASK, _write

    from perftune.targets.command import load_task

    task = load_task(_write(public_tmp_path, TASK), prepare=False)
    pruner = task.objective.pruner
    assert pruner is not None and pruner.rungs == (1, 2)
    assert (pruner.brackets, pruner.random_starts) == (1, 0)
