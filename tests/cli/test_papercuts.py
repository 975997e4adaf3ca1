"""What a new user meets first: markup in names and output printed as typed, a Ctrl-C that prints one
clean line with a resume command that works pasted anywhere."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli

MARKUP = "[bold]x[/bold]"
# Every candidate string that rich would parse: a closing tag with nothing open, and a style.
HOSTILE = textwrap.dedent("""
    [space]
    mode = { type = "choice", options = ["[/]", "[bold]x[/bold]", "plain"], default = "plain" }
    [run]
    command = ["python3", "-c", "import sys; m = sys.argv[1]; sys.stderr.write('boom [/] [bold]x[/bold]') if m == '[/]' else None; sys.exit(3) if m == '[/]' else print('value', len(m))", "{mode}"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([0-9.]+)'
    goal = "max"
    [timing]
    repeats = 1
    warmup_runs = 0
""")  # noqa: E501


@pytest.fixture
def tmp_path(public_tmp_path):
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def invoke(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_markup_in_names_configs_and_candidate_stderr_is_printed_as_typed(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    name = f"{MARKUP}[/]"
    # Enumerates the three choices: the default, then the two hostile ones.
    printed = invoke("--store", db, "run", str(task), "--budget", "3", "--seed", "0", "--name", name)
    assert f"run {name} (id 1)" in printed
    assert f'best configuration: {{"mode": "{MARKUP}"}}' in printed

    shown = invoke("--store", db, "show", name)
    assert f"run {name} (id 1)" in shown
    assert f'{{"mode": "{MARKUP}"}}' in shown and '{"mode": "[/]"}' in shown
    assert f"boom [/] {MARKUP}" in shown  # the failing candidate's stderr, in the failure table

    assert name in invoke("--store", db, "runs")


ESCAPES = textwrap.dedent("""
    [space]
    x = { type = "int", min = 0, max = 2, default = 0 }
    [run]
    command = ["python3", "-c", "import sys; x = {x}; sys.stderr.write('boom' + chr(27) + '[2J' + chr(27) + ']0;pwned' + chr(7) + 'over'); sys.exit(3) if x else print('value', 1)"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([0-9.]+)'
    goal = "min"
    [timing]
    repeats = 1
    warmup_runs = 0
""")  # noqa: E501


def test_a_candidates_terminal_escapes_are_shown_not_sent_to_the_terminal(tmp_path):
    # Clear the screen, set the window title: a hostile candidate's stderr
    # (kept as its failure reason) is printed with each control character spelled out.
    task = tmp_path / "task.toml"
    task.write_text(ESCAPES)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    invoke("--store", db, "run", str(task), "--budget", "3", "--seed", "0", "--name", "esc\x1b[31m")
    shown = invoke("--store", db, "show", "esc\x1b[31m")
    assert "\x1b" not in shown and "\x07" not in shown
    assert "stderr: boom\\x1b[2J\\x1b]0;pwned\\x07over" in shown
    listed = invoke("--store", db, "runs")
    assert "\x1b" not in listed and "esc\\x1b[31m" in listed


def test_a_markup_name_given_in_the_task_file_is_printed_as_typed(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(f'name = "{MARKUP}"\n' + HOSTILE)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert f"run {MARKUP} (id 1)" in invoke("--store", db, "run", str(task), "--budget", "2")
    assert MARKUP in invoke("--store", db, "runs")


SLOW = textwrap.dedent("""
    name = "slow"
    [space]
    x = { type = "int", min = 0, max = 30, default = 0 }
    [run]
    command = ["python3", "-c", "import time; time.sleep(0.3); print('value', ({x} - 7) ** 2)"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([0-9.]+)'
    goal = "min"
    [timing]
    repeats = 1
    warmup_runs = 0
""")


def _n_trials(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_ctrl_c_prints_one_line_whose_resume_command_works_pasted_anywhere(tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "task.toml").write_text(SLOW)
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    # The default store (./perftune.db) and a relative task path: what a new user types.
    proc = subprocess.Popen(
        [sys.executable, "-m", "perftune", "run", "task.toml", "--budget", "12", "--workers", "2"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while _n_trials(work / "perftune.db") < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    [hint] = [line.split("resume with: ", 1)[1] for line in err.splitlines() if "resume with: " in line]
    words = shlex.split(hint)
    assert words[:3] == ["perftune", "resume", "slow"]
    assert words[words.index("--store") + 1] == str(work / "perftune.db")

    resumed = subprocess.run([sys.executable, "-m", *words, "--json"], cwd=elsewhere, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert sum(json.loads(resumed.stdout)["counts"].values()) == 12
    assert not (elsewhere / "perftune.db").exists()


@pytest.mark.slow
def test_sigterm_ends_a_run_as_ctrl_c_does(tmp_path):
    # A batch system's stop (or `timeout`, `kill`): the run is marked interrupted, with the resume line.
    (tmp_path / "task.toml").write_text(SLOW)
    db = tmp_path / "t.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from perftune.cli import entry; entry()", "--store", str(db), "run",
         "task.toml", "--budget", "30"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 120
    while _n_trials(db) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "resume with: perftune resume slow" in err, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"


# SIGTERM (the driver cancelling an evaluation) arriving while the worker forks a candidate: after the
# guard's before-fork hook, before logging's (which is where the stray "Exception ignored" came from).
FORK_SCRIPT = textwrap.dedent("""
    import functools, logging, os, signal, subprocess
    from perftune.drive import _executors as executors

    signal.signal(signal.SIGTERM, executors._cancel)
    os.register_at_fork(before=functools.partial(os.kill, os.getpid(), signal.SIGTERM))
    executors._guard_forks()
    proc = None
    try:
        proc = subprocess.Popen(["true"], preexec_fn=lambda: None)
        print("not cancelled")
    except executors._Cancelled:
        print("cancelled", "with its process" if proc is not None else "without its process")
    if proc is not None:
        proc.wait()
""")


def test_a_cancellation_during_a_fork_is_raised_after_it_and_prints_nothing():
    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cancelled with its process"
    assert "Exception ignored" not in done.stderr and done.stderr == ""


def test_resume_line_names_an_absolute_store(tmp_path, monkeypatch):
    from perftune.cli import _resume_command
    from perftune.store import open_store

    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///rel dir.db")
    try:
        line = _resume_command("a run", store)
    finally:
        store.close()
    assert shlex.split(line) == ["perftune", "resume", "a run", "--store", str(tmp_path / "rel dir.db")]


def test_runs_prints_whole_names_on_a_narrow_terminal(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    name = "a-rather-long-run-name-that-other-commands-take"
    invoke("--store", db, "run", str(task), "--budget", "1", "--name", name)
    narrow = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["--store", db, "runs"], catch_exceptions=False)
    assert narrow.exit_code == 0 and name in narrow.output


def test_resume_line_never_prints_a_store_password():
    from types import SimpleNamespace

    from perftune.cli import _resume_command

    # The attributes _resume_command reads of a PostgreSQL store whose URL holds a password.
    store = SimpleNamespace(dialect="postgresql", has_password=True,
                            url="postgresql://tuner:***@db.example/perftune")
    line = _resume_command("nightly", store)
    assert "***" not in line and "secret" not in line
    assert line.startswith("perftune resume nightly ") and "$PERFTUNE_STORE or --store @FILE" in line
    plain = SimpleNamespace(dialect="postgresql", has_password=False, url="postgresql://tuner@db/perftune")
    assert shlex.split(_resume_command("nightly", plain))[-2:] == ["--store", "postgresql://tuner@db/perftune"]


def test_resume_with_a_budget_already_spent_says_so(tmp_path):
    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = str(tmp_path / "p.db")
    invoke("--store", db, "run", str(task), "--budget", "3", "--seed", "0", "--name", "r")
    before = json.loads(invoke("--store", db, "show", "r", "--json"))
    said = invoke("--store", db, "resume", "r", "--budget", "2")
    assert "run 'r' has 3 trials, as many as a budget of 2 allows: nothing to measure" in said
    # ... and the run is left as it was: its budget, its end and its answer (a no-op resume wrote a budget
    # of 2 and a new end time into a run of 3 trials).
    after = json.loads(invoke("--store", db, "show", "r", "--json"))
    assert after == before
    # A later plain resume still reads the run's own budget.
    assert "as many as a budget of 3 allows" in invoke("--store", db, "resume", "r")


def test_the_store_file_alone_holds_every_trial_when_a_command_ends(tmp_path):
    # SQLite's write-ahead log is folded into the .db file when the command closes the store: a copy or
    # a backup of the .db file alone is whole (it used to hold the tables and none of the trials).
    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = tmp_path / "p.db"
    invoke("--store", str(db), "run", str(task), "--budget", "3", "--seed", "0")
    invoke("--store", str(db), "runs")  # a read-only command closes its store too
    wal = Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 3


def test_flags_contributions_never_print_a_negative_slowdown(capsys):
    # The last check of an option alone can come out faster than the reduced set (noise against the
    # reduction's own verdict); the line says so in words instead of "-1.3% slower without it".
    from types import SimpleNamespace

    from perftune.cli import _print_flags_result
    from perftune.report import Improvement

    result = SimpleNamespace(
        run_id=None, n_trials=3, improvement=Improvement(1.2, 1.1, 1.3, baseline="-O3"), note=None,
        contributions={"-funroll-loops": 0.25, "-fno-plt": -0.013, "-ffast-math": float("nan")},
        command_line="gcc -O2 -funroll-loops -fno-plt -ffast-math x.c", pareto=None, notes=())
    _print_flags_result(result, as_json=False)
    out = capsys.readouterr().out
    assert "-funroll-loops: 25.0% slower without it" in out
    assert "-fno-plt: 1.3% faster without it in the last check (kept:" in out
    assert "-ffast-math: required for the output" in out
    assert "-1.3%" not in out and "+25.0%" not in out


def test_an_interrupt_before_the_loop_begins_leaves_an_interrupted_run_and_the_resume_line(
        tmp_path, monkeypatch):
    # SIGTERM 1.9 s after start reached the command between the run's creation and its loop: the run stayed
    # 'running' for ever and no resume line was printed.
    from perftune.drive import Tuner

    def stopped(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(Tuner, "run", stopped)
    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = str(tmp_path / "p.db")
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "3", "--name", "r"])
    assert result.exit_code == 130
    assert "perftune: interrupted; resume with: perftune resume r" in result.output
    monkeypatch.undo()
    listed = json.loads(invoke("--store", db, "runs", "--json"))["runs"]
    assert [(r["name"], r["status"]) for r in listed] == [("r", "interrupted")]


def test_a_plain_resume_measures_the_tickets_a_killed_driver_left_in_flight(tmp_path):
    # The budget is spent by tickets issued and never measured (the driver was killed): a plain resume must
    # measure them and end the run, not say "nothing to measure".
    from perftune.drive import Tuner
    from perftune.store import open_store
    from perftune.targets.command import load_task

    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = str(tmp_path / "p.db")
    invoke("--store", db, "run", str(task), "--budget", "1", "--seed", "0", "--name", "r")
    killed = Tuner.resume("r", db, space=load_task(task).space)
    killed.budget = None  # the run's stored budget (1 trial) is spent: ask beyond it
    in_flight = [killed.ask(), killed.ask()]  # issued, then the driver "dies" before measuring them
    assert all(t is not None for t in in_flight)
    killed.checkpoint()
    killed.release()
    with open_store(db) as st:
        st.update_settings(st.get_run("r").id, {"budget": {"evals": 3}})
    said = invoke("--store", db, "resume", "r")
    assert "nothing to measure" not in said
    with open_store(db) as st:
        trials = st.trials(st.get_run("r").id)
    assert sorted(t.id for t in trials) == [0, 1, 2]  # the two tickets in flight, measured (ok or failed)


def test_a_resume_interrupted_before_its_loop_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    from perftune.drive import Tuner

    task = tmp_path / "task.toml"
    task.write_text(HOSTILE)
    db = str(tmp_path / "p.db")
    invoke("--store", db, "run", str(task), "--budget", "2", "--seed", "0", "--name", "r")
    before = json.loads(invoke("--store", db, "show", "r", "--json"))

    def stopped(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(Tuner, "run", stopped)
    result = CliRunner().invoke(cli, ["--store", db, "resume", "r", "--budget", "+2"])
    assert result.exit_code == 130 and "resume with: perftune resume r" in result.output
    monkeypatch.undo()
    after = json.loads(invoke("--store", db, "show", "r", "--json"))
    # Its status and final answer as they were (the answer was erased), and the lease given back: a
    # resume runs at once (it was refused, "being driven by", until the lease timed out).
    assert after["run"]["status"] == before["run"]["status"] and after["final"] == before["final"]
    assert "run r (id 1): 3 trials" in invoke("--store", db, "resume", "r", "--budget", "+2")  # all 3 configs


def test_a_long_task_name_gets_a_free_run_name_within_the_stores_limit(tmp_path) -> None:  # noqa: ANN001
    # A task named with 199 characters ran once: the second run's name, NAME-2, was 201 characters long.
    from perftune.cli import _free_name
    from perftune.space import Int, Space
    from perftune.store import open_store

    base = "t" * 199
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as st:
        space = Space({"x": Int(0, 3)})
        for _ in range(3):
            name = _free_name(st, base)
            assert len(name) <= 200
            st.create_run(name, space, {}, "min", None)
        names = sorted(info.name for info in st.list_runs())
    assert len(set(names)) == 3 and names[0].endswith("-2") and names[1].endswith("-3")
