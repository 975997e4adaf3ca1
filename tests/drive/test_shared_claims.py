"""Trial leases of shared runs in the store: atomic claims, heartbeats, re-issue once, results only from the
current holder, on SQLite and PostgreSQL; and a store of the previous schema opens with them."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from perftune.space import Config, Int, Space
from perftune.store import LEASE_TIMEOUT_S, SCHEMA_VERSION, LeaseError, Store, open_store
from perftune.store._url import resolve_url
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 99)})


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("fresh_postgres_url"))
    return f"sqlite:///{tmp_path / 'claims.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with open_store(url) as st:
        yield st


def _sql(url: str, statement: str, **params: object) -> None:
    """Change rows behind the store's back, as another (dead) process would have left them."""
    engine = sa.create_engine(resolve_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement), params)
    finally:
        engine.dispose()


def _issue(store: Store, n: int) -> int:
    run = store.create_run(None, SPACE, {}, "min", None)
    store.issue_trials(run.id, [Trial(id=i, config=Config({"x": i}), technique="random") for i in range(n)])
    return run.id


def _result(ticket: int, value: float) -> Trial:
    return Trial(id=ticket, config=Config({"x": ticket}), status=Status.OK, value=value, loss=value,
                 samples=[value], technique="random")


def _play_dead(url: str, run_id: int, ticket: int) -> None:
    """The holder of ``ticket`` is on another host and silent for longer than any timeout."""
    _sql(url, "UPDATE trial_leases SET host = 'elsewhere', pid = 4242, heartbeat_at = :t "
              "WHERE run_id = :r AND trial_id = :k", t=time.time() - 3600, r=run_id, k=ticket)


def test_claims_take_the_oldest_pending_trial_once(store: Store) -> None:
    run_id = _issue(store, 3)
    claims = [store.claim_trial(run_id, timeout_s=30) for _ in range(3)]
    assert [c.trial_id for c in claims if c is not None] == [0, 1, 2]
    assert store.claim_trial(run_id, timeout_s=30) is None
    first = claims[0]
    assert first is not None
    assert first.status == "claimed" and first.n_issues == 1 and first.config["x"] == 0
    assert first.worker == f"{socket.gethostname()}:{os.getpid()}"
    assert store.count_trial_leases(run_id) == {"pending": 0, "claimed": 3, "done": 0}
    # Issuing a ticket again does nothing: the first configuration stays.
    assert store.issue_trials(run_id, [Trial(id=0, config=Config({"x": 9}))]) == []
    assert store.trial_leases(run_id)[0].config["x"] == 0


def test_a_result_is_stored_with_its_claim_closed(store: Store) -> None:
    run_id = _issue(store, 1)
    claim = store.claim_trial(run_id, timeout_s=30)
    assert claim is not None
    assert store.renew_claim(claim)
    assert store.finish_claim(claim, _result(0, 2.5))
    (trial,) = store.trials(run_id)
    assert (trial.id, trial.value, trial.samples) == (0, 2.5, [2.5])
    assert store.trial_leases(run_id)[0].status == "done"
    assert not store.finish_claim(claim, _result(0, 1.0))  # closed: a second result is refused
    assert not store.renew_claim(claim)
    assert store.trials(run_id)[0].value == 2.5
    with pytest.raises(ValueError, match="not the claimed trial"):
        store.finish_claim(claim, _result(1, 1.0))


def test_a_dead_workers_trial_is_issued_again_once_and_its_result_refused(url: str, store: Store) -> None:
    run_id = _issue(store, 1)
    dead = store.claim_trial(run_id, timeout_s=30)
    assert dead is not None
    _play_dead(url, run_id, 0)
    assert store.claim_trial(run_id, timeout_s=30, reclaim=False) is None  # only pending ones
    again = store.claim_trial(run_id, timeout_s=30)
    assert again is not None and again.trial_id == 0 and again.n_issues == 2
    assert [h["worker"] for h in again.lost] == ["elsewhere:4242"]
    assert again.token != dead.token
    # The old holder's heartbeat and result are refused (it is not the holder any more).
    assert not store.renew_claim(dead)
    assert not store.finish_claim(dead, _result(0, 9.0))
    assert store.count(run_id) == 0
    assert store.finish_claim(again, _result(0, 1.0))
    assert [t.value for t in store.trials(run_id)] == [1.0]
    (lease,) = store.trial_leases(run_id)
    assert (lease.status, lease.n_issues, len(lease.lost)) == ("done", 2, 1)


