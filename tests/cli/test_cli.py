"""The perftune command: runs, listing, showing, best, resume, export, JSON output and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli

TASK = textwrap.dedent("""
    name = "square"
    [space]
    x = { type = "int", min = -20, max = 20, default = 0 }
    y = { type = "float", min = 0.0, max = 1.0, default = 0.5 }
    [run]
    command = ["{python}", "-c", "print('value', ({x} - 3) ** 2 + {y})"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([-0-9.e]+)'
    goal = "min"
    [timing]
    repeats = 1
    warmup_runs = 0
    [check]
    stdout = "none"   # the output is the metric itself, different for every configuration
""")


@pytest.fixture
def tmp_path(public_tmp_path):
    return public_tmp_path  # candidates run as an unprivileged user: the task folder must be readable


def write_task(tmp_path: Path, text: str = TASK, name: str = "task.toml") -> Path:
    path = tmp_path / name
    path.write_text(text.replace("{python}", "python3"))
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_run_runs_show_best_export_and_json(tmp_path):
    task = write_task(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    result = invoke("--store", db, "run", str(task), "--budget", "12", "--seed", "1", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["schema"] == 1
    assert payload["counts"] == {"ok": 12}
    assert payload["best"]["value"] <= payload["default"]["value"]
    assert payload["run"]["name"] == "square"

    runs = json.loads(invoke("--store", db, "runs", "--json").output)
    assert runs["schema"] == 1 and [r["name"] for r in runs["runs"]] == ["square"]
    assert runs["runs"][0]["trials"] == 12

    shown = json.loads(invoke("--store", db, "show", "latest", "--json").output)
    assert len(shown["trials"]) == 12 and shown["run"]["name"] == "square"
    assert shown["best"] == payload["best"] or shown["best"]["value"] == payload["best"]["value"]

    best = invoke("--store", db, "best", "1")
    assert json.loads(best.output) == payload["best"]["config"]

    out = tmp_path / "trials.csv"
    assert invoke("--store", db, "export", "square", "--format", "csv", "-o", str(out)).exit_code == 0
    assert len(out.read_text().strip().splitlines()) == 13
    # The file is replaced whole (a temporary file renamed over it): a link named with -o is followed.
    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("old\n")
    (tmp_path / "link.csv").symlink_to(elsewhere)
    linked = invoke("--store", db, "export", "square", "--format", "csv", "-o", str(tmp_path / "link.csv"))
    assert linked.exit_code == 0, linked.output
    assert elsewhere.read_text() == out.read_text() and (tmp_path / "link.csv").is_symlink()
    assert not list(tmp_path.glob(".*.tmp"))
    # -o - is standard output (it wrote a file named "-"), the same rows; a Kernel Tuner cache needs a file.
    piped = invoke("--store", db, "export", "square", "--format", "csv", "-o", "-")
    assert piped.exit_code == 0 and piped.output == out.read_text()
    as_json = invoke("--store", db, "export", "square", "--format", "json", "-o", "-").output
    assert len(json.loads(as_json)["trials"]) == 12
    assert not (Path.cwd() / "-").exists()
    kt = CliRunner().invoke(cli, ["--store", db, "export", "square", "--format", "kt", "-o", "-"])
    assert kt.exit_code == 2 and "a Kernel Tuner cache is a file" in kt.output

    # A second run of the same task gets its own name.
    again = json.loads(invoke("--store", db, "run", str(task), "--budget", "3", "--json").output)
    assert again["run"]["name"] == "square-2"


def test_resume_extends_a_finished_run(tmp_path):
    task = write_task(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert invoke("--store", db, "run", str(task), "--budget", "6", "--seed", "2").exit_code == 0
    result = invoke("--store", db, "resume", "latest", "--budget", "+4", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(invoke("--store", db, "show", "latest", "--json").output)
    ids = [t["id"] for t in shown["trials"]]
    assert sorted(ids) == list(range(10))


def test_warm_start_seeds_a_new_run_with_old_bests(tmp_path):
    task = write_task(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    first = json.loads(
        invoke("--store", db, "run", str(task), "--budget", "15", "--seed", "3", "--json").output)
    second = json.loads(invoke("--store", db, "run", str(task), "--budget", "3", "--warm-start", "square",
                               "--json").output)
    assert second["best"]["config"] == first["best"]["config"]


@pytest.mark.parametrize("case", ["empty range", "unknown type in space",
                                  "constraint names unknown parameter", "unsatisfiable constraints"])
def test_bad_task_is_one_clear_line_and_writes_nothing(tmp_path, case):
    text = TASK
    if case == "empty range":
        text = text.replace("min = -20, max = 20, default = 0", "min = 5, max = 1")
    elif case == "unknown type in space":
        text = text.replace('type = "int"', 'type = "integer"')
    elif case == "constraint names unknown parameter":
        text = text.replace('name = "square"', 'name = "square"\nconstraints = ["z > 1"]')
    else:
        text = text.replace('name = "square"', 'name = "square"\nconstraints = ["x > 100"]')
    task = write_task(tmp_path, text)
    db = tmp_path / "p.db"
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{db}", "run", str(task), "--budget", "5"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("perftune: error:"), result.output
    assert "Traceback" not in result.output
    if db.exists():  # nothing written: no run was created
        runs = json.loads(invoke("--store", f"sqlite:///{db}", "runs", "--json").output)["runs"]
        assert runs == []


def test_budget_of_zero_and_bad_budget(tmp_path):
    task = write_task(tmp_path)
    for bad in ("0", "ten", "-5m"):
        result = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path / 'p.db'}", "run", str(task),
                                          "--budget", bad])
        assert result.exit_code == 2 and result.output.startswith("perftune: error: --budget"), result.output
    assert not (tmp_path / "p.db").exists()


def test_malformed_store_url_is_one_line_without_traceback(tmp_path):
    task = write_task(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "perftune", "--store", "nosuchdb://x/y", "run", str(task),
                           "--budget", "2"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "perftune: error:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_run_or_missing_store_is_a_clear_error(tmp_path):
    task = write_task(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert invoke("--store", db, "run", str(task), "--budget", "2").exit_code == 0
    result = CliRunner().invoke(cli, ["--store", db, "show", "nope"])
    assert result.exit_code == 2 and "nope" in result.output
    # A typo in the store path must not create an empty store.
    typo = tmp_path / "typo.db"
    result = CliRunner().invoke(cli, ["--store", str(typo), "runs"])
    assert result.exit_code == 2 and result.output.startswith("perftune: error:")
    assert not typo.exists()


def test_help_is_there_for_newcomers():
    result = invoke("--help")
    assert "perftune run" in result.output and "--store" in result.output
    assert "--budget" in invoke("run", "--help").output


def test_resume_bad_input_is_one_line_and_leaves_data_untouched(tmp_path):
    task = write_task(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert invoke("--store", db, "run", str(task), "--budget", "4", "--seed", "1").exit_code == 0
    before = json.loads(invoke("--store", db, "show", "latest", "--json").output)["trials"]

    missing = CliRunner().invoke(cli, ["--store", db, "resume", "no-such-run"])
    assert missing.exit_code == 2 and "no-such-run" in missing.output

    task.write_text(task.read_text().replace("max = 1.0", "max = 2.0"))  # another space
    other_space = CliRunner().invoke(cli, ["--store", db, "resume", "square", "--budget", "+2"])
    assert other_space.exit_code == 2 and "different space" in other_space.output

    task.write_text(task.read_text().replace("max = 2.0", "max = 1.0").replace("- 3) ** 2", "- 4) ** 2"))
    other_objective = CliRunner().invoke(cli, ["--store", db, "resume", "square", "--budget", "+2"])
    assert other_objective.exit_code == 2 and "changed its objective" in other_objective.output

    bad_scheduler = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "2",
                                             "--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"])
    assert bad_scheduler.exit_code == 2 and "Dask scheduler" in bad_scheduler.output

    after = json.loads(invoke("--store", db, "show", "square", "--json").output)["trials"]
    assert after == before


@pytest.mark.slow
def test_run_dispatches_a_flags_target_task(tmp_path):
    import shutil

    programs = Path(__file__).parents[2] / "src" / "perftune" / "targets" / "flags" / "programs"
    shutil.copy(programs / "stencil.c", tmp_path / "stencil.c")
    (tmp_path / "stencil.c").chmod(0o644)
    task = tmp_path / "flags.toml"
    task.write_text('[target]\nkind = "flags"\nsources = ["stencil.c"]\nrun = ["64", "10"]\nrel_tol = 1e-5\n')
    result = invoke("--store", f"sqlite:///{tmp_path / 'p.db'}", "run", str(task), "--budget", "10s",
                    "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    assert payload["schema"] == 1 and payload["n_trials"] >= 2
    assert payload["command_line"].startswith("gcc") and "stencil.c" in payload["command_line"]

    # As for any task file: --name names the run, the output names it and counts its trials as show
    # does, and resume says why a flags run cannot be resumed.
    db = f"sqlite:///{tmp_path / 'p.db'}"
    result = invoke("--store", db, "run", str(task), "--budget", "4", "--name", "mine")
    assert result.exit_code == 0, result.output
    shown = json.loads(invoke("--store", db, "show", "mine", "--json").output)
    listed = ", ".join(f"{n} {k}" for k, n in sorted(shown["counts"].items()))
    assert f"run mine (id {shown['run']['id']}): {sum(shown['counts'].values())} trials ({listed}); " \
           "improvement over -O3" in result.output
    refused = CliRunner().invoke(cli, ["--store", db, "resume", "mine"])
    assert refused.exit_code == 2 and "is a gcc flags run, which cannot be resumed" in refused.output

    bad = tmp_path / "bad.toml"
    bad.write_text('[target]\nkind = "rust"\n')
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path / 'p.db'}", "run", str(bad)])
    assert result.exit_code == 2 and "target.kind" in result.output


def test_resume_refuses_a_run_without_the_fingerprint_of_its_task(tmp_path):
    # The task path comes from the store: a store from elsewhere could name any task file on this machine.
    import sqlite3

    task = write_task(tmp_path)
    db_file = tmp_path / "p.db"
    db = f"sqlite:///{db_file}"
    assert invoke("--store", db, "run", str(task), "--budget", "3", "--seed", "2").exit_code == 0
    with sqlite3.connect(db_file) as conn:
        (settings,) = conn.execute("select settings from runs").fetchone()
        data = json.loads(settings)
        del data["task_fingerprint"]
        conn.execute("update runs set settings = ?", (json.dumps(data),))
    result = CliRunner().invoke(cli, ["--store", db, "resume", "latest", "--budget", "+2"])
    assert result.exit_code != 0
    assert "records no fingerprint of its task file" in result.output and "Traceback" not in result.output
    shown = json.loads(invoke("--store", db, "show", "latest", "--json").output)
    assert len(shown["trials"]) == 3  # nothing ran, nothing lost


def test_runs_says_when_a_running_runs_driver_is_gone(tmp_path):
    import os

    from perftune.store import open_store

    db = f"sqlite:///{tmp_path / 'p.db'}"
    with open_store(db) as st:
        run = st.create_run("killed", None, {}, "min", None)
    pid = os.fork()
    if pid == 0:  # a driver that takes the run's lease, then dies without a word (SIGKILL)
        with open_store(db) as st:
            st.acquire_lease(run.id)
        os._exit(0)
    os.waitpid(pid, 0)
    listed = invoke("--store", db, "runs")
    words = listed.output.split()
    assert listed.exit_code == 0 and "(no" in words and "driver)" in words
    as_json = json.loads(invoke("--store", db, "runs", "--json").output)
    assert [r["status"] for r in as_json["runs"]] == ["running"]  # the JSON keeps the stored status
