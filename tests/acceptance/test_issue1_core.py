"""Acceptance tests of issue [1] (the core): what a demanding user tries first, with real parts only.

Python API (tune, Tuner ask/tell, Budget, metrics, seeds, the cache, validity), the SQLite store
(environment, export, default location) and the ``perftune`` command (budgets, JSON, progress, bad
input), each checked the way the issue words it.
"""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from acceptance_helpers import PERFTUNE, SQUARE, one_line_error, perftune_json, write_task
from acceptance_helpers import perftune as run_cli

import perftune
from perftune import Budget, Status, Tuner
from perftune.errors import (
    BudgetError,
    ExpressionError,
    PerftuneError,
    SpaceError,
    StoreError,
    UnsatisfiableError,
)
from perftune.space import Bool, Choice, Float, Int, Pow2, Space
from perftune.store import open_store


def quadratic(config):
    return (config["x"] - 3) ** 2 + (config["y"] - 0.25) ** 2


def plane() -> Space:
    return Space({"x": Int(-10, 10, default=0), "y": Float(0.0, 1.0, default=0.5)})


def runs_in(url: str) -> list[str]:
    store = open_store(url)
    try:
        return [r.name for r in store.list_runs()]
    finally:
        store.close()


# ---------------------------------------------------------------- budgets


def test_time_budget_cancels_in_flight_records_them_cancelled_and_does_not_count_them(tmp_path):
    def slow(config):
        time.sleep(0.3)
        return quadratic(config)

    url = f"sqlite:///{tmp_path / 'p.db'}"
    result = perftune.tune(slow, plane(), budget=Budget(evals=10_000, seconds=1.0), workers=2, store=url)
    assert result.stop_reason == "time"
    cancelled = [t for t in result.trials if t.status is Status.CANCELLED]
    assert cancelled, "two evaluations of 0.3 s were in flight at the 1 s limit: they must be cancelled"
    assert all(t.value is None and t.reason == "time budget reached" for t in cancelled)
    store = open_store(url)
    stored = store.trials(result.run_id)
    assert sorted(t.id for t in stored if t.status is Status.CANCELLED) == sorted(t.id for t in cancelled)
    # Cancelled evaluations are recorded but do not count: the best is among the completed ones.
    assert store.count(result.run_id, Status.OK) == len([t for t in result.trials if t.ok])
    assert store.best(result.run_id).status is Status.OK


def test_evaluation_budget_counts_failures_and_timeouts_in_ask_tell():
    tuner = Tuner(plane(), seed=1, budget=6)
    told = []
    while (trial := tuner.ask()) is not None:
        if len(told) % 3 == 0:
            tuner.tell(trial, error="the compiler crashed")
        elif len(told) % 3 == 1:
            tuner.tell(trial, status=Status.TIMEOUT)
        else:
            tuner.tell(trial, quadratic(trial.config))
        told.append(trial.id)
    assert len(told) == 6 and len(tuner.trials) == 6
    statuses = [t.status for t in tuner.trials]
    assert statuses.count(Status.FAILED) == 2 and statuses.count(Status.TIMEOUT) == 2
    assert {t.reason for t in tuner.trials if t.status is Status.FAILED} == {"the compiler crashed"}


def test_patience_counts_trials_without_improvement_and_target_works_for_max():
    # A strictly improving objective never runs out of patience.
    calls = []

    def improving(config):
        calls.append(1)
        return -len(calls)

    result = perftune.tune(improving, plane(), budget=Budget(evals=25, patience=3), seed=2)
    assert result.stop_reason == "budget" and len(result.trials) == 25
    # goal="max": the target is reached when the value is at least the target.
    space = Space({"n": Int(0, 1000, default=0)})
    hit = perftune.tune(
        lambda c: float(c["n"]), space, budget=Budget(evals=2000, target=900.0), goal="max", seed=3
    )
    assert hit.stop_reason == "target" and hit.best.value >= 900 and len(hit.trials) < 2000


