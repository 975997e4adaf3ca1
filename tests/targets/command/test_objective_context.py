"""The command objective learns the incumbent and shares its risk model through the driver's context."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perftune.drive import EvalContext, Incumbent
from perftune.targets.command import CandidateError, load_task
from perftune.trial import TrialTimeout


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.toml"
    path.write_text(text)
    os.chmod(tmp_path, 0o755)
    return path


def test_adaptive_timeout_follows_the_incumbent_of_the_context(tmp_path: Path) -> None:
    text = """
[space]
delay = { type = "choice", options = ["0", "2"] }
[run]
command = ["sleep", "{delay}"]
timeout_s = 30
[timing]
repeats = 1
warmup_runs = 0
timeout_factor = 2
min_timeout_s = 0.5
"""
    task = load_task(write(tmp_path, text))
    fast = Incumbent(trial_id=0, value=0.01, samples=(0.01,), metrics={"wall_time": 0.01})
    with pytest.raises(TrialTimeout, match="adaptive limit"):
        task.objective({"delay": "2"}, context=EvalContext(trial_id=1, incumbent=fast))


CHECKED = """
[space]
mode = { type = "choice", options = ["good", "bad"] }

[run]
command = ["sh", "-c", 'echo "score 1"; [ $0 = good ] && echo fine || echo broken', "{mode}"]

[objective]
metric = "stdout_regex"
pattern = 'score (\\d+)'
goal = "min"

[check]
stdout = "none"

[check.expensive]
budget = 0.0

[timing]
repeats = 1
warmup_runs = 0
"""


def test_risk_model_travels_in_the_context_not_in_side_files(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, CHECKED.replace('stdout = "none"', 'stdout = "exact"')))
    first = EvalContext(trial_id=1, technique="random")
    assert task.objective({"mode": "good"}, context=first)["verified"] == 1.0  # a potential winner
    risk = first.published["command.risk"]
    assert risk["n_seen"] == 1 and risk["technique"] == {"random": [0, 2]}
    second = EvalContext(trial_id=2, technique="random", shared=dict(first.published))
    with pytest.raises(CandidateError, match="wrong output"):
        task.objective({"mode": "bad"}, context=second)
    # The second evaluation started from what the first published, and added its failure.
    assert second.published["command.risk"]["technique"] == {"random": [1, 3]}
    assert [bad for _, bad in second.published["command.risk"]["points"]][-1] == 1.0
    left = set(os.listdir(task.objective.state_dir))
    assert not left & {"incumbent.json", "risk.json", "deterministic.json"}, left


def test_detected_determinism_is_published(tmp_path: Path) -> None:
    text = """
[space]
n = { type = "int", min = 1, max = 5, default = 2 }
[run]
command = ["sh", "-c", "echo value=$0", "{n}"]
[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "max"
"""
    task = load_task(write(tmp_path, text))
    ctx = EvalContext(trial_id=0)
    assert task.objective({"n": 3}, context=ctx)["n_runs"] >= 2
    assert ctx.published["command.deterministic"] is True
    again = EvalContext(trial_id=1, shared=dict(ctx.published))
    assert task.objective({"n": 4}, context=again)["n_runs"] == 1.0  # told: one run is enough
