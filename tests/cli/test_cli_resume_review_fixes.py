"""`perftune resume` and `perftune run` defects found in review: a killed seeded run resumed with --budget +N,
+N after an interrupt with trials in flight, a second Ctrl-C while a run ends, --scheduler without
--executor dask, and the runs a warm start left out."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.drive import Tuner
from perftune.store import open_store
from perftune.targets.command import load_task

TASK = textwrap.dedent("""
    [space]
    x = { type = "int", min = 0, max = 9, default = 0 }
    y = { type = "int", min = 0, max = 9, default = 0 }
    [run]
    command = ["python3", "-c", "import sys; x, y = map(int, sys.argv[1:]); print('value', (x - 7) ** 2 + (y - 2) ** 2 + 1)", "{x}", "{y}"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([0-9.]+)'
    goal = "min"
    [check]
    stdout = "none"
    [timing]
    repeats = 1
    warmup_runs = 0
""")  # noqa: E501


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


@pytest.fixture
def task(tmp_path: Path) -> Path:
    path = tmp_path / "task.toml"
    path.write_text(TASK)
    return path


def invoke(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _trials(db: str, run: str = "r") -> list[Any]:
    with open_store(db) as st:
        return st.trials(st.get_run(run).id)


def test_a_killed_seeded_run_resumed_with_plus_n_measures_n_and_answers_with_its_best(
        tmp_path: Path, task: Path) -> None:
    whole = str(tmp_path / "whole.db")
    invoke("--store", whole, "run", str(task), "--budget", "10", "--seed", "3", "--name", "r", "-q")

    db = str(tmp_path / "p.db")
    invoke("--store", db, "run", str(task), "--budget", "3", "--seed", "3", "--name", "r", "-q")
    with open_store(db) as st:
        run_id = st.get_run("r").id
        early = st.load_checkpoint(run_id)
        assert early is not None and early[0] == 3
    invoke("--store", db, "resume", "r", "--budget", "+5", "-q")
    with open_store(db) as st:  # as if killed after its 8th trial, its last checkpoint the one at 3
        st.save_checkpoint(run_id, early[0], early[1])
        st.finish_run(run_id, "running")

    said = json.loads(invoke("--store", db, "resume", "r", "--budget", "+2", "--json"))
    trials = _trials(db)
    assert len(trials) == 10 and said["counts"] == {"ok": 10}
    assert [t.config for t in trials] == [t.config for t in _trials(whole)]
    best = min(trials, key=lambda t: t.value)
    assert said["best"]["id"] == best.id and said["default"]["id"] == 0
    shown = json.loads(invoke("--store", db, "show", "r", "--json"))
    assert shown["best"]["id"] == best.id and shown["run"]["status"] == "finished"


def test_plus_n_after_an_interrupt_with_trials_in_flight_measures_n(tmp_path: Path, task: Path) -> None:
    db = str(tmp_path / "p.db")
    invoke("--store", db, "run", str(task), "--budget", "1", "--seed", "0", "--name", "r", "-q")
    killed = Tuner.resume("r", db, space=load_task(task).space)
    killed.budget = None
    in_flight = [killed.ask(), killed.ask()]  # issued, then the driver stops before measuring them
    assert all(t is not None for t in in_flight)
    killed.checkpoint()
    killed.release()
    invoke("--store", db, "resume", "r", "--budget", "+3", "-q")
    # The two in flight are measured again, and one more: three measured, not five.
    assert sorted(t.id for t in _trials(db)) == [0, 1, 2, 3]


def test_ctrl_c_pressed_again_while_the_run_ends_is_one_line_and_the_run_interrupted(
        tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "p.db")
    record, checkpoint = Tuner._record, Tuner.checkpoint

    def interrupted_after_two(self: Tuner, ticket: int, outcome: Any) -> Any:
        trial = record(self, ticket, outcome)
        if len(self.trials) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C
        return trial

    def pressed_again(self: Tuner) -> None:
        if self.result().stop_reason == "interrupted":
            os.kill(os.getpid(), signal.SIGINT)  # and again, while the interrupted run is stored
        checkpoint(self)

    monkeypatch.setattr(Tuner, "_record", interrupted_after_two)
    monkeypatch.setattr(Tuner, "checkpoint", pressed_again)
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "6", "--seed", "0",
                                      "--name", "r", "-q"])
    monkeypatch.undo()
    assert result.exit_code == 130, result.output
    said = result.stderr.splitlines()
    assert said == [f"perftune: interrupted; resume with: perftune resume r --store {db}"]
    with open_store(db) as st:
        info = st.get_run("r")
        assert info.status == "interrupted" and st.get_lease(info.id) is None
        loaded = st.load_checkpoint(info.id)
        assert loaded is not None and loaded[0] == 2


def test_scheduler_without_executor_dask_is_refused_in_one_line(tmp_path: Path, task: Path) -> None:
    db = str(tmp_path / "p.db")
    for args in (["run", str(task)], ["resume", "r"]):
        result = CliRunner().invoke(cli, ["--store", db, *args, "--scheduler", "local:2"])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith("perftune: error: --scheduler local:2 needs --executor dask")
    assert not os.path.exists(db)  # refused before anything is made


def test_the_runs_a_warm_start_left_out_are_named_and_recorded(tmp_path: Path, task: Path) -> None:
    other = str(tmp_path / "other.db")
    space = load_task(task, prepare=False).space
    Tuner(space, seed=0, store=other, name="good").run(lambda c: float(c["x"] + c["y"]), 4)
    Tuner(space, seed=0, store=other, name="broken").run(lambda c: 1 / 0, 2)

    db = str(tmp_path / "p.db")
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "3", "--name", "r", "-q",
                                      "--warm-start", other])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "warm start" in line]
    assert notes == [f"perftune: note: warm start: left out {other}: run 'broken' (no successful "
                     "configuration valid in this space)"]
    with open_store(db) as st:
        warm = st.get_run("r").settings["warm_start"]
    assert warm["skipped"] == [f"{other}: run 'broken'"] and warm["n_sources"] == 1


def test_ctrl_c_pressed_again_before_the_loop_began_is_one_line_and_the_run_interrupted(
        tmp_path: Path, task: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "p.db")
    close = Tuner.close

    def stopped(self: Tuner, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C while the run starts

    def pressed_again(self: Tuner, status: str = "finished") -> None:
        os.kill(os.getpid(), signal.SIGINT)  # and again, while the new run is marked interrupted
        close(self, status)

    monkeypatch.setattr(Tuner, "run", stopped)
    monkeypatch.setattr(Tuner, "close", pressed_again)
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "3", "--name", "r"])
    monkeypatch.undo()
    assert result.exit_code == 130, result.output
    said = result.stderr.splitlines()
    assert said == [f"perftune: interrupted; resume with: perftune resume r --store {db}"]
    with open_store(db) as st:
        info = st.get_run("r")
        assert info.status == "interrupted" and st.get_lease(info.id) is None
