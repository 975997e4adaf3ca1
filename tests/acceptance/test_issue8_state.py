"""Acceptance tests of issue [8], stored state: checkpoints are data (a planted row runs nothing), a run
is driven by one driver at a time, and a checkpoint of another format or a corrupt one is refused in one
line. Everything runs the real ``perftune`` command on real task files.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from acceptance_helpers import PERFTUNE, logged_task, one_line_error, write_task
from acceptance_helpers import perftune as run_cli

import perftune
from perftune.store import open_store

DEFAULT = (0, 5)  # the default configuration of the LOGGED task


def _square_run(task_dir: Path) -> tuple[str, Path]:
    """A finished run 'square' of two trials in a store file; returns the URL and the file."""
    task = write_task(task_dir)
    db = task_dir / "p.db"
    proc = run_cli("--store", str(db), "run", str(task), "--budget", "2", "--seed", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    return str(db), db


def _plant_checkpoint(db: Path, blob: bytes, run: str = "square") -> None:
    """Overwrite the run's checkpoint row, as anyone who can write to a shared store can."""
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("SELECT id FROM runs WHERE name = ?", (run,)).fetchone()
        assert conn.execute("UPDATE checkpoints SET blob = ? WHERE run_id = ?", (blob, run_id)).rowcount == 1


