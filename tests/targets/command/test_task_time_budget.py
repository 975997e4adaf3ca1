"""A time budget ends a task-file run: candidates in flight are cancelled, with a reason, for any workers.

The elapsed time of the run is the behaviour under test; the budgets are a few seconds.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune import Status
from perftune.store import open_store

ALLOWANCE_S = 3.0  # stopping the sandboxed candidate and the worker, the final checkpoint, 2 shared cores

# The default configuration (x = 0) answers at once; every other candidate hangs far past the budget,
# well within its own step timeout: only the driver's clock can stop it.
HANGING = """
[space]
x = { type = "int", min = 0, max = 1000, default = 0 }

[run]
command = ["sh", "-c", "if [ \\"$0\\" != 0 ]; then sleep 60; fi; echo value=$0", "{x}"]
timeout_s = 120

[objective]
metric = "stdout_regex"
pattern = 'value=(\\d+)'
goal = "min"

[timing]
repeats = 1
warmup_runs = 0
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_hanging_candidates_are_cancelled_at_the_time_budget(public_tmp_path: Path, workers: int) -> None:
    from perftune.cli import cli

    task = public_tmp_path / "task.toml"
    task.write_text(HANGING)
    os.chmod(public_tmp_path, 0o755)
    db = str(public_tmp_path / "p.db")
    started = time.monotonic()
    args = ["--store", db, "run", str(task), "--budget", "3s", "--workers", str(workers), "--json"]
    res = CliRunner().invoke(cli, args)
    elapsed = time.monotonic() - started
    assert res.exit_code == 0, res.output
    assert elapsed < 3.0 + ALLOWANCE_S
    data = json.loads(res.output[res.output.index("{"):])
    assert data["stop_reason"] == "time" and data["best"]["config"] == {"x": 0}
    trials = open_store(db).trials(data["run"]["id"])
    cancelled = [t for t in trials if t.status is Status.CANCELLED]
    assert len(cancelled) == workers  # every worker was stuck in a candidate at the deadline
    assert all(t.reason == "time budget reached" for t in cancelled)
