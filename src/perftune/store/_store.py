"""The results store: runs, trials, samples and checkpoints in SQLite or PostgreSQL.

Writes of trials are the hot path (one per finished trial): their INSERTs are compiled once from
SQLAlchemy Core when the store opens and then run on a DBAPI connection held by the store's dialect,
one short transaction per trial. Everything else goes through SQLAlchemy Core on pooled connections.
What differs between SQLite and PostgreSQL lives in their dialects (:mod:`perftune.store._sqlite`,
:mod:`perftune.store._postgres`), chosen once when the store opens.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import enum
import hashlib
import io
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from perftune._atomic import write_text_atomic
from perftune.errors import PerftuneError, StoreError
from perftune.store import _decode
from perftune.store import _schema as schema
from perftune.store._decode import Damage, StoreDamageError
from perftune.store._dialect import (
    RECONNECT_WAIT_S,
    ConnectionLost,
    Dialect,
    LockWait,
    TrialRow,
    refusal,
    store_error,
)
from perftune.store._environment import capture_environment
from perftune.store._keyset import keyset_page, trial_filters
from perftune.store._names import generate_run_name
from perftune.store._url import describe, dialect_for, resolve_url
from perftune.trial import Status, Trial

if TYPE_CHECKING:
    import pandas

    from perftune.space import Config, Space

__all__ = [
    "EXPORT_SCHEMA",
    "LEASE_TIMEOUT_S",
    "HistoryPoint",
    "Lease",
    "LeaseError",
    "RunInfo",
    "Store",
    "StoreDamageError",
    "MAX_ISSUES",
    "TRIAL_ORDERS",
    "TrialLease",
    "TrialSummary",
    "open_store",
    "trial_row",
]

T = TypeVar("T")

#: Version of the layout of ``export(..., "json")`` output.
EXPORT_SCHEMA = 1

#: A lease whose heartbeat is older than this is stale: another driver may take the run over.
LEASE_TIMEOUT_S = 600.0
_RESERVED_NAMES = frozenset({"latest"})
# What decoding a stored space or configuration raises on input perftune never wrote (besides
# RecursionError, for JSON nested too deeply).
_DECODING_ERRORS = (PerftuneError, ValueError, TypeError, LookupError, ArithmeticError, AttributeError)
_MAX_NAME_LEN = 200
_NAME_ATTEMPTS = 50


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """One tuning run as recorded in the store.

    Attributes:
        id: Numeric id, unique in the store.
        name: Unique name (given or generated, like ``brisk-heron-042``).
        created_at: ``time.time()`` when the run was created.
        status: ``"running"`` until :meth:`Store.finish_run` sets another status.
        goal: ``"min"`` or ``"max"``.
        metric: The metric optimised when the objective reports several, else None.
        space: The search space as ``Space.to_dict()``, or None.
        space_fingerprint: ``Space.fingerprint()``, to check that a resume uses the same space.
        settings: Run settings (budget, technique, seed, ...) as JSON-compatible values.
        environment: Machine, OS, Python, compilers and git commit where the run was created.
        finished_at: When :meth:`Store.finish_run` was called, else None.
        damaged: None, or which columns of the run's row hold what perftune never writes there (one
            line, ``"settings: not valid JSON"``). Those fields then hold neutral values (``{}``, None);
            the run is listed and can be deleted, and whatever reads its trials refuses it
            (:class:`StoreDamageError`).

    Example:
        >>> store = open_store("sqlite://")
        >>> run = store.create_run("demo", None, {"budget": 10}, "min", None)
        >>> (run.id, run.name, run.status)
        (1, 'demo', 'running')
    """

    id: int
    name: str
    created_at: float
    status: str
    goal: str
    metric: str | None
    space: dict[str, Any] | None
    space_fingerprint: str | None
    settings: dict[str, Any]
    environment: dict[str, Any]
    finished_at: float | None = None
    damaged: str | None = None

    def load_space(self) -> Space:
        """Rebuild the run's :class:`~perftune.space.Space` (``Space.from_dict``).

        Raises:
            StoreError: the run was created without a space.
        """
        from perftune.space import Space

        if any(part.startswith("space:") for part in (self.damaged or "").split("; ")):
            raise StoreDamageError(f"run {self.name!r} (id {self.id}) is damaged: {self.damaged}",
                                   run_id=self.id, run_name=self.name, field="space", detail=self.damaged)
        if self.space is None:
            raise StoreError(f"run {self.name!r} was recorded without a search space")
        try:
            return Space.from_dict(self.space)
        except RecursionError:
            detail = "nested too deeply"
        except _DECODING_ERRORS as exc:  # a stored space perftune never wrote
            detail = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise StoreDamageError(f"run {self.name!r} (id {self.id}) is damaged: space: {detail}",
                               run_id=self.id, run_name=self.name, field="space", detail=detail)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-compatible values (``damaged`` only when the run is damaged)."""
        out = dataclasses.asdict(self)
        if out["damaged"] is None:
            del out["damaged"]
        return out


class LeaseError(StoreError):
    """The run is driven by another driver (or this driver's lease was taken over).

    Example:
        >>> with open_store("sqlite://") as store:
        ...     run = store.create_run("demo", None, {}, "min", None)
        ...     _ = store.acquire_lease(run.id)
        ...     store.acquire_lease(run.id)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        perftune.store._store.LeaseError: run 'demo' is being driven by ...
    """


@dataclasses.dataclass(frozen=True)
class Lease:
    """Who drives a run: taken by :meth:`Store.acquire_lease`, renewed by heartbeats, then released.

    Attributes:
        run_id: The run.
        token: Identifies this holding of the lease (a takeover gives a new token).
        host: ``socket.gethostname()`` of the driver.
        pid: Process id of the driver on that host.
        started_at: When the lease was taken (``time.time()``).
        heartbeat_at: The driver's last sign of life.
        timeout_s: How long the holder promised to go without a heartbeat: after that its lease is stale
            (None: the taker's ``timeout_s``, by default :data:`LEASE_TIMEOUT_S`). A shared run's
            proposer promises a short one (docs/running-at-scale.md).

    Example:
        >>> with open_store("sqlite://") as store:
        ...     run = store.create_run("demo", None, {}, "min", None)
        ...     lease = store.acquire_lease(run.id)
        ...     store.release_lease(lease)
        ...     store.get_lease(run.id) is None
        True
    """

    run_id: int
    token: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    timeout_s: float | None = None

    def is_stale(self, now: float | None = None, timeout_s: float | None = None) -> bool:
        """Whether its driver is gone: no heartbeat for the promised time (``timeout_s`` where the lease
        promised none, by default :data:`LEASE_TIMEOUT_S`), or a process of this host no longer alive.

        ``now`` is the store's time (:meth:`Store.clock`), which the heartbeat was written with; None
        reads this machine's clock, right only where it agrees with the database's."""
        now = time.time() if now is None else now
        limit = self.timeout_s if self.timeout_s is not None else (
            LEASE_TIMEOUT_S if timeout_s is None else timeout_s)
        mine_and_dead = self.host == socket.gethostname() and not _pid_alive(self.pid)
        return now - self.heartbeat_at > limit or mine_and_dead

    def describe(self) -> str:
        """``host:pid since 2026-01-31 12:00:00 UTC``."""
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started_at))
        return f"{self.host}:{self.pid} since {since}"


#: How many times a trial is issued: once, and once again when its first worker died.
MAX_ISSUES = 2


@dataclasses.dataclass(frozen=True)
class TrialLease:
    """A trial of a shared run and who measures it (:meth:`Store.claim_trial`).

    The proposer issues trials (``pending``); a worker claims one atomically (``claimed``: its token,
    host and pid, then heartbeats); its result is accepted only while it holds the claim (``done``).
    A claim whose heartbeat is older than the timeout, or whose process is dead on the claimer's
    host, is issued again to the next claimer; ``lost`` lists the holders that died with it.

    Attributes:
        run_id: The run.
        trial_id: The trial's ticket.
        config: The configuration to measure.
        technique: Who proposed it.
        status: ``"pending"``, ``"claimed"`` or ``"done"``.
        token: Identifies the current claim (None while pending).
        host: Host of the current holder.
        pid: Process id of the current holder.
        n_issues: How many times it was claimed (2: re-issued once after its first worker died).
        lost: The earlier holders that died, as ``{"worker", "claimed_at", "heartbeat_at"}``.
        created_at: When the proposer issued it.
        claimed_at: When the current holder claimed it.
        heartbeat_at: The current holder's last sign of life.

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Trial
        >>> with open_store("sqlite://") as store:
        ...     run = store.create_run("demo", None, {}, "min", None)
        ...     store.issue_trials(run.id, [Trial(id=0, config=Config({"x": 1}), technique="random")])
        ...     claim = store.claim_trial(run.id, timeout_s=30)
        ...     (claim.trial_id, claim.status, claim.n_issues, claim.config["x"])
        [0]
        (0, 'claimed', 1, 1)
    """

    run_id: int
    trial_id: int
    config: Config
    technique: str | None
    status: str
    token: str | None
    host: str | None
    pid: int | None
    n_issues: int
    lost: tuple[dict[str, Any], ...]
    created_at: float
    claimed_at: float | None
    heartbeat_at: float | None

    @property
    def worker(self) -> str | None:
        """``host:pid`` of the current holder (None while pending)."""
        return None if self.host is None else f"{self.host}:{self.pid}"


