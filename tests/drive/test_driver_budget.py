"""The driver owns every budget limit: ask() ends an ask/tell loop, tell() keeps measured times, and
a thread executor's in-flight work is cancelled by the driver at a time limit."""

from __future__ import annotations

import threading
import time

import pytest

from perftune import Budget, Status, Tuner
from perftune.drive import Countdown, Outcome, ThreadExecutor
from perftune.errors import PerftuneError
from perftune.space import Int, Space

ALLOWANCE_S = 3.0  # threads, collecting and a checkpoint, on 2 shared cores


def space() -> Space:
    return Space({"x": Int(0, 1000, default=0)})


def drain(tuner: Tuner, value) -> int:
    n = 0
    while (trial := tuner.ask()) is not None:
        tuner.tell(trial, value(trial))
        n += 1
    return n


def test_ask_returns_none_once_patience_is_spent():
    tuner = Tuner(space(), budget=Budget(patience=3), seed=0, lag=0)
    # The default (x=0) is the best there is: every later trial is one without a new best.
    assert drain(tuner, lambda t: float(t.config["x"])) == 4
    assert tuner.result().stop_reason == "patience"


def test_ask_returns_none_once_the_target_is_reached():
    tuner = Tuner(space(), budget=Budget(target=5.0, evals=500), seed=0, lag=0)
    n = drain(tuner, lambda t: float(t.config["x"]))
    assert tuner.result().stop_reason == "target" and tuner.best.value <= 5.0 and n < 500


def test_ask_returns_none_once_the_evaluations_are_spent():
    tuner = Tuner(space(), budget=7, seed=0, lag=0)
    assert drain(tuner, lambda t: 1.0) == 7 and tuner.result().stop_reason == "budget"


def test_tell_stores_the_measured_start_and_finish():
    tuner = Tuner(space(), budget=2)
    ok = tuner.tell(tuner.ask(), 3.0, started_at=1000.0, finished_at=1002.5)
    failed = tuner.tell(tuner.ask(), error="boom", started_at=1003.0, finished_at=1004.0)
    assert (ok.started_at, ok.finished_at) == (1000.0, 1002.5)
    assert (failed.status, failed.started_at, failed.finished_at) == (Status.FAILED, 1003.0, 1004.0)


def test_tell_without_times_stamps_the_call():
    tuner = Tuner(space(), budget=1)
    before = time.time()
    told = tuner.tell(tuner.ask(), 1.0)
    assert before <= told.started_at == told.finished_at <= time.time()


def test_tell_refuses_a_start_after_the_finish():
    tuner = Tuner(space(), budget=1)
    with pytest.raises(PerftuneError, match="after finished_at"):
        tuner.tell(tuner.ask(), 1.0, started_at=10.0, finished_at=9.0)


def test_thread_executor_runs_a_search_to_its_evaluation_budget():
    tuner = Tuner(space(), budget=20, seed=0)
    result = tuner.run(lambda c: float(c["x"]), executor=ThreadExecutor(lambda c: float(c["x"]), None, 3))
    assert result.counts() == {"ok": 20} and result.stop_reason == "budget"


def test_thread_executor_takes_the_targets_own_outcome():
    def objective(config):
        if config["x"] % 2:
            return Outcome(Status.TIMEOUT, reason="ran too long")
        return {"time": float(config["x"]), "samples": [float(config["x"])] * 2}

    result = Tuner(space(), budget=30, seed=0, metric="time").run(
        objective, executor=ThreadExecutor(objective, "time", 2))
    timeouts = [t for t in result.trials if t.status is Status.TIMEOUT]
    assert timeouts and all(t.reason == "ran too long" and t.config["x"] % 2 for t in timeouts)
    assert all(t.started_at and t.finished_at >= t.started_at for t in result.trials)
    assert all(len(t.samples) == 2 for t in result.trials if t.ok)


def test_thread_executor_records_an_exception_as_a_failure():
    def objective(config):
        raise RuntimeError("no luck")

    result = Tuner(space(), budget=3).run(objective, executor=ThreadExecutor(objective, None, 2))
    assert result.counts() == {"failed": 3}
    assert all(t.reason == "RuntimeError: no luck" for t in result.trials)


def test_time_budget_cancels_thread_work_that_the_cancel_hook_stops():
    stop = threading.Event()

    def hangs_until_stopped(config):
        if config["x"] == 0:
            return 1.0
        stop.wait(60)
        return Outcome(Status.CANCELLED, reason="stopped by the hook")

    tuner = Tuner(space(), budget="1s")
    started = time.monotonic()
    result = tuner.run(hangs_until_stopped,
                       executor=ThreadExecutor(hangs_until_stopped, None, 2, cancel=stop.set))
    assert time.monotonic() - started < 1.0 + ALLOWANCE_S
    assert stop.is_set() and result.stop_reason == "time"
    cancelled = [t for t in result.trials if t.status is Status.CANCELLED]
    assert cancelled and all(t.reason == "time budget reached" for t in cancelled)
    assert result.counts()["ok"] == 1 and tuner.n_trials == 1  # cancelled trials do not count


def test_work_bounded_by_remaining_s_ends_within_the_time_budget():
    tuner = Tuner(space(), budget="1s")

    def sleeps_what_is_left(config):
        left = tuner.remaining_s()
        time.sleep(min(0.3, left if left is not None else 0.3))
        return float(config["x"])

    started = time.monotonic()
    result = tuner.run(sleeps_what_is_left, executor=ThreadExecutor(sleeps_what_is_left, None, 2))
    assert time.monotonic() - started < 1.0 + ALLOWANCE_S
    assert result.stop_reason == "time" and result.counts().get("ok", 0) >= 2


def test_countdown_counts_down_to_zero_and_none_never_expires():
    clock = Countdown(0.05)
    assert 0 < clock.remaining_s() <= 0.05 and not clock.expired()
    time.sleep(0.06)
    assert clock.remaining_s() == 0.0 and clock.expired() and clock.elapsed_s() >= 0.05
    assert Countdown(None).remaining_s() is None and not Countdown(None).expired()


def test_the_thread_executor_hands_the_driver_context_to_an_objective_that_takes_it():
    from perftune.drive import ThreadExecutor, Tuner
    from perftune.space import Int, Space

    seen: list[float | None] = []

    def objective(config, context=None):
        seen.append(None if context is None or context.incumbent is None else context.incumbent.value)
        return float(config["x"])

    tuner = Tuner(Space({"x": Int(0, 9, default=5)}), seed=1)
    tuner.run(objective, budget=4, executor=ThreadExecutor(objective, None, 1))
    assert seen[0] is None and len(seen) == 4
    assert all(v is not None for v in seen[1:])  # every later evaluation saw the best so far
