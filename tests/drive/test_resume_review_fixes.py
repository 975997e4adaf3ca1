"""Resume defects found in review: the trials a killed run stored after its last checkpoint, ask/tell runs
with a store (checkpoints, in-flight tickets, the budget), the baseline of an unseeded run, the status of a
resumed run, the published values in the checkpoint, and a second Ctrl-C while a run ends."""

from __future__ import annotations

import json
import os
import signal
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.drive import ASHA, Budget, EvalContext, Tuner, _checkpoint
from perftune.errors import PerftuneError, RunWarning
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 40, default=0), "y": Int(0, 40, default=0)})


def f(config: Any) -> float:
    return float((config["x"] - 27) ** 2 + (config["y"] - 6) ** 2 + 1)


def _outline(trials: list[Trial]) -> list[tuple[int, Any, str, float | None]]:
    return [(t.id, t.config, t.status.value, t.value) for t in sorted(trials, key=lambda t: t.id)]


class _Crash(Exception):
    """Stands in for kill -9: the driver stops; the checkpoint in the store is an older one."""


def _crash(path: str, *, stop_at: int, checkpoint_upto: int, seed: int | None = 3, **kw: Any) -> None:
    """A run "killed" once ``stop_at`` trials are stored, its last checkpoint taken at ``checkpoint_upto``."""
    tuner = Tuner(SPACE, seed=seed, store=path, name="r", checkpoint_every=4, **kw)
    real = tuner.checkpoint

    def early_only() -> None:
        if len(tuner.trials) <= checkpoint_upto:
            real()

    tuner.checkpoint = early_only  # type: ignore[method-assign]

    def die(trial: Trial) -> None:
        if len(tuner.trials) == stop_at:
            raise _Crash

    with pytest.raises(_Crash):
        tuner.run(f, 100, on_trial=die)
    with open_store(path) as st:
        run_id = st.get_run("r").id
        loaded = st.load_checkpoint(run_id)
        assert loaded is not None and loaded[0] <= checkpoint_upto < stop_at == len(st.trials(run_id))


# ---- 1. the trials stored after the last checkpoint count at once


def test_a_resumed_seeded_run_counts_every_stored_trial_and_extends_by_exactly_n(tmp_path: Path) -> None:
    whole = Tuner(SPACE, seed=3, store=str(tmp_path / "whole.db"), name="r").run(f, 25)
    path = str(tmp_path / "crash.db")
    _crash(path, stop_at=20, checkpoint_upto=4)

    resumed = Tuner.resume("r", path)
    assert resumed.n_trials == 20 and len(resumed.result().trials) == 20
    best = resumed.result().best
    assert best is not None and best.id == min(whole.trials[:20], key=lambda t: t.value or 0.0).id
    assert resumed.default_trial is not None and resumed.default_trial.id == 0
    result = resumed.run(f, resumed.n_trials + 5)  # what `perftune resume --budget +5` asks
    assert len(result.trials) == 25 and result.stop_reason == "budget"
    assert _outline(result.trials) == _outline(whole.trials)  # the history of the run that was not killed


