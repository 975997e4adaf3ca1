"""Shared runs: many processes attached to one run pull its trials; two killed with SIGKILL mid-trial.

What is shown, on PostgreSQL (8 processes) and on SQLite (4 processes): the budget is met exactly,
nothing is measured to the end twice (the objective creates a file per configuration with O_EXCL), the
trials of the killed workers are issued again once, to another worker, and recorded as such, and the
proposer role moves when its holder is one of the killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perftune.errors import StoreError
from perftune.store import open_store

WORKER = Path(__file__).with_name("shared_worker.py")
RUN = "shared"


def _start(url: str, out: Path, n: int, sleep_s: float, budget: int) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(WORKER.parent)}
    procs = []
    for i in range(n):
        with open(out / f"stderr-{i}.log", "wb") as err:
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKER), url, RUN, str(out), str(sleep_s), str(budget)],
                env=env, stdout=subprocess.DEVNULL, stderr=err))
    return procs


def _wait_for(predicate, timeout_s: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _kill_two_mid_trial(url: str, procs: list[subprocess.Popen[bytes]], done_before: int,
                        sleep_s: float) -> dict[int, int]:
    """Once ``done_before`` trials are in, SIGKILL the proposer and one other worker, each just after it
    claimed a trial; returns {pid: ticket it held}."""
    pids = {p.pid: p for p in procs}
    with open_store(url) as store:

        def enough() -> bool:
            try:
                return store.count(store.get_run(RUN).id) >= done_before
            except StoreError:
                return False  # the workers have not created the run yet

        _wait_for(enough, 120, f"{done_before} trials")
        run_id = store.get_run(RUN).id
        proposer = store.get_lease(run_id)
        assert proposer is not None and proposer.pid in pids
        killed: dict[int, int] = {}
        targets = [proposer.pid]
        deadline = time.monotonic() + 60
        while len(killed) < 2:
            assert time.monotonic() < deadline, "no worker was seen just after a claim"
            for lease in store.trial_leases(run_id, status="claimed"):
                # A first issue: the second kill must not hit the first one's trial issued again.
                fresh = (lease.claimed_at is not None and time.time() - lease.claimed_at < sleep_s / 3
                         and lease.n_issues == 1)
                wanted = lease.pid in targets if len(killed) == 0 else lease.pid not in killed
                if fresh and wanted and lease.pid in pids and lease.pid not in killed:
                    pids[lease.pid].kill()
                    pids[lease.pid].wait()  # reaped: its pid is gone from this host at once
                    killed[lease.pid] = lease.trial_id
                    break
            time.sleep(0.005)
    return killed


def _check(url: str, out: Path, procs: list[subprocess.Popen[bytes]], killed: dict[int, int],
           budget: int) -> None:
    for i, p in enumerate(procs):
        if p.pid in killed:
            continue
        p.wait(timeout=180)
        assert p.returncode == 0, (out / f"stderr-{i}.log").read_text()[-3000:]
    with open_store(url) as store:
        run_id = store.get_run(RUN).id
        trials = store.trials(run_id)
        leases = {lease.trial_id: lease for lease in store.trial_leases(run_id)}
        assert store.get_run(RUN).status == "finished"
    # The budget exactly: that many trials, each measured, each with one accepted result.
    assert len(trials) == budget and [t.id for t in trials] == list(range(budget))
    assert all(t.ok for t in trials), [(t.id, t.status, t.reason) for t in trials if not t.ok]
    assert len({t.config for t in trials}) == budget
    # Nothing measured to the end twice, and every full measurement is a recorded trial.
    assert not list(out.glob("twice-*"))
    assert len(list(out.glob("done-*"))) == budget
    # The killed workers' trials were issued again, once, to a live worker, and that is recorded.
    for pid, ticket in killed.items():
        lease = leases[ticket]
        assert lease.n_issues == 2 and lease.pid != pid and lease.status == "done"
        assert [h["worker"].rsplit(":", 1)[1] for h in lease.lost] == [str(pid)]
        assert trials[ticket].worker is not None and not trials[ticket].worker.endswith(f":{pid}")
    assert {t for t, lease in leases.items() if lease.n_issues > 1} == set(killed.values())
    assert all(lease.n_issues == 1 and not lease.lost
               for t, lease in leases.items() if t not in killed.values())
    # No worker measured after its claim was given to another; one of the survivors took the role over.
    summaries = [json.loads(f.read_text()) for f in out.glob("summary-*.json")]
    assert len(summaries) == len(procs) - len(killed)
    by_killed = sum(1 for t in trials if t.worker is not None and int(t.worker.rsplit(":", 1)[1]) in killed)
    assert sum(s["n_measured"] for s in summaries) == budget - by_killed
    assert all(s["n_discarded"] == 0 for s in summaries)
    assert sum(s["n_reissued"] for s in summaries) == len(killed)
    assert any(s["proposed"] for s in summaries)
    assert {s["stop_reason"] for s in summaries} == {"budget"}


@pytest.mark.slow
def test_eight_workers_on_postgresql_two_killed_mid_trial(fresh_postgres_url: str, tmp_path: Path) -> None:
    budget, sleep_s = 64, 0.3
    procs = _start(fresh_postgres_url, tmp_path, 8, sleep_s, budget)
    try:
        killed = _kill_two_mid_trial(fresh_postgres_url, procs, 12, sleep_s)
        _check(fresh_postgres_url, tmp_path, procs, killed, budget)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_four_workers_on_sqlite_two_killed_mid_trial(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    out = tmp_path / "out"
    out.mkdir()
    budget, sleep_s = 16, 0.3
    procs = _start(url, out, 4, sleep_s, budget)
    try:
        killed = _kill_two_mid_trial(url, procs, 3, sleep_s)
        _check(url, out, procs, killed, budget)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
