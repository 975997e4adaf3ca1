"""Habits of other tuners: add_trial, enqueue with a partial configuration, callbacks, to_dataframe."""

from __future__ import annotations

from typing import Any

import pytest

import perftune
from perftune import PerftuneError, Status
from perftune.space import Int, Space

SPACE = Space({"a": Int(0, 9, default=1), "b": Int(0, 9, default=2)}, constraints=["a + b <= 15"])


def _f(c: Any) -> float:
    return float((c["a"] - 7) ** 2 + (c["b"] - 8) ** 2)


def test_add_trial_is_learned_stored_counted_and_never_measured_again(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    tuner = perftune.Tuner(SPACE, seed=0, store=url, budget=10, name="h")
    added = tuner.add_trial({"a": 6, "b": 8}, {"value": _f({"a": 6, "b": 8}), "size": 3.0})
    assert (added.technique, added.status, added.metrics["size"]) == ("added", Status.OK, 3.0)
    failed = tuner.add_trial({"a": 0, "b": 0}, error="crashed on the cluster")
    assert failed.status is Status.FAILED and failed.reason == "crashed on the cluster"
    result = tuner.run(_f)
    assert len(result.trials) == 10  # the two added count against the budget
    configs = [dict(t.config) for t in result.trials]
    assert configs.count({"a": 6, "b": 8}) == 1 and configs.count({"a": 0, "b": 0}) == 1
    assert result.best is not None and result.best.value <= 1.0
    from perftune.store import open_store

    stored = open_store(url).trials(result.run_id or 0)
    assert [t.technique for t in stored[:2]] == ["added", "added"]


def test_add_trial_refuses_what_it_cannot_record_and_keeps_seeded_runs_whole() -> None:
    tuner = perftune.Tuner(SPACE, seed=1)
    tuner.add_trial({"a": 3, "b": 3}, 1.0)
    with pytest.raises(PerftuneError, match="already trial 0"):
        tuner.add_trial({"a": 3, "b": 3}, 2.0)
    with pytest.raises(PerftuneError, match="invalid configuration"):
        tuner.add_trial({"a": 9, "b": 9}, 1.0)
    with pytest.raises(PerftuneError, match="give a value"):
        tuner.add_trial({"a": 4, "b": 4})
    # The refused ones used no ticket: the seeded run goes on without a gap.
    trial = tuner.ask()
    assert trial is not None and trial.id == 1


def test_enqueue_completes_a_partial_configuration_from_the_defaults() -> None:
    tuner = perftune.Tuner(SPACE, seed=0)
    tuner.enqueue({"b": 9})
    tuner.enqueue({"b": 9})  # queued once
    tuner.enqueue({"a": 1, "b": 2})  # the default, already queued
    trials = [tuner.ask() for _ in range(3)]
    assert [(t.technique, dict(t.config)) for t in trials[:2]] == [
        ("default", {"a": 1, "b": 2}), ("enqueued", {"a": 1, "b": 9})]
    assert trials[2].technique not in ("enqueued", "default")
    with pytest.raises(PerftuneError, match="unknown parameter"):
        tuner.enqueue({"c": 1})
    with pytest.raises(PerftuneError, match=r"enqueue\(\): invalid configuration"):
        tuner.enqueue({"a": 9, "b": 9})


def test_callbacks_see_every_trial_and_can_stop_the_run() -> None:
    seen: list[int] = []

    def record(tuner: perftune.Tuner, trial: perftune.Trial) -> None:
        seen.append(trial.id)

    def good_enough(tuner: perftune.Tuner, trial: perftune.Trial) -> None:
        if tuner.best is not None and tuner.best.value is not None and tuner.best.value <= 5:
            tuner.stop("good enough")

    r = perftune.tune(_f, SPACE, budget=60, seed=2, callbacks=[record, good_enough])
    assert seen == [t.id for t in r.trials]
    assert r.stop_reason == "good enough" and len(r.trials) < 60
    assert r.best is not None and r.best.value is not None and r.best.value <= 5
    with pytest.raises(PerftuneError, match="callbacks must be a list"):
        perftune.tune(_f, SPACE, budget=2, callbacks=record)  # type: ignore[arg-type]


def test_to_dataframe_has_one_row_per_trial_with_the_metrics(tmp_path: Any) -> None:
    pandas = pytest.importorskip("pandas")
    r = perftune.tune(lambda c: {"time": _f(c), "size": float(c["a"])}, SPACE, budget=6, seed=0,
                      goal={"time": "min", "size": "min"}, store=f"sqlite:///{tmp_path / 'd.db'}")
    from perftune.store import open_store

    frame = open_store(f"sqlite:///{tmp_path / 'd.db'}").to_dataframe(r.run_id or 0)
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 6
    assert list(frame["value"]) == [t.value for t in r.trials]
