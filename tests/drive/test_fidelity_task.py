"""A task file's fidelity parameter: a real command run at growing levels, and bad declarations."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.errors import TaskError
from perftune.store import open_store
from perftune.targets.command import load_task
from perftune.trial import Status

PROGRAM = """import sys
a, n = int(sys.argv[1]), int(sys.argv[2])
print(f"error: {(a - 3) ** 2 + 100.0 / n}")
"""

TASK = """name = "sim"
[space]
a = { type = "int", min = 0, max = 40, default = 8 }
n = { type = "int", fidelity = [100, 1000, 10000] }
[run]
command = ["python3", "{task_dir}/sim.py", "{a}", "{n}"]
[objective]
metric = "stdout_regex"
pattern = 'error: ([0-9.e+-]+)'
goal = "min"
[check]
stdout = "none"
"""


def _write(folder: Path, text: str) -> Path:
    (folder / "sim.py").write_text(PROGRAM)
    task = folder / "task.toml"
    task.write_text(text)
    for f in (folder / "sim.py", task):
        f.chmod(0o644)
    return task


@pytest.mark.parametrize("workers", [1, 2])
def test_a_command_runs_at_growing_fidelity_and_is_promoted_by_asha(public_tmp_path: Path,
                                                                    workers: int) -> None:
    task = _write(public_tmp_path, TASK)
    db = f"sqlite:///{public_tmp_path / 'r.db'}"
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "5", "--seed", "0",
                                      "--workers", str(workers), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        info = store.get_run("sim")
        trials = store.trials(info.id)
        best = store.best(info.id)
    full = [t for t in trials if t.status is Status.OK]
    pruned = [t for t in trials if t.status is Status.PRUNED]
    # The budget counts full evaluations; pruned ones are extra (41 values of a: never exhausted here).
    assert len(full) == 5 and pruned, [(t.status, t.reason) for t in trials]
    for t in trials:
        assert set(t.config) == {"a"}  # the fidelity parameter is not searched
        a = t.config["a"]
        # The command really ran at each level it reached: 100, then 1000, then 10000.
        for step, n in zip(sorted(t.intermediate), (100, 1000, 10000), strict=False):
            assert t.intermediate[step] == pytest.approx((a - 3) ** 2 + 100.0 / n)
    for t in full:
        assert sorted(t.intermediate) == [1, 2, 3]
        assert t.value == pytest.approx((t.config["a"] - 3) ** 2 + 0.01)
    for t in pruned:
        assert t.reason is not None and t.reason.startswith("pruned at step ")
        assert t.reason.endswith(("(n=100)", "(n=1000)"))
    assert best is not None and best.ok
    shown = CliRunner().invoke(cli, ["--store", db, "show", "sim"], catch_exceptions=False)
    assert f"{len(pruned)} pruned" in shown.output and "not full evaluations" in shown.output


BAD = [
    ('n = { type = "int", fidelity = [1000] }', "space.n.fidelity", "at least 2 positive numbers"),
    ('n = { type = "int", fidelity = [1000, 100] }', "space.n.fidelity", "levels must increase"),
    ('n = { type = "int", fidelity = [1, 2.5] }', "space.n.fidelity", 'type "int" needs integer levels'),
    ('n = { type = "int", fidelity = ["small", "big"] }', "space.n.fidelity", "positive numbers"),
    ('n = { type = "int", fidelity = 1000 }', "space.n.fidelity", "expected an array"),
    ('n = { type = "choice", fidelity = [1, 2] }', "space.n.type", '"int" or "float"'),
    ('n = { type = "int", min = 1, fidelity = [1, 2] }', "space.n.min", "takes only type, fidelity and eta"),
    ('n = { type = "int", fidelity = [1, 2], eta = 1 }', "space.n.eta", "at least 2"),
    ('n = { fidelity = [1, 2] }\nm = { fidelity = [3, 4] }', "space.m.fidelity",
     "a second fidelity parameter"),
]


@pytest.mark.parametrize(("line", "key", "message"), BAD)
def test_a_bad_fidelity_declaration_is_one_line_naming_file_and_key(public_tmp_path: Path, line: str,
                                                                    key: str, message: str) -> None:
    text = TASK.replace('n = { type = "int", fidelity = [100, 1000, 10000] }', line)
    task = _write(public_tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(task, prepare=False)
    error = str(info.value)
    assert "\n" not in error and error.startswith(f"{task}:")
    assert f": {key}: " in error and message in error
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{public_tmp_path / 'x.db'}", "run", str(task)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert key in result.output


def test_a_space_of_only_a_fidelity_parameter_is_refused(public_tmp_path: Path) -> None:
    text = TASK.replace('a = { type = "int", min = 0, max = 40, default = 8 }\n', "")
    task = _write(public_tmp_path, text)
    with pytest.raises(TaskError, match="only a fidelity parameter"):
        load_task(task, prepare=False)