class _LeaseStatements:
    """The statements of the trial-lease hot path, built once: building a statement (and its cache key)
    costs more than running it, and every worker runs these for every trial. Parameters are ``b_*``
    (SQLAlchemy reserves the column names in an UPDATE)."""

    def __init__(self) -> None:
        tl = schema.trial_leases
        b = sa.bindparam
        run, ticket = tl.c.run_id == b("b_run"), tl.c.trial_id == b("b_trial")
        self.look = sa.select(tl.c.trial_id, tl.c.status, tl.c.host, tl.c.pid, tl.c.heartbeat_at).where(
            run, tl.c.status.in_(("pending", "claimed")))
        # SKIP LOCKED on PostgreSQL; SQLite renders no FOR UPDATE (its write lock serialises claimers).
        self.pending = (sa.select(tl).where(run, tl.c.status == "pending").order_by(tl.c.trial_id).limit(1)
                        .with_for_update(skip_locked=True))
        mine = {"status": "claimed", "token": b("b_token"), "host": b("b_host"), "pid": b("b_pid"),
                "claimed_at": b("b_now"), "heartbeat_at": b("b_now"), "n_issues": b("b_issues")}
        self.claim_pending = sa.update(tl).where(run, ticket, tl.c.status == "pending").values(mine)
        held = (run, ticket, tl.c.token == b("b_held"), tl.c.status == "claimed")
        self.finish = sa.update(tl).where(*held).values(status="done", heartbeat_at=b("b_now"))
        self.renew = sa.update(tl).where(*held).values(heartbeat_at=b("b_now"))
        self.count = sa.select(tl.c.status, sa.func.count()).where(run).group_by(tl.c.status)
        self.samples = sa.insert(schema.samples)


_LEASE_SQL: list[_LeaseStatements] = []


def _lease_sql() -> _LeaseStatements:
    if not _LEASE_SQL:
        _LEASE_SQL.append(_LeaseStatements())
    return _LEASE_SQL[0]


class _Reconnect:
    """Waiting for a database whose connection dropped: growing pauses, up to ``RECONNECT_WAIT_S``."""

    def __init__(self) -> None:
        self._deadline = time.monotonic() + RECONNECT_WAIT_S
        self._delay = 0.1

    def wait(self) -> bool:
        """Pause before the next try; False once the time is up (the caller gives up)."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self._delay, left))
        self._delay = min(self._delay * 2, 2.0)
        return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OverflowError:
        return False
    return True


#: What :meth:`Store.trial_page` can sort by.
TRIAL_ORDERS = ("trial", "value", "status", "technique", "worker", "started_at", "duration")


class TrialSummary(NamedTuple):
    """A trial without its configuration and samples (:meth:`Store.trial_summaries`).

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Status, Trial
        >>> with open_store("sqlite://") as store:
        ...     run = store.create_run("demo", None, {}, "min", None)
        ...     _ = store.add_trial(run.id, Trial(id=0, config=Config({"x": 1}), status=Status.OK,
        ...                                       value=2.0, loss=2.0, technique="random"))
        ...     store.trial_summaries(run.id)[0][:5]
        (0, 'ok', 2.0, 2.0, 'random')
    """

    trial_id: int
    status: str
    value: float | None
    loss: float | None
    technique: str | None
    worker: str | None
    reason: str | None
    started_at: float | None
    finished_at: float | None


class HistoryPoint(NamedTuple):
    """One trial in a run's history, with the best value reached so far (in the user's units).

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Status, Trial
        >>> with open_store("sqlite://") as store:
        ...     run = store.create_run("demo", None, {}, "min", None)
        ...     for i, v in enumerate([3.0, 1.0, 2.0]):
        ...         _ = store.add_trial(run.id, Trial(id=i, config=Config({"x": i}), status=Status.OK,
        ...                                           value=v, loss=v))
        ...     store.history(run.id)[2]
        HistoryPoint(trial_id=2, status='ok', value=2.0, best_value=1.0)
    """

    trial_id: int
    status: str
    value: float | None
    best_value: float | None


def _json_default(obj: Any) -> Any:
    # Settings hold dataclasses (budgets, technique settings), enums and numpy scalars.
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=repr)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item):
        return item()
    tolist = getattr(obj, "tolist", None)  # numpy arrays
    if callable(tolist):
        return tolist()
    return str(obj)


def _dumps(obj: Any, *, sort_keys: bool = True) -> str:
    return json.dumps(obj, default=_json_default, sort_keys=sort_keys, separators=(",", ":"))


def _float_or_none(x: Any) -> float | None:
    return None if x is None else float(x)


def config_hash(config_json: str) -> str:
    """The hash stored with each trial: sha256 of the configuration's canonical JSON."""
    return hashlib.sha256(config_json.encode()).hexdigest()


def trial_row(run_id: int, trial: Trial) -> TrialRow:
    """A finished trial as the row of the trials table (the values of ``TRIAL_KEYS``, in order).

    Raises:
        ValueError: the trial is still pending.
    """
    if trial.status is Status.PENDING:
        raise ValueError(f"trial {trial.id} is still pending: only finished trials are stored")
    config_json = trial.config.to_json()
    return (
        run_id,
        trial.id,
        config_json,
        config_hash(config_json),
        trial.status.value,
        trial.reason,
        _float_or_none(trial.value),
        _float_or_none(trial.loss),
        _dumps(trial.metrics) if trial.metrics else None,
        trial.technique,
        trial.worker,
        _float_or_none(trial.started_at),
        _float_or_none(trial.finished_at),
        (
            _dumps({str(k): float(v) for k, v in sorted(trial.intermediate.items())})
            if trial.intermediate
            else None
        ),
    )


