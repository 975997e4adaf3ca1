"""A leased uid is empty when the next candidate gets it, with or without a scan of /proc (root only)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from perftune.measure import Sandbox
from perftune.measure._uids import UidPool, _uids_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uids are leased only when perftune runs as root")

DAEMON = "setsid sh -c 'sleep {t}' </dev/null >/dev/null 2>&1 & echo started"


def _running_as(uid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and uid in _uids_of(p)[:3]]


@pytest.mark.parametrize("ending", ["exits", "times out"])
def test_a_step_in_a_pid_namespace_leaves_nothing_under_its_uid(
    monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "61020-61021")
    sandbox = Sandbox()
    if not sandbox._pid_namespace():
        pytest.skip("PID namespaces unavailable here")
    script = DAEMON.format(t=71.5) + ("; sleep 30" if ending == "times out" else "")
    with sandbox.scratch() as scratch:
        uid = scratch._leased_user()[0]  # type: ignore[index]
        r = sandbox.run(["sh", "-c", script], scratch=scratch, timeout_s=1.0)
        assert r.stdout == b"started\n", r.reason
        assert r.ok if ending == "exits" else r.reason and "timeout" in r.reason
        assert _running_as(uid) == []  # before the lease is released: nothing is left to sweep


def test_a_process_started_under_a_scratch_users_uid_is_killed_at_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "61022-61022")
    sandbox = Sandbox()
    with sandbox.scratch() as scratch:
        assert scratch.user is not None
        uid, gid = scratch.user
        mine = subprocess.Popen(["sleep", "72.5"], user=uid, group=gid, extra_groups=[], cwd="/")
    try:
        assert mine.wait(timeout=10) == -9  # the release swept the uid: its user may have started this
    finally:
        if mine.poll() is None:
            mine.kill()
            mine.wait()


def test_a_lease_left_by_a_holder_that_died_is_swept_by_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "61023-61023")
    holder = textwrap.dedent(
        """
        import os, subprocess
        from perftune.measure._uids import UidPool
        lease = UidPool.from_environment().acquire()
        p = subprocess.Popen(["sleep", "73.5"], user=lease.uid, group=lease.gid, extra_groups=[],
                             cwd="/", start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(p.pid, flush=True)
        os._exit(0)  # dies holding the lease, with a process left under its uid
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", holder], capture_output=True, text=True, timeout=30, check=True
    )
    leftover = int(out.stdout)
    try:
        assert leftover in _running_as(61023)
        pool = UidPool.from_environment()
        assert pool is not None
        lease = pool.acquire()
        try:
            deadline = time.monotonic() + 5
            while leftover in _running_as(61023):
                assert time.monotonic() < deadline, "the next holder got a uid with a process still under it"
                time.sleep(0.05)
        finally:
            lease.release()
    finally:
        for pid in _running_as(61023):
            os.kill(pid, 9)
