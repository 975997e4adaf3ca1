"""`perftune resume` offers --seed and --lag: it takes the run's own (a command line repeated with resume)
and refuses others in one line, and its help says so."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.store import open_store

TASK = textwrap.dedent("""
    [space]
    x = { type = "int", min = 0, max = 9, default = 0 }
    [run]
    command = ["python3", "-c", "import sys; print('value', (int(sys.argv[1]) - 7) ** 2 + 1)", "{x}"]
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
""")


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def test_resume_takes_the_runs_own_seed_and_lag_and_refuses_others(tmp_path: Path) -> None:
    task = tmp_path / "task.toml"
    task.write_text(TASK)
    db = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    done = runner.invoke(cli, ["--store", db, "run", str(task), "--name", "r", "--seed", "3", "--lag", "2",
                               "--budget", "2"])
    assert done.exit_code == 0, done.output
    again = runner.invoke(cli, ["--store", db, "resume", "r", "--seed", "3", "--lag", "2", "--budget", "+1"])
    assert again.exit_code == 0, again.output
    with open_store(db) as store:
        assert store.count(store.get_run("r").id) == 3
    for option in (["--seed", "5"], ["--lag", "0"]):
        refused = runner.invoke(cli, ["--store", db, "resume", "r", *option, "--budget", "+1"])
        assert refused.exit_code == 2
        assert refused.output == ("perftune: error: resume: run 'r' keeps its seed (3) and lag (2); "
                                  "start a new run to change them\n")
    helped = " ".join(runner.invoke(cli, ["resume", "--help"]).output.split())
    assert helped.count("A resumed run keeps the run's own: only that value is accepted.") == 2
