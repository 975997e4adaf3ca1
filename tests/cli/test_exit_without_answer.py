"""``perftune run`` and ``perftune resume`` exit with status 3 when the run has no final answer.

Before, a run in which no trial succeeded printed "no successful trial" and exited 0, so that a script
wrapping ``perftune run`` could not tell a failed tuning from a good one without reading its text.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from perftune.cli import EXIT_NO_ANSWER, cli

# The default runs for 1.5 s: the preparation measures it, then the 1 s time budget ends the run with
# its first trial cancelled, so that no trial succeeds.
SLOW = textwrap.dedent("""
    name = "slow"
    [space]
    x = { type = "int", min = 1, max = 3, default = 1 }
    [run]
    command = ["sleep", "1.5"]
    [check]
    stdout = "none"
    [objective]
    metric = "wall_time"
""")

FAST = SLOW.replace('"sleep", "1.5"', '"true"')


@pytest.fixture
def tmp_path(public_tmp_path):
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def _run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_run_without_a_successful_trial_exits_3(tmp_path, as_json):
    (tmp_path / "task.toml").write_text(SLOW)
    db = str(tmp_path / "s.db")
    result = _run("--store", db, "run", str(tmp_path / "task.toml"), "--budget", "1s",
                  *(["--json"] if as_json else []))
    assert EXIT_NO_ANSWER == 3
    assert result.exit_code == EXIT_NO_ANSWER, result.output
    if as_json:
        assert json.loads(result.output)["best"] is None
    else:
        assert "no successful trial" in result.output
    # What was measured is kept: the run is in the store.
    shown = _run("--store", db, "show", "slow", "--json")
    assert shown.exit_code == 0 and json.loads(shown.output)["run"]["name"] == "slow"


def test_a_run_with_an_answer_exits_0(tmp_path):
    (tmp_path / "task.toml").write_text(FAST)
    result = _run("--store", str(tmp_path / "s.db"), "run", str(tmp_path / "task.toml"), "--budget", "3")
    assert result.exit_code == 0, result.output
