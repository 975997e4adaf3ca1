"""Acceptance tests of issue [3] (long runs): Ctrl-C and resume, worker counts, warm starts,
determinism through the CLI, shared stores (SQLite from several processes, PostgreSQL) and bad input.

Everything runs the real ``perftune`` command on real task files; measurements are counted by a TCP
recorder that every candidate reports to (see acceptance_helpers.LOGGED).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from acceptance_helpers import (
    PERFTUNE,
    SQUARE,
    logged_task,
    one_line_error,
    perftune_json,
    write_task,
)
from acceptance_helpers import (
    perftune as run_cli,
)

import perftune
from perftune import Status, Tuner
from perftune.errors import PerftuneError, StoreError
from perftune.space import Float, Int, Space
from perftune.store import open_store

DEFAULT = (0, 5)  # the default configuration of the LOGGED task (also measured as the reference run)


def _interrupted_run(
    task_dir: Path, recorder, *, budget: int, workers: int, sig: int = signal.SIGINT, seed: int | None = 3
) -> tuple[str, list]:
    """Start ``perftune run`` on LOGGED, press Ctrl-C (SIGINT to its process group) mid-run, check the exit.

    With ``sig=SIGKILL`` the driver and everything it started die at once instead (a node failure)."""
    task = logged_task(task_dir, recorder, sleep=0.4)
    db = f"sqlite:///{task_dir / 'p.db'}"
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    proc = subprocess.Popen(
        [
            *PERFTUNE,
            "--store",
            db,
            "run",
            str(task),
            "--budget",
            str(budget),
            *(["--seed", str(seed)] if seed is not None else []),
            "--workers",
            str(workers),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
        # A shell starts background jobs with SIGINT ignored, and children inherit that; a terminal's
        # perftune has the default disposition, which is what this test is about.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while len(recorder.measured()) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, sig)  # SIGINT: what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=120)
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return db, recorder.measured()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "Traceback" not in err and "perftune resume logged" in err, err
    return db, recorder.measured()


def _stored(db: str, run: str = "logged"):
    store = open_store(db, must_exist=True)
    try:
        info = store.get_run(run)
        return info, store.trials(info.id), store.load_checkpoint(info.id)
    finally:
        store.close()


@pytest.mark.slow
def test_ctrl_c_checkpoints_and_resume_with_other_workers_completes_without_remeasuring(task_dir, recorder):
    db, before = _interrupted_run(task_dir, recorder, budget=14, workers=2)
    info, trials, checkpoint = _stored(db)
    assert info.status == "interrupted"
    assert checkpoint is not None and checkpoint[0] == len(trials)
    finished = {(t.config["x"], t.config["y"]) for t in trials}
    assert 1 <= len(trials) < 14 and all(t.ok for t in trials)
    # The evaluations in flight at Ctrl-C were measured (started) but not recorded: they are cancelled.
    assert len(set(before) - finished) >= 1

    resumed = perftune_json("--store", db, "resume", "logged", "--workers", "3", "--budget", "14", "--json")
    assert resumed["run"]["name"] == "logged" and resumed["counts"] == {"ok": 14}
    _, trials, _ = _stored(db)
    assert sorted(t.id for t in trials) == list(range(14))
    assert len({t.config for t in trials}) == 14
    after = recorder.measured()[len(before) :]
    remeasured = (finished - {DEFAULT}) & set(after)
    assert not remeasured, f"finished trials measured again after resume: {remeasured}"
    # Each trial of the final store was measured once as a trial (the default also once as the reference).
    for t in trials:
        key = (t.config["x"], t.config["y"])
        if key != DEFAULT:
            assert recorder.measured().count(key) >= 1


@pytest.mark.slow
def test_resume_after_ctrl_c_keeps_the_original_budget(task_dir, recorder):
    db, _ = _interrupted_run(task_dir, recorder, budget=10, workers=2)
    resumed = perftune_json("--store", db, "resume", "logged", "--workers", "4", "--json")
    assert sum(resumed["counts"].values()) == 10


@pytest.mark.slow
def test_resume_of_an_interrupted_seeded_run_equals_the_uninterrupted_run(task_dir, recorder):
    db, _ = _interrupted_run(task_dir, recorder, budget=12, workers=1)
    resumed = perftune_json("--store", db, "resume", "logged", "--workers", "2", "--budget", "12", "--json")
    assert sum(resumed["counts"].values()) == 12
    _, interrupted, _ = _stored(db)
    straight = perftune_json(
        "--store",
        db,
        "run",
        str(task_dir / "task.toml"),
        "--budget",
        "12",
        "--seed",
        "3",
        "--workers",
        "3",
        "--name",
        "straight",
        "--json",
    )
    assert straight["counts"] == {"ok": 12}
    _, uninterrupted, _ = _stored(db, "straight")
    assert [t.config for t in interrupted] == [t.config for t in uninterrupted]


@pytest.mark.slow
def test_seeded_cli_runs_are_identical_for_1_and_3_workers(task_dir):
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    for workers in (1, 3):
        run = perftune_json(
            "--store",
            db,
            "run",
            str(task),
            "--budget",
            "14",
            "--seed",
            "9",
            "--workers",
            str(workers),
            "--name",
            f"w{workers}",
            "--json",
        )
        assert run["counts"] == {"ok": 14}
    one = perftune_json("--store", db, "show", "w1", "--json")["trials"]
    three = perftune_json("--store", db, "show", "w3", "--json")["trials"]
    assert [(t["id"], t["config"]) for t in one] == [(t["id"], t["config"]) for t in three]
    assert perftune_json("--store", db, "show", "w3", "--json")["run"]["settings"]["lag"] >= 1


def test_resume_budget_plus_extends_a_finished_run_keeping_its_history(task_dir, recorder):
    task = logged_task(task_dir, recorder, sleep=0.0)
    db = str(task_dir / "p.db")
    first = perftune_json("--store", db, "run", str(task), "--budget", "5", "--seed", "4", "--json")
    n_measured = len(recorder.measured())
    more = perftune_json("--store", db, "resume", "latest", "--budget", "+3", "--workers", "2", "--json")
    assert sum(more["counts"].values()) == 8
    assert more["best"]["value"] <= first["best"]["value"]
    _, trials, _ = _stored(f"sqlite:///{db}")
    assert sorted(t.id for t in trials) == list(range(8))
    new = [m for m in recorder.measured()[n_measured:] if m != DEFAULT]
    assert len(new) == 3, new  # only the three new trials were measured


def test_warm_start_from_a_run_with_a_compatible_space(task_dir):
    db = str(task_dir / "p.db")
    old = perftune_json(
        "--store", db, "run", str(write_task(task_dir)), "--budget", "15", "--seed", "3", "--json"
    )
    wider = write_task(
        task_dir, SQUARE.replace("min = -20, max = 20", "min = -40, max = 40"), name="wider.toml"
    )
    new = perftune_json("--store", db, "run", str(wider), "--budget", "4", "--warm-start", "square", "--json")
    assert new["run"]["name"] != "square"
    trials = perftune_json("--store", db, "show", "latest", "--json")["trials"]
    assert trials[0]["technique"] == "default"
    # The old run's best configurations (other than the default, measured anyway) come right after it.
    old_trials = perftune_json("--store", db, "show", "square", "--json")["trials"]
    ranked = [
        t["config"]
        for t in sorted(old_trials, key=lambda t: t["value"])
        if t["config"] != trials[0]["config"]
    ]
    warm = [t["config"] for t in trials if t["technique"] == "seed"]
    assert (
        warm
        and warm == ranked[: len(warm)]
        and [t["technique"] for t in trials[1 : len(warm) + 1]] == ["seed"] * len(warm)
    )
    assert new["best"]["value"] <= old["best"]["value"]


def test_warm_start_from_a_missing_run_is_one_line_and_writes_nothing(task_dir):
    db = str(task_dir / "p.db")
    task = write_task(task_dir)
    assert run_cli("--store", db, "run", str(task), "--budget", "2").returncode == 0
    line = one_line_error(run_cli("--store", db, "run", str(task), "--budget", "2", "--warm-start", "ghost"))
    assert "ghost" in line
    assert [r["name"] for r in perftune_json("--store", db, "runs", "--json")["runs"]] == ["square"]


# ---------------------------------------------------------------- checkpoints in Python


def test_checkpoints_every_n_trials_and_resume_in_python_with_more_workers(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    space = Space({"x": Int(-10, 10, default=0), "y": Float(0.0, 1.0, default=0.5)})
    store = open_store(url)
    seen_checkpoints = []

    def watch(trial):
        seen_checkpoints.append(store.load_checkpoint(store.get_run("ck").id)[0])

    tuner = Tuner(space, seed=5, store=url, name="ck", checkpoint_every=4, checkpoint_interval_s=3600)
    tuner.run(lambda c: (c["x"] - 1) ** 2 + c["y"], 13, on_trial=watch)
    assert max(seen_checkpoints) >= 8
    assert all(n - c <= 4 for n, c in enumerate(seen_checkpoints, start=1)), seen_checkpoints
    assert store.load_checkpoint(store.get_run("ck").id)[0] == 13  # and one at the clean end

    resumed = Tuner.resume("ck", url)
    result = resumed.run(lambda c: (c["x"] - 1) ** 2 + c["y"], 25, workers=3)
    assert [t.id for t in result.trials] == list(range(25))
    straight = perftune.tune(lambda c: (c["x"] - 1) ** 2 + c["y"], space, budget=25, seed=5)
    assert [t.config for t in straight.trials] == [t.config for t in result.trials]
    store.close()


def test_python_resume_with_another_space_is_refused_and_data_untouched(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    space = Space({"x": Int(-10, 10, default=0)})
    perftune.tune(lambda c: c["x"] ** 2, space, budget=5, seed=1, store=url, name="r")
    before = [(t.id, t.config, t.value) for t in open_store(url).trials(1)]
    with pytest.raises(PerftuneError, match="different space"):
        Tuner.resume("r", url, space=Space({"x": Int(-10, 11, default=0)}))
    with pytest.raises(StoreError, match="nope"):
        Tuner.resume("nope", url)
    assert [(t.id, t.config, t.value) for t in open_store(url).trials(1)] == before


# ---------------------------------------------------------------- shared stores


@pytest.mark.slow
def test_concurrent_cli_drivers_with_their_own_names_share_one_sqlite_file(task_dir):
    db = str(task_dir / "shared.db")
    task = write_task(task_dir)
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    procs = [
        subprocess.Popen(
            [*PERFTUNE, "--store", db, "run", str(task), "--budget", "6", "--name", f"d{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(3)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    runs = perftune_json("--store", db, "runs", "--json")["runs"]
    assert sorted(r["name"] for r in runs) == ["d0", "d1", "d2"] and all(r["trials"] == 6 for r in runs)
    with sqlite3.connect(task_dir / "shared.db") as conn:
        rows = conn.execute(
            "SELECT run_id, trial_id, COUNT(*) FROM trials GROUP BY run_id, trial_id"
        ).fetchall()
    assert len(rows) == 18 and all(n == 1 for _, _, n in rows)


@pytest.mark.slow
def test_concurrent_cli_drivers_of_one_task_without_names(task_dir):
    db = str(task_dir / "shared.db")
    task = write_task(task_dir)
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    procs = [
        subprocess.Popen(
            [*PERFTUNE, "--store", db, "run", str(task), "--budget", "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    errors = []
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        if proc.returncode != 0:
            errors.append(err.strip())
    assert not errors, errors
    runs = perftune_json("--store", db, "runs", "--json")["runs"]
    assert len(runs) == 4 and len({r["name"] for r in runs}) == 4


@pytest.mark.slow
@pytest.mark.postgres
def test_postgresql_end_to_end_through_the_cli(task_dir, fresh_postgres_url):
    url = fresh_postgres_url
    task = write_task(task_dir)
    first = perftune_json(
        "--store", url, "run", str(task), "--budget", "6", "--seed", "2", "--workers", "2", "--json"
    )
    assert first["counts"] == {"ok": 6}
    runs = perftune_json("--store", url, "runs", "--json")["runs"]
    assert [(r["name"], r["trials"]) for r in runs] == [("square", 6)]
    more = perftune_json("--store", url, "resume", "square", "--budget", "+3", "--json")
    assert sum(more["counts"].values()) == 9
    shown = perftune_json("--store", url, "show", "latest", "--json")
    assert [t["id"] for t in shown["trials"]] == list(range(9))
    assert shown["run"]["environment"]["cpu_count"] == os.cpu_count()
    best = run_cli("--store", url, "best", "square")
    assert best.returncode == 0 and best.stdout.strip().startswith("{")
    # The same store from the environment variable.
    assert perftune_json("runs", "--json", env={"PERFTUNE_STORE": url})["runs"][0]["trials"] == 9
    # A second driver at the same time, writing to the same database.
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    procs = [
        subprocess.Popen(
            [*PERFTUNE, "--store", url, "run", str(task), "--budget", "4", "--name", f"p{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
    counts = {r["name"]: r["trials"] for r in perftune_json("--store", url, "runs", "--json")["runs"]}
    assert counts == {"square": 9, "p0": 4, "p1": 4}


@pytest.mark.slow
def test_dask_local_cluster_through_the_cli(task_dir):
    pytest.importorskip("distributed")
    task = write_task(task_dir)
    db = str(task_dir / "p.db")
    result = perftune_json(
        "--store",
        db,
        "run",
        str(task),
        "--budget",
        "6",
        "--workers",
        "2",
        "--executor",
        "dask",
        "--scheduler",
        "local:2",
        "--seed",
        "1",
        "--json",
    )
    assert result["counts"] == {"ok": 6}
    trials = perftune_json("--store", db, "show", "latest", "--json")["trials"]
    local = perftune_json(
        "--store",
        db,
        "run",
        str(task),
        "--budget",
        "6",
        "--workers",
        "2",
        "--seed",
        "1",
        "--name",
        "local",
        "--json",
    )
    assert local["counts"] == {"ok": 6}
    same = perftune_json("--store", db, "show", "local", "--json")["trials"]
    assert [t["config"] for t in trials] == [t["config"] for t in same]  # seeded: same proposals on Dask


# ---------------------------------------------------------------- bad input


def test_store_from_an_incompatible_version_is_refused_untouched(task_dir):
    db = task_dir / "p.db"
    task = write_task(task_dir)
    assert run_cli("--store", str(db), "run", str(task), "--budget", "3").returncode == 0
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    snapshot = _dump(db)
    for i, args in enumerate(
        (
            ["runs"],
            ["show", "latest"],
            ["resume", "latest", "--budget", "+2"],
            ["run", str(task), "--budget", "2"],
        )
    ):
        line = one_line_error(run_cli("--store", str(db), *args, subprocess_=i == 0))
        assert "999" in line or "version" in line, line
    assert _dump(db) == snapshot


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def test_unreachable_database_is_one_line(task_dir):
    task = write_task(task_dir)
    line = one_line_error(
        run_cli(
            "--store",
            "postgresql://nobody@127.0.0.1:1/none",
            "run",
            str(task),
            "--budget",
            "2",
            timeout=120,
            subprocess_=True,
        )
    )
    assert "127.0.0.1" in line or "reach" in line or "connect" in line


def test_resume_errors_leave_the_data_untouched(task_dir):
    db = task_dir / "p.db"
    task = write_task(task_dir)
    assert run_cli("--store", str(db), "run", str(task), "--budget", "3", "--seed", "1").returncode == 0
    snapshot = _dump(db)
    assert "ghost" in one_line_error(run_cli("--store", str(db), "resume", "ghost", subprocess_=True))
    one_line_error(run_cli("--store", str(task_dir / "typo.db"), "resume", "latest"))
    assert not (task_dir / "typo.db").exists()
    task.write_text(SQUARE.replace("max = 1.0", "max = 3.0"))
    assert "space" in one_line_error(run_cli("--store", str(db), "resume", "square", "--budget", "+2"))
    task.write_text(SQUARE.replace("- 3) ** 2", "- 5) ** 2"))
    assert "objective" in one_line_error(run_cli("--store", str(db), "resume", "square", "--budget", "+2"))
    task.write_text(SQUARE)
    assert _dump(db) == snapshot
    assert perftune_json("--store", str(db), "resume", "square", "--budget", "+2", "--json")["counts"] == {
        "ok": 5
    }


def test_a_run_status_is_finished_after_a_clean_exit(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    result = perftune.tune(lambda c: c["x"] ** 2, Space({"x": Int(-5, 5)}), budget=4, store=url, seed=1)
    store = open_store(url)
    assert store.get_run(result.run_id).status == "finished"
    assert store.load_checkpoint(result.run_id)[0] == 4
    assert all(t.status is Status.OK for t in store.trials(result.run_id))
    store.close()


def test_checkpoints_every_t_seconds(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    store = open_store(url)
    seen = []

    def objective(config):
        time.sleep(0.06)
        return float(config["x"] ** 2)

    tuner = Tuner(
        Space({"x": Int(-50, 50)}),
        seed=1,
        store=url,
        name="t",
        checkpoint_every=10_000,
        checkpoint_interval_s=0.05,
    )
    tuner.run(objective, 8, on_trial=lambda t: seen.append(store.load_checkpoint(store.get_run("t").id)[0]))
    # Every trial took longer than the interval: a checkpoint follows each one (at most one trial behind).
    assert all(n - c <= 1 for n, c in enumerate(seen, start=1)), seen
    store.close()


def test_ctrl_c_in_python_checkpoints_and_resume_does_not_remeasure(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    space = Space({"x": Int(-50, 50, default=0), "y": Float(0.0, 1.0, default=0.5)})
    calls = []

    def objective(config):
        calls.append(config)
        if len(calls) == 7:
            raise KeyboardInterrupt  # Ctrl-C while the 7th evaluation runs in this process
        return (config["x"] - 5) ** 2 + config["y"]

    tuner = Tuner(space, seed=2, store=url, name="ki")
    with pytest.raises(KeyboardInterrupt):
        tuner.run(objective, 15)
    store = open_store(url)
    assert store.get_run("ki").status == "interrupted"
    assert store.load_checkpoint(store.get_run("ki").id)[0] == 6
    assert [t.id for t in store.trials(store.get_run("ki").id)] == list(range(6))
    interrupted = calls[6]
    result = Tuner.resume("ki", url).run(objective, 15)
    assert [t.id for t in result.trials] == list(range(15))
    assert calls[7] == interrupted  # the cancelled evaluation is issued again, first
    assert len(calls) == 7 + 9 and len(set(calls)) == 15  # nothing finished was measured twice
    straight = perftune.tune(lambda c: (c["x"] - 5) ** 2 + c["y"], space, budget=15, seed=2)
    assert [t.config for t in straight.trials] == [t.config for t in result.trials]
    store.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [3, None])
def test_cli_run_killed_with_sigkill_resumes_without_losing_or_remeasuring(task_dir, recorder, seed):
    db, before = _interrupted_run(task_dir, recorder, budget=12, workers=2, sig=signal.SIGKILL, seed=seed)
    info, trials, checkpoint = _stored(db)
    assert info.status == "running" and checkpoint is not None  # nobody could mark it
    finished = {(t.config["x"], t.config["y"]) for t in trials}
    resumed = perftune_json("--store", db, "resume", "logged", "--workers", "1", "--budget", "12", "--json")
    assert sum(resumed["counts"].values()) == 12
    _, trials, _ = _stored(db)
    assert sorted(t.id for t in trials) == list(range(12)) and len({t.config for t in trials}) == 12
    remeasured = (finished - {DEFAULT}) & set(recorder.measured()[len(before) :])
    assert not remeasured, f"finished trials measured again after resume: {remeasured}"
    assert _stored(db)[0].status == "finished"


def _survivors(port: int) -> list[int]:
    """Pids of candidate processes (of this test: they carry the recorder's port) still running."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"'127.0.0.1', {port})" in cmdline and "create_connection" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_cancelled_candidates_do_not_keep_running_after_a_time_budget(task_dir, recorder):
    from acceptance_helpers import LOGGED

    # The default configuration (x = 0, also the reference run) is quick; every other candidate sleeps 60 s.
    text = LOGGED.replace("time.sleep({sleep})", "time.sleep(60 if {x} != 0 else 0)")
    task = write_task(task_dir, text, port=recorder.port).as_posix()
    try:
        result = perftune_json(
            "--store",
            str(task_dir / "p.db"),
            "run",
            task,
            "--budget",
            "3s",
            "--workers",
            "2",
            "--seed",
            "1",
            "--json",
        )
        assert result["stop_reason"] == "time" and result["counts"].get("cancelled", 0) >= 1
        time.sleep(2.0)
        assert _survivors(recorder.port) == []
    finally:
        for pid in _survivors(recorder.port):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)  # what the test started, by pid


def test_resuming_a_python_run_from_the_cli_says_how_to_resume_it(tmp_path):
    db = str(tmp_path / "p.db")
    perftune.tune(lambda c: c["x"] ** 2, Space({"x": Int(-5, 5)}), budget=3, store=db, name="py", seed=1)
    line = one_line_error(run_cli("--store", db, "resume", "py", "--budget", "+2"))
    assert "Tuner.resume" in line
    assert perftune_json("--store", db, "runs", "--json")["runs"][0]["trials"] == 3
