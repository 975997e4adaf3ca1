"""Kill the driver with SIGKILL at random moments, resume with 1, 2 or 4 workers, and check the store."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import perftune
from perftune.store import open_store

DRIVER = Path(__file__).with_name("fault_driver.py")
BUDGET = 300

pytestmark = pytest.mark.slow


def _start(url: str, workers: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(DRIVER), url, str(workers), str(BUDGET)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _n_trials(url: str) -> int:
    # must_exist: the poll never creates the store file, so it cannot race a starting driver's creation
    # of it (the file, its schema and the run are the driver's alone to make).
    try:
        store = open_store(url, must_exist=True)
        return len(store.trials(store.get_run("fault").id))
    except Exception:  # no store or no run yet (the first driver was killed before creating them)
        return 0


def _kill_moment(proc: subprocess.Popen, url: str, rng: random.Random, early: bool) -> None:
    """Wait until the moment to kill ``proc``: an early kill lands at a random moment of the start or the
    resume; a late one once the driver measured again, a few hundredths of a second into its work. (A
    kill at a fixed delay after the start let a fast machine finish the run within a few long attempts,
    before twenty kills had landed.)"""
    if early:
        time.sleep(rng.uniform(0.05, 0.6))
        return
    before = _n_trials(url)
    deadline = time.monotonic() + 30
    while proc.poll() is None and _n_trials(url) <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.03))


def test_sigkill_twenty_times_then_resume_loses_nothing_and_matches_uninterrupted(tmp_path):
    sys.path.insert(0, str(DRIVER.parent))
    import fault_driver

    url = f"sqlite:///{tmp_path / 'fault.db'}"
    rng = random.Random(2024)
    worker_cycle = [1, 2, 4]
    kills = 0
    for attempt in range(40):
        proc = _start(url, worker_cycle[attempt % 3])
        if kills < 20:
            _kill_moment(proc, url, rng, early=attempt % 2 == 0)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                kills += 1
                continue
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0 and "done" in out:
            if kills >= 20:
                break
            continue
        pytest.fail(f"driver failed (rc {proc.returncode}): {err[-2000:]}")
    assert kills == 20

    store = open_store(url)
    run = store.get_run("fault")
    trials = store.trials(run.id)
    ids = [t.id for t in trials]
    assert len(ids) == len(set(ids)), "a trial was stored twice"
    assert sorted(ids) == list(range(BUDGET)), "a completed trial is missing"
    assert len({t.config for t in trials}) == BUDGET, "a configuration was measured twice"

    straight = perftune.tune(fault_driver.objective, fault_driver.SPACE, budget=BUDGET, seed=42)
    assert [(t.id, t.config, t.value) for t in straight.trials] == \
        [(t.id, t.config, t.value) for t in sorted(trials, key=lambda t: t.id)]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def test_workers_of_a_killed_driver_do_not_outlive_it(tmp_path):
    proc = _start(f"sqlite:///{tmp_path / 'orphans.db'}", 4)
    deadline = time.time() + 30
    workers: list[int] = []
    while time.time() < deadline and len(workers) < 4:
        time.sleep(0.2)
        workers = _children(proc.pid)
    assert len(workers) == 4, "the driver did not start its workers"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)  # returns only once no worker holds the driver's output pipes
    time.sleep(0.5)
    assert [pid for pid in workers if _running(pid)] == []


def _running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "zombie" not in status