def test_budgets_smaller_than_the_stored_trials_and_patience_see_them_all(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    _crash(path, stop_at=20, checkpoint_upto=4)
    result = Tuner.resume("r", path).run(f, 10)
    assert len(result.trials) == 20 and result.stop_reason == "budget"  # nothing new: 20 >= 10
    best = result.best
    assert best is not None
    reached = Tuner.resume("r", path).run(f, Budget(evals=100, target=best.value))
    assert len(reached.trials) == 20 and reached.stop_reason == "target"


def test_a_stored_ticket_that_re_derives_another_configuration_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    _crash(path, stop_at=12, checkpoint_upto=4)
    with open_store(path) as st:
        run_id = st.get_run("r").id
        stored = {t.id: t for t in st.trials(run_id)}
        used = {t.config for t in stored.values()}
        other = next(Config({"x": x, "y": 40}) for x in range(41) if Config({"x": x, "y": 40}) not in used)
        forged = Trial(id=12, config=other, status=Status.OK, value=1.0, loss=1.0, technique="x")
        st.add_trial(run_id, forged)
    # Tickets 5..11 re-derive; 12 does not: its stored configuration is another.
    with pytest.raises(PerftuneError, match="ticket 12 re-derived a different configuration"):
        Tuner.resume("r", path)
    with open_store(path) as st:
        assert st.get_lease(st.get_run("r").id) is None  # given back: the run can be looked at, deleted


def test_a_pruning_run_killed_before_its_first_checkpoint_re_derives_its_random_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def curve(config: Any, trial: Any) -> float:
        value = 0.0
        for step in range(1, 10):
            value = f(config) + 1.0 / step
            trial.report(step, value)
            if trial.should_prune():
                raise perftune.Pruned()
        return value

    pruner = ASHA(eta=3, max_steps=9)
    whole = Tuner(SPACE, seed=5, store=str(tmp_path / "whole.db"), name="r").run(curve, 14, pruner=pruner)
    path = str(tmp_path / "crash.db")
    tuner = Tuner(SPACE, seed=5, store=path, name="r")
    monkeypatch.setattr(tuner, "checkpoint", lambda: None)  # only the checkpoint made with the run

    def die(trial: Trial) -> None:
        if len(tuner.trials) == 12:  # past the 9 random starts that its first run() queued
            raise _Crash

    with pytest.raises(_Crash):
        tuner.run(curve, 14, pruner=pruner, on_trial=die)
    resumed = Tuner.resume("r", path)
    assert len(resumed.trials) == 12
    assert _outline(resumed.run(curve, 14, pruner=pruner).trials) == _outline(whole.trials)


# ---- 2. ask/tell runs with a store


def _ask_tell(tuner: Tuner, n: int | None = None) -> list[int]:
    asked = []
    while (n is None or len(asked) < n) and (trial := tuner.ask()) is not None:
        asked.append(trial.id)
        tuner.tell(trial, f(trial.config))
    return asked


def test_ask_tell_writes_periodic_checkpoints(tmp_path: Path) -> None:
    path = str(tmp_path / "at.db")
    tuner = Tuner(SPACE, seed=1, store=path, name="at", checkpoint_every=5, budget=30)
    _ask_tell(tuner, 12)
    with open_store(path) as st:
        loaded = st.load_checkpoint(st.get_run("at").id)
    assert loaded is not None and loaded[0] == 10  # without close()
    tuner.close()


def test_a_resumed_seeded_ask_tell_run_hands_out_in_flight_tickets_first_and_never_stored_ones(
        tmp_path: Path) -> None:
    whole = Tuner(SPACE, seed=1, budget=30)
    _ask_tell(whole)

    path = str(tmp_path / "at.db")
    killed = Tuner(SPACE, seed=1, store=path, name="at", budget=30, checkpoint_every=1000)
    _ask_tell(killed, 6)
    a, b, c = killed.ask(), killed.ask(), killed.ask()
    assert a is not None and b is not None and c is not None
    killed.checkpoint()  # a, b and c in flight
    killed.tell(a, f(a.config))
    killed.tell(c, f(c.config))  # b never comes back: the process is killed here
    _ask_tell(killed, 4)  # stored after the checkpoint, never in it
    del killed

    with open_store(path) as st:
        lease = st.get_lease(st.get_run("at").id)
        assert lease is not None
        st.release_lease(lease)  # as a dead driver's lease on this host is taken over
    resumed = Tuner.resume("at", path)
    assert resumed.n_trials == 6 + 3 + 4 and resumed.n_waiting == 1
    assert resumed.budget == Budget(evals=30)  # the run's own budget: ask() returns None once spent
    asked = _ask_tell(resumed)
    assert asked[0] == b.id and asked[1:] == list(range(13, 30))  # b first; nothing stored is asked again
    assert _outline(resumed.trials) == _outline(whole.trials)
    resumed.close()


def test_a_ticket_between_stored_ones_is_issued_again_under_its_ticket(tmp_path: Path) -> None:
    path = str(tmp_path / "gap.db")
    killed = Tuner(SPACE, seed=2, store=path, name="g", budget=12, checkpoint_every=1000)
    t0, t1, t2 = killed.ask(), killed.ask(), killed.ask()
    assert t0 is not None and t1 is not None and t2 is not None
    killed.tell(t0, f(t0.config))
    killed.tell(t2, f(t2.config))  # ticket 1 was in flight; the checkpoint is the one made with the run
    killed.release()

    resumed = Tuner.resume("g", path)
    assert resumed.n_trials == 3 and resumed.n_waiting == 1 and len(resumed.trials) == 2
    again = resumed.ask()
    assert again is not None and (again.id, again.config) == (1, t1.config)


# ---- 3. the baseline of an unseeded run


def test_an_unseeded_run_killed_before_its_first_checkpoint_keeps_its_baseline(tmp_path: Path) -> None:
    path = str(tmp_path / "dl.db")
    _crash(path, stop_at=10, checkpoint_upto=0, seed=None)
    result = Tuner.resume("r", path).run(f, 15)
    assert result.default is not None and result.default.id == 0 and result.default.technique == "default"
    assert result.improvement is not None and result.improvement > 1


# ---- 4. the status of a resumed run


def test_a_resumed_run_is_running_while_driven_and_gets_its_status_back_when_nothing_was_measured(
        tmp_path: Path) -> None:
    path = str(tmp_path / "st.db")
    Tuner(SPACE, seed=0, store=path, name="s", budget=3).run(f)
    with open_store(path) as st:
        assert st.get_run("s").status == "finished"

        untouched = Tuner.resume("s", path)
        assert st.get_run("s").status == "finished"  # taken, not driven yet
        untouched.release()
        assert st.get_run("s").status == "finished"

        seen: list[str] = []
        resumed = Tuner.resume("s", path)
        resumed.run(f, 5, on_trial=lambda t: seen.append(st.get_run("s").status))  # replaces the 3
        assert seen == ["running", "running"] and st.get_run("s").status == "finished"

        asked = Tuner.resume("s", path)
        assert asked.ask() is None  # the run's stored budget of 3 is spent
        asked.budget = Budget(evals=8)
        trial = asked.ask()
        assert trial is not None and st.get_run("s").status == "running"
        asked.tell(trial, f(trial.config))
        asked.release()  # measured something, then stopped: "running (no driver)" for `perftune runs`
        assert st.get_run("s").status == "running" and st.get_lease(st.get_run("s").id) is None


# ---- 5. what objectives publish is in the checkpoint


def counting(config: Any, context: EvalContext) -> float:
    context.publish("n_seen", context.shared.get("n_seen", 0) + 1)
    return f(config)


def test_published_values_survive_a_resume(tmp_path: Path) -> None:
    path = str(tmp_path / "sh.db")
    Tuner(SPACE, seed=1, store=path, name="s").run(counting, 10)
    resumed = Tuner.resume("s", path)
    assert resumed.context_for(Trial(id=10, config=SPACE.default())).shared == {"n_seen": 10}
    resumed.run(counting, 15)
    assert Tuner.resume("s", path).context_for(Trial(id=15, config=SPACE.default())).shared == {"n_seen": 15}


def test_a_checkpoint_without_published_values_reads_as_none(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    Tuner(SPACE, seed=1, store=path, name="s").run(counting, 4)
    with open_store(path) as st:
        run_id = st.get_run("s").id
        loaded = st.load_checkpoint(run_id)
        assert loaded is not None
        assert _checkpoint.decode(loaded[1], SPACE)["shared"] == {"n_seen": 4}
        document = json.loads(loaded[1])
        del document["state"]["shared"]  # a checkpoint written before published values were kept
        st.save_checkpoint(run_id, loaded[0], json.dumps(document).encode())
    resumed = Tuner.resume("s", path)
    assert resumed.context_for(Trial(id=4, config=SPACE.default())).shared == {}
    assert len(resumed.run(counting, 6).trials) == 6


def test_a_published_object_is_left_out_of_the_checkpoint_with_a_warning(tmp_path: Path) -> None:
    class Opaque:
        pass

    def publishes_an_object(config: Any, context: EvalContext) -> float:
        context.publish("handle", Opaque())
        context.publish("n", 1)
        return f(config)

    path = str(tmp_path / "obj.db")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Tuner(SPACE, seed=1, store=path, name="s").run(publishes_an_object, 3)
    said = [str(w.message) for w in caught if issubclass(w.category, RunWarning)]
    assert len(said) == 1 and "'handle'" in said[0] and "not kept in the run's checkpoint" in said[0]
    assert Tuner.resume("s", path).context_for(Trial(id=3, config=SPACE.default())).shared == {"n": 1}


# ---- 6. a second Ctrl-C while an interrupted run ends


def test_a_second_ctrl_c_while_the_run_ends_leaves_it_interrupted_with_its_lease_given_back(
        tmp_path: Path) -> None:
    path = str(tmp_path / "cc.db")
    tuner = Tuner(SPACE, seed=0, store=path, name="c")
    real: Callable[[], None] = tuner.checkpoint

    def pressed_again() -> None:  # Ctrl-C pressed again while the checkpoint of the interrupt is written
        os.kill(os.getpid(), signal.SIGINT)
        real()

    def interrupt(trial: Trial) -> None:
        if len(tuner.trials) == 3:
            tuner.checkpoint = pressed_again  # type: ignore[method-assign]
            raise KeyboardInterrupt

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        tuner.run(f, 10, on_trial=interrupt)
    assert signal.getsignal(signal.SIGINT) is before  # the handler is given back
    with open_store(path) as st:
        info = st.get_run("c")
        assert info.status == "interrupted" and st.get_lease(info.id) is None
        loaded = st.load_checkpoint(info.id)
        assert loaded is not None and loaded[0] == 3
    assert len(Tuner.resume("c", path).run(f, 5).trials) == 5
