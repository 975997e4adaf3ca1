"""Multi-fidelity in the Python API: report/should_prune, Pruned, the ASHA rule, the budget, the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.drive import ASHA, Fidelity, RunningTrial, Tuner
from perftune.errors import PerftuneError
from perftune.space import Float, Int, Space
from perftune.store import SCHEMA_VERSION, open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Float(0.0, 1.0)})


def curve(config: Any, trial: Any) -> float:
    """A learning curve: the final value is (x - 0.3)^2, approached as 1/step (27 steps)."""
    value = 0.0
    for step in range(1, 28):
        value = (config["x"] - 0.3) ** 2 + 1.0 / step
        trial.report(step, value)
        if trial.should_prune():
            raise perftune.Pruned()
    return value


def test_pruning_happens_with_a_reason_and_the_budget_counts_full_evaluations_only() -> None:
    result = perftune.tune(curve, SPACE, budget=8, seed=0)
    counts = result.counts()
    assert counts["ok"] == 8 and counts["pruned"] >= 4
    pruned = [t for t in result.trials if t.status is Status.PRUNED]
    for t in pruned:
        assert t.value is None and t.loss is None
        assert t.reason is not None and t.reason.startswith("pruned at step ")
        assert "worse than the top 1/3 at that step" in t.reason
        # It stopped at a rung of ASHA() (steps 1, 3, 9, 27) and reported nothing after it.
        assert max(t.intermediate) in (1, 3, 9, 27)
    full = [t for t in result.trials if t.ok]
    assert all(sorted(t.intermediate) == list(range(1, 28)) for t in full)
    assert all(t.intermediate[27] == t.value for t in full)
    # The best is a full evaluation, and the pruned ones were worse where they stopped.
    assert result.best is not None and result.best.ok


def test_the_rule_keeps_the_top_third_of_a_rung_and_never_waits(tmp_path: Path) -> None:
    fidelity = Fidelity(ASHA(eta=3), "min", str(tmp_path))
    decisions = []
    for i, v in enumerate([5.0, 4.0, 6.0, 3.0, 7.0, 8.0, 1.0, 2.5, 9.0]):
        t = RunningTrial(i, {}, fidelity)
        t.report(1, v)
        decisions.append(not t.should_prune())
    # n values at the rung keep the best max(1, n // 3): 5 (alone), 4 (best of 2), 6 no, 3 (best of 4),
    # 7 no, 8 no, 1 (best of 7), 2.5 (2nd of 8, 2 kept), 9 no.
    assert decisions == [True, True, False, True, False, False, True, True, False]


def test_maximising_keeps_the_largest_values(tmp_path: Path) -> None:
    fidelity = Fidelity(ASHA(eta=2), "max", str(tmp_path))
    first, second = RunningTrial(0, {}, fidelity), RunningTrial(1, {}, fidelity)
    first.report(1, 0.5)
    second.report(1, 0.2)
    assert not first.should_prune() and second.should_prune()
    assert second.prune_reason is not None and "0.2 worse" in second.prune_reason


def test_a_promotion_sticks_and_a_pruned_trial_stays_pruned(tmp_path: Path) -> None:
    fidelity = Fidelity(ASHA(eta=2, min_steps=2), "min", str(tmp_path))
    early = RunningTrial(0, {}, fidelity)
    early.report(1, 9.0)
    assert not early.should_prune()  # step 1 is before the first rung: nothing to judge
    early.report(2, 9.0)
    assert not early.should_prune()  # alone at rung 0
    for i in range(1, 6):
        better = RunningTrial(i, {}, fidelity)
        better.report(2, 1.0)
    early.report(3, 9.0)
    assert not early.should_prune()  # promoted at rung 0 when it got there; rung 1 is at step 4
    early.report(4, 9.0)
    late = RunningTrial(7, {}, fidelity)
    late.report(4, 0.5)
    assert late.should_prune() is False and early.should_prune() is True
    early.report(5, 0.1)
    assert early.should_prune() is True


def test_should_prune_then_return_is_pruned_and_a_raised_message_is_the_reason() -> None:
    def returns(config: Any, trial: Any) -> float:
        for step in (1, 3, 9):
            trial.report(step, config["x"] + 1.0 / step)
            if trial.should_prune():
                return -1.0  # a low-fidelity value: not a full evaluation
        return config["x"]

    result = perftune.tune(returns, SPACE, budget=6, seed=1)
    assert result.counts().get("pruned", 0) > 0
    assert all(t.value is None for t in result.trials if t.status is Status.PRUNED)
    assert result.best is not None and result.best.value != -1.0

    def raises(config: Any, trial: Any) -> float:
        trial.report(1, config["x"])
        if config["x"] > 0.5:
            raise perftune.Pruned("not worth it")
        return config["x"]

    result = perftune.tune(raises, SPACE, budget=10, seed=2, pruner=False)
    reasons = {t.reason for t in result.trials if t.status is Status.PRUNED}
    assert reasons == {"not worth it"}


def test_pruner_false_records_the_reports_and_never_prunes() -> None:
    result = perftune.tune(curve, SPACE, budget=6, seed=0, pruner=False)
    assert result.counts() == {"ok": 6}
    assert all(len(t.intermediate) == 27 for t in result.trials)


def test_brackets_start_their_rungs_later() -> None:
    pruner = ASHA(eta=3, brackets=2)
    assert pruner.rung_steps(0)[:3] == (1, 3, 9) and pruner.rung_steps(1)[:3] == (3, 9, 27)
    assert [pruner.bracket_of(i) for i in range(4)] == [0, 1, 0, 1]
    result = perftune.tune(curve, SPACE, budget=6, seed=0, pruner=pruner)
    odd = [t for t in result.trials if t.status is Status.PRUNED and t.id % 2 == 1]
    assert odd and all(max(t.intermediate) in (3, 9, 27) for t in odd)  # bracket 1: no rung at step 1


def test_hyperband_allocation_gives_the_early_brackets_more_trials_in_every_stretch() -> None:
    pruner = ASHA(eta=3, max_steps=27, brackets=4, allocation="hyperband")
    # Hyperband's numbers of configurations for 4 brackets of eta 3: 27, 12, 6 and 4 (of 49).
    shares = (27 / 49, 12 / 49, 6 / 49, 4 / 49)
    for start in (0, 1000):  # any stretch of tickets, not only from the start
        counts = [0] * 4
        for i in range(start, start + 490):
            counts[pruner.bracket_of(i)] += 1
        assert all(abs(c / 490 - share) < 0.01 for c, share in zip(counts, shares, strict=True)), counts
    assert pruner.bracket_of(0) == 0  # the first trial (the default configuration) is judged from step 1
    assert pruner.rung_steps(3) == ()  # the last bracket starts at max_steps: its trials are never pruned
    assert ASHA(brackets=3).bracket_of(7) == 1  # "even" stays i % brackets
    assert pruner.to_dict()["allocation"] == "hyperband"


def test_a_trial_of_the_bracket_without_rungs_is_never_pruned(tmp_path: Path) -> None:
    pruner = ASHA(eta=3, max_steps=27, brackets=4, allocation="hyperband")
    fidelity = Fidelity(pruner, "min", str(tmp_path))
    last = next(i for i in range(100) if pruner.bracket_of(i) == 3)
    good = next(i for i in range(100) if pruner.bracket_of(i) == 0)
    first = RunningTrial(good, {}, fidelity)
    first.report(1, 0.1)
    late = RunningTrial(last, {}, fidelity)
    for step in range(1, 27):
        late.report(step, 9.0)
        assert not late.should_prune()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"allocation": "uneven"}, "ASHA: allocation must be 'even' or 'hyperband', got 'uneven'"),
    ({"eta": 1}, "ASHA: eta must be an integer of at least 2, got 1"),
    ({"min_steps": 0}, "ASHA: min_steps must be an integer of at least 1, got 0"),
    ({"brackets": 0}, "ASHA: brackets must be an integer of at least 1, got 0"),
    ({"max_steps": 1}, "ASHA: max_steps must be an integer of at least 2, got 1"),
    ({"rungs": (3, 1)}, "ASHA: rungs must be increasing integer steps, got (3, 1)"),
])
def test_bad_settings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PerftuneError) as info:
        ASHA(**kwargs)
    assert str(info.value) == message


def test_bad_reports_fail_the_trial_and_a_bad_pruner_is_refused() -> None:
    def backwards(config: Any, trial: Any) -> float:
        trial.report(2, 1.0)
        trial.report(1, 1.0)
        return 1.0

    result = perftune.tune(backwards, SPACE, budget=1, seed=0)
    (t,) = result.trials
    assert t.status is Status.FAILED
    assert t.reason == "PerftuneError: trial.report(): step 1 after step 2; steps must increase"
    with pytest.raises(PerftuneError, match="pruner must be a perftune.drive.ASHA"):
        perftune.tune(curve, SPACE, budget=1, pruner="asha")  # type: ignore[arg-type]
    with pytest.raises(PerftuneError, match="cannot be repeated"):
        perftune.tune(curve, SPACE, budget=1, repeats=3)


def test_an_objective_whose_only_parameter_is_named_trial_still_gets_the_config() -> None:
    result = perftune.tune(lambda trial: trial["n"], Space({"n": Int(0, 5)}), budget=6, seed=0)
    assert result.best is not None and result.best.value == 0


def test_the_store_round_trips_the_status_and_the_intermediate_values(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    result = perftune.tune(curve, SPACE, budget=5, seed=0, store=url, name="fid")
    with open_store(url) as store:
        stored = store.trials(store.get_run("fid").id)
        assert store.count(store.get_run("fid").id, Status.PRUNED) == result.counts()["pruned"]
    assert [(t.status, t.intermediate, t.reason) for t in stored] == \
        [(t.status, t.intermediate, t.reason) for t in result.trials]


def test_a_store_of_the_previous_schema_opens_and_keeps_its_trials(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    with open_store(url, _schema_version=3) as store:
        run = store.create_run("old", SPACE, {}, "min", None)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO trials (run_id, trial_id, config, config_hash, status, value, loss) "
                     "VALUES (?, 0, ?, 'h', 'ok', 0.5, 0.5)", (run.id, json.dumps({"x": 0.25})))
    with open_store(url) as store:
        assert store.schema_version() == SCHEMA_VERSION
        (old,) = store.trials(run.id)
        assert old.ok and old.value == 0.5 and old.intermediate == {}
        store.add_trial(run.id, Trial(id=1, config=old.config, status=Status.PRUNED, reason="r",
                                      intermediate={1: 0.75}))
        assert store.trials(run.id)[1].intermediate == {1: 0.75}


def test_a_resumed_run_puts_the_stored_reports_back_on_the_rungs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    tuner = Tuner(SPACE, seed=0, store=url, name="again")
    tuner.run(curve, 4)
    first = tuner.trials
    resumed = Tuner.resume("again", url)
    seen: list[int] = []

    def judged(config: Any, trial: Any) -> float:
        trial.report(1, 10.0)  # worse at step 1 than every trial before the resume
        seen.append(trial.id)
        if trial.should_prune():
            raise perftune.Pruned()
        return 10.0

    # Every new trial is pruned, so the budget of full evaluations would never be spent: stop after five.
    result = resumed.run(judged, 6, on_trial=lambda t: resumed.stop() if len(seen) >= 5 else None)
    new = [t for t in result.trials if t.id >= len(first)]
    assert seen and new and all(t.status is Status.PRUNED for t in new)


def test_a_thread_executor_hands_the_handle_to_a_reporting_objective() -> None:
    from perftune.drive import ThreadExecutor

    def first_wins(config: Any, trial: Any) -> float:
        # Trial 0 is far ahead at step 1: from the third trial on, a trial needs to be in the best third
        # of at least three values there, and cannot be until six trials have reported.
        trial.report(1, 0.0 if trial.id == 0 else 1.0 + config["x"])
        if trial.should_prune():
            raise perftune.Pruned()
        return config["x"]

    tuner = Tuner(SPACE, seed=0)
    result = tuner.run(first_wins, 3, executor=ThreadExecutor(first_wins, None, workers=2))
    assert result.counts()["ok"] == 3 and result.counts()["pruned"] > 0


def test_a_seeded_run_with_one_worker_prunes_the_same_way_every_time() -> None:
    def outline(result: Any) -> list[tuple[Any, ...]]:
        return [(dict(t.config), t.status, t.reason, t.intermediate) for t in result.trials]

    first = perftune.tune(curve, SPACE, budget=6, seed=5)
    assert outline(first) == outline(perftune.tune(curve, SPACE, budget=6, seed=5))
