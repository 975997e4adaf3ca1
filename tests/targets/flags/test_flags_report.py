"""What the flags kind prints and records: the run name of the task file, command lines that can be
pasted anywhere, and a fallback to -O3 said in one line that show and the report repeat."""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.flags import _tune

PROGRAMS = Path(__file__).parents[3] / "src" / "perftune" / "targets" / "flags" / "programs"


@pytest.fixture
def task_dir(public_tmp_path: Path, flags_cache: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    shutil.copy(PROGRAMS / "stencil.c", public_tmp_path / "stencil.c")
    (public_tmp_path / "stencil.c").chmod(0o644)
    return public_tmp_path


def _flags_task(folder: Path, extra: str = "") -> Path:
    task = folder / "flags.toml"
    task.write_text(f'{extra}[target]\nkind = "flags"\nsources = ["stencil.c"]\nrun = ["64", "10"]\n'
                    'rel_tol = 1e-5\nparams = false\n')
    return task


def invoke(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_tuning_name_is_the_run_name_and_the_command_line_works_from_anywhere(task_dir, tmp_path,
                                                                             monkeypatch):
    task = _flags_task(task_dir, '[tuning]\nname = "stencil-flags"\nbudget = 4\n')
    db = f"sqlite:///{task_dir / 'p.db'}"
    elsewhere = task_dir / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    payload = json.loads(invoke("--store", db, "run", str(task), "--json"))
    assert payload["n_trials"] == 4  # [tuning] budget
    runs = json.loads(invoke("--store", db, "runs", "--json"))["runs"]
    assert [r["name"] for r in runs] == ["stencil-flags"]

    words = shlex.split(payload["command_line"])
    assert str(task_dir / "stencil.c") in words
    built = subprocess.run(payload["command_line"], shell=True, cwd=elsewhere, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert (elsewhere / "prog").exists()

    # A second run of the same file without [tuning] name takes the top-level name, made unique.
    plain = _flags_task(task_dir, 'name = "named"\n')
    invoke("--store", db, "run", str(plain), "--budget", "2")
    invoke("--store", db, "run", str(plain), "--budget", "2")
    names = [r["name"] for r in json.loads(invoke("--store", db, "runs", "--json"))["runs"]]
    assert names == ["stencil-flags", "named", "named-2"]


def test_bad_tuning_key_of_a_flags_task_is_one_line(task_dir):
    task = _flags_task(task_dir, '[tuning]\nname = 3\n')
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{task_dir / 'p.db'}", "run", str(task)])
    assert result.exit_code == 2
    assert result.output.strip() == f"perftune: error: {task}: key tuning.name: expected a run name " \
                                    "(a non-empty string)"


def test_absolute_options_keep_pasted_command_lines_working(tmp_path):
    (tmp_path / "include").mkdir()
    (tmp_path / "lib.o").write_text("")
    out = _tune._absolute_options(["-Iinclude", "-I", "include", "-DX=1", "lib.o", "-lm", "-L/usr/lib"],
                                  str(tmp_path))
    assert out == [f"-I{tmp_path}/include", "-I", f"{tmp_path}/include", "-DX=1", f"{tmp_path}/lib.o", "-lm",
                   "-L/usr/lib"]
    assert _tune._absolute_program("gcc") == "gcc"
    assert _tune._absolute_program("./bin/cc") == os.path.abspath("./bin/cc")


def test_a_fallback_to_O3_is_said_in_one_line_and_show_and_report_agree(task_dir, monkeypatch):
    # Every finalist is slower than -O3 in its interleaved confirmation, whatever the search measured.
    def slower(evaluator, a, b, n_runs):  # type: ignore[no-untyped-def]
        return [1.0, 1.01, 0.99] * 2, [1.2, 1.21, 1.19] * 2

    monkeypatch.setattr(_tune, "_interleaved", slower)
    task = _flags_task(task_dir, '[tuning]\nname = "fb"\n')
    db = f"sqlite:///{task_dir / 'p.db'}"
    printed = invoke("--store", db, "run", str(task), "--budget", "5")
    lines = printed.splitlines()
    assert "improvement over -O3: 1.000x (the final answer is -O3 itself)" in lines[0]
    note = lines[1]
    assert re.fullmatch(r"no flag set beat -O3 in the interleaved confirmation: [0-9.]+x in the search did "
                        r"not confirm \(best in the confirmation: 0\.833x\)", note), note
    assert lines[-1] == f"gcc -O3 {task_dir / 'stencil.c'} -o prog -lm"

    shown = invoke("--store", db, "show", "fb")
    assert "improvement over -O3: 1.000x (the final answer is -O3 itself)" in shown
    assert note in shown and f"final command line: {lines[-1]}" in shown

    report = task_dir / "fb.html"
    invoke("--store", db, "report", "fb", "-o", str(report))
    page = html.unescape(report.read_text())
    assert "improvement over -O3: 1.000x (the final answer is -O3 itself)" in page and note in page

    data = json.loads(invoke("--store", db, "show", "fb", "--json"))
    assert data["improvement"]["estimate"] == 1.0 and data["note"] == note


def test_a_winner_reduced_to_O3_says_so_and_show_agrees(task_dir, monkeypatch):
    # The confirmation favours the finalist, but none of its options survives the reduction.
    def faster(evaluator, a, b, n_runs):  # type: ignore[no-untyped-def]
        return [1.2, 1.21, 1.19] * 2, [1.0, 1.01, 0.99] * 2

    monkeypatch.setattr(_tune, "_interleaved", faster)
    monkeypatch.setattr(_tune, "reduce_flags", lambda evaluator, options: (["-O3"], {}))
    task = _flags_task(task_dir, 'name = "reduced"\n')
    db = f"sqlite:///{task_dir / 'p.db'}"
    payload = json.loads(invoke("--store", db, "run", str(task), "--budget", "4", "--json"))
    assert payload["flags"] == ["-O3"] and payload["speedup_over_O3"] == 1.0
    assert payload["note"] == ("the confirmed winner (1.200x in the confirmation) reduced to plain -O3: "
                               "none of its options made a difference beyond the noise")
    assert payload["improvement"]["text"] == "improvement over -O3: 1.000x (the final answer is -O3 itself)"
    shown = invoke("--store", db, "show", "reduced")
    assert payload["note"] in shown and payload["improvement"]["text"] in shown


def test_an_interrupted_run_answers_the_searchs_fastest_flags_and_command_line(task_dir):
    db = f"sqlite:///{task_dir / 'p.db'}"

    def interrupt(n_trials, speedup):  # type: ignore[no-untyped-def]
        if n_trials >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _tune.tune_flags([str(task_dir / "stencil.c")], ["64", "10"], rel_tol=1e-5, include_params=False,
                         budget=30, seed=1, store=db, name="cut", on_trial=interrupt,
                         seeds=["-O3 -funroll-loops"])
    best = json.loads(invoke("--store", db, "best", "cut"))
    assert set(best) == {"flags", "command_line"}  # as a finished run's, not the search's configuration
    assert best["flags"][0].startswith("-O") and best["command_line"].startswith("gcc ")
    assert str(task_dir / "stencil.c") in best["command_line"]
    shown = invoke("--store", db, "show", "cut")
    assert "improvement over -O3" in shown and "interrupted" in shown
    assert f"final command line: {best['command_line']}" in shown