class Store:
    """A results store; create it with :func:`open_store`.

    Runs hold trials (append-only, at most one row per ticket), the samples of each trial, and the
    latest checkpoint of the driver. Safe to share between threads; each process opens its own.

    Example:
        >>> store = open_store("sqlite://")  # in memory; a path or URL in real use
        >>> run = store.create_run(None, None, {}, "min", None)
        >>> store.count(run.id)
        0
        >>> store.close()
    """

    def __init__(
        self,
        engine: Engine,
        url: URL,
        *,
        schema_version: int = schema.SCHEMA_VERSION,
        create: bool = True,
        dialect: Dialect | None = None,
        read_only: bool = False,
    ) -> None:
        self._engine = engine
        self._may_create = create and not read_only
        self.read_only = read_only
        self._url = url
        self.location = describe(url)
        self._dialect = dialect if dialect is not None else dialect_for(url)
        self._lock = threading.RLock()
        self._spaces: dict[int, Space | None] = {}
        self._closed = False
        self._pid = os.getpid()
        try:
            self._migrate(schema_version)
            if schema_version == schema.SCHEMA_VERSION:
                self._prepare_hot_path()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ plumbing

    @property
    def url(self) -> str:
        """The store's URL, without password."""
        return self._url.render_as_string(hide_password=True)

    @property
    def has_password(self) -> bool:
        """Whether the store's URL holds a password (which :attr:`url` hides)."""
        return bool(self._url.password)

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._dialect.name

    @property
    def _dbapi(self) -> Any:
        """The hot path's DBAPI connection (sqlite3's, psycopg2's or psycopg's)."""
        return self._dialect.dbapi_connection

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"store {self.location} is closed")
        if self._pid != os.getpid():
            self._reconnect_after_fork()

    def _reconnect_after_fork(self) -> None:
        # A SQLite or libpq connection must be neither used nor closed in a forked child (SQLite's
        # "how to corrupt" list): keep the parent's objects alive, untouched, and connect anew.
        connected = self._dialect.connected
        _INHERITED.append((self._engine, *self._dialect.abandon()))
        self._pid = os.getpid()
        try:
            self._dialect.check_fork()
        except RuntimeError:
            self._closed = True
            raise
        self._lock = threading.RLock()  # another thread of the parent may have held it at fork time
        self._engine = self._dialect.create_engine()
        if connected:
            self._dialect.connect_hot_path(self._engine)

    def _run(self, fn: Callable[[Connection], T], what: str, *, write: bool) -> T:
        """Run ``fn`` in one transaction; retry while SQLite is locked by another writer."""
        self._check_open()
        if write and self.read_only:
            raise StoreError(f"store {self.location}: {what}: the store was opened for reading only")
        wait = LockWait(self.location, what)
        reconnect: _Reconnect | None = None
        while True:
            committing = False
            with self._lock:
                try:
                    with self._engine.connect() as conn:
                        if write:
                            self._dialect.begin_write(conn)
                        result = fn(conn)
                        if write:
                            committing = True
                            conn.commit()
                        self._reached = True
                        return result
                except sa.exc.DBAPIError as exc:
                    self._dialect.raise_if_interrupted(exc)
                    if self._dialect.lost(exc) and not committing and getattr(self, "_reached", False):
                        # The transaction did not happen (a commit cut off might have: not tried again).
                        reconnect = reconnect or _Reconnect()
                        if reconnect.wait():
                            continue
                    if not self._dialect.is_locked(exc):
                        raise store_error(self.location, exc, what) from None
            wait.sleep()

    # ------------------------------------------------------------------ schema

    def _read_version(self, conn: Connection) -> int:
        # First, before any table is read: a view named like one of ours would run instead of the table
        # (one that never ends makes every command hang), a trigger would run inside our writes.
        found = self._dialect.foreign_objects(conn)
        if found is not None:
            raise refusal(self.location, found)
        names = set(sa.inspect(conn).get_table_names())
        if "meta" not in names:
            if names:
                listed = ", ".join(sorted(names)[:5])
                raise StoreError(f"store {self.location}: not a perftune store (it holds tables {listed})")
            return 0
        value = conn.execute(
            sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version")
        ).scalar_one_or_none()
        if value is None or not str(value).isdigit():
            raise StoreError(f"store {self.location}: not a perftune store (no schema version)")
        return int(value)

    def _check_version(self, version: int) -> None:
        if version > schema.SCHEMA_VERSION:
            raise StoreError(
                f"store {self.location}: store schema v{version} is newer than this perftune "
                f"(v{schema.SCHEMA_VERSION}); upgrade perftune"
            )

    def _upgrade(self, conn: Connection, target: int) -> None:
        self._dialect.lock_schema(conn)
        version = self._read_version(conn)
        self._check_version(version)
        for migration in schema.migrations:
            if version < migration.version <= target:
                migration.apply(conn)
                values = {"key": "schema_version", "value": str(migration.version)}
                if version == 0:
                    conn.execute(sa.insert(schema.meta).values(values))
                    conn.execute(sa.insert(schema.meta).values(key="created_by", value=_perftune_version()))
                else:
                    conn.execute(
                        sa.update(schema.meta)
                        .where(schema.meta.c.key == "schema_version")
                        .values(value=values["value"])
                    )
                version = migration.version

    def _migrate(self, target: int) -> None:
        version = self._run(self._read_version, "cannot open", write=False)
        if version == 0 and not self._may_create:
            # describe() gives a SQLite store's path, a server's URL (password hidden) otherwise.
            empty = ("an empty SQLite database" if "://" not in self.location
                     else "a database without perftune's tables: no run was stored in it yet")
            raise StoreError(f"{self.location} is not a perftune store ({empty})")
        self._check_version(version)
        if version < target and self.read_only:
            raise StoreError(
                f"store {self.location}: its schema v{version} is older than this perftune's "
                f"(v{schema.SCHEMA_VERSION}) and this command only reads; a command that writes "
                "(perftune run or resume) upgrades it, after which older perftunes cannot open it")
        if version < target:
            self._run(lambda conn: self._upgrade(conn, target), "cannot upgrade the schema", write=True)

    def schema_version(self) -> int:
        """The schema version recorded in the store."""
        return self._run(self._read_version, "cannot read the schema version", write=False)

    # ------------------------------------------------------------------ hot path

    def _prepare_hot_path(self) -> None:
        self._dialect.compile_hot_path(self._engine)
        self._dialect.connect_hot_path(self._engine)

    def add_trial(self, run_id: int, trial: Trial) -> bool:
        """Record a finished trial and its samples in one transaction (the driver's hot path).

        Trials are append-only and never duplicated: when the run already holds a trial with this
        ticket (``trial.id``), nothing is written and False is returned (the first write wins).

        Args:
            run_id: The run, from :meth:`create_run`.
            trial: A finished trial (any status but PENDING).

        Returns:
            True when the trial was stored, False when its ticket was already there.

        Raises:
            StoreError: the run does not exist or the database cannot be written.
        """
        row = trial_row(run_id, trial)
        samples = [float(v) for v in trial.samples]
        self._check_open()
        if self.read_only:
            raise StoreError(f"store {self.location}: cannot record trial {trial.id}: the store was opened "
                             "for reading only")
        with self._lock:
            reconnect: _Reconnect | None = None
            while True:
                try:
                    return self._dialect.add_trial(run_id, trial.id, row, samples)
                except ConnectionLost:
                    # Writing a ticket twice stores it once (the first write wins), so a write whose
                    # commit was cut off is simply written again on a new connection.
                    reconnect = reconnect or _Reconnect()
                    if not reconnect.wait():
                        raise
                    with contextlib.suppress(StoreError):
                        self._dialect.reconnect_hot_path(self._engine)

    # ------------------------------------------------------------------ runs

    def create_run(
        self,
        name: str | None,
        space: Space | None,
        settings: Mapping[str, Any] | None = None,
        goal: str = "min",
        metric: str | None = None,
        *,
        environment: Mapping[str, Any] | None = None,
        checkpoint: bytes | None = None,
    ) -> RunInfo:
        """Create a run; its environment (machine, compilers, git commit of the cwd) is recorded.

        Args:
            name: A unique name, or None for a generated one (``adjective-noun-NNN``).
            space: The search space (stored as ``to_dict()`` with its fingerprint).
            settings: Run settings, stored as JSON (dataclasses and enums are converted).
            goal: ``"min"`` or ``"max"``.
            metric: The metric optimised, when the objective reports several.
            environment: Entries added to (or replacing) the captured environment, e.g. the git
                commit of the tuned program when it lives elsewhere.
            checkpoint: The run's first checkpoint (0 trials), written in the same transaction, so
                that no reader ever sees the run without one: a driver killed right after creating its
                run can still be resumed.

        Raises:
            StoreError: the name is taken or not allowed, or the goal is unknown.
        """
        if goal not in ("min", "max"):
            raise StoreError(f"goal must be 'min' or 'max', not {goal!r}")
        if name is not None:
            _check_name(name)
        env = capture_environment()
        if environment:
            env.update(environment)
        values: dict[str, Any] = {
            "created_at": time.time(),
            "status": "running",
            "goal": goal,
            "metric": metric,
            # Parameter order is part of the space (it fixes the encoding): never sort it.
            "space": _dumps(space.to_dict(), sort_keys=False) if space is not None else None,
            "space_fingerprint": space.fingerprint() if space is not None else None,
            "settings": _dumps(dict(settings or {})),
            "environment": _dumps(env),
        }
        for _ in range(_NAME_ATTEMPTS):
            values["name"] = name if name is not None else generate_run_name()
            try:
                run_id = self._run(
                    lambda conn: self._insert_run(conn, values, checkpoint), "cannot create a run", write=True
                )
            except _NameTaken:
                if name is not None:
                    raise StoreError(f"store {self.location}: a run named {name!r} already exists") from None
                continue
            self._spaces[run_id] = space
            return self.get_run(run_id)
        raise StoreError(f"store {self.location}: could not generate an unused run name")

    def _insert_run(self, conn: Connection, values: dict[str, Any], checkpoint: bytes | None = None) -> int:
        taken = conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.name == values["name"])).first()
        if taken is not None:
            raise _NameTaken
        try:
            result = conn.execute(sa.insert(schema.runs).values(values).returning(schema.runs.c.id))
        except sa.exc.IntegrityError:
            raise _NameTaken from None  # a concurrent writer took it (PostgreSQL)
        run_id = int(result.scalar_one())
        if checkpoint is not None:
            conn.execute(self._checkpoint_upsert(run_id, 0, checkpoint))
        return run_id

    @staticmethod
    def _row_to_run(row: sa.Row[Any]) -> RunInfo:
        # Never raises for a damaged column (the run is listed as damaged, and can be deleted).
        fields, damaged = _decode.run_fields(row._mapping)
        return RunInfo(**fields, damaged="; ".join(damaged) if damaged else None)

    def require_intact(self, run: RunInfo) -> None:
        """Refuse a damaged run (:attr:`RunInfo.damaged`) before its contents are read.

        Raises:
            StoreDamageError: one line naming the store, the run and the damaged columns.
        """
        if run.damaged is not None:
            raise StoreDamageError(
                f"store {self.location}: run {run.name!r} (id {run.id}) is damaged: {run.damaged} "
                f"(perftune runs delete {run.id} removes it)",
                run_id=run.id, run_name=run.name, field=run.damaged.split(":", 1)[0], detail=run.damaged)

    def _run_name(self, run_id: Any) -> str | None:
        """The name of a run for an error message (None when it cannot be read)."""
        try:
            name = self._run(lambda conn: conn.execute(sa.select(schema.runs.c.name)
                                                       .where(schema.runs.c.id == run_id)).scalar(),
                             "cannot read runs", write=False)
        except StoreError:
            return None
        return name if isinstance(name, str) or name is None else _decode.show(name)

    def _damaged(self, run_id: Any, damage: Damage, *, trial_id: Any = None,
                 what: str = "trial") -> StoreDamageError:
        """One line naming the store, the run, the trial (or the run's other row) and the damaged column."""
        name = self._run_name(run_id)
        who = f"run {name!r} (id {run_id})" if name is not None else f"run id {_decode.show(run_id)}"
        if trial_id is not None:
            who += f", {what} {trial_id if isinstance(trial_id, int) else _decode.show(trial_id)}"
        elif what not in ("trial", "run"):
            who += f", its {what}"
        return StoreDamageError(
            f"store {self.location}: {who} is damaged: {damage.field}: {damage.detail}",
            run_id=run_id if isinstance(run_id, int) else None, run_name=name, trial_id=trial_id,
            field=damage.field, detail=damage.detail)

    def get_run(self, ref: str | int) -> RunInfo:
        """Find a run by numeric id, name, or ``"latest"`` (the most recently created).

        Raises:
            StoreError: no such run.
        """
        runs = schema.runs
        query = sa.select(runs)
        if isinstance(ref, bool):
            raise TypeError("run reference must be a name, an id or 'latest'")
        # An id in ASCII digits ("²" is a digit to str.isdigit, not to int); one past 64 bits names no run
        # (the database's integers end there: the query would overflow).
        if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isascii() and ref.strip().isdigit()):
            run_id = int(ref)
            if not -(2**63) <= run_id < 2**63:
                raise StoreError(f"store {self.location}: no run {ref!r} (perftune runs lists the runs)")
            query = query.where(runs.c.id == run_id)
        elif ref == "latest":
            query = query.order_by(runs.c.id.desc()).limit(1)
        else:
            query = query.where(runs.c.name == ref)
        row = self._run(lambda conn: conn.execute(query).first(), "cannot read runs", write=False)
        if row is None:
            what = "no runs yet" if ref == "latest" else f"no run {ref!r}"
            raise StoreError(f"store {self.location}: {what} (perftune runs lists the runs)")
        return self._row_to_run(row)

    def _run_id(self, ref: str | int) -> int:
        """The id of the run ``ref`` names, taken as :meth:`get_run` takes it: an id (an ``int`` as it is,
        without a query), a name, an id in digits, or ``"latest"``. Every public method that reads a run's
        trials, leases or checkpoint takes its run through this, so that a name never matches nothing.

        Raises:
            TypeError: ``ref`` is neither a str nor an int (a bool, a float, a :class:`RunInfo`: give its
                ``id``).
            StoreError: no run of that name (or id in digits), or no run at all for ``"latest"``.
        """
        if isinstance(ref, int) and not isinstance(ref, bool):
            return ref
        if isinstance(ref, str):
            return self.get_run(ref).id
        shown = repr(ref)[:60]
        hint = "; give its .id" if isinstance(ref, RunInfo) else ""
        raise TypeError(f"a run is given by its id, its name or 'latest', not a {type(ref).__name__} "
                        f"({shown}){hint}")

    def list_runs(self) -> list[RunInfo]:
        """Every run, oldest first; a damaged one too (:attr:`RunInfo.damaged` says which columns)."""
        rows = self._run(
            lambda conn: conn.execute(sa.select(schema.runs).order_by(schema.runs.c.id)).all(),
            "cannot read runs",
            write=False,
        )
        return [self._row_to_run(r) for r in rows]

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        """Mark a run as ended (``"finished"``, ``"interrupted"``, ``"failed"``, ...).

        Raises:
            StoreError: no such run.
        """
        if not status or len(status) > 32:
            raise ValueError(f"bad run status {status!r}")

        def update(conn: Connection) -> int:
            result = conn.execute(
                sa.update(schema.runs)
                .where(schema.runs.c.id == run_id)
                .values(status=status, finished_at=time.time())
            )
            return int(result.rowcount)

        if self._run(update, "cannot update the run", write=True) == 0:
            raise StoreError(f"store {self.location}: no run with id {run_id}")

    def record_result(self, run_id: int, result: dict[str, Any] | None) -> None:
        """Record the final answer of a run (``settings["result"]``), replacing an earlier one.

        The final answer can differ from the best trial (a winner that fails its check, a flag set that
        does not confirm against -O3); every view of the run reads it from here, so that they agree.
        None forgets it (a resumed run has no final answer until it ends again).

        Raises:
            StoreError: no such run.
        """
        self._update_settings(run_id, {"result": result}, "cannot record the result")

    def update_settings(self, run_id: int, changes: Mapping[str, Any]) -> None:
        """Set keys of a run's settings (a value of None removes the key); the others are kept.

        For what changes over a run's life, such as the budget a resumed run was given, so that every
        view of the run (show, the report) says what it ran with.

        Raises:
            StoreError: no such run.
        """
        self._update_settings(run_id, changes, "cannot update the run's settings")

    def _update_settings(self, run_id: int, changes: Mapping[str, Any], what: str) -> None:
        runs = schema.runs

        def update(conn: Connection) -> int:
            row = conn.execute(sa.select(runs.c.settings).where(runs.c.id == run_id)).first()
            if row is None:
                return 0
            try:
                settings = _decode.json_object(row.settings, "settings") or {}
            except Damage as damage:
                raise self._damaged(run_id, damage, what="run") from None
            for key, value in changes.items():
                if value is None:
                    settings.pop(key, None)
                else:
                    settings[key] = value
            conn.execute(sa.update(runs).where(runs.c.id == run_id).values(settings=_dumps(settings)))
            return 1

        if self._run(update, what, write=True) == 0:
            raise StoreError(f"store {self.location}: no run with id {run_id}")

    def _require_run(self, conn: Connection, run_id: int) -> None:
        if conn.execute(sa.select(schema.runs.c.id).where(schema.runs.c.id == run_id)).first() is None:
            raise StoreError(f"store {self.location}: no run with id {run_id}")

    def _space(self, run_id: int) -> Space | None:
        """The run's space, read once; a damaged run is refused here, before its trials are decoded."""
        if run_id not in self._spaces:
            run = self.get_run(run_id)
            self.require_intact(run)
            try:
                space = run.load_space() if run.space is not None else None
            except StoreDamageError as exc:
                raise self._damaged(run_id, Damage("space", exc.detail or "damaged"), what="run") from None
            self._spaces[run_id] = space
        return self._spaces[run_id]

    # ------------------------------------------------------------------ trials

    def _trial_from_row(self, m: Mapping[str, Any], samples: list[float], space: Space | None) -> Trial:
        """A stored trial, every column checked (StoreDamageError naming the run, trial and column)."""
        try:
            return _decode.trial_from_row(m, samples, space)
        except Damage as damage:
            raise self._damaged(m.get("run_id"), damage, trial_id=m.get("trial_id")) from None

    def trials(self, run_id: int | str) -> list[Trial]:
        """Every stored trial of a run in ticket order, with configurations decoded by the run's space.

        ``run_id`` is the run's id, name or ``"latest"``, as :meth:`get_run` takes it; so for every method
        that reads a run.

        Raises:
            StoreError: no such run.
            StoreDamageError: the run, or one of its trials, holds what perftune never writes (one line
                naming the run, the trial and the column).
        """
        run_id = self._run_id(run_id)
        space = self._space(run_id)
        t, s = schema.trials, schema.samples

        def read(conn: Connection) -> tuple[Sequence[Any], Sequence[Any]]:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.trial_id)).all()
            srows = conn.execute(
                sa.select(s.c.trial_id, s.c.value).where(s.c.run_id == run_id).order_by(s.c.trial_id, s.c.idx)
            ).all()
            return rows, srows

        rows, srows = self._run(read, "cannot read trials", write=False)
        by_trial: dict[int, list[float]] = {}
        for trial_id, value in srows:
            by_trial.setdefault(trial_id, []).append(value)
        return [self._trial_from_row(r._mapping, by_trial.get(r.trial_id, []), space) for r in rows]

    def best(self, run_id: int | str) -> Trial | None:
        """The successful trial with the lowest loss (earliest on ties), or None when there is none.

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        t, s = schema.trials, schema.samples

        def read(conn: Connection) -> tuple[Any, list[float]]:
            row = conn.execute(
                sa.select(t)
                .where(t.c.run_id == run_id, t.c.status == Status.OK.value, t.c.loss.is_not(None))
                .order_by(t.c.loss, t.c.trial_id)
                .limit(1)
            ).first()
            if row is None:
                self._require_run(conn, run_id)
                return None, []
            values = conn.execute(
                sa.select(s.c.value)
                .where(s.c.run_id == run_id, s.c.trial_id == row.trial_id)
                .order_by(s.c.idx)
            ).scalars()
            return row, list(values)

        row, samples = self._run(read, "cannot read trials", write=False)
        if row is None:
            return None
        return self._trial_from_row(row._mapping, samples, self._space(run_id))

    def pareto(self, run_id: int | str) -> list[Trial]:
        """The run's Pareto front: its successful, feasible, non-dominated trials in ticket order.

        The objectives are those the run was created with (``settings["objectives"]``, written by the
        driver); a run with one objective gives the trials that share the best value.

        Raises:
            StoreError: no such run.
            StoreDamageError: the run's stored objectives are not what perftune writes.
        """
        from perftune.search import Objectives

        run = self.get_run(self._run_id(run_id))
        raw = run.settings.get("objectives")
        try:
            objectives = (Objectives.from_dict(raw) if isinstance(raw, Mapping)
                          else Objectives((run.metric or "value",), (run.goal,)))
        except StoreError:
            raise
        except PerftuneError as error:  # names, goals or constraints perftune never writes
            detail = str(error).removeprefix("objectives: ")
            raise self._damaged(run.id, Damage("settings.objectives", detail), what="run") from None
        return objectives.pareto(self.trials(run.id))

    def count(self, run_id: int | str, status: Status | str | None = None) -> int:
        """Number of stored trials of a run (of one status when given).

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        t = schema.trials
        query = sa.select(sa.func.count()).select_from(t).where(t.c.run_id == run_id)
        if status is not None:
            query = query.where(t.c.status == Status(status).value)

        def read(conn: Connection) -> int:
            n = int(conn.execute(query).scalar_one())
            if n == 0:
                self._require_run(conn, run_id)
            return n

        return self._run(read, "cannot count trials", write=False)

    def stored_ids(self, run_id: int | str) -> set[int]:
        """Tickets of the trials stored for a run (what a resume must not measure again)."""
        run_id = self._run_id(run_id)
        t = schema.trials
        ids = self._run(
            lambda conn: conn.execute(sa.select(t.c.trial_id).where(t.c.run_id == run_id)).scalars().all(),
            "cannot read trials",
            write=False,
        )
        for trial_id in ids:
            if isinstance(trial_id, bool) or not isinstance(trial_id, int):
                raise self._damaged(run_id, Damage("trial_id", f"not an integer ({_decode.show(trial_id)})"),
                                    trial_id=trial_id)
        return set(ids)

    def history(self, run_id: int | str) -> list[HistoryPoint]:
        """Each trial's status and value in ticket order, with the best value so far (cheap: no configs).

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        self.require_intact(self.get_run(run_id))  # StoreError for an unknown (or damaged) run
        t = schema.trials
        rows = self._run(
            lambda conn: conn.execute(
                sa.select(t.c.trial_id, t.c.status, t.c.value, t.c.loss)
                .where(t.c.run_id == run_id)
                .order_by(t.c.trial_id)
            ).all(),
            "cannot read trials",
            write=False,
        )
        points: list[HistoryPoint] = []
        best_loss = math.inf
        best_value: float | None = None
        for row in rows:
            trial_id, status, value, loss, *_ = self._summary_fields(run_id, (*row, *[None] * 5))
            if status == Status.OK.value and loss is not None and loss < best_loss:
                best_loss, best_value = loss, value
            points.append(HistoryPoint(trial_id, status, value, best_value))
        return points

    # ------------------------------------------------------------------ read views (dashboard, report)

    def trial_summaries(self, run_id: int | str) -> list[TrialSummary]:
        """Every trial of a run without its configuration or samples, in ticket order (cheap to read).

        What the dashboard's convergence, credit and failure views need, without decoding a
        configuration per trial: a run of 100,000 trials reads in a fraction of a second.

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        t = schema.trials
        cols = (t.c.trial_id, t.c.status, t.c.value, t.c.loss, t.c.technique, t.c.worker, t.c.reason,
                t.c.started_at, t.c.finished_at)

        def read(conn: Connection) -> Sequence[Any]:
            rows = conn.execute(sa.select(*cols).where(t.c.run_id == run_id).order_by(t.c.trial_id)).all()
            if not rows:
                self._require_run(conn, run_id)
            return rows

        rows = self._run(read, "cannot read trials", write=False)
        if rows:
            self.require_intact(self.get_run(run_id))
        return [TrialSummary(*self._summary_fields(run_id, r)) for r in rows]

    def _summary_fields(self, run_id: int, row: Sequence[Any]) -> tuple[Any, ...]:
        try:
            return _decode.summary_fields(*row)
        except Damage as damage:
            raise self._damaged(run_id, damage, trial_id=row[0]) from None

    def trial_page(
        self,
        run_id: int | str,
        *,
        offset: int = 0,
        limit: int | None = 50,
        order_by: str = "trial",
        descending: bool = False,
        status: str | None = None,
        technique: str | None = None,
        text: str | None = None,
        trial_ids: Sequence[int] | None = None,
        count: bool = True,
    ) -> tuple[int | None, list[Trial]]:
        """One page of a run's trials, filtered and sorted in the database.

        Args:
            run_id: The run.
            offset: Trials to skip (after filtering and sorting).
            limit: Trials to return; None for all.
            order_by: One of :data:`TRIAL_ORDERS` (``trial``, ``value``, ``status``, ``technique``,
                ``worker``, ``started_at``, ``duration``); trials without a value sort last.
            descending: Reverse the order.
            status: Only trials of this status (``ok``, ``failed``, ...).
            technique: Only trials proposed by this technique.
            text: Only trials whose configuration JSON or reason contains this text (case-insensitive).
            trial_ids: Only these tickets.
            count: Count the matching trials (a scan of the run's rows when filtered); False gives None.

        Returns:
            ``(n_matching, trials)``: how many trials match the filters (None with ``count=False``), and
            the page.

        Raises:
            StoreError: no such run, or an unknown ``order_by``.
        """
        run_id = self._run_id(run_id)
        t, s = schema.trials, schema.samples
        if order_by not in TRIAL_ORDERS:
            raise StoreError(f"cannot sort trials by {order_by!r}: use one of {', '.join(TRIAL_ORDERS)}")
        where = trial_filters(run_id, status, technique, text)
        if trial_ids is not None:
            where.append(t.c.trial_id.in_([int(i) for i in trial_ids]))
        if order_by == "value":
            # The loss orders values as the goal does, and its index (run_id, loss) gives that order: a
            # page deep in a run of 100,000 trials is an index walk, not a sort.
            goal = self.get_run(run_id).goal
            order_by, descending = "loss", descending != (goal == "max")
        key: Any = {"trial": t.c.trial_id, "loss": t.c.loss, "status": t.c.status,
                    "technique": t.c.technique, "worker": t.c.worker, "started_at": t.c.started_at,
                    "duration": t.c.finished_at - t.c.started_at}[order_by]
        # NULLs last in both directions, the same on SQLite and PostgreSQL (the ticket is never NULL, and
        # ordering by it alone lets the primary key give the order).
        direction = key.desc() if descending else key.asc()
        if order_by == "trial" or (order_by == "loss" and status == Status.OK.value):
            order = [direction, t.c.trial_id]  # never NULL here
        else:
            order = [key.is_(None), direction, t.c.trial_id]
        query = sa.select(t).where(*where).order_by(*order).offset(max(0, int(offset)))
        if limit is not None:
            query = query.limit(max(0, int(limit)))

        def read(conn: Connection) -> tuple[int | None, Sequence[Any], Sequence[Any]]:
            total = None
            if count:
                counting = sa.select(sa.func.count()).select_from(t).where(*where)
                total = int(conn.execute(counting).scalar_one())
            rows = conn.execute(query).all()
            if not rows and not total:
                self._require_run(conn, run_id)
            ids = [r.trial_id for r in rows]
            srows = conn.execute(
                sa.select(s.c.trial_id, s.c.value)
                .where(s.c.run_id == run_id, s.c.trial_id.in_(ids))
                .order_by(s.c.trial_id, s.c.idx)
            ).all() if ids else []
            return total, rows, srows

        total, rows, srows = self._run(read, "cannot read trials", write=False)
        by_trial: dict[int, list[float]] = {}
        for trial_id, value in srows:
            by_trial.setdefault(trial_id, []).append(value)
        space = self._space(run_id)
        return total, [self._trial_from_row(r._mapping, by_trial.get(r.trial_id, []), space) for r in rows]

    def delete_run(self, run_id: int) -> None:
        """Delete a run with its trials, samples, checkpoint and lease, in one transaction.

        Raises:
            LeaseError: a live driver holds the run's lease (stop it first).
            StoreError: no such run.
        """
        try:
            lease = self.get_lease(run_id)
        except StoreDamageError:
            lease = None  # no live driver writes a lease like that: it goes with the run
        if lease is not None:
            stale = self.clock() - lease.heartbeat_at > LEASE_TIMEOUT_S or (
                lease.host == socket.gethostname() and not _pid_alive(lease.pid))
            if not stale:
                raise LeaseError(f"run {self.get_run(run_id).name!r} is being driven by {lease.describe()}; "
                                 "stop it before deleting it")

        def delete(conn: Connection) -> None:
            self._require_run(conn, run_id)
            tables = (schema.samples, schema.trial_leases, schema.trials, schema.checkpoints, schema.leases)
            for table in tables:
                conn.execute(sa.delete(table).where(table.c.run_id == run_id))
            conn.execute(sa.delete(schema.runs).where(schema.runs.c.id == run_id))

        self._run(delete, "cannot delete the run", write=True)
        self._spaces.pop(run_id, None)

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, run_id: int, n_trials: int, blob: bytes) -> None:
        """Replace the run's checkpoint in one transaction: readers see the old one or the new one.

        Raises:
            StoreError: no such run, or the database cannot be written.
        """
        stmt = self._checkpoint_upsert(run_id, n_trials, blob)

        def write(conn: Connection) -> None:
            self._require_run(conn, run_id)
            conn.execute(stmt)

        self._run(write, "cannot save the checkpoint", write=True)

    def _checkpoint_upsert(self, run_id: int, n_trials: int, blob: bytes) -> Any:
        """The statement that writes (or replaces) the run's one checkpoint."""
        values = {"run_id": run_id, "n_trials": int(n_trials), "created_at": time.time(), "blob": bytes(blob)}
        return self._dialect.upsert(
            schema.checkpoints, values, key=("run_id",), update=("n_trials", "created_at", "blob")
        )

    def load_checkpoint(self, run_id: int | str) -> tuple[int, bytes] | None:
        """The run's latest checkpoint as ``(n_trials, blob)``, or None when it has none.

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        c = schema.checkpoints

        def read(conn: Connection) -> Any:
            row = conn.execute(sa.select(c.c.n_trials, c.c.blob).where(c.c.run_id == run_id)).first()
            if row is None:
                self._require_run(conn, run_id)
            return row

        row = self._run(read, "cannot read the checkpoint", write=False)
        if row is None:
            return None
        blob = row.blob
        if isinstance(blob, memoryview | bytearray):
            blob = bytes(blob)
        try:
            n_trials = _decode.integer(row.n_trials, "checkpoints.n_trials")
            if n_trials < 0:
                raise Damage("checkpoints.n_trials", f"negative ({n_trials})")
            if not isinstance(blob, bytes):
                raise Damage("checkpoints.blob", f"not a blob ({_decode.show(blob)})")
        except Damage as damage:
            raise self._damaged(run_id, damage, what="checkpoint") from None
        return n_trials, blob

    # ------------------------------------------------------------------ leases

    def _lease_from_row(self, row: sa.Row[Any]) -> Lease:
        m = row._mapping
        try:
            run_id = _decode.integer(m["run_id"], "leases.run_id")
            token, host = _decode.text(m["token"], "leases.token"), _decode.text(m["host"], "leases.host")
            pid = _decode.integer(m["pid"], "leases.pid")
            started, heartbeat = (_decode.timestamp(m["started_at"], "leases.started_at"),
                                  _decode.timestamp(m["heartbeat_at"], "leases.heartbeat_at"))
            timeout = _decode.number(m.get("timeout_s"), "leases.timeout_s")
            if token is None or host is None or started is None or heartbeat is None:
                raise Damage("leases", "a column is missing")
        except Damage as damage:
            raise self._damaged(m.get("run_id"), damage, what="lease") from None
        return Lease(run_id, token, host, pid, started, heartbeat, timeout)

    def clock(self) -> float:
        """The store's time in seconds since the epoch: the database server's clock on PostgreSQL, this
        machine's for SQLite. Leases, claims and their heartbeats are written and judged by it, so that
        machines whose clocks disagree still agree on which driver or worker is alive."""
        return float(self._run(self._dialect.now, "cannot read the database's clock", write=False))

    def get_lease(self, run_id: int | str) -> Lease | None:
        """Who holds the run's lease (stale or not), or None."""
        run_id = self._run_id(run_id)
        le = schema.leases
        row = self._run(lambda conn: conn.execute(sa.select(le).where(le.c.run_id == run_id)).first(),
                        "cannot read the lease", write=False)
        return None if row is None else self._lease_from_row(row)

    def acquire_lease(self, run_id: int, *, timeout_s: float = LEASE_TIMEOUT_S,
                      promise_s: float | None = None) -> Lease:
        """Take the run's lease for this process, atomically.

        A lease held by another driver is taken over only when it is stale: its heartbeat is older than
        the timeout its holder promised (:attr:`Lease.timeout_s`) or, when it promised none, than
        ``timeout_s``; or its process is dead on this host. ``promise_s`` is this holder's promise: it
        heartbeats more often than that (None: the default ``timeout_s`` of whoever looks).

        Raises:
            LeaseError: another live driver holds it ("run X is being driven by host:pid since T").
            StoreError: no such run.
        """
        host, pid = socket.gethostname(), os.getpid()
        le = schema.leases

        def take(conn: Connection) -> Lease:
            name = conn.execute(sa.select(schema.runs.c.name).where(schema.runs.c.id == run_id)).scalar()
            if name is None:
                raise StoreError(f"store {self.location}: no run with id {run_id}")
            now = self._dialect.now(conn)
            mine = Lease(run_id, uuid.uuid4().hex, host, pid, now, now, promise_s)
            values = dataclasses.asdict(mine)
            query = sa.select(le).where(le.c.run_id == run_id).with_for_update()
            row = conn.execute(query).first()
            if row is None:
                # SQLite holds the write lock already (BEGIN IMMEDIATE); on PostgreSQL two drivers may
                # both see no row: the primary key lets one insert win, and the other reads the winner.
                stmt = self._dialect.insert_or_ignore(le, values, ("run_id",)).returning(le.c.token)
                if conn.execute(stmt).first() is not None:
                    return mine
                row = conn.execute(query).first()
                assert row is not None
            held = self._lease_from_row(row)
            if not held.is_stale(now, timeout_s):
                raise LeaseError(f"run {name!r} is being driven by {held.describe()}")
            conn.execute(sa.update(le).where(le.c.run_id == run_id, le.c.token == held.token).values(values))
            return mine

        return self._run(take, "cannot take the lease", write=True)

    def renew_lease(self, lease: Lease) -> None:
        """Heartbeat: the driver holding ``lease`` is alive.

        Raises:
            LeaseError: the lease was taken over by another driver (this one must stop writing).
        """
        le = schema.leases

        def renew(conn: Connection) -> int:
            result = conn.execute(sa.update(le).where(le.c.run_id == lease.run_id, le.c.token == lease.token)
                                  .values(heartbeat_at=self._dialect.now(conn)))
            return int(result.rowcount)

        if self._run(renew, "cannot renew the lease", write=True) == 0:
            holder = self.get_lease(lease.run_id)
            who = f"by {holder.describe()}" if holder is not None else "and released"
            raise LeaseError(f"run {lease.run_id}: this driver's lease was taken over {who}")

    def release_lease(self, lease: Lease) -> None:
        """Give the run back; does nothing when the lease is no longer this driver's."""
        le = schema.leases
        stmt = sa.delete(le).where(le.c.run_id == lease.run_id, le.c.token == lease.token)
        self._run(lambda conn: conn.execute(stmt), "cannot release the lease", write=True)

    # ------------------------------------------------------------------ trial leases (shared runs)

    def _trial_lease_from_row(self, row: sa.Row[Any], space: Space | None) -> TrialLease:
        m = row._mapping
        try:
            return self._decode_trial_lease(m, space)
        except RecursionError:
            damage = Damage("trial_leases", "JSON nested too deeply")
        except _DECODING_ERRORS as exc:
            damage = Damage("trial_leases", (str(exc).splitlines() or [type(exc).__name__])[0][:200])
        raise self._damaged(m.get("run_id"), damage, trial_id=m.get("trial_id"), what="trial lease")

    @staticmethod
    def _decode_trial_lease(m: Mapping[Any, Any], space: Space | None) -> TrialLease:
        from perftune.space import Config

        return TrialLease(
            run_id=int(m["run_id"]), trial_id=int(m["trial_id"]),
            config=Config.from_json(m["config"], space=space),
            technique=m["technique"], status=m["status"], token=m["token"], host=m["host"],
            pid=None if m["pid"] is None else int(m["pid"]), n_issues=int(m["n_issues"]),
            lost=tuple(json.loads(m["lost"])) if m["lost"] else (), created_at=float(m["created_at"]),
            claimed_at=_float_or_none(m["claimed_at"]), heartbeat_at=_float_or_none(m["heartbeat_at"]),
        )

    def issue_trials(self, run_id: int, trials: Sequence[Trial]) -> list[int]:
        """Offer trials of a shared run to its workers (``pending``); returns the tickets newly issued.

        A ticket issued already keeps its first configuration (a proposer that took over re-derives
        the tickets its predecessor issued after its last checkpoint).

        Raises:
            StoreError: no such run.
        """
        tl = schema.trial_leases
        rows: list[dict[str, Any]] = [
            {"run_id": run_id, "trial_id": t.id, "config": t.config.to_json(), "technique": t.technique,
             "status": "pending", "n_issues": 0} for t in trials]

        def write(conn: Connection) -> list[int]:
            self._require_run(conn, run_id)
            added = []
            now = self._dialect.now(conn)
            for values in rows:
                values["created_at"] = now
                stmt = self._dialect.insert_or_ignore(tl, values, ("run_id", "trial_id"))
                if conn.execute(stmt).rowcount == 1:
                    added.append(int(values["trial_id"]))
            return added

        return self._run(write, "cannot issue trials", write=True) if rows else []

    def trial_leases(self, run_id: int | str, *, status: str | None = None) -> list[TrialLease]:
        """The issued trials of a shared run (of one status when given), in ticket order.

        Raises:
            StoreError: no such run.
        """
        run_id = self._run_id(run_id)
        tl = schema.trial_leases
        query = sa.select(tl).where(tl.c.run_id == run_id)
        if status is not None:
            query = query.where(tl.c.status == status)
        query = query.order_by(tl.c.trial_id)

        def read(conn: Connection) -> Sequence[Any]:
            rows = conn.execute(query).all()
            if not rows:
                self._require_run(conn, run_id)
            return rows

        rows = self._run(read, "cannot read trial leases", write=False)
        space = self._space(run_id)
        return [self._trial_lease_from_row(r, space) for r in rows]

    def count_trial_leases(self, run_id: int | str) -> dict[str, int]:
        """How many issued trials of a shared run are ``pending``, ``claimed`` and ``done``."""
        run_id = self._run_id(run_id)
        query = _lease_sql().count
        rows = self._run(lambda conn: conn.execute(query, {"b_run": run_id}).all(),
                         "cannot read trial leases", write=False)
        out = {"pending": 0, "claimed": 0, "done": 0}
        out.update({str(status): int(n) for status, n in rows})
        return out

    def claim_trial(self, run_id: int, *, timeout_s: float, max_issues: int = MAX_ISSUES,
                    reclaim: bool = True, _finishing: tuple[TrialLease, Trial, list[bool]] | None = None
                    ) -> TrialLease | None:
        """Claim one trial of a shared run for this process, atomically; None when there is none to claim.

        A dead worker's trial comes first: one claimed by a holder whose heartbeat is older than
        ``timeout_s`` or whose process is dead on this host. It is issued again (``n_issues`` + 1, the
        dead holder appended to ``lost``) unless it was issued ``max_issues`` times already: then it is
        recorded as a FAILED trial whose reason names the workers that died measuring it (a
        configuration that kills its workers must not kill them all). Otherwise the oldest pending
        trial. On PostgreSQL the rows are read ``FOR UPDATE SKIP LOCKED``, so that claimers never wait
        for each other; on SQLite the write transaction (``BEGIN IMMEDIATE``) makes them take turns, and
        each claim is an ``UPDATE ... WHERE status = 'pending'`` (or the stale holder's token).
        ``reclaim=False`` looks at pending trials only (one transaction: a worker looks for dead
        workers' trials once per heartbeat, not at every claim).

        Raises:
            StoreError: the database cannot be written.
        """
        tl = schema.trial_leases
        host, pid = socket.gethostname(), os.getpid()
        postgres = self._dialect.name == "postgresql"

        def is_stale(m: Any, now: float) -> bool:
            if m["pid"] == pid and m["host"] == host:
                return False
            heartbeat = m["heartbeat_at"] if m["heartbeat_at"] is not None else 0.0
            return now - heartbeat > timeout_s or (m["host"] == host and not _pid_alive(int(m["pid"])))

        sql = _lease_sql()

        def look_around(conn: Connection) -> tuple[bool, list[int]]:
            now = self._dialect.now(conn)
            rows = conn.execute(sql.look, {"b_run": run_id}).all()
            stale = [int(r.trial_id) for r in rows if r.status == "claimed" and is_stale(r._mapping, now)]
            return any(r.status == "pending" for r in rows), stale

        # A read first: idle workers polling an empty queue must not take SQLite's write lock, and the
        # write transaction looks again only at the claims that looked stale. PostgreSQL's claimers do
        # not wait for each other: without stale claims to look for, the transaction alone does.
        stale_ids: list[int] = []
        if _finishing is None and (reclaim or not postgres):
            any_pending, stale_ids = self._run(look_around, "cannot read trial leases", write=False)
            if not reclaim:
                stale_ids = []
            if not any_pending and not stale_ids:
                return None
        space = self._space(run_id)

        trials_t = schema.trials

        def stored(conn: Connection, trial_id: int) -> bool:
            query = sa.select(trials_t.c.trial_id).where(trials_t.c.run_id == run_id,
                                                          trials_t.c.trial_id == trial_id)
            return conn.execute(query).first() is not None

        def claim(conn: Connection) -> TrialLease | None:
            if _finishing is not None:
                done, trial, accepted = _finishing
                accepted[:] = [self._finish_in(conn, done, trial)]
            now = self._dialect.now(conn)
            token = uuid.uuid4().hex
            mine = {"status": "claimed", "token": token, "host": host, "pid": pid, "claimed_at": now,
                    "heartbeat_at": now}
            stale_q = (sa.select(tl).where(tl.c.run_id == run_id, tl.c.status == "claimed",
                                           tl.c.trial_id.in_(stale_ids)).order_by(tl.c.trial_id))
            if postgres:
                stale_q = stale_q.with_for_update(skip_locked=True)
            for row in conn.execute(stale_q).all() if stale_ids else ():
                m = row._mapping
                if not is_stale(m, now):
                    continue
                if stored(conn, int(m["trial_id"])):
                    conn.execute(sa.update(tl).where(tl.c.run_id == run_id, tl.c.trial_id == m["trial_id"],
                                                     tl.c.token == m["token"]).values(status="done"))
                    continue
                lost = [*(json.loads(m["lost"]) if m["lost"] else []),
                        {"worker": f"{m['host']}:{m['pid']}", "claimed_at": m["claimed_at"],
                         "heartbeat_at": m["heartbeat_at"]}]
                held = sa.and_(tl.c.run_id == run_id, tl.c.trial_id == m["trial_id"],
                               tl.c.token == m["token"])
                lost_json = _dumps(lost, sort_keys=False)
                if int(m["n_issues"]) >= max_issues:
                    conn.execute(sa.update(tl).where(held).values(status="done", lost=lost_json))
                    self._insert_trial(conn, run_id, self._died_trial(self._trial_lease_from_row(row, space),
                                                                      lost, now))
                    continue
                result = conn.execute(sa.update(tl).where(held).values(
                    **mine, n_issues=int(m["n_issues"]) + 1, lost=lost_json))
                if result.rowcount == 1:
                    claimed = self._trial_lease_from_row(row, space)
                    return dataclasses.replace(claimed, status="claimed", token=token, host=host, pid=pid,
                                               n_issues=claimed.n_issues + 1, lost=tuple(lost),
                                               claimed_at=now, heartbeat_at=now)
            while True:
                pending = conn.execute(sql.pending, {"b_run": run_id}).first()
                if pending is None:
                    return None
                row = pending
                if not stored(conn, int(row.trial_id)):
                    break
                # Measured and stored already (a driver resumed the run and measured the tickets in
                # flight): the lease is done, not issued again.
                conn.execute(sa.update(tl).where(tl.c.run_id == run_id, tl.c.trial_id == row.trial_id,
                                                 tl.c.status == "pending").values(status="done"))
            result = conn.execute(sql.claim_pending, {
                "b_run": run_id, "b_trial": row.trial_id, "b_token": token, "b_host": host, "b_pid": pid,
                "b_now": now, "b_issues": int(row.n_issues) + 1})
            if result.rowcount != 1:
                return None
            claimed = self._trial_lease_from_row(row, space)
            return dataclasses.replace(claimed, status="claimed", token=token, host=host, pid=pid,
                                       n_issues=claimed.n_issues + 1, claimed_at=now, heartbeat_at=now)

        return self._run(claim, "cannot claim a trial", write=True)

    @staticmethod
    def _died_trial(lease: TrialLease, lost: list[dict[str, Any]], now: float) -> Trial:
        workers = ", ".join(str(h["worker"]) for h in lost)
        return Trial(id=lease.trial_id, config=lease.config, technique=lease.technique, status=Status.FAILED,
                     reason=f"its workers died measuring it, {len(lost)} times ({workers})",
                     worker=str(lost[-1]["worker"]), started_at=lease.claimed_at, finished_at=now)

    def _insert_trial(self, conn: Connection, run_id: int, trial: Trial) -> bool:
        """Write a trial and its samples inside the caller's transaction; False when its ticket is there."""
        from perftune.store._dialect import TRIAL_KEYS

        row = dict(zip(TRIAL_KEYS, trial_row(run_id, trial), strict=True))
        insert = getattr(self, "_trial_insert_stmt", None)
        if insert is None:
            insert = self._trial_insert_stmt = self._dialect.trial_insert()
        if conn.execute(insert, row).rowcount != 1:
            return False
        samples = [{"run_id": run_id, "trial_id": trial.id, "idx": i, "value": float(v)}
                   for i, v in enumerate(trial.samples)]
        if samples:
            conn.execute(_lease_sql().samples, samples)
        return True

    def renew_claim(self, claim: TrialLease) -> bool:
        """Heartbeat of the worker measuring ``claim``; False when the claim is no longer its own."""
        params = {"b_run": claim.run_id, "b_trial": claim.trial_id, "b_held": claim.token}

        def renew(conn: Connection) -> int:
            now = self._dialect.now(conn)
            return int(conn.execute(_lease_sql().renew, {**params, "b_now": now}).rowcount)

        return self._run(renew, "cannot renew a trial lease", write=True) == 1

    def finish_claim(self, claim: TrialLease, trial: Trial) -> bool:
        """Record the result of a claimed trial, only if ``claim`` is still the current one.

        In one transaction: the trial lease becomes ``done`` and the trial is stored. A worker whose
        claim was issued to another (it looked dead) records nothing and gets False: a trial's result
        comes from one measurement only.

        Raises:
            ValueError: ``trial`` is not the claimed ticket.
        """
        if trial.id != claim.trial_id:
            raise ValueError(f"finish_claim: trial {trial.id} is not the claimed trial {claim.trial_id}")
        return self._run(lambda conn: self._finish_in(conn, claim, trial), f"cannot record trial {trial.id}",
                         write=True)

    def _finish_in(self, conn: Connection, claim: TrialLease, trial: Trial) -> bool:
        params = {"b_run": claim.run_id, "b_trial": claim.trial_id, "b_held": claim.token,
                  "b_now": self._dialect.now(conn)}
        if conn.execute(_lease_sql().finish, params).rowcount != 1:
            return False
        # False when the ticket is stored already (a driver that resumed the run measured it): the result
        # is not this worker's, and the lease is done either way.
        return self._insert_trial(conn, claim.run_id, trial)

    def finish_and_claim(self, claim: TrialLease, trial: Trial, *, timeout_s: float,
                         max_issues: int = MAX_ISSUES) -> tuple[bool, TrialLease | None]:
        """:meth:`finish_claim` and then :meth:`claim_trial` (pending trials only) in one transaction: a
        worker's next trial starts one round trip sooner. Returns (whether the result was recorded, the
        next claim or None).
        """
        if trial.id != claim.trial_id:
            raise ValueError(f"finish_claim: trial {trial.id} is not the claimed trial {claim.trial_id}")
        accepted: list[bool] = []
        nxt = self.claim_trial(claim.run_id, timeout_s=timeout_s, max_issues=max_issues, reclaim=False,
                               _finishing=(claim, trial, accepted))
        return accepted[0], nxt

    def cancel_pending(self, run_id: int, reason: str) -> list[int]:
        """Record every pending (unclaimed) trial of a shared run as CANCELLED with ``reason``; returns
        their tickets. Claimed trials are left to their workers (a time budget: nothing starts after it).
        """
        tl = schema.trial_leases
        space = self._space(run_id)
        postgres = self._dialect.name == "postgresql"

        def cancel(conn: Connection) -> list[int]:
            query = sa.select(tl).where(tl.c.run_id == run_id, tl.c.status == "pending")
            if postgres:
                query = query.with_for_update(skip_locked=True)
            done = []
            now = time.time()
            for row in conn.execute(query).all():
                stmt = sa.update(tl).where(tl.c.run_id == run_id, tl.c.trial_id == row.trial_id,
                                           tl.c.status == "pending").values(status="done")
                if conn.execute(stmt).rowcount != 1:
                    continue
                lease = self._trial_lease_from_row(row, space)
                self._insert_trial(conn, run_id, Trial(id=lease.trial_id, config=lease.config,
                                                       technique=lease.technique, status=Status.CANCELLED,
                                                       reason=reason, started_at=now, finished_at=now))
                done.append(lease.trial_id)
            return done

        return self._run(cancel, "cannot cancel trials", write=True)

    def release_claim(self, claim: TrialLease) -> bool:
        """Give a claimed trial back unmeasured (a worker stopped by Ctrl-C): pending again, this issue
        not counted. False when the claim was no longer this worker's."""
        tl = schema.trial_leases
        stmt = sa.update(tl).where(tl.c.run_id == claim.run_id, tl.c.trial_id == claim.trial_id,
                                   tl.c.token == claim.token, tl.c.status == "claimed").values(
            status="pending", token=None, host=None, pid=None, claimed_at=None, heartbeat_at=None,
            n_issues=claim.n_issues - 1)
        return self._run(lambda conn: int(conn.execute(stmt).rowcount), "cannot release a trial lease",
                         write=True) == 1

    # ------------------------------------------------------------------ export

    def _export_rows(self, run_id: int | str) -> tuple[RunInfo, list[dict[str, Any]]]:
        run = self.get_run(self._run_id(run_id))
        run_id = run.id
        self.require_intact(run)
        t, s = schema.trials, schema.samples

        def read(conn: Connection) -> tuple[Sequence[Any], Sequence[Any]]:
            rows = conn.execute(sa.select(t).where(t.c.run_id == run_id).order_by(t.c.trial_id)).all()
            srows = conn.execute(
                sa.select(s.c.trial_id, s.c.value).where(s.c.run_id == run_id).order_by(s.c.trial_id, s.c.idx)
            ).all()
            return rows, srows

        rows, srows = self._run(read, "cannot read trials", write=False)
        by_trial: dict[int, list[float]] = {}
        for trial_id, value in srows:
            by_trial.setdefault(trial_id, []).append(value)
        out = []
        for r in rows:
            m = r._mapping
            try:
                f = _decode.trial_fields(m, by_trial.get(m["trial_id"], []))
                config = _decode.config_object(m["config"])
                config_hash = _decode.text(m["config_hash"], "config_hash")
            except Damage as damage:
                raise self._damaged(run_id, damage, trial_id=m["trial_id"]) from None
            started, finished = f["started_at"], f["finished_at"]
            out.append(
                {
                    "trial": f["id"],
                    "status": f["status"].value,
                    "value": f["value"],
                    "loss": f["loss"],
                    "reason": f["reason"],
                    "technique": f["technique"],
                    "worker": f["worker"],
                    "started_at": started,
                    "finished_at": finished,
                    "duration_s": None if started is None or finished is None else finished - started,
                    "config": config,
                    "config_hash": config_hash,
                    "metrics": f["metrics"],
                    "samples": f["samples"],
                }
            )
        return run, out

    @staticmethod
    def _flatten(run: RunInfo, rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
        names: list[str] = list((run.space or {}).get("params", {}).keys()) if run.space else []
        metric_names: list[str] = []
        for row in rows:
            for k in row["config"]:
                if k not in names:
                    names.append(k)
            for k in row["metrics"]:
                if k not in metric_names:
                    metric_names.append(k)
        base = ["trial", "status", "value", "loss", "reason", "technique", "worker",
                "started_at", "finished_at", "duration_s", "n_samples", "samples"]  # fmt: skip
        columns = base + [f"config.{n}" for n in names] + [f"metric.{n}" for n in metric_names]
        flat = []
        for row in rows:
            d = {k: row[k] for k in base if k in row}
            d["n_samples"] = len(row["samples"])
            d["samples"] = json.dumps(row["samples"]) if row["samples"] else None
            for n in names:
                v = row["config"].get(n)
                d[f"config.{n}"] = json.dumps(v) if isinstance(v, list | dict) else v
            for n in metric_names:
                d[f"metric.{n}"] = row["metrics"].get(n)
            flat.append(d)
        return columns, flat

    def export(self, run_id: int | str, fmt: str, path: str | os.PathLike[str] | IO[str]) -> None:
        """Write a run's trials as CSV (one row per trial, a column per parameter and metric) or JSON.

        The JSON holds ``{"schema": EXPORT_SCHEMA, "run": {...}, "trials": [...]}`` with the samples
        of every trial. ``path`` may be an open text file (e.g. ``sys.stdout``).

        In the CSV, a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
        gets a leading ``'`` (OWASP's advice against formula injection: a spreadsheet would run the
        stored text as a formula). Numbers are written as they are (``-1.5`` stays a number). A row with
        a carriage return in a cell has its text cells quoted, so that no reader splits it in two.

        Raises:
            StoreError: no such run, an unknown format, or ``path`` is the store's own file
                (:meth:`owns_path`).
            StoreDamageError: the run, or one of its trials, holds what perftune never writes.
        """
        if fmt not in ("csv", "json"):
            raise StoreError(f"unknown export format {fmt!r}: use 'csv' or 'json'")
        if isinstance(path, str | os.PathLike) and self.owns_path(path):
            raise StoreError(f"{os.fspath(path)!r} is the store's own file ({self.location}): an export "
                             "never replaces the store it reads; name another file")
        run, rows = self._export_rows(run_id)
        buf = io.StringIO()
        if fmt == "json":
            json.dump({"schema": EXPORT_SCHEMA, "run": run.to_dict(), "trials": rows}, buf, indent=1)
            buf.write("\n")
        else:
            columns, flat = self._flatten(run, rows)
            writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
            # csv quotes a cell that holds "\n" but not one that holds "\r" (not in this line end): a row with
            # one is written all quoted, so that no reader splits it into a row of its own.
            quoted = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n",
                                    quoting=csv.QUOTE_NONNUMERIC)
            (quoted if any("\r" in c for c in columns) else writer).writeheader()
            # Text that a spreadsheet would read as a formula is quoted with a leading "'"; numbers are not
            # text (a negative value stays a number).
            formula = ("=", "+", "-", "@", "\t", "\r")
            for row in flat:
                cells = {k: "'" + v if isinstance(v, str) and v.startswith(formula) else v
                         for k, v in row.items()}
                cr = any(isinstance(v, str) and "\r" in v for v in cells.values())
                (quoted if cr else writer).writerow(cells)
        if isinstance(path, str | os.PathLike):
            try:
                # Whole or not at all: an interrupted or failed export leaves the file that was there. A
                # symbolic link named here is followed (its target is replaced), as `perftune report -o` does.
                write_text_atomic(os.path.realpath(path), buf.getvalue())
            except OSError as exc:
                raise StoreError(f"cannot write {os.fspath(path)!r}: {exc.strerror}") from None
        else:
            path.write(buf.getvalue())

    def owns_path(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is one of this store's own files: a SQLite store's database, or its ``-wal``,
        ``-shm`` or ``-journal`` file, named directly or through symbolic links (compared by real path,
        and by :func:`os.path.samefile` for hard links). What an export or a report must never replace.
        A PostgreSQL or in-memory store has no file: False.

        Example:
            >>> store = open_store("sqlite://")
            >>> store.owns_path("report.html")
            False
        """
        if self.dialect != "sqlite":
            return False

        def main_file(conn: Connection) -> str | None:
            # The file SQLite has open (an absolute path), whatever directory the store was opened from.
            for row in conn.exec_driver_sql("PRAGMA database_list").all():
                if row[1] == "main":
                    return str(row[2]) if row[2] else None
            return None

        database = self._run(main_file, "cannot read the store's file name", write=False)
        if not database:
            return False
        target = os.path.realpath(path)
        for own in (database, *(f"{database}{suffix}" for suffix in ("-wal", "-shm", "-journal"))):
            if target == os.path.realpath(own):
                return True
            with contextlib.suppress(OSError):
                if os.path.samefile(path, own):
                    return True
        return False

    def to_dataframe(self, run_id: int | str) -> pandas.DataFrame:
        """The run's trials as a pandas DataFrame, with the same columns as the CSV export.

        Raises:
            StoreError: pandas is not installed, or no such run.
        """
        try:
            import pandas
        except ImportError:
            raise StoreError("to_dataframe needs pandas: pip install 'perftune[pandas]'") from None
        run, rows = self._export_rows(run_id)
        columns, flat = self._flatten(run, rows)
        return pandas.DataFrame(flat, columns=columns)

    # ------------------------------------------------------------------ lifetime

    def trial_keyset_page(
        self,
        run_id: int | str,
        *,
        after: tuple[Any, int] | None = None,
        before: tuple[Any, int] | None = None,
        limit: int = 50,
        order_by: str = "trial",
        descending: bool = False,
        status: str | None = None,
        technique: str | None = None,
        text: str | None = None,
        count: bool = True,
    ) -> tuple[int | None, list[Trial]]:
        """The page of :meth:`trial_page` that follows the row ``after`` (or precedes ``before``).

        Its cost does not grow with the page's depth when sorting by ticket or by value (an index walk from
        the row): ``after`` and ``before`` are ``trial_sort_key(row, order_by)`` of the last row of the page
        before or the first of the page after. The other arguments, and the order, are :meth:`trial_page`'s.

        Raises:
            StoreError: no such run, an unknown ``order_by``, both ``after`` and ``before``, a bad cursor.
        """
        return keyset_page(self, self._run_id(run_id), after=after, before=before, limit=limit,
                           order_by=order_by, descending=descending, status=status, technique=technique,
                           text=text, count=count)

    def fold_log(self) -> None:
        """Make the database file hold every result by itself (SQLite: fold its write-ahead log into
        it), so that a copy of that one file is whole; the store stays open. Runs call it when they end."""
        if self._pid != os.getpid():
            return
        with self._lock:
            if not self._closed:
                self._dialect.fold_log()

    def close(self) -> None:
        """Release the database connections; calling it again does nothing."""
        if self._pid != os.getpid():  # a forked child: leave the parent's connections alone
            self._closed = True
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._dialect.close()
            self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"


# Connections inherited through fork(), kept referenced so that they are never closed in the child.
_INHERITED: list[tuple[Any, ...]] = []


class _NameTaken(Exception):
    pass


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise StoreError("run name must be a non-empty string")
    if name != name.strip() or any(ch in name for ch in "\n\r\t"):
        raise StoreError(f"run name {name!r} must not start or end with spaces or hold control characters")
    if name in _RESERVED_NAMES or name.isdigit():
        raise StoreError(f"run name {name!r} is reserved (numbers are run ids, 'latest' is the newest run)")
    if len(name) > _MAX_NAME_LEN:
        raise StoreError(f"run name is longer than {_MAX_NAME_LEN} characters")


def _perftune_version() -> str:
    from perftune._version import __version__

    return __version__


def open_store(
    url: str | os.PathLike[str] | None = None, *, must_exist: bool = False, read_only: bool = False,
    _schema_version: int | None = None,
) -> Store:
    """Open (and create or upgrade) a results store.

    Args:
        url: ``sqlite:///PATH``, a bare path (a SQLite file), ``sqlite://`` (in memory) or
            ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB``. None means ``$PERFTUNE_STORE``,
            else ``sqlite:///perftune.db`` in the current folder.
        must_exist: Refuse to create a new SQLite file (for commands that only read).
        read_only: For commands that only read: nothing is written, not even a schema upgrade (a store
            of an older schema is refused, saying so) or SQLite's switch to WAL mode; every write
            raises StoreError. Implies ``must_exist``.

    Raises:
        StoreError: malformed URL, unsupported backend, unreachable database, not a perftune store
            (a SQLite path that is not a regular file, a store holding views or triggers), or a schema
            newer than this perftune knows. Nothing is written in these cases.

    Example:
        >>> with open_store("sqlite://") as store:
        ...     store.list_runs()
        []
    """
    resolved = resolve_url(url)
    dialect = dialect_for(resolved)
    dialect.read_only = read_only
    engine = dialect.create_engine(must_exist=must_exist or read_only)
    target = schema.SCHEMA_VERSION if _schema_version is None else _schema_version

    def initialise(new: URL) -> None:
        fresh = dialect_for(new)
        Store(fresh.create_engine(), new, schema_version=target, dialect=fresh).close()

    create = dialect.prepare_database(initialise)
    return Store(engine, resolved, schema_version=target, create=create, dialect=dialect, read_only=read_only)