def test_a_trial_whose_second_worker_dies_too_fails_naming_both(url: str, store: Store) -> None:
    run_id = _issue(store, 2)
    assert store.claim_trial(run_id, timeout_s=30) is not None
    _play_dead(url, run_id, 0)
    assert store.claim_trial(run_id, timeout_s=30).trial_id == 0  # type: ignore[union-attr]
    _play_dead(url, run_id, 0)
    nxt = store.claim_trial(run_id, timeout_s=30)
    assert nxt is not None and nxt.trial_id == 1  # not issued a third time
    (trial,) = store.trials(run_id)
    assert trial.id == 0 and trial.status is Status.FAILED
    assert trial.reason == "its workers died measuring it, 2 times (elsewhere:4242, elsewhere:4242)"
    assert store.trial_leases(run_id)[0].status == "done"


def test_a_dead_process_on_this_host_is_seen_at_once(url: str, store: Store) -> None:
    run_id = _issue(store, 1)
    assert store.claim_trial(run_id, timeout_s=3600) is not None
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    _sql(url, "UPDATE trial_leases SET pid = :p WHERE run_id = :r", p=gone, r=run_id)
    again = store.claim_trial(run_id, timeout_s=3600)
    assert again is not None and again.n_issues == 2


def test_release_and_cancel(store: Store) -> None:
    run_id = _issue(store, 3)
    claim = store.claim_trial(run_id, timeout_s=30)
    assert claim is not None and store.release_claim(claim)
    assert not store.release_claim(claim)
    again = store.claim_trial(run_id, timeout_s=30)
    assert again is not None and again.trial_id == 0 and again.n_issues == 1  # a release is not an issue
    assert store.cancel_pending(run_id, "time budget reached") == [1, 2]
    assert [(t.id, t.status, t.reason) for t in store.trials(run_id)] == [
        (1, Status.CANCELLED, "time budget reached"), (2, Status.CANCELLED, "time budget reached")]
    assert store.count_trial_leases(run_id) == {"pending": 0, "claimed": 1, "done": 2}


def test_a_lease_is_stale_after_its_holders_promise(url: str, store: Store) -> None:
    run = store.create_run("r", SPACE, {}, "min", None)
    lease = store.acquire_lease(run.id, promise_s=5.0)
    assert store.get_lease(run.id).timeout_s == 5.0  # type: ignore[union-attr]
    _sql(url, "UPDATE leases SET host = 'elsewhere', heartbeat_at = :t", t=time.time() - 10)
    taken = store.acquire_lease(run.id)  # 10 s silent: stale by its promise, not by LEASE_TIMEOUT_S
    assert taken.token != lease.token and taken.timeout_s is None
    _sql(url, "UPDATE leases SET host = 'elsewhere', heartbeat_at = :t", t=time.time() - 10)
    with pytest.raises(LeaseError, match="is being driven by elsewhere"):
        store.acquire_lease(run.id)  # promised nothing: the default timeout holds
    assert LEASE_TIMEOUT_S > 10


def test_a_store_of_schema_v3_opens_with_trial_leases(url: str) -> None:
    with open_store(url, _schema_version=3) as old:
        run = old.create_run("old", SPACE, {}, "min", None)
        _sql(url, "INSERT INTO leases (run_id, token, host, pid, started_at, heartbeat_at) "
                  "VALUES (:r, 'tok', 'h', 1, 1.0, 2.0)", r=run.id)
    with open_store(url) as store:
        assert store.schema_version() == SCHEMA_VERSION
        lease = store.get_lease(run.id)
        assert lease is not None and lease.timeout_s is None and lease.heartbeat_at == 2.0
        assert store.trial_leases(run.id) == []
        store.issue_trials(run.id, [Trial(id=0, config=Config({"x": 1}))])
        assert store.count_trial_leases(run.id)["pending"] == 1


