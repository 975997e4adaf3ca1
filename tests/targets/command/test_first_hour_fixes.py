"""A new user's first hour with task files: an unchecked output is said at the start of a run, and
mistakes that surfaced only when the default configuration ran (or once the run was in the store) are
one line naming the file, the line and the key when the task file is loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.errors import TaskError
from perftune.store import open_store
from perftune.targets.command import load_task

BASE = """name = "t"
{top}
[space]
reps = {{ type = "int", min = 1, max = 4, default = 2 }}
{space}
[run]
command = ["sh", "-c", "echo answer $0", "{{reps}}"]
timeout_s = 10
{run}
[objective]
metric = "stdout_regex"
pattern = 'answer (\\d+)'
goal = "max"
{objective}
[timing]
repeats = 1
warmup_runs = 0
{check}
"""


def _task_file(folder: Path, *, top: str = "", space: str = "", run: str = "", objective: str = "",
               check: str = "") -> Path:
    path = folder / "task.toml"
    path.write_text(BASE.format(top=top, space=space, run=run, objective=objective, check=check))
    path.chmod(0o644)
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def _refused(path: Path) -> str:
    with pytest.raises(TaskError) as caught:
        load_task(path, prepare=False)
    message = str(caught.value)
    assert "\n" not in message
    return message


NOTE = ("the candidates' output is not checked (the task has no [check] stdout or files), so a "
        'configuration that prints a wrong answer can win; add [check] stdout = "exact" (or "numeric"), '
        'or stdout = "none" to say that is on purpose')


# -- M1: no output check is said, once, when a run starts measuring ---------------------------------


def test_a_task_without_an_output_check_says_so_at_its_first_evaluation_only(
        public_tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _task_file(public_tmp_path)
    task = load_task(path)
    assert capsys.readouterr().err == ""  # loading is not a run: a bad store or budget stays one line
    task.objective({"reps": 3})
    task.objective({"reps": 4})
    assert capsys.readouterr().err.splitlines() == [f"perftune: note: {path}: {NOTE}"]


@pytest.mark.parametrize("check", ['[check]\nstdout = "none"', "[check]\nstdout = false",
                                   '[check]\nstdout = "exact"', '[check]\nfiles = ["{scratch}/x"]'])
def test_a_declared_check_or_an_explicit_none_gets_no_note(
        public_tmp_path: Path, capsys: pytest.CaptureFixture[str], check: str) -> None:
    path = _task_file(public_tmp_path, check=check)
    if "files" in check:  # the run writes the file that is compared
        path.write_text(path.read_text().replace('"echo answer $0"', '"echo answer $0; : > x"'))
    load_task(path).objective({"reps": 2})
    assert capsys.readouterr().err == ""


def test_a_run_of_several_workers_says_it_once(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path)
    db = public_tmp_path / "p.db"
    perftune = [sys.executable, "-m", "perftune", "--store", str(db), "run", str(path)]
    done = subprocess.run([*perftune, "--budget", "4", "--workers", "2", "--seed", "0", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "output is not checked" in line] == [
        f"perftune: note: {path}: {NOTE}"]
    bad = subprocess.run([*perftune, "--budget", "0"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1  # a mistake, nothing measured: one line


# -- L6: mistakes found only when the default configuration ran --------------------------------------


def test_a_missing_stdin_file_is_refused_at_load_with_its_line(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path, run='stdin = "nosuch.txt"')
    assert _refused(path) == (f"{path}:{_line_of(path, 'stdin =')}: run.stdin: file 'nosuch.txt' does not "
                              f"exist ({public_tmp_path / 'nosuch.txt'})")
    (public_tmp_path / "nosuch.txt").mkdir()
    assert _refused(path).endswith("run.stdin: file 'nosuch.txt' is not a regular file "
                                   f"({public_tmp_path / 'nosuch.txt'})")


def test_a_stdin_made_per_candidate_or_present_is_accepted(public_tmp_path: Path) -> None:
    (public_tmp_path / "in.txt").write_text("1\n")
    load_task(_task_file(public_tmp_path, run='stdin = "in.txt"'), prepare=False)
    load_task(_task_file(public_tmp_path, run='stdin = "{task_dir}/in.txt"'), prepare=False)
    load_task(_task_file(public_tmp_path, run='stdin = "{scratch}/made-by-the-build"'), prepare=False)


@pytest.mark.parametrize("where, text, key", [
    ("top", 'env = { "A=B" = "1" }', "env.A=B"),
    ("run", 'env = { "A=B" = "1" }', "run.env.A=B"),
    ("top", 'env = { "" = "1" }', "env."),
])
def test_a_bad_environment_variable_name_is_refused_at_load(public_tmp_path: Path, where: str, text: str,
                                                            key: str) -> None:
    path = _task_file(public_tmp_path, **{where: text})
    name = "A=B" if "A=B" in text else ""
    why = "holds '='" if name else "is empty"
    assert _refused(path) == (f"{path}:{_line_of(path, 'env =')}: {key}: environment variable name {name!r} "
                              f"{why}: no program can be started with it")


def test_a_nul_byte_in_an_environment_value_is_refused_at_load(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path, top='env = { A = "x\\u0000y" }')
    assert _refused(path).endswith("env.A: holds a NUL byte, which no environment variable can hold")


# -- L6: parameter names and when= ------------------------------------------------------------------


def test_a_parameter_name_that_no_expression_can_name_is_refused(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path, space='"a-b" = { type = "int", min = 1, max = 2 }',
                      top='constraints = ["a-b > 1"]')
    line = _line_of(path, '"a-b" =')
    assert _refused(path) == (f"{path}:{line}: space.a-b: parameter name 'a-b' is not an identifier "
                              "(letters, digits and _, not starting with a digit), so constraints and when "
                              "could not name it: rename it (e.g. a_b) in [space] and in the templates")
    path = _task_file(public_tmp_path, space='class = { type = "int", min = 1, max = 2 }')
    assert "space.class: parameter name 'class' is a Python keyword" in _refused(path)


def test_an_identifier_parameter_name_works_in_constraints(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path, space='a_b = { type = "int", min = 1, max = 2 }',
                      top='constraints = ["a_b > 1"]')
    task = load_task(path, prepare=False)
    assert task.space.is_valid({"reps": 2, "a_b": 2}) and not task.space.is_valid({"reps": 2, "a_b": 1})


@pytest.mark.parametrize("when, message", [
    ("repz == 2", "space.step.when: when='repz == 2' names unknown parameter 'repz' (did you mean 'reps'?)"),
    ("reps ==", "space.step.when: expression 'reps ==': syntax error: invalid syntax"),
])
def test_a_bad_when_is_reported_at_its_own_line(public_tmp_path: Path, when: str, message: str) -> None:
    path = _task_file(public_tmp_path,
                      space=f'step = {{ type = "choice", options = [1, 2], default = 1, when = "{when}" }}')
    assert _refused(path) == f"{path}:{_line_of(path, 'step =')}: {message}"


# -- several objectives with a fidelity parameter ----------------------------------------------------

FIDELITY_MULTI = dict(space='n = { type = "int", fidelity = [10, 100] }',
                      objective='metrics = ["stdout_regex", "max_rss"]')


def test_fidelity_levels_with_several_objectives_are_refused_at_load(public_tmp_path: Path) -> None:
    path = _task_file(public_tmp_path, **FIDELITY_MULTI)
    assert _refused(path) == (
        f"{path}:{_line_of(path, 'metrics =')}: objective.metrics: pruning a run of several objectives "
        "(stdout_regex, max_rss) is not supported, and the fidelity levels of space.n prune: drop the "
        "fidelity levels or keep one metric")
    db = public_tmp_path / "p.db"
    result = CliRunner().invoke(cli, ["--store", str(db), "run", str(path), "--budget", "2"])
    assert result.exit_code == 2 and "objective.metrics: pruning a run of several objectives" in result.output
    assert "Traceback" not in result.output
    if db.exists():  # no empty run was created in the store
        with open_store(db, read_only=True) as st:
            assert st.list_runs() == []
