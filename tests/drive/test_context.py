"""The driver's context reaches objectives: in the driver's process, in a worker process, on Dask."""

from __future__ import annotations

import os
from typing import Any

import pytest

import perftune
from perftune.drive import EvalContext, InlineExecutor, Outcome, Tuner, evaluate
from perftune.space import Int, Space


def space() -> Space:
    return Space({"n": Int(0, 40, default=20)})


def reporting_objective(config: Any, context: EvalContext) -> dict[str, float]:
    """Returns what it was told, so that the test sees the context of an evaluation made elsewhere."""
    seen = context.shared.get("n_seen", 0)
    context.publish("n_seen", seen + 1)
    best = context.incumbent
    return {
        "value": float(abs(config["n"] - 13)),
        "incumbent": -1.0 if best is None else best.value,
        "incumbent_id": -1.0 if best is None else float(best.trial_id),
        "trial_id": float(context.trial_id if context.trial_id is not None else -2),
        "n_seen": float(seen),
        "pid": float(os.getpid()),
    }


def check_sequential_run(result: Any) -> None:
    """One evaluation at a time: each saw the best of those before it and everything they published."""
    trials = sorted(result.trials, key=lambda t: t.id)
    assert len(trials) >= 5 and all(t.ok for t in trials)
    best = None
    for i, t in enumerate(trials):
        assert t.metrics["trial_id"] == t.id
        assert t.metrics["n_seen"] == i  # every earlier evaluation's publication arrived
        if best is None:
            assert t.metrics["incumbent"] == -1.0
        else:
            assert (t.metrics["incumbent"], t.metrics["incumbent_id"]) == (best.value, best.id)
        if best is None or t.value < best.value:
            best = t


def test_context_reaches_an_objective_in_the_drivers_process() -> None:
    tuner = Tuner(space(), seed=0)
    result = tuner.run(reporting_objective, 8, executor=InlineExecutor(reporting_objective, None))
    check_sequential_run(result)
    assert all(t.metrics["pid"] == os.getpid() for t in result.trials)


def test_context_reaches_an_objective_in_a_worker_process() -> None:
    # A timeout makes even one worker a forked process: the context travels in the submit message.
    result = perftune.tune(reporting_objective, space(), budget=8, seed=0, workers=1, timeout_s=30)
    check_sequential_run(result)
    assert all(t.metrics["pid"] != os.getpid() for t in result.trials)


@pytest.mark.slow
def test_context_reaches_an_objective_on_dask() -> None:
    pytest.importorskip("distributed")
    result = perftune.tune(reporting_objective, space(), budget=6, seed=0, workers=1,
                           executor="dask", scheduler="local:1")
    check_sequential_run(result)
    assert all(t.metrics["pid"] != os.getpid() for t in result.trials)


def test_publications_of_a_failed_evaluation_arrive_too() -> None:
    def objective(config: Any, context: EvalContext) -> float:
        context.publish("failures", context.shared.get("failures", 0) + 1)
        raise RuntimeError("no good")

    ctx = EvalContext(shared={"failures": 2})
    outcome = evaluate(objective, {"n": 1}, None, ctx)
    assert outcome.reason == "RuntimeError: no good" and outcome.published == {"failures": 3}


def test_objectives_without_a_context_parameter_get_none() -> None:
    def scaled(config: Any, scale: int = 2) -> float:  # a second parameter that is not a context
        return float(config["n"] * scale)

    result = perftune.tune(scaled, space(), budget=4, seed=0)
    assert all(t.ok and t.value == 2 * t.config["n"] for t in result.trials)


def test_an_executor_written_before_contexts_keeps_working() -> None:
    class OldExecutor:
        capacity = 1

        def __init__(self) -> None:
            self.done: list[tuple[int, Outcome]] = []

        def submit(self, ticket: int, config: Any) -> None:
            self.done.append((ticket, evaluate(lambda c: float(c["n"]), config, None)))

        def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
            done, self.done = self.done, []
            return done

        def cancel_all(self, reason: str) -> list[tuple[int, Outcome]]:
            return []

        def close(self) -> None:
            pass

    result = Tuner(space(), seed=0).run(lambda c: 0.0, 5, executor=OldExecutor())
    assert len(result.trials) == 5 and all(t.value == t.config["n"] for t in result.trials)


def test_ask_tell_loops_get_the_same_context() -> None:
    tuner = Tuner(space(), seed=0)
    first = tuner.ask()
    assert first is not None and tuner.context_for(first).incumbent is None
    tuner.tell(first, 5.0, samples=[4.0, 5.0, 6.0], metrics={"wall_time": 0.5})
    second = tuner.ask()
    assert second is not None
    incumbent = tuner.context_for(second).incumbent
    assert incumbent is not None
    assert (incumbent.value, incumbent.samples, incumbent.metrics["wall_time"]) == (5.0, (4.0, 5.0, 6.0), 0.5)