def test_finish_and_claim_records_and_claims_in_one_go(url: str, store: Store) -> None:
    run_id = _issue(store, 2)
    first = store.claim_trial(run_id, timeout_s=30)
    assert first is not None
    accepted, nxt = store.finish_and_claim(first, _result(0, 3.0), timeout_s=30)
    assert accepted and nxt is not None and nxt.trial_id == 1
    _play_dead(url, run_id, 1)
    assert store.claim_trial(run_id, timeout_s=30) is not None  # trial 1 issued again to "another"
    accepted, last = store.finish_and_claim(nxt, _result(1, 1.0), timeout_s=30)
    assert not accepted and last is None  # no longer its claim: refused, and nothing left to claim
    assert [t.id for t in store.trials(run_id)] == [0]


def test_tickets_a_resumed_driver_stored_are_not_measured_again(url: str, store: Store) -> None:
    # Both workers of a shared run died; a driver resumed the run (Tuner.resume) and measured the tickets
    # they had in hand, and one more, without the trial leases. A worker that joins later must not measure
    # those again (it did: 205 measurements for 200 trials), and a claim finished after the driver stored
    # the ticket is no result of this worker's.
    run_id = _issue(store, 4)
    held = store.claim_trial(run_id, timeout_s=30)
    assert held is not None and held.trial_id == 0
    _play_dead(url, run_id, 0)
    for ticket in (0, 1):
        store.add_trial(run_id, _result(ticket, 1.0 + ticket))  # what the resumed driver stored
    claim = store.claim_trial(run_id, timeout_s=30)
    assert claim is not None and claim.trial_id == 2  # not 0 (a dead worker's) nor 1 (pending): stored
    assert store.count_trial_leases(run_id) == {"pending": 1, "claimed": 1, "done": 2}
    store.add_trial(run_id, _result(2, 9.0))
    assert not store.finish_claim(claim, _result(2, 3.0))  # stored by the driver first: not this worker's
    assert [t.value for t in store.trials(run_id)] == [1.0, 2.0, 9.0]


@pytest.mark.postgres
def test_on_postgresql_leases_and_claims_go_by_the_servers_clock(
        fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose clock runs ahead takes neither a live driver's run nor a live worker's claim: both
    are written and judged by the database server's clock, not each machine's."""
    with open_store(fresh_postgres_url) as st:
        real = time.time
        assert abs(st.clock() - real()) < 5  # the throwaway server runs on this machine's clock
        run_id = _issue(st, 2)
        st.acquire_lease(run_id)
        claim = st.claim_trial(run_id, timeout_s=30)
        assert claim is not None
        # Both holders are on another machine, alive: their heartbeats are fresh by the server's clock.
        _sql(fresh_postgres_url, "UPDATE leases SET host = 'elsewhere', pid = 4242")
        _sql(fresh_postgres_url, "UPDATE trial_leases SET host = 'elsewhere', pid = 4242 "
                                 "WHERE status = 'claimed'")
        monkeypatch.setattr(time, "time", lambda: real() + LEASE_TIMEOUT_S + 60)  # this machine runs ahead
        with pytest.raises(LeaseError, match="is being driven by elsewhere"):
            st.acquire_lease(run_id)
        nxt = st.claim_trial(run_id, timeout_s=30)
        assert nxt is not None and nxt.trial_id == 1 and nxt.n_issues == 1  # the pending one, not ticket 0
        (held,) = [le for le in st.trial_leases(run_id) if le.trial_id == 0]
        assert (held.status, held.n_issues, held.host) == ("claimed", 1, "elsewhere")
        assert held.heartbeat_at is not None and held.heartbeat_at < real() + 5
        assert st.renew_claim(nxt)
        (mine,) = [le for le in st.trial_leases(run_id) if le.trial_id == 1]
        assert mine.heartbeat_at is not None and abs(mine.heartbeat_at - real()) < 5  # the server's time