def _resume(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("--store", db, "resume", "square", "--budget", "+2", *args, subprocess_=True)


def _n_trials(db: str) -> int:
    with open_store(db, must_exist=True) as store:
        return store.count(store.get_run("square").id)


class _TouchOnLoad:
    """Unpickling this runs ``touch MARKER`` (the classic pickle attack)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def _checkpoint_document(state: object, **header: object) -> bytes:
    document = {"format": "perftune-checkpoint", "version": 2, "perftune": perftune.__version__,
                "configs": [], "state": state, **header}
    return json.dumps(document).encode()


# ---------------------------------------------------------------- a hostile checkpoint row


def test_a_planted_pickle_checkpoint_runs_nothing_on_resume(task_dir: Path) -> None:
    url, db = _square_run(task_dir)
    marker = task_dir / "owned"
    blob = pickle.dumps(_TouchOnLoad(marker))
    # The payload is live: loading it the way perftune used to creates the file.
    loader = "import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read())"
    (task_dir / "blob").write_bytes(blob)
    subprocess.run([sys.executable, "-c", loader, str(task_dir / "blob")], check=True, timeout=60)
    assert marker.exists()
    marker.unlink()

    _plant_checkpoint(db, blob)
    line = one_line_error(_resume(url))
    assert "checkpoint of run 'square'" in line and "old pickle format" in line, line
    assert not marker.exists()
    assert _n_trials(url) == 2  # nothing was measured


@pytest.mark.parametrize(
    "state",
    [
        # An allow-listed-object tag naming os.system.
        {"driver": {"$obj": "os:system", "attrs": {"command": "touch {marker}"}}, "technique": {}},
        # A bit generator "named" os.system.
        {"driver": {"rng": {"$rng": {"bit_generator": "os.system", "state": "touch {marker}"}}},
         "technique": {}},
        # jsonpickle's spelling of a call: plain strings here, never resolved.
        {"driver": {"py/reduce": [{"py/function": "os.system"}, {"py/tuple": ["touch {marker}"]}]},
         "technique": {"py/object": "os.system"}},
        # A numpy array of Python objects (would unpickle its data).
        {"driver": {"$ndarray": "|O", "shape": [1], "data": "AAAA"}, "technique": {}},
    ],
    ids=["obj-tag", "rng-tag", "jsonpickle", "object-array"],
)
def test_a_planted_json_checkpoint_naming_os_system_runs_nothing(task_dir: Path, state: dict) -> None:
    url, db = _square_run(task_dir)
    marker = task_dir / "owned"
    text = json.dumps(state).replace("{marker}", str(marker))
    _plant_checkpoint(db, _checkpoint_document(json.loads(text)))
    line = one_line_error(_resume(url))
    assert "checkpoint of run 'square'" in line, line
    assert not marker.exists()
    assert _n_trials(url) == 2


def test_a_json_document_naming_os_system_instead_of_a_checkpoint_is_refused(task_dir: Path) -> None:
    url, db = _square_run(task_dir)
    marker = task_dir / "owned"
    _plant_checkpoint(db, json.dumps({"py/reduce": [{"py/function": "os.system"},
                                                    {"py/tuple": [f"touch {marker}"]}]}).encode())
    line = one_line_error(_resume(url))
    assert line.endswith("is not a perftune checkpoint"), line
    assert not marker.exists()


# ---------------------------------------------------------------- other formats, corrupt rows


def test_a_checkpoint_of_another_format_version_is_refused(task_dir: Path) -> None:
    url, db = _square_run(task_dir)
    _plant_checkpoint(db, _checkpoint_document({}, version=99))
    line = one_line_error(_resume(url))
    assert "has format v99; this perftune reads v2" in line, line


def test_a_checkpoint_of_another_perftune_version_is_refused(task_dir: Path) -> None:
    url, db = _square_run(task_dir)
    _plant_checkpoint(db, _checkpoint_document({}, perftune="0.0.1"))
    line = one_line_error(_resume(url))
    assert f"was written by perftune 0.0.1; this is perftune {perftune.__version__}" in line, line


@pytest.mark.parametrize(
    "cut",
    [lambda blob: b"", lambda blob: blob[: len(blob) // 2], lambda blob: b"\x00\xff" * 40,
     lambda blob: blob.replace(b'"next_id":', b'"next_idx":')],
    ids=["empty", "truncated", "garbage", "missing-key"],
)
def test_a_corrupt_checkpoint_is_one_line_and_measures_nothing(task_dir: Path, cut) -> None:
    url, db = _square_run(task_dir)
    with open_store(url) as store:
        _, blob = store.load_checkpoint(store.get_run("square").id)
    _plant_checkpoint(db, cut(blob))
    line = one_line_error(_resume(url))
    assert "the checkpoint of run 'square' is corrupt" in line, line
    assert _n_trials(url) == 2


def test_the_stored_checkpoint_is_json_and_resumes(task_dir: Path) -> None:
    url, _ = _square_run(task_dir)
    with open_store(url) as store:
        _, blob = store.load_checkpoint(store.get_run("square").id)
    document = json.loads(blob)
    assert (document["format"], document["version"]) == ("perftune-checkpoint", 2)
    proc = _resume(url, "--json")
    assert proc.returncode == 0, proc.stderr
    assert _n_trials(url) == 4


# ---------------------------------------------------------------- one driver per run


@pytest.mark.slow
def test_two_concurrent_resumes_one_runs_the_other_exits_2_naming_it(task_dir: Path, recorder) -> None:
    task = logged_task(task_dir, recorder, sleep=0.3)
    db = str(task_dir / "p.db")
    env = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    first = subprocess.run([*PERFTUNE, "--store", db, "run", str(task), "--budget", "3", "--seed", "3"],
                           capture_output=True, text=True, env=env, timeout=240)
    assert first.returncode == 0, first.stderr
    n_before = len(recorder.measured())  # 3 trials and the reference measurement of the default
    # 20 more trials of 0.3 s: the first driver still holds the run while the second starts, also on a
    # loaded machine (with 6, a second start slower than 2 s found the run free and resumed it itself).
    more = 20
    resume = [*PERFTUNE, "--store", db, "resume", "logged", "--budget", f"+{more}"]
    driver = subprocess.Popen(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while len(recorder.measured()) <= n_before and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.02)
        assert driver.poll() is None, "the first resume ended before the second one started"
        second = subprocess.run(resume, capture_output=True, text=True, env=env, timeout=240)
        line = one_line_error(second)
        assert f"run 'logged' is being driven by {socket.gethostname()}:{driver.pid} since " in line, line
        out, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:
            driver.kill()
        if driver.returncode is None or driver.stdout is not None and not driver.stdout.closed:
            with contextlib.suppress(ValueError):
                driver.communicate()  # its pipes are closed however the test ended
    assert driver.returncode == 0, err
    with open_store(db, must_exist=True) as store:
        run = store.get_run("logged")
        keys = [(t.config["x"], t.config["y"]) for t in store.trials(run.id)]
        assert store.get_lease(run.id) is None  # given back when the run ended
    assert len(keys) == 3 + more == len(set(keys))
    # After the first run: the resumed driver's reference run of the default (preparing the task) and
    # its new trials, each once. The refused resume measured nothing, not even the reference.
    after = recorder.measured()[n_before:]
    assert sorted(after) == sorted([DEFAULT, *keys[3:]]), (after, keys)