def test_budget_given_as_duration_string():
    result = perftune.tune(quadratic, plane(), budget="1s", seed=None)
    assert result.stop_reason == "time" and len(result.trials) > 5


@pytest.mark.parametrize("bad", [0, -3, True, "0s", "ten", 2.5])
def test_bad_budget_is_a_budget_error(bad):
    with pytest.raises(BudgetError):
        perftune.tune(quadratic, plane(), budget=bad)


@pytest.mark.parametrize(
    "bad", [{"budget": 0}, {"budget": "0s"}, {"budget": 5, "workers": 0}, {"budget": 5, "executor": "ray"}]
)
def test_bad_arguments_to_tune_write_nothing_to_the_store(tmp_path, bad):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    open_store(url).close()
    with pytest.raises(PerftuneError):
        perftune.tune(quadratic, plane(), store=url, **bad)
    assert runs_in(url) == []


def test_negative_timeout_is_refused():
    with pytest.raises(PerftuneError, match="timeout"):
        perftune.tune(quadratic, plane(), budget=3, timeout_s=-1, workers=2)


# ---------------------------------------------------------------- objectives, metrics, failures


def test_metric_mapping_optimises_one_metric_and_stores_the_others(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"

    def objective(config):
        return {"time": quadratic(config), "size": 100.0 + config["x"], "energy": 2.0}

    result = perftune.tune(objective, plane(), budget=15, seed=4, metric="time", store=url, name="metrics")
    assert result.best.value == min(t.metrics["time"] for t in result.trials if t.ok)
    store = open_store(url)
    stored = store.trials(store.get_run("metrics").id)
    assert len(stored) == 15
    for t in stored:
        assert t.metrics == {"time": t.value, "size": 100.0 + t.config["x"], "energy": 2.0}
    assert store.get_run("metrics").metric == "time"
    out = tmp_path / "metrics.csv"
    store.export(store.get_run("metrics").id, "csv", out)
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert len(rows) == 15 and {"metric.size", "metric.energy", "metric.time"} <= set(rows[0])


def test_raising_objective_records_failed_with_the_message_in_the_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"

    def objective(config):
        if config["x"] % 2:
            raise RuntimeError(f"odd x={config['x']} does not compile")
        return quadratic(config)

    result = perftune.tune(objective, plane(), budget=20, seed=5, store=url)
    store = open_store(url)
    failed = [t for t in store.trials(result.run_id) if t.status is Status.FAILED]
    assert failed and all(f"odd x={t.config['x']} does not compile" in t.reason for t in failed)
    assert store.count(result.run_id) == 20


def test_ask_tell_failures_and_metrics_reach_the_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    tuner = Tuner(plane(), seed=0, store=url, name="own-loop", metric="t")
    a, b, c = tuner.ask(), tuner.ask(), tuner.ask()
    tuner.tell(a, error="linker error: undefined symbol")
    tuner.tell(b, status=Status.TIMEOUT)
    tuner.tell(c, {"t": 1.5, "rss": 2048.0})
    tuner.close()
    store = open_store(url)
    by_id = {t.id: t for t in store.trials(store.get_run("own-loop").id)}
    assert by_id[a.id].status is Status.FAILED and by_id[a.id].reason == "linker error: undefined symbol"
    assert by_id[b.id].status is Status.TIMEOUT and by_id[b.id].value is None
    assert by_id[c.id].ok and by_id[c.id].value == 1.5 and by_id[c.id].metrics == {"t": 1.5, "rss": 2048.0}
    with pytest.raises(PerftuneError):
        tuner.tell(c, 1.0)  # told twice


def test_a_trial_keeps_all_its_samples(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    tuner = Tuner(plane(), seed=0, store=url)
    trial = tuner.ask()
    done = tuner.tell(trial, 2.5, samples=[3.0, 1.0, 2.0, 10.0, 2.5])
    assert done.samples == [3.0, 1.0, 2.0, 10.0, 2.5]
    assert open_store(url).trials(tuner.run_id)[0].samples == [3.0, 1.0, 2.0, 10.0, 2.5]


def test_a_trial_told_only_its_samples_takes_their_median():
    tuner = Tuner(plane(), seed=0)
    trial = tuner.ask()
    done = tuner.tell(trial, samples=[3.0, 1.0, 2.0, 10.0, 2.5])
    assert done.value == 2.5 and done.ok


# ---------------------------------------------------------------- the cache and validity


@pytest.mark.parametrize("technique", sorted(n for n in __import__("perftune.search").search.names()))
def test_every_technique_measures_each_configuration_once_and_only_valid_ones(technique):
    space = Space(
        {
            "algo": Choice(["loop", "tiled"], default="loop"),
            "tile": Pow2(1, 64, default=8, when="algo == 'tiled'"),
            "n": Int(1, 12, default=2),
            "fast": Bool(),
        },
        constraints=["n % 2 == 0", lambda c: c.get("tile", 1) <= 4 * c["n"]],
    )
    measured = []

    def objective(config):
        assert space.is_valid(config), f"an invalid configuration was measured: {dict(config)}"
        measured.append(config)
        return (config["n"] - 7) ** 2 + (0 if config["fast"] else 1) + config.get("tile", 0) / 64

    result = perftune.tune(objective, space, budget=30, seed=6, technique=technique)
    assert len(result.trials) == 30
    assert len(measured) == 30, "a repeated configuration must be answered from the cache, not measured"
    assert len(set(measured)) == 30
    assert all(("tile" in c) == (c["algo"] == "tiled") for c in measured)


def test_a_finite_space_smaller_than_the_budget_is_measured_exactly_once_each():
    space = Space({"a": Int(0, 3), "b": Choice(["p", "q", "r"])}, constraints=["a != 1 or b != 'q'"])
    measured = []
    result = perftune.tune(lambda c: measured.append(c) or c["a"], space, budget=50, seed=1)
    assert sorted(map(str, measured)) == sorted(map(str, space.enumerate()))
    assert len(result.trials) == 11 and result.stop_reason == "space exhausted"


# ---------------------------------------------------------------- default configuration and seeds


def test_default_first_then_seeds_and_both_recorded_in_the_store(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    seeds = [{"x": 3, "y": 0.25}, {"x": -4, "y": 0.0}]
    result = perftune.tune(quadratic, plane(), budget=8, seed=7, seeds=seeds, store=url)
    stored = open_store(url).trials(result.run_id)
    assert [(t.technique, dict(t.config)) for t in stored[:3]] == [
        ("default", {"x": 0, "y": 0.5}),
        ("seed", seeds[0]),
        ("seed", seeds[1]),
    ]
    assert result.default.id == 0 and result.default.technique == "default"
    assert result.best.value == 0.0 and result.best.technique == "seed"


def test_invalid_seed_writes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    open_store(url).close()
    with pytest.raises(PerftuneError, match="seeds"):
        perftune.tune(quadratic, plane(), budget=5, seeds=[{"x": 3, "z": 1}], store=url)
    assert runs_in(url) == []


def test_cli_reports_the_default_configuration_and_the_improvement(task_dir):
    task = write_task(task_dir)
    proc = run_cli("--store", str(task_dir / "p.db"), "run", str(task), "--budget", "10", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert "default configuration:" in proc.stdout
    assert "improvement over the default configuration" in proc.stdout
    shown = perftune_json("--store", str(task_dir / "p.db"), "show", "latest", "--json")
    assert shown["default"]["id"] == 0 and shown["default"]["config"] == {"x": 0, "y": 0.5}
    assert shown["trials"][0]["technique"] == "default"


# ---------------------------------------------------------------- workers


def test_workers_keep_a_steady_stream_while_one_evaluation_is_slow():
    space = Space({"x": Int(0, 200, default=0)})

    def objective(config):
        if config["x"] == 0:
            time.sleep(2.5)
        else:
            time.sleep(0.05)
        return float(config["x"])

    result = perftune.tune(objective, space, budget=20, workers=2)  # unseeded: fully asynchronous
    slow = result.trials[0]
    assert slow.config["x"] == 0
    overlapped = [t for t in result.trials[1:] if t.finished_at < slow.finished_at]
    assert len(overlapped) >= 5, "the other worker must keep receiving proposals while trial 0 runs"


# ---------------------------------------------------------------- store


def test_environment_is_recorded_with_every_run(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    result = perftune.tune(quadratic, plane(), budget=3, store=url)
    env = open_store(url).get_run(result.run_id).environment
    assert env["cpu_count"] == os.cpu_count() and env["cpu_model"]
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert "Linux" in env["os"] or sys.platform != "linux"
    if subprocess.run(["gcc", "--version"], capture_output=True).returncode == 0:
        assert env["gcc"].startswith("gcc")


def test_cli_records_the_git_commit_of_the_tuned_program(task_dir, tmp_path):
    repo = task_dir / "program"
    repo.mkdir()
    repo.chmod(0o755)
    task = write_task(repo)
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "task.toml"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "program"], check=True)
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = str(tmp_path / "p.db")
    assert run_cli("--store", db, "run", str(task), "--budget", "2", cwd=elsewhere).returncode == 0
    env = perftune_json("--store", db, "show", "latest", "--json")["run"]["environment"]
    assert env.get("git_commit") == head


def test_store_rows_carry_timings_worker_and_technique(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    result = perftune.tune(quadratic, plane(), budget=6, workers=2, store=url, seed=1)
    for t in open_store(url).trials(result.run_id):
        assert t.started_at is not None and t.finished_at >= t.started_at
        assert t.worker and t.technique


def test_history_and_best_are_consistent_with_the_trials(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    result = perftune.tune(quadratic, plane(), budget=20, seed=8, store=url)
    store = open_store(url)
    assert store.best(result.run_id).id == result.best.id
    history = store.history(result.run_id)
    assert len(history) == 20


def test_export_csv_json_and_dataframe(task_dir):
    db = str(task_dir / "p.db")
    task = write_task(task_dir)
    assert run_cli("--store", db, "run", str(task), "--budget", "7", "--seed", "2").returncode == 0
    csv_out, json_out = task_dir / "t.csv", task_dir / "t.json"
    assert run_cli("--store", db, "export", "latest", "-o", str(csv_out)).returncode == 0
    assert run_cli("--store", db, "export", "square", "--format", "json", "-o", str(json_out)).returncode == 0
    rows = list(csv.DictReader(csv_out.read_text().splitlines()))
    assert len(rows) == 7 and {"config.x", "config.y", "status", "value", "technique"} <= set(rows[0])
    data = json.loads(json_out.read_text())
    assert "schema" in data and len(data["trials"]) == 7
    assert [r["trial"] for r in data["trials"]] == list(range(7))
    assert all(t["samples"] for t in data["trials"])
    pytest.importorskip("pandas")
    store = open_store(db)
    frame = store.to_dataframe(store.get_run("square").id)
    assert len(frame) == 7 and list(frame["config.x"]) == [int(r["config.x"]) for r in rows]


def test_default_store_is_perftune_db_in_the_current_folder_or_env(task_dir, tmp_path):
    task = write_task(task_dir)
    here = tmp_path / "here"
    here.mkdir()
    assert run_cli("run", str(task), "--budget", "2", cwd=here).returncode == 0
    assert (here / "perftune.db").exists()
    assert perftune_json("runs", "--json", cwd=here)["runs"][0]["trials"] == 2

    elsewhere = tmp_path / "env.db"
    env = {"PERFTUNE_STORE": f"sqlite:///{elsewhere}"}
    other = tmp_path / "other"
    other.mkdir()
    assert run_cli("run", str(task), "--budget", "3", cwd=other, env=env).returncode == 0
    assert elsewhere.exists() and not (other / "perftune.db").exists()
    assert perftune_json("runs", "--json", cwd=other, env=env)["runs"][0]["trials"] == 3
    # An explicit --store wins over the environment.
    explicit = tmp_path / "explicit.db"
    assert (
        run_cli("--store", str(explicit), "run", str(task), "--budget", "2", cwd=other, env=env).returncode
        == 0
    )
    assert len(perftune_json("runs", "--json", cwd=other, env=env)["runs"]) == 1


def test_sqlite_store_is_in_wal_mode(tmp_path):
    import sqlite3

    url = f"sqlite:///{tmp_path / 'p.db'}"
    perftune.tune(quadratic, plane(), budget=2, store=url)
    with sqlite3.connect(tmp_path / "p.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ---------------------------------------------------------------- CLI


@pytest.mark.slow
def test_cli_budget_given_twice_the_first_reached_ends_the_run(task_dir):
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    by_count = perftune_json("--store", db, "run", str(task), "--budget", "3", "--budget", "60s", "--json")
    assert by_count["stop_reason"] == "budget" and sum(by_count["counts"].values()) == 3
    by_time = perftune_json("--store", db, "run", str(task), "--budget", "200", "--budget", "2s", "--json")
    assert by_time["stop_reason"] == "time"
    assert sum(n for k, n in by_time["counts"].items() if k != "cancelled") < 200
    # Global options before the command work too.
    glob = perftune_json("--store", db, "--budget", "4", "--seed", "3", "run", str(task), "--json")
    assert sum(glob["counts"].values()) == 4


def test_cli_run_names_ids_and_latest(task_dir):
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    first = perftune_json("--store", db, "run", str(task), "--budget", "4", "--name", "mine", "--json")
    assert first["run"]["name"] == "mine"
    dup = run_cli("--store", db, "run", str(task), "--budget", "2", "--name", "mine")
    assert "mine" in one_line_error(dup)
    assert [r["name"] for r in perftune_json("--store", db, "runs", "--json")["runs"]] == ["mine"]
    by_name = run_cli("--store", db, "best", "mine").stdout
    by_id = run_cli("--store", db, "best", str(first["run"]["id"])).stdout
    latest = run_cli("--store", db, "best", "latest").stdout
    assert by_name == by_id == latest and json.loads(by_name) == first["best"]["config"]


def test_every_json_output_carries_a_schema_version(task_dir):
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    outputs = [
        perftune_json("--store", db, "run", str(task), "--budget", "3", "--seed", "4", "--json"),
        perftune_json("--store", db, "runs", "--json"),
        perftune_json("--store", db, "show", "latest", "--json"),
        perftune_json("--store", db, "resume", "latest", "--budget", "+1", "--json"),
        perftune_json("doctor", "--json"),
    ]
    out = task_dir / "e.json"
    assert run_cli("--store", db, "export", "latest", "--format", "json", "-o", str(out)).returncode == 0
    outputs.append(json.loads(out.read_text()))
    for payload in outputs:
        assert isinstance(payload.get("schema"), int), sorted(payload)


def test_cli_json_output_is_pure_json_and_errors_stay_on_stderr(task_dir):
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    proc = run_cli("--store", db, "run", str(task), "--budget", "3", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["schema"] == 1
    bad = run_cli("--store", db, "show", "nope", "--json", subprocess_=True)
    one_line_error(bad)
    assert bad.stdout == ""


def _run_on_a_terminal(task_dir: Path, stdout_too: bool) -> tuple[int, str, str]:
    """Run ``perftune run`` with stderr (and maybe stdout) on a pseudo-terminal: (rc, terminal, stdout)."""
    # Half of the candidates fail, so that failures show.
    text = SQUARE.replace(
        "print('value', ({x} - 3) ** 2 + {y})",
        "import sys; sys.exit(1) if {x} % 2 else print('value', ({x} - 3) ** 2 + {y})",
    )
    task = write_task(task_dir, text)
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    env["COLUMNS"] = "200"
    out_file = task_dir / "stdout.txt"
    with out_file.open("w") as out:
        proc = subprocess.Popen(
            [*PERFTUNE, "--store", str(task_dir / "p.db"), "run", str(task), "--budget", "12", "--seed", "1"],
            stdout=slave if stdout_too else out,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        seen = b""
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, seen.decode(errors="replace"), out_file.read_text()


def test_cli_shows_a_progress_bar_with_evaluations_best_failures_and_rate(task_dir):
    rc, terminal, _ = _run_on_a_terminal(task_dir, stdout_too=True)
    assert rc == 0, terminal
    assert "12 trials" in terminal and "best" in terminal and "/s" in terminal
    assert re.search(r"failures [1-9]|[1-9] failed", terminal), "odd x fails: the bar must count the failures"


@pytest.mark.slow
def test_progress_bar_goes_to_the_terminal_when_stdout_is_redirected(task_dir):
    rc, terminal, stdout = _run_on_a_terminal(task_dir, stdout_too=False)
    assert rc == 0, terminal
    assert "12 trials" in terminal and "failed" in terminal and "/s" in terminal
    assert "elapsed" not in stdout and "best configuration" in stdout


def test_help_for_every_core_command():
    for command in ([], ["run"], ["resume"], ["runs"], ["show"], ["best"], ["export"]):
        proc = run_cli(*command, "--help")
        assert proc.returncode == 0 and "Usage:" in proc.stdout and "--store" in proc.stdout, command
    assert "--budget" in run_cli("run", "--help").stdout and "--warm-start" in run_cli("run", "--help").stdout


# ---------------------------------------------------------------- bad input


def test_bad_spaces_are_one_line_perftune_errors():
    cases = [
        (lambda: Space({"x": "int"}), SpaceError),
        (lambda: Space({"x": Int(5, 1)}), SpaceError),
        (lambda: Float(1.0, 0.5), SpaceError),
        (lambda: Choice([]), SpaceError),
        (lambda: Space({"x": Int(0, 3)}, constraints=["y > 1"]), ExpressionError),
        (lambda: Space({"x": Int(0, 3, when="missing == 1")}), SpaceError),
    ]
    for make, kind in cases:
        with pytest.raises(kind) as info:
            make()
        assert "\n" not in str(info.value) and str(info.value)


def test_unsatisfiable_constraints_say_so_and_write_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    open_store(url).close()
    space = Space({"a": Int(0, 50), "b": Int(0, 50)}, constraints=["a + b > 60", "a < 5", "b < 5"])
    with pytest.raises(UnsatisfiableError, match="may be unsatisfiable"):
        perftune.tune(lambda c: 0.0, space, budget=5, store=url)
    assert runs_in(url) == []


def test_malformed_store_url_writes_nothing(tmp_path):
    for url in ("nosuchdb://x/y", "postgresql://", "sqlite:///" + str(tmp_path / "missing" / "dir" / "p.db")):
        with pytest.raises(StoreError) as info:
            perftune.tune(quadratic, plane(), budget=3, store=url)
        assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_cli_bad_input_in_a_task_file_writes_nothing(task_dir):
    db = task_dir / "p.db"
    cases = {
        "unknown type": SQUARE.replace('type = "int"', 'type = "integer"'),
        "empty range": SQUARE.replace("min = -20, max = 20", "min = 20, max = -20"),
        "unknown name": SQUARE.replace('name = "square"', 'name = "square"\nconstraints = ["q < 1"]'),
        "unsatisfiable": SQUARE.replace('name = "square"', 'name = "square"\nconstraints = ["x > 20"]'),
    }
    for case, text in cases.items():
        task = write_task(task_dir, text, name=f"{case.replace(' ', '_')}.toml")
        line = one_line_error(run_cli("--store", str(db), "run", str(task), "--budget", "5"))
        assert str(task) in line or task.name in line, (case, line)
    assert not db.exists() or perftune_json("--store", str(db), "runs", "--json")["runs"] == []
    task = write_task(task_dir)
    for budget in ("0", "0s", "-1", "1x"):
        one_line_error(run_cli("--store", str(db), "run", str(task), "--budget", budget))
    one_line_error(run_cli("--store", "nosuchdb://x", "run", str(task), "--budget", "2", subprocess_=True))
    assert not db.exists() or perftune_json("--store", str(db), "runs", "--json")["runs"] == []


def test_show_and_runs_for_humans_list_failures_by_reason(task_dir):
    text = SQUARE.replace(
        "print('value', ({x} - 3) ** 2 + {y})",
        "import sys; sys.exit('odd x is not supported') if {x} % 2 else print('value', {x} ** 2)",
    )
    task = write_task(task_dir, text)
    db = str(task_dir / "p.db")
    assert run_cli("--store", db, "run", str(task), "--budget", "12", "--seed", "5").returncode == 0
    shown = run_cli("--store", db, "show", "latest")
    assert (
        shown.returncode == 0
        and "failure reason" in shown.stdout
        and "odd x is not supported" in shown.stdout
    )
    assert "default configuration" in shown.stdout and "best" in shown.stdout
    listed = run_cli("--store", db, "runs")
    assert listed.returncode == 0 and "square" in listed.stdout and "12" in listed.stdout
    counts = perftune_json("--store", db, "show", "latest", "--json")["counts"]
    assert counts.get("failed", 0) >= 1 and sum(counts.values()) == 12


@pytest.mark.slow
def test_cli_time_budget_cancels_in_flight_candidates(task_dir, recorder):
    from acceptance_helpers import logged_task

    task = logged_task(task_dir, recorder, sleep=1.5)
    db = str(task_dir / "p.db")
    result = perftune_json(
        "--store", db, "run", str(task), "--budget", "2s", "--budget", "100", "--workers", "2", "--json"
    )
    assert result["stop_reason"] == "time"
    shown = perftune_json("--store", db, "show", "latest", "--json")
    cancelled = [t for t in shown["trials"] if t["status"] == "cancelled"]
    assert cancelled and all(t["reason"] == "time budget reached" for t in cancelled)
    assert shown["counts"].get("ok", 0) + len(cancelled) == len(shown["trials"])


def test_a_task_trial_holds_its_repeats_and_its_value_is_their_median(task_dir):
    text = SQUARE.replace(
        "print('value', ({x} - 3) ** 2 + {y})", "import random; print('value', random.random() + ({x}) ** 2)"
    ).replace("repeats = 1", "repeats = 5")
    db = str(task_dir / "p.db")
    assert run_cli("--store", db, "run", str(write_task(task_dir, text)), "--budget", "3").returncode == 0
    for trial in perftune_json("--store", db, "show", "latest", "--json")["trials"]:
        assert len(trial["samples"]) == 5 and len(set(trial["samples"])) == 5
        assert trial["value"] == pytest.approx(sorted(trial["samples"])[2])


def test_cli_bad_worker_count_is_one_line_and_writes_nothing(task_dir):
    db = str(task_dir / "p.db")
    task = write_task(task_dir)
    assert "workers" in one_line_error(
        run_cli("--store", db, "run", str(task), "--budget", "2", "--workers", "-1")
    )
    assert not Path(db).exists() or perftune_json("--store", db, "runs", "--json")["runs"] == []


def test_negative_seed_is_one_clear_line(task_dir):
    task = write_task(task_dir)
    line = one_line_error(
        run_cli(
            "--store",
            str(task_dir / "p.db"),
            "run",
            str(task),
            "--budget",
            "2",
            "--seed",
            "-1",
            subprocess_=True,
        )
    )
    assert "seed" in line
    with pytest.raises(PerftuneError, match="seed"):
        perftune.tune(quadratic, plane(), budget=2, seed=-1)
