"""Conformance suite that every results-store backend must pass.

Subclass :class:`StoreConformance` in a test module and provide a ``store_url`` fixture that returns
the URL of a new, empty store for each test::

    class TestSQLiteStore(StoreConformance):
        @pytest.fixture
        def store_url(self, tmp_path):
            return f"sqlite:///{tmp_path / 'perftune.db'}"

The suite covers runs, trials, samples, checkpoints, leases (one driver per run; stale leases taken
over; several processes racing for one), ``best``/``history``, exports, and 8 processes appending to
one store at once (nothing lost, nothing duplicated, each trial's samples written by the same process
as the trial). This module is also the writer process of that last test:
``python -m perftune.testing.stores URL RUN WORKER N_WORKERS N_TICKETS GO_FILE``.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perftune.errors import StoreError
from perftune.store import EXPORT_SCHEMA, LeaseError, Store, open_store
from perftune.trial import Status, Trial

if TYPE_CHECKING:
    from perftune.space import Space

__all__ = ["StoreConformance", "example_space", "make_trial"]

N_WRITERS = 8
TICKETS_PER_WRITER = 60


def example_space() -> Space:
    """A small space with an integer, a float, a choice and a permutation."""
    from perftune.space import Choice, Float, Int, Permutation, Space

    return Space(
        {
            "x": Int(0, 100),
            "f": Float(0.0, 1.0),
            "mode": Choice(["fast", "safe"]),
            "order": Permutation(["a", "b", "c"]),
        }
    )


def make_trial(
    trial_id: int,
    *,
    status: Status = Status.OK,
    value: float | None = None,
    goal: str = "min",
    samples: list[float] | None = None,
    worker: str | None = "w0",
) -> Trial:
    """A finished trial of :func:`example_space` whose configuration depends on ``trial_id``."""
    from perftune.space import Config

    config = Config(
        x=trial_id % 101,
        f=(trial_id % 7) / 7,
        mode="fast" if trial_id % 2 else "safe",
        order=("a", "b", "c") if trial_id % 3 else ("c", "a", "b"),
    )
    ok = status is Status.OK
    if ok and value is None:
        value = float(trial_id)
    return Trial(
        id=trial_id,
        config=config,
        status=status,
        value=value if ok else None,
        loss=(value if goal == "min" else -value) if ok and value is not None else None,
        metrics={"time_ms": float(trial_id), "size": 3.0} if ok else {},
        samples=list(samples)
        if samples is not None
        else ([value, value] if ok and value is not None else []),
        reason=None if ok else f"{status.value} at ticket {trial_id}",
        technique="random",
        worker=worker,
        started_at=1000.0 + trial_id,
        finished_at=1000.5 + trial_id,
    )


def _assert_same_trial(got: Trial, want: Trial) -> None:
    assert got.id == want.id
    assert got.config == want.config
    assert got.status is want.status
    assert got.value == want.value
    assert got.loss == want.loss
    assert got.metrics == want.metrics
    assert got.samples == want.samples
    assert got.reason == want.reason
    assert (got.technique, got.worker) == (want.technique, want.worker)
    assert (got.started_at, got.finished_at) == (want.started_at, want.finished_at)


class StoreConformance:
    """Behaviour every store backend must show; subclasses provide the ``store_url`` fixture."""

    #: Whether a store opened again from ``store_url`` sees the same data (False for in-memory stores).
    persistent: bool = True

    @pytest.fixture
    def store_url(self) -> str:
        raise NotImplementedError("subclasses of StoreConformance provide a store_url fixture")

    @pytest.fixture
    def space(self) -> Space:
        try:
            return example_space()
        except ImportError as exc:  # while perftune.space is being built
            pytest.skip(f"perftune.space is not available: {exc}")

    @pytest.fixture
    def store(self, store_url: str) -> Iterator[Store]:
        with open_store(store_url) as store:
            yield store

    # ---------------------------------------------------------------- runs

    def test_new_store_is_empty_and_current(self, store: Store) -> None:
        from perftune.store import SCHEMA_VERSION

        assert store.list_runs() == []
        assert store.schema_version() == SCHEMA_VERSION
        with pytest.raises(StoreError, match="no runs yet"):
            store.get_run("latest")

    def test_run_round_trip(self, store: Store, space: Space) -> None:
        run = store.create_run("first", space, {"budget": 100, "technique": "bandit"}, "max", "time_ms")
        assert (run.name, run.goal, run.metric, run.status) == ("first", "max", "time_ms", "running")
        assert run.settings == {"budget": 100, "technique": "bandit"}
        assert run.space_fingerprint == space.fingerprint()
        assert run.load_space().fingerprint() == space.fingerprint()
        assert run.load_space().names == space.names  # the order fixes the encoding
        assert run.space == space.to_dict()
        for key in ("cpu_model", "cpu_count", "os", "python"):
            assert key in run.environment
        assert store.get_run(run.id) == run
        assert store.get_run(str(run.id)) == run
        assert store.get_run("first") == run
        second = store.create_run("second", space, {}, "min", None)
        assert store.get_run("latest") == second
        assert [r.name for r in store.list_runs()] == ["first", "second"]

    def test_generated_names_are_unique(self, store: Store) -> None:
        names = {store.create_run(None, None, {}, "min", None).name for _ in range(30)}
        assert len(names) == 30
        assert all(re.fullmatch(r"[a-z]+-[a-z]+-\d{3}", n) for n in names)

    def test_bad_run_names_and_goal(self, store: Store) -> None:
        store.create_run("taken", None, {}, "min", None)
        for name, message in [
            ("taken", "already exists"),
            ("latest", "reserved"),
            ("42", "reserved"),
            ("", "non-empty"),
            (" pad", "spaces"),
        ]:
            with pytest.raises(StoreError, match=message):
                store.create_run(name, None, {}, "min", None)
        with pytest.raises(StoreError, match="goal"):
            store.create_run("ok-name", None, {}, "fastest", None)
        assert [r.name for r in store.list_runs()] == ["taken"]

    def test_unknown_run(self, store: Store, space: Space) -> None:
        for ref in (99, "99", "nope"):
            with pytest.raises(StoreError, match="no run") as info:
                store.get_run(ref)
            assert "\n" not in str(info.value)
        with pytest.raises(StoreError, match="no run with id 99"):
            store.add_trial(99, make_trial(0))
        for method in (store.trials, store.best, store.count, store.load_checkpoint):
            with pytest.raises(StoreError, match="no run"):
                method(99)
        with pytest.raises(StoreError, match="no run"):
            store.save_checkpoint(99, 1, b"x")
        with pytest.raises(StoreError, match="no run"):
            store.finish_run(99, "finished")

    def test_finish_run(self, store: Store) -> None:
        run = store.create_run("r", None, {}, "min", None)
        store.finish_run(run.id, "interrupted")
        again = store.get_run(run.id)
        assert again.status == "interrupted"
        assert again.finished_at is not None and again.finished_at >= run.created_at

    # ---------------------------------------------------------------- trials

    def test_trial_round_trip(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "min", None)
        written = [
            make_trial(0, samples=[3.0, 1.0, 2.0], value=2.0),
            make_trial(1, status=Status.FAILED),
            make_trial(2, status=Status.TIMEOUT),
            make_trial(3, status=Status.CANCELLED),
            make_trial(4, samples=[]),
            make_trial(5, value=-1.5e-300),
        ]
        for t in written:
            assert store.add_trial(run.id, t) is True
        got = store.trials(run.id)
        assert len(got) == len(written)
        for g, w in zip(got, written, strict=True):
            _assert_same_trial(g, w)
        assert isinstance(got[0].config["order"], tuple)
        assert space.is_valid(got[0].config)
        assert store.count(run.id) == 6
        assert store.count(run.id, Status.OK) == 3
        assert store.count(run.id, "failed") == 1

    def test_trials_in_ticket_order(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "min", None)
        for i in (5, 2, 9, 0):
            store.add_trial(run.id, make_trial(i))
        assert [t.id for t in store.trials(run.id)] == [0, 2, 5, 9]

    def test_same_ticket_is_stored_once(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "min", None)
        first = make_trial(7, value=1.0, samples=[1.0, 1.0])
        assert store.add_trial(run.id, first) is True
        assert (
            store.add_trial(run.id, make_trial(7, value=5.0, samples=[5.0, 5.0, 5.0], worker="w9")) is False
        )
        (stored,) = store.trials(run.id)
        _assert_same_trial(stored, first)
        assert store.count(run.id) == 1

    def test_runs_are_separate(self, store: Store, space: Space) -> None:
        a = store.create_run("a", space, {}, "min", None)
        b = store.create_run("b", space, {}, "min", None)
        store.add_trial(a.id, make_trial(0, value=5.0))
        assert store.add_trial(b.id, make_trial(0, value=1.0)) is True
        assert store.best(a.id).value == 5.0  # type: ignore[union-attr]
        assert store.best(b.id).value == 1.0  # type: ignore[union-attr]

    def test_pending_trial_refused(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "min", None)
        pending = make_trial(0)
        pending.status = Status.PENDING
        with pytest.raises(ValueError, match="pending"):
            store.add_trial(run.id, pending)
        assert store.count(run.id) == 0

    def test_best_and_history_minimise(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "min", None)
        assert store.best(run.id) is None
        store.add_trial(run.id, make_trial(0, status=Status.FAILED))
        assert store.best(run.id) is None
        for i, v in [(1, 5.0), (2, 3.0), (3, 4.0), (4, 3.0), (5, 1.0)]:
            store.add_trial(run.id, make_trial(i, value=v))
        best = store.best(run.id)
        assert best is not None and (best.id, best.value, best.samples) == (5, 1.0, [1.0, 1.0])
        assert [(p.trial_id, p.status, p.value, p.best_value) for p in store.history(run.id)] == [
            (0, "failed", None, None),
            (1, "ok", 5.0, 5.0),
            (2, "ok", 3.0, 3.0),
            (3, "ok", 4.0, 3.0),
            (4, "ok", 3.0, 3.0),
            (5, "ok", 1.0, 1.0),
        ]

    def test_best_maximise_and_ties(self, store: Store, space: Space) -> None:
        run = store.create_run("r", space, {}, "max", None)
        for i, v in [(0, 2.0), (1, 9.0), (2, 9.0), (3, -4.0)]:
            store.add_trial(run.id, make_trial(i, value=v, goal="max"))
        best = store.best(run.id)
        assert best is not None and (best.id, best.value, best.loss) == (1, 9.0, -9.0)
        assert [p.best_value for p in store.history(run.id)] == [2.0, 9.0, 9.0, 9.0]

    # ---------------------------------------------------------------- checkpoints

    def test_checkpoint_keeps_only_the_latest(self, store: Store) -> None:
        run = store.create_run("r", None, {}, "min", None)
        other = store.create_run("other", None, {}, "min", None)
        assert store.load_checkpoint(run.id) is None
        store.save_checkpoint(run.id, 10, b"\x00first\xff")
        store.save_checkpoint(other.id, 1, b"other")
        big = bytes(range(256)) * 4096
        store.save_checkpoint(run.id, 20, big)
        assert store.load_checkpoint(run.id) == (20, big)
        assert store.load_checkpoint(other.id) == (1, b"other")

    # ---------------------------------------------------------------- leases

    def test_lease_is_held_by_one_driver(self, store: Store) -> None:
        run = store.create_run("leased", None, {}, "min", None)
        lease = store.acquire_lease(run.id)
        assert (lease.host, lease.pid) == (socket.gethostname(), os.getpid())
        assert store.get_lease(run.id) == lease
        with pytest.raises(LeaseError) as info:
            store.acquire_lease(run.id)  # a second Tuner of this process: alive, fresh heartbeat
        message = str(info.value)
        assert f"run 'leased' is being driven by {lease.host}:{lease.pid} since " in message
        assert "\n" not in message
        store.renew_lease(lease)
        store.release_lease(lease)
        assert store.get_lease(run.id) is None
        again = store.acquire_lease(run.id)
        assert again.token != lease.token
        store.release_lease(lease)  # an old holder's release leaves the new lease alone
        assert store.get_lease(run.id) == again

    def test_stale_lease_is_taken_over_and_the_old_holder_told(self, store: Store) -> None:
        run = store.create_run("stale", None, {}, "min", None)
        old = store.acquire_lease(run.id)
        time.sleep(0.01)
        new = store.acquire_lease(run.id, timeout_s=0.001)  # its heartbeat is older than the timeout
        assert new.token != old.token and store.get_lease(run.id) == new
        with pytest.raises(LeaseError, match="taken over"):
            store.renew_lease(old)
        store.renew_lease(new)

    def test_lease_of_a_dead_process_on_this_host_is_taken_over(self, store_url: str) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        with open_store(store_url) as store:
            run = store.create_run("orphan", None, {}, "min", None)
        # The holder dies without releasing (a crash): its row stays, with a pid that no longer exists.
        code = (
            "import os, sys; from perftune.store import open_store; s = open_store(sys.argv[1]); "
            "print(s.acquire_lease(s.get_run('orphan').id).pid, flush=True); os._exit(0)"
        )
        proc = subprocess.run([sys.executable, "-c", code, store_url], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        with open_store(store_url) as store:
            held = store.get_lease(run.id)
            assert held is not None and held.pid == int(proc.stdout) != os.getpid()
            lease = store.acquire_lease(run.id)
            assert lease.pid == os.getpid()

    @pytest.mark.slow
    def test_processes_racing_for_a_lease_get_it_once(self, store_url: str, tmp_path: Path) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        with open_store(store_url) as store:
            run = store.create_run("race", None, {}, "min", None)
        go, done = tmp_path / "go", tmp_path / "done"
        # Each racer stays alive until the end, so that none of them looks dead to the others.
        racer = tmp_path / "racer.py"
        racer.write_text(_RACER)
        procs = [
            subprocess.Popen([sys.executable, str(racer), store_url, str(go), str(done)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]
        try:
            time.sleep(0.5)
            go.touch()
            lines = [proc.stdout.readline().strip() for proc in procs]  # type: ignore[union-attr]
        finally:
            done.touch()
            outputs = [proc.communicate(timeout=120) for proc in procs]
        assert all(proc.returncode == 0 for proc in procs), outputs
        assert sorted(line.split()[0] for line in lines) == ["lost", "lost", "lost", "won"], lines
        assert all("is being driven by" in line for line in lines if line.startswith("lost"))
        winner = next(int(line.split()[1]) for line in lines if line.startswith("won"))
        with open_store(store_url) as store:
            held = store.get_lease(run.id)
            assert held is not None and held.pid == winner

    # ---------------------------------------------------------------- export

    def test_export_csv(self, store: Store, space: Space, tmp_path: Path) -> None:
        run = store.create_run("r", space, {}, "min", None)
        store.add_trial(run.id, make_trial(0, value=2.5, samples=[2.0, 2.5, 3.0]))
        store.add_trial(run.id, make_trial(1, status=Status.FAILED))
        path = tmp_path / "out.csv"
        store.export(run.id, "csv", path)
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert [r["trial"] for r in rows] == ["0", "1"]
        assert rows[0]["status"] == "ok" and float(rows[0]["value"]) == 2.5
        assert rows[0]["config.x"] == "0" and rows[0]["config.mode"] == "safe"
        assert json.loads(rows[0]["config.order"]) == ["c", "a", "b"]
        assert json.loads(rows[0]["samples"]) == [2.0, 2.5, 3.0] and rows[0]["n_samples"] == "3"
        assert float(rows[0]["metric.time_ms"]) == 0.0
        assert rows[1]["status"] == "failed" and rows[1]["value"] == "" and "failed" in rows[1]["reason"]

    def test_export_json(self, store: Store, space: Space, tmp_path: Path) -> None:
        run = store.create_run("r", space, {"seed": 3}, "min", None)
        store.add_trial(run.id, make_trial(0, value=2.5, samples=[2.0, 3.0]))
        path = tmp_path / "out.json"
        store.export(run.id, "json", path)
        data = json.loads(path.read_text())
        assert data["schema"] == EXPORT_SCHEMA
        assert data["run"]["name"] == "r" and data["run"]["settings"] == {"seed": 3}
        (trial,) = data["trials"]
        assert trial["config"]["order"] == ["c", "a", "b"] and trial["samples"] == [2.0, 3.0]
        assert trial["duration_s"] == 0.5
        with pytest.raises(StoreError, match="unknown export format"):
            store.export(run.id, "xml", tmp_path / "out.xml")
        assert not (tmp_path / "out.xml").exists()

    def test_to_dataframe(self, store: Store, space: Space) -> None:
        pytest.importorskip("pandas")
        run = store.create_run("r", space, {}, "min", None)
        for i in range(3):
            store.add_trial(run.id, make_trial(i))
        frame = store.to_dataframe(run.id)
        assert list(frame["trial"]) == [0, 1, 2]
        assert "config.x" in frame.columns

    # ---------------------------------------------------------------- schema versions

    @staticmethod
    def _sql(url: str, *statements: str) -> list[Any]:
        """Run raw SQL on the store's database, as an older or newer perftune would have."""
        import sqlalchemy as sa

        from perftune.store._url import resolve_url

        engine = sa.create_engine(resolve_url(url))
        try:
            with engine.begin() as conn:
                results = [conn.execute(sa.text(stmt)) for stmt in statements]
                return [r.all() if r.returns_rows else None for r in results]
        finally:
            engine.dispose()

    def test_upgrade_from_schema_v1(self, store_url: str, space: Space) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        from perftune.store import SCHEMA_VERSION

        with open_store(store_url, _schema_version=1) as old:
            assert old.schema_version() == 1
        self._sql(
            store_url,
            "INSERT INTO runs (name, created_at, status, goal, settings, environment) "
            "VALUES ('old-run', 1.0, 'running', 'min', '{}', '{}')",
            "INSERT INTO trials (run_id, trial_id, config, config_hash, status, value, loss) "
            "SELECT id, 0, '{\"x\": 1}', 'h', 'ok', 2.0, 2.0 FROM runs WHERE name = 'old-run'",
            "INSERT INTO samples (run_id, trial_id, idx, value) SELECT id, 0, 0, 2.0 FROM runs",
        )
        with open_store(store_url) as store:
            assert store.schema_version() == SCHEMA_VERSION
            run = store.get_run("old-run")
            assert run.finished_at is None
            best = store.best(run.id)
            assert best is not None and (best.config["x"], best.value, best.samples) == (1, 2.0, [2.0])
            assert store.load_checkpoint(run.id) is None
            store.save_checkpoint(run.id, 1, b"new")
            store.add_trial(run.id, make_trial(1, value=1.0))
            store.finish_run(run.id, "finished")
            assert store.count(run.id) == 2 and store.load_checkpoint(run.id) == (1, b"new")

    def test_newer_schema_is_refused_untouched(self, store_url: str) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        from perftune.store import SCHEMA_VERSION

        with open_store(store_url) as store:
            store.create_run("r", None, {}, "min", None)
        newer = SCHEMA_VERSION + 7
        self._sql(store_url, f"UPDATE meta SET value = '{newer}' WHERE key = 'schema_version'")
        message = f"store schema v{newer} is newer than this perftune (v{SCHEMA_VERSION}); upgrade perftune"
        with pytest.raises(StoreError, match=re.escape(message)) as info:
            open_store(store_url)
        assert "\n" not in str(info.value)
        (rows,) = self._sql(store_url, "SELECT value FROM meta WHERE key = 'schema_version'")
        assert rows == [(str(newer),)]

    def test_foreign_database_is_refused_untouched(self, store_url: str) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        self._sql(store_url, "CREATE TABLE inventory (item VARCHAR(20))")
        with pytest.raises(StoreError, match="not a perftune store"):
            open_store(store_url)
        (rows,) = self._sql(store_url, "SELECT item FROM inventory")
        assert rows == []
        with pytest.raises(Exception):  # noqa: B017 - the table must not exist, whatever the driver says
            self._sql(store_url, "SELECT * FROM meta")

    # ---------------------------------------------------------------- persistence and concurrency

    def test_reopen_sees_everything(self, store_url: str, space: Space) -> None:
        if not self.persistent:
            pytest.skip("in-memory store")
        with open_store(store_url) as store:
            run = store.create_run("r", space, {}, "min", None)
            store.add_trial(run.id, make_trial(0, value=1.0))
            store.save_checkpoint(run.id, 1, b"state")
            store.finish_run(run.id, "finished")
        with open_store(store_url) as store:
            again = store.get_run("r")
            assert again.status == "finished"
            assert [t.id for t in store.trials(again.id)] == [0]
            assert store.load_checkpoint(again.id) == (1, b"state")

    def test_usable_in_a_forked_child(self, store_url: str, space: Space) -> None:
        """A worker forked while the store is open gets its own connection; the parent's is untouched."""
        if not self.persistent or not hasattr(os, "fork"):
            pytest.skip("needs a persistent store and fork()")
        with open_store(store_url) as store:
            run = store.create_run("r", space, {}, "min", None)
            store.add_trial(run.id, make_trial(0))
            pid = os.fork()
            if pid == 0:  # the child: report through the exit status, never return into pytest
                code = 1
                try:
                    store.add_trial(run.id, make_trial(1))
                    code = 0 if store.count(run.id) == 2 else 2
                    store.close()
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            store.add_trial(run.id, make_trial(2))
            assert [t.id for t in store.trials(run.id)] == [0, 1, 2]

    @pytest.mark.slow
    def test_concurrent_first_open(self, store_url: str) -> None:
        """Several drivers open a store that does not exist yet: one builds the schema, none fails."""
        if not self.persistent:
            pytest.skip("in-memory store")
        code = (
            "import sys; from perftune.store import open_store; "
            "s = open_store(sys.argv[1]); print(s.create_run(None, None, {}, 'min', None).name)"
        )
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, store_url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for _ in range(4)
        ]
        names = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            names.append(out.strip())
        with open_store(store_url) as store:
            assert sorted(r.name for r in store.list_runs()) == sorted(names)
            assert len(set(names)) == 4

    @pytest.mark.slow
    def test_concurrent_writers_lose_and_duplicate_nothing(
        self, store_url: str, space: Space, tmp_path: Path
    ) -> None:
        """8 processes append to one run; each also tries to write its neighbour's tickets."""
        if not self.persistent:
            pytest.skip("in-memory store")
        with open_store(store_url) as store:
            run = store.create_run("shared", space, {}, "min", None)
        go = tmp_path / "go"
        n_tickets = N_WRITERS * TICKETS_PER_WRITER
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "perftune.testing.stores",
                    store_url,
                    "shared",
                    str(w),
                    str(N_WRITERS),
                    str(n_tickets),
                    str(go),
                ],  # fmt: skip
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for w in range(N_WRITERS)
        ]
        time.sleep(0.2)
        go.touch()
        inserted = 0
        for proc in procs:
            out, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            inserted += int(out.split()[-1])
        # Every ticket was offered by two writers; exactly one of them stored it.
        assert inserted == n_tickets
        with open_store(store_url) as store:
            trials = store.trials(run.id)
            assert [t.id for t in trials] == list(range(n_tickets))
            for t in trials:
                writer = int(t.worker.removeprefix("w"))  # type: ignore[union-attr]
                assert writer in (t.id % N_WRITERS, (t.id - 1) % N_WRITERS)
                # The samples come from the same writer as the trial row (one transaction).
                assert t.samples == [t.id + writer / 10, t.id + writer / 10 + 1]
            assert store.count(run.id) == n_tickets


