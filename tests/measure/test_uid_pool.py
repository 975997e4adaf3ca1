"""The pool of uids candidates lease (root only), its configuration, and what doctor says of it."""

from __future__ import annotations

import os

import pytest

from perftune.errors import PerftuneError
from perftune.measure import Sandbox, doctor
from perftune.measure._uids import DEFAULT_UID_RANGE, UidPool

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="uids are leased only when perftune runs as root")


def test_the_range_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERFTUNE_SANDBOX_UIDS", raising=False)
    pool = UidPool.from_environment()
    assert pool is not None and (pool.first, pool.last) == DEFAULT_UID_RANGE
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "61000-61003")
    pool = UidPool.from_environment()
    assert pool is not None and (pool.first, pool.last) == (61000, 61003) and 61002 in pool
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "none")
    assert UidPool.from_environment() is None
    for bad in ("abc", "5-1", "0-3"):
        monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", bad)
        with pytest.raises(PerftuneError, match="PERFTUNE_SANDBOX_UIDS"):
            UidPool.from_environment()


def test_uids_with_an_account_are_never_used() -> None:
    import pwd

    taken = {p.pw_uid for p in pwd.getpwall()}
    nobody = max(uid for uid in taken if uid < 70000)
    pool = UidPool(nobody - 1, nobody + 1)
    assert nobody not in pool.usable()
    assert set(pool.usable()) == {nobody - 1, nobody, nobody + 1} - taken


@needs_root
def test_concurrent_candidates_get_distinct_uids_which_are_released(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "61000-61001")
    sandbox = Sandbox()
    with sandbox.scratch() as a, sandbox.scratch() as b:
        assert a.user is not None and b.user is not None and a.user != b.user
        assert {a.user[0], b.user[0]} == {61000, 61001}
        assert os.stat(a.path).st_uid == a.user[0] and os.stat(a.path).st_mode & 0o777 == 0o700
        r = sandbox.run(["id", "-u"], scratch=a, timeout_s=5)
        assert r.ok and r.stdout.strip() == str(a.user[0]).encode()
    with sandbox.scratch() as c:  # both leases were given back
        assert c.user is not None and c.user[0] in (61000, 61001)


@needs_root
def test_without_a_pool_candidates_share_the_nobody_account(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_SANDBOX_UIDS", "none")
    sandbox = Sandbox()
    if sandbox._user() is None:
        pytest.skip("no nobody account here")
    with sandbox.scratch() as scratch:
        assert scratch.user is None
        r = sandbox.run(["id", "-u"], scratch=scratch, timeout_s=5)
    assert r.ok and r.stdout.strip() == str(sandbox._user()[0]).encode()
    names = {name: active for name, active, _ in doctor()}
    assert names["own uid per candidate"] is False


def test_doctor_lists_the_isolation_of_candidates() -> None:
    names = [name for name, _, _ in doctor()]
    for expected in ("process isolation", "clean environment", "files read for candidates"):
        assert expected in names
    if os.geteuid() == 0:
        assert "own uid per candidate" in names and "staging of private task directories" in names
