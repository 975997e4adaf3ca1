"""Asynchronous promotion: with two worker processes, no worker waits for a rung to fill."""

from __future__ import annotations

import time
from typing import Any

import perftune
from perftune.space import Float, Space
from perftune.trial import Status

STEP_S = 0.02
SLOW_S = 4.0


def learning_curve(config: Any, trial: Any) -> float:
    value = 0.0
    for step in range(1, 10):
        # Trial 1 is a straggler: its first step takes SLOW_S, the others' STEP_S.
        time.sleep(SLOW_S if trial.id == 1 and step == 1 else STEP_S)
        value = (config["x"] - 0.7) ** 2 + 1.0 / step
        trial.report(step, value)
        if trial.should_prune():
            raise perftune.Pruned()
    return value


def test_two_workers_never_idle_while_a_trial_can_go_on() -> None:
    def enough(tuner: Any, trial: Any) -> None:
        if len(tuner.trials) >= 8:
            tuner.stop("enough")

    # A budget that cannot bind while the straggler runs (near the end of a budget of evaluations, a
    # trial in flight keeps its place: it may still become a full evaluation, and the budget is exact).
    result = perftune.tune(learning_curve, Space({"x": Float(0.0, 1.0)}), budget=1000, workers=2, seed=0,
                           pruner=perftune.drive.ASHA(eta=3, max_steps=9), callbacks=[enough])
    trials = {t.id: t for t in result.trials}
    straggler = trials[1]
    assert straggler.finished_at is not None
    first = trials[0]
    # Trial 0 reached the rungs at steps 1 and 3 alone (the straggler had reported nothing): it was
    # promoted at once and ran to the end, instead of waiting for the rung to hold eta trials.
    assert first.status is Status.OK and sorted(first.intermediate) == list(range(1, 10))
    assert first.finished_at is not None and first.finished_at < straggler.finished_at
    # Its worker did not wait either: it went on with new configurations while the straggler ran.
    other = [t for t in trials.values() if t.worker == first.worker and t.id != 0]
    assert straggler.worker != first.worker and other
    before = [t for t in other if t.finished_at is not None and t.finished_at < straggler.finished_at]
    assert before, "the free worker idled until the straggler finished"
    by_start = sorted([first, *other], key=lambda t: t.started_at or 0.0)
    for done, nxt in zip(by_start, by_start[1:], strict=False):
        assert done.finished_at is not None and nxt.started_at is not None
        # The next configuration starts as soon as the last one ended (not at the straggler's pace).
        assert nxt.started_at - done.finished_at < SLOW_S / 2, (done.id, nxt.id)
    assert result.stop_reason == "enough"
