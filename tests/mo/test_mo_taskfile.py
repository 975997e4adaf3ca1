"""Several objectives and constraints in task files: ``[objective] metrics = [...]`` and ``constraints``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune import PerftuneError
from perftune.cli import cli
from perftune.search import dominates
from perftune.store import open_store
from perftune.targets.command import load_task

SCRIPT = """\
import json, sys
n = int(sys.argv[1])
# A made-up trade-off: the size falls with n, the "error" grows with it.
print(json.dumps({"size": 100 - 10 * n, "error": n * n}))
"""


def _task(tmp_path: Path, objective: str) -> Path:
    (tmp_path / "prog.py").write_text(SCRIPT)
    task = tmp_path / "task.toml"
    task.write_text(textwrap.dedent(f"""\
        name = "mo"
        [space]
        n = {{ type = "int", min = 0, max = 5, default = 0 }}
        [run]
        command = ["python3", "{{task_dir}}/prog.py", "{{n}}"]
        timeout_s = 30
        [objective]
        {objective}
        [timing]
        repeats = 1
        warmup_runs = 0
        [check]
        stdout = "none"
        """))
    return task


def test_metrics_key_runs_a_multi_objective_search_and_reports_the_front(tmp_path: Path) -> None:
    task = _task(tmp_path, 'metrics = ["stdout_json", "max_rss"]\nkey = "size"\ngoal = ["min", "min"]')
    db = f"sqlite:///{tmp_path / 'mo.db'}"
    out = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "6", "--seed", "0", "--json"],
                             catch_exceptions=False)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["objectives"]["names"] == ["stdout_json", "max_rss"]
    front = [(t["values"]["stdout_json"], t["values"]["max_rss"]) for t in doc["pareto"]["trials"]]
    store = open_store(db)
    trials = store.trials(store.get_run("latest").id)
    measured = [(t.metrics["stdout_json"], t.metrics["max_rss"]) for t in trials if t.ok]
    assert len(measured) == 6 and front
    assert sorted(front) == sorted(v for v in set(measured) if not any(dominates(w, v) for w in measured))
    # The smallest size is on it.
    assert any(t["values"]["stdout_json"] == 50.0 for t in doc["pareto"]["trials"])
    # run --json and show --json give the front in one shape.
    shown = CliRunner().invoke(cli, ["--store", db, "show", "latest", "--json"], catch_exceptions=False)
    assert json.loads(shown.output)["pareto"] == doc["pareto"]


def test_constraints_key_bounds_a_reported_metric(tmp_path: Path) -> None:
    task = _task(tmp_path, 'metric = "stdout_json"\nkey = "size"\ngoal = "min"\n'
                           'constraints = ["wall_time <= 0.000001"]')
    spec = load_task(task, prepare=False)
    assert spec.constraints == ("wall_time <= 0.000001",)
    db = f"sqlite:///{tmp_path / 'c.db'}"
    out = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "3", "--seed", "0", "--json"],
                             catch_exceptions=False)
    doc = json.loads(out.output)
    assert doc["best"] is None  # no run is that fast: every trial is measured but infeasible
    assert doc["counts"] == {"ok": 3}


@pytest.mark.parametrize("objective, message", [
    ('metrics = ["stdout_json", "size"]\nkey = "size"\ngoal = "min"', "'size' cannot be a second objective"),
    ('metrics = "wall_time"', "expected a list of metric names"),
    ('metrics = ["wall_time", "max_rss"]\ngoal = ["min"]', 'expected one "min" or "max" per metric'),
    ('metric = "max_rss"\nmetrics = ["wall_time", "max_rss"]', "must be the first of metrics"),
    ('constraints = ["accuracy >= 0.9"]', "'accuracy' is not reported by a run"),
    ('constraints = ["wall_time fast"]', "cannot read 'wall_time fast'"),
])
def test_bad_objective_keys_are_one_line_task_errors(tmp_path: Path, objective: str, message: str) -> None:
    task = _task(tmp_path, objective)
    with pytest.raises(PerftuneError) as info:
        load_task(task, prepare=False)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(task))
