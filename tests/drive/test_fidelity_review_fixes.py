"""Multi-fidelity defects found in review: a resume after a crash, threads sharing the rungs, numpy
reports, the pruner stored with the run, other stop exceptions, ``ASHA(rungs=...)`` and torn records."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import perftune
from perftune.drive import ASHA, Fidelity, RunningTrial, ThreadExecutor, Tuner
from perftune.drive._fidelity import _reader
from perftune.errors import PerftuneError
from perftune.space import Float, Space
from perftune.store import open_store
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


def _outline(trials: list[Trial]) -> list[tuple[int, Any, str, str | None]]:
    return [(t.id, t.config, t.status.value, t.reason) for t in sorted(trials, key=lambda t: t.id)]


class _Crash(Exception):
    """Stands in for kill -9: the driver stops without writing a checkpoint."""


def test_a_seeded_pruning_run_resumed_after_a_crash_decides_as_the_run_that_did_not_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pruner = ASHA(eta=3, max_steps=27)
    whole = Tuner(SPACE, seed=1, store=str(tmp_path / "whole.db"), name="r").run(curve, 12, pruner=pruner)

    path = str(tmp_path / "crash.db")
    tuner = Tuner(SPACE, seed=1, store=path, name="r", checkpoint_every=8)
    real_checkpoint = tuner.checkpoint

    def checkpoint_while_at_most_8() -> None:  # what a kill after the 14th trial leaves: the one at 8
        if len(tuner.trials) <= 8:
            real_checkpoint()

    def crash(trial: Trial) -> None:
        if len(tuner.trials) == 14:
            raise _Crash

    monkeypatch.setattr(tuner, "checkpoint", checkpoint_while_at_most_8)
    with pytest.raises(_Crash):
        tuner.run(curve, 12, pruner=pruner, on_trial=crash)
    with open_store(path) as st:
        run_id = st.get_run("r").id
        loaded = st.load_checkpoint(run_id)
        assert loaded is not None and loaded[0] == 8 and len(st.trials(run_id)) == 14

    resumed = Tuner.resume("r", path).run(curve, 12, pruner=pruner)
    # Every decision, with its reason ("the 1st best of 5": what the rung held), is the uncrashed run's.
    assert _outline(resumed.trials) == _outline(whole.trials)


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Threads switch as often as they can, so that a missing lock shows at once."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_threads_of_one_process_count_each_rung_value_once(tmp_path: Path, fast_switching: None) -> None:
    fid = Fidelity(ASHA(eta=3, random_starts=0), "min", str(tmp_path))
    n_threads, per_thread = 8, 60
    barrier = threading.Barrier(n_threads)
    largest_rung: list[int] = []

    def work(k: int) -> None:
        barrier.wait()
        for j in range(per_thread):
            handle = RunningTrial(k * per_thread + j, {}, fid)
            handle.report(1, float(j))
            handle.should_prune()
            largest_rung.append(len(_reader(str(tmp_path)).losses(0, 0)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert max(largest_rung) <= n_threads * per_thread
    assert _reader(str(tmp_path)).losses(0, 0) == sorted(float(j) for j in range(per_thread)
                                                        for _ in range(n_threads))


def test_a_thread_executor_run_judges_each_trial_against_one_value_per_trial() -> None:
    tuner = Tuner(SPACE, seed=0)
    result = tuner.run(curve, 12, executor=ThreadExecutor(curve, None, workers=4),
                       pruner=ASHA(max_steps=27))
    pruned = [t for t in result.trials if t.status is Status.PRUNED]
    assert pruned
    for t in pruned:
        assert t.reason is not None
        n_at_rung = int(t.reason.rsplit(" of ", 1)[1].rstrip(")"))
        assert n_at_rung <= len(result.trials)


def test_numpy_steps_and_values_are_reports() -> None:
    handle = RunningTrial(0, {}, None)
    handle.report(np.int64(1), np.float32(0.5))  # type: ignore[arg-type]
    handle.report(2, np.float64(0.25))
    assert handle.intermediate == {1: 0.5, 2: 0.25}
    assert all(type(k) is int and type(v) is float for k, v in handle.intermediate.items())
    with pytest.raises(PerftuneError, match="step must be a non-negative integer"):
        handle.report(np.float64(3.0), 0.1)  # type: ignore[arg-type]
    with pytest.raises(PerftuneError, match="value must be a finite number"):
        handle.report(3, np.float32("nan"))  # type: ignore[arg-type]

    def numpy_curve(config: Any, trial: Any) -> float:
        loss = np.float32(1.0)
        for epoch in np.arange(1, 28):
            loss = np.float32((config["x"] - 0.3) ** 2 + 1.0 / epoch)
            trial.report(epoch, loss)
            if trial.should_prune():
                raise perftune.Pruned()
        return float(loss)

    counts = perftune.tune(numpy_curve, SPACE, budget=6, seed=0, pruner=ASHA(max_steps=27)).counts()
    assert counts["ok"] == 6 and "failed" not in counts


def test_the_pruner_is_stored_with_the_run_and_a_resume_prunes_with_it(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    pruner = ASHA(max_steps=27)
    Tuner(SPACE, seed=0, store=path, name="r").run(curve, 4, pruner=pruner)
    with open_store(path) as st:
        assert st.get_run("r").settings["pruner"] == pruner.to_dict()
    assert ASHA.from_dict(pruner.to_dict()) == pruner

    used: set[ASHA | None] = set()

    def spying_curve(config: Any, trial: Any) -> float:
        used.add(trial.fidelity.pruner)
        return curve(config, trial)

    resumed = Tuner.resume("r", path).run(spying_curve, 8)  # no pruner: the run's own
    assert used == {pruner}
    assert not any("pruned at step 27" in (t.reason or "") for t in resumed.trials)

    refused = Tuner.resume("r", path)
    with pytest.raises(PerftuneError, match=r"^run\(\): this run prunes with ASHA\(eta=3") as info:
        refused.run(curve, 10, pruner=ASHA(eta=2))
    assert "\n" not in str(info.value) and len(refused.trials) == len(resumed.trials)  # nothing measured
    refused.release()

    # pruner=False stops pruning, and is stored so.
    Tuner.resume("r", path).run(curve, 10, pruner=False)
    with open_store(path) as st:
        assert st.get_run("r").settings["pruner"] is False


def test_a_damaged_stored_pruner_is_one_line(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    Tuner(SPACE, seed=0, store=path, name="r").run(curve, 2, pruner=ASHA(max_steps=27))
    with open_store(path) as st:
        st.update_settings(st.get_run("r").id, {"pruner": {"eta": "three"}})
    with pytest.raises(PerftuneError, match=r"^resume: run 'r': settings.pruner: ASHA: eta must be"):
        Tuner.resume("r", path)


class _FrameworkStop(Exception):
    """A stop exception of another framework (optuna.TrialPruned, say)."""


def test_another_exception_after_should_prune_said_true_prunes_the_trial() -> None:
    def objective(config: Any, trial: Any) -> float:
        for step in range(1, 28):
            trial.report(step, (config["x"] - 0.3) ** 2 + 1.0 / step)
            if trial.should_prune():
                raise _FrameworkStop("stop")
        return (config["x"] - 0.3) ** 2

    result = perftune.tune(objective, SPACE, budget=6, seed=0, pruner=ASHA(max_steps=27))
    counts = result.counts()
    assert counts["ok"] == 6 and counts["pruned"] > 0 and "failed" not in counts
    assert all((t.reason or "").startswith("pruned at step ") for t in result.trials
               if t.status is Status.PRUNED)

    def broken(config: Any, trial: Any) -> float:  # raises without being told to stop: a failure
        trial.report(1, 1.0)
        raise _FrameworkStop("boom")

    result = perftune.tune(broken, SPACE, budget=2, seed=0, pruner=ASHA(max_steps=27))
    assert {t.status for t in result.trials} == {Status.FAILED}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rungs": 5}, "ASHA: rungs must be increasing integer steps, got 5"),
    ({"rungs": "13"}, "ASHA: rungs must be increasing integer steps, got '13'"),
    ({"rungs": (0, 1)}, "ASHA: rungs must be steps of at least 1, got (0, 1)"),
    ({"rungs": (-3, 1)}, "ASHA: rungs must be steps of at least 1, got (-3, 1)"),
    ({"rungs": (1, 3, 9, 27), "max_steps": 9}, "ASHA: rungs must be below max_steps (9), got (1, 3, 9, 27)"),
    ({"rungs": (1, 3), "min_steps": 5}, "ASHA: give either rungs or min_steps, not both (rungs=(1, 3), "
                                        "min_steps=5): the rungs' steps are the ones judged"),
])
def test_bad_rungs_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PerftuneError) as info:
        ASHA(**kwargs)
    assert str(info.value) == message


def test_good_rungs_are_kept_as_python_ints() -> None:
    assert ASHA(rungs=[1, 3]).rungs == (1, 3)  # type: ignore[arg-type]
    assert ASHA(rungs=(np.int64(2), 4), max_steps=5).rung_steps(0) == (2, 4)  # type: ignore[arg-type]
    assert all(type(s) is int for s in ASHA(rungs=(np.int64(2), 4)).rung_steps(0))  # type: ignore[arg-type]


def _record_bytes(tmp_path: Path, trial_id: int, value: float) -> bytes:
    scratch = tmp_path / f"scratch-{trial_id}"
    scratch.mkdir()
    RunningTrial(trial_id, {}, Fidelity(ASHA(eta=3), "min", str(scratch))).report(1, value)
    return (scratch / "b0-r0.txt").read_bytes()


def test_a_torn_record_costs_its_own_value_only(tmp_path: Path) -> None:
    torn = _record_bytes(tmp_path, 1, 0.4242)
    for cut in range(1, len(torn)):
        board = tmp_path / f"board-{cut}"
        board.mkdir()
        fid = Fidelity(ASHA(eta=3, random_starts=0), "min", str(board))
        RunningTrial(0, {}, fid).report(1, 0.5)
        with open(board / "b0-r0.txt", "ab") as f:
            f.write(torn[:cut])  # a writer killed inside its write(), or a full disk
        for i in (2, 3, 4):
            handle = RunningTrial(i, {}, fid)
            handle.report(1, 0.3)
            assert handle.should_prune() is False  # the best value there: never pruned, never raises
        values = _reader(str(board)).losses(0, 0)
        # The complete records only; the torn one counts when its value was whole, never as a part of it.
        assert values in ([0.3, 0.3, 0.3, 0.5], [0.3, 0.3, 0.3, 0.4242, 0.5]), (cut, torn[:cut], values)


def test_a_forked_process_reads_the_rungs_with_its_own_reader(tmp_path: Path) -> None:
    fid = Fidelity(ASHA(eta=3, random_starts=0), "min", str(tmp_path))
    RunningTrial(0, {}, fid).report(1, 0.5)
    assert _reader(str(tmp_path)).losses(0, 0) == [0.5]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what the driver read, and what was appended since
        try:
            RunningTrial(1, {}, fid).report(1, 0.25)
            os.write(write, repr(_reader(str(tmp_path)).losses(0, 0)).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        assert f.read() == "[0.25, 0.5]" and status == 0
