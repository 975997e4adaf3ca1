"""The driver owns time: a time budget ends the run, whatever the objective does.

These tests measure the elapsed time of a run because ending on time is the behaviour under test. The
bounds are the budget, plus the longest single evaluation's timeout where there is one, plus an
allowance for starting and stopping worker processes on a busy machine.
"""

from __future__ import annotations

import os
import signal
import time

import perftune
from perftune import Budget, Status, Tuner
from perftune.drive import InlineExecutor
from perftune.space import Int, Space

ALLOWANCE_S = 3.0  # forking, SIGTERM, collecting and a checkpoint, on 2 shared cores
GRACE_S = 2.0  # what ProcessExecutor.cancel_all waits before SIGKILL


def space() -> Space:
    return Space({"x": Int(0, 1000, default=0)})


def hang_after_default(config):
    """Quick for the default configuration, then hangs: what a deadlocked candidate does."""
    if config["x"] != 0:
        while True:
            time.sleep(0.05)
    return 1.0


def assert_cancelled_with_reason(result, at_least: int) -> None:
    cancelled = [t for t in result.trials if t.status is Status.CANCELLED]
    assert len(cancelled) >= at_least
    assert all(t.reason == "time budget reached" for t in cancelled)
    assert all(t.started_at is not None and t.finished_at is not None for t in cancelled)


def test_hanging_objective_with_one_worker_ends_at_the_time_budget():
    started = time.monotonic()
    result = perftune.tune(hang_after_default, space(), budget="2s", workers=1, seed=None)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 + ALLOWANCE_S
    assert result.stop_reason == "time"
    # Nothing measured is lost: the default configuration finished before the hang.
    assert result.default is not None and result.default.ok and result.best is result.default
    assert_cancelled_with_reason(result, at_least=1)


def test_hanging_objective_with_two_workers_ends_at_the_time_budget():
    started = time.monotonic()
    result = perftune.tune(hang_after_default, space(), budget=Budget(evals=100, seconds=2.0), workers=2)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 + ALLOWANCE_S
    assert result.stop_reason == "time"
    assert result.default is not None and result.default.ok
    assert_cancelled_with_reason(result, at_least=2)  # both workers were hanging at the deadline


def test_objective_that_ignores_sigterm_is_killed_after_the_grace_period():
    def stubborn(config):
        if config["x"] != 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a hostile candidate refuses to stop
            while True:
                time.sleep(0.05)
        return 1.0

    started = time.monotonic()
    result = perftune.tune(stubborn, space(), budget="2s", workers=2, seed=None)
    elapsed = time.monotonic() - started
    # Both stubborn workers share one grace period before SIGKILL.
    assert elapsed < 2.0 + GRACE_S + ALLOWANCE_S
    assert result.stop_reason == "time"
    assert_cancelled_with_reason(result, at_least=2)


def test_time_budget_with_a_timeout_ends_within_budget_and_one_timeout():
    def slow(config):
        time.sleep(0.0 if config["x"] == 0 else 30.0)
        return 1.0

    started = time.monotonic()
    result = perftune.tune(slow, space(), budget="2s", workers=1, timeout_s=1.0, seed=None)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 + 1.0 + ALLOWANCE_S
    assert result.stop_reason == "time"
    statuses = {t.status for t in result.trials}
    assert Status.TIMEOUT in statuses and Status.OK in statuses


def test_quick_objective_with_a_time_budget_still_runs_many_trials():
    # A space far larger than a second of trials, so that the clock, not exhaustion, ends the run.
    big = Space({"x": Int(0, 10**9, default=0)})
    result = perftune.tune(lambda c: float(c["x"]), big, budget="1s", seed=None)
    assert result.stop_reason == "time" and len(result.trials) > 20
    assert result.best is not None and result.best.value == min(t.value for t in result.trials if t.ok)


def test_explicit_inline_executor_evaluates_in_this_process():
    seen: list[int] = []

    def record(config):
        seen.append(os.getpid())
        time.sleep(0.01)
        return float(config["x"])

    tuner = Tuner(Space({"x": Int(0, 10**6, default=0)}), budget="1s")
    result = tuner.run(record, executor=InlineExecutor(record, None))
    assert result.stop_reason == "time" and seen and set(seen) == {os.getpid()}


def test_ask_returns_none_once_the_time_budget_is_spent():
    tuner = Tuner(space(), budget="1s")
    assert tuner.remaining_s() is not None and tuner.remaining_s() <= 1.0
    asked = 0
    started = time.monotonic()
    while (trial := tuner.ask()) is not None:
        asked += 1
        tuner.tell(trial, float(trial.config["x"]))
        time.sleep(0.1)
    assert time.monotonic() - started < 1.0 + ALLOWANCE_S
    assert tuner.result().stop_reason == "time" and tuner.remaining_s() == 0.0
    assert 2 <= asked <= 11 and len(tuner.trials) == asked


def test_remaining_s_is_none_without_a_time_budget():
    tuner = Tuner(space(), budget=5)
    assert tuner.ask() is not None and tuner.remaining_s() is None