_RACER = """
import pathlib, sys, time
from perftune.store import LeaseError, open_store

store = open_store(sys.argv[1])
run = store.get_run("race").id
go, done = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
while not go.exists():
    time.sleep(0.005)
try:
    print("won", store.acquire_lease(run).pid, flush=True)
except LeaseError as exc:
    print("lost", exc, flush=True)
while not done.exists():
    time.sleep(0.01)
"""


def _writer_main(argv: list[str]) -> int:
    url, run_ref, worker, n_writers, n_tickets, go = argv
    w, n_w, n_t = int(worker), int(n_writers), int(n_tickets)
    store = open_store(url)
    run = store.get_run(run_ref)
    mine = [t for t in range(n_t) if t % n_w == w]
    neighbours = [t for t in range(n_t) if t % n_w == (w + 1) % n_w]
    order = [t for pair in zip(mine, neighbours, strict=True) for t in pair]
    deadline = time.monotonic() + 60
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    inserted = 0
    for t in order:
        value = t + w / 10
        trial = make_trial(t, value=value, samples=[value, value + 1], worker=f"w{w}")
        inserted += store.add_trial(run.id, trial)
    store.close()
    print(inserted)
    return 0


if __name__ == "__main__":
    sys.exit(_writer_main(sys.argv[1:]))
