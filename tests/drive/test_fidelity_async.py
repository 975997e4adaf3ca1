"""Asynchronous promotion: with two worker processes, no worker waits for a rung to fill."""

from __future__ import annotations

import time
from typing import Any

import perftune
from perftune.space import Float, Space
from perftune.trial import Status

STEP_S = 0.05


def learning_curve(config: Any, trial: Any) -> float:
    value = 0.0
    for step in range(1, 10):
        time.sleep(STEP_S)  # one "epoch"
        value = (config["x"] - 0.7) ** 2 + 1.0 / step
        trial.report(step, value)
        t0 = time.monotonic()
        prune = trial.should_prune()
        # The answer uses what is on the rung now: it never blocks until others get there.
        assert time.monotonic() - t0 < 1.0
        if prune:
            raise perftune.Pruned()
    return value


def test_two_workers_never_idle_while_a_trial_can_go_on() -> None:
    result = perftune.tune(learning_curve, Space({"x": Float(0.0, 1.0)}), budget=4, workers=2,
                           pruner=perftune.drive.ASHA(eta=3, max_steps=9))
    trials = result.trials
    assert result.counts()["ok"] == 4 and result.counts()["pruned"] >= 2
    by_worker: dict[str, list[Any]] = {}
    for t in trials:
        assert t.worker is not None and t.started_at is not None and t.finished_at is not None
        by_worker.setdefault(t.worker, []).append(t)
    assert len(by_worker) == 2
    for runs in by_worker.values():
        runs.sort(key=lambda t: t.started_at)
        for before, after in zip(runs, runs[1:], strict=False):
            # A worker that finished (or pruned) a trial starts the next one at once: the driver hands
            # it a new configuration instead of waiting for the other worker's trial to reach a rung.
            assert after.started_at - before.finished_at < 0.75, (before.id, after.id)
    # A promoted trial continues at once: its full run takes nine steps, not nine steps plus waits.
    for t in trials:
        if t.status is Status.OK:
            assert t.duration_s is not None and t.duration_s < 9 * STEP_S + 2.0
    # Both workers were busy together: the run took well under the sum of the trials' durations.
    span = max(t.finished_at for t in trials) - min(t.started_at for t in trials)
    busy = sum(t.duration_s or 0.0 for t in trials)
    assert busy / span > 1.5
