"""What the store asks of a SQL dialect, and the pieces the two dialects share.

:class:`~perftune.store.Store` speaks SQLAlchemy Core for everything but the few places where SQLite
and PostgreSQL differ: how a connection is set up, how a write transaction starts, whether a failure
means "locked, try again", how a fresh schema is serialised between drivers, the upserts, and the hot
path that records one trial per transaction on a raw DBAPI connection. Those live in
:mod:`perftune.store._sqlite` and :mod:`perftune.store._postgres`, one :class:`Dialect` each, chosen
once when the store opens.
"""

from __future__ import annotations

import abc
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine

from perftune.errors import StoreError
from perftune.store import _schema as schema

__all__ = [
    "ConnectionLost",
    "Dialect",
    "LOCK_WAIT_S",
    "LockWait",
    "RECONNECT_WAIT_S",
    "SAMPLE_KEYS",
    "TRIAL_KEYS",
    "TrialRow",
    "refusal",
    "store_error",
]

#: How long a writer keeps retrying while other processes hold the SQLite write lock.
LOCK_WAIT_S = 120.0
#: How long an open store keeps trying again when its connection to the database drops (a server
#: restart or failover, a killed backend) before the operation fails with one line.
RECONNECT_WAIT_S = 30.0

#: Columns of a trial row, in the order of :data:`TrialRow` (and of the hot path's qmark parameters).
TRIAL_KEYS = (
    "run_id",
    "trial_id",
    "config",
    "config_hash",
    "status",
    "reason",
    "value",
    "loss",
    "metrics",
    "technique",
    "worker",
    "started_at",
    "finished_at",
    "intermediate",
)
SAMPLE_KEYS = ("run_id", "trial_id", "idx", "value")

#: One trial as the hot path writes it: the values of :data:`TRIAL_KEYS`, in that order.
TrialRow = tuple[int, int, str, str, str, str | None, float | None, float | None, str | None, str | None,
                 str | None, float | None, float | None, str | None]

#: An INSERT that can say what happens on a conflict (both dialects' own Insert constructs).
UpsertableInsert = sqlite_dialect.Insert | pg_dialect.Insert


def one_line(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's wrapping."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def refusal(location: str, found: str) -> StoreError:
    """The one line that refuses a store holding views, triggers (or rules, virtual tables): ``found``."""
    return StoreError(f"store {location} is refused: it holds {found}, which perftune never creates "
                      "(they would run inside perftune's own reads and writes)")


def store_error(location: str, exc: BaseException, what: str) -> StoreError:
    """``store LOCATION: WHAT: first line of the database's message``."""
    return StoreError(f"store {location}: {what}: {one_line(exc)}")


class ConnectionLost(StoreError):
    """The hot path's connection to the database was lost; ``str()`` is the one line to show when
    reconnecting does not help."""


class LockWait:
    """Waiting for another process's write lock: exponential backoff with jitter, up to ``LOCK_WAIT_S``.

    Example:
        >>> wait = LockWait("results.db", "cannot record trial 3")
        >>> wait.sleep()  # a few milliseconds; raises StoreError once LOCK_WAIT_S have passed
    """

    def __init__(self, location: str, what: str) -> None:
        self._location = location
        self._what = what
        self._deadline = time.monotonic() + LOCK_WAIT_S
        self._delay = 0.005

    def sleep(self) -> None:
        """Wait a little longer than last time.

        Raises:
            StoreError: the lock is still held after ``LOCK_WAIT_S``.
        """
        if time.monotonic() >= self._deadline:
            raise StoreError(
                f"store {self._location}: {self._what}: still locked by another process after "
                f"{LOCK_WAIT_S:.0f} s"
            ) from None
        # Jitter keeps several waiting writers from waking in lock step.
        time.sleep(self._delay * (0.5 + random.random()))
        self._delay = min(self._delay * 2, 0.5)


class Dialect(abc.ABC):
    """The SQLite- or PostgreSQL-specific part of one open store.

    It owns the hot path's raw DBAPI connection: :meth:`connect_hot_path` opens it, :meth:`add_trial`
    writes through it, :meth:`close` closes it, and :meth:`abandon` hands it over untouched after a
    fork (a connection must be neither used nor closed in a forked child).
    """

    #: ``"sqlite"`` or ``"postgresql"`` (:attr:`perftune.store.Store.dialect`).
    name: ClassVar[str]

    def __init__(self, url: URL, location: str) -> None:
        self.url = url
        self.location = location
        #: Opened by a command that only reads: the database is neither written nor upgraded (set before
        #: :meth:`create_engine`).
        self.read_only = False
        self._raw: Any = None  # SQLAlchemy's pool wrapper around the DBAPI connection
        self._cursor: Any = None

    # -- connections ------------------------------------------------------------------------------

    @abc.abstractmethod
    def create_engine(self, *, must_exist: bool = False) -> Engine:
        """An engine for :attr:`url`; nothing is connected or written yet.

        Raises:
            StoreError: the database cannot be used (a missing file or folder, a missing driver).
        """

    def prepare_database(self, initialise: Callable[[URL], None]) -> bool:
        """Make the database ready for the store's engine; returns whether the store may create the schema.

        ``initialise(url)`` builds a whole store at ``url`` (the SQLite dialect builds a new file
        beside its path and links it into place).
        """
        return True

    @abc.abstractmethod
    def check_fork(self) -> None:
        """Called in a forked child before it reconnects.

        Raises:
            RuntimeError: the database cannot be reached from another process (SQLite in memory).
        """

    # -- transactions -----------------------------------------------------------------------------

    @abc.abstractmethod
    def begin_write(self, conn: Connection) -> None:
        """Start a write transaction on ``conn``."""

    @abc.abstractmethod
    def is_locked(self, exc: BaseException) -> bool:
        """Whether ``exc`` means "another process holds the lock: try again"."""

    def lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` (SQLAlchemy's) means the connection to the database was lost or could not be
        made: the transaction did not happen, and a new connection may succeed."""
        return False

    def reconnect_hot_path(self, engine: Engine) -> None:
        """Drop the hot path's connection and open a new one.

        Raises:
            StoreError: the database cannot be reached.
        """
        self.close()
        self.connect_hot_path(engine)

    def raise_if_interrupted(self, exc: BaseException) -> None:
        """Raise KeyboardInterrupt when ``exc`` says a signal (Ctrl-C, SIGTERM) stopped the statement."""
        return None

    def foreign_objects(self, conn: Connection) -> str | None:
        """What the database holds that perftune never creates and that would run inside its statements
        (views, triggers), as words; None when there is none."""
        return None

    @abc.abstractmethod
    def lock_schema(self, conn: Connection) -> None:
        """Serialise schema creation and upgrades between drivers, inside the transaction of ``conn``."""

    def now(self, conn: Connection) -> float:
        """The time by the database's clock, in seconds since the epoch, read inside ``conn``'s
        transaction. Every lease and heartbeat is written and judged by it, so that drivers and workers
        on machines whose clocks disagree still agree on who is alive. An SQLite file is used on one
        machine: its clock is this machine's."""
        return time.time()

    # -- upserts ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def insert(self, table: sa.Table) -> UpsertableInsert:
        """An INSERT into ``table`` that can say what happens on a conflict."""

    def insert_or_ignore(
        self, table: sa.Table, values: dict[str, Any], key: Sequence[str]
    ) -> UpsertableInsert:
        """INSERT ``values``, or nothing when a row with the same ``key`` columns is there."""
        return self.insert(table).values(values).on_conflict_do_nothing(index_elements=list(key))

    def upsert(
        self, table: sa.Table, values: dict[str, Any], key: Sequence[str], update: Sequence[str]
    ) -> UpsertableInsert:
        """INSERT ``values``, or set the ``update`` columns of the row with the same ``key`` columns."""
        stmt = self.insert(table).values(values)
        return stmt.on_conflict_do_update(
            index_elements=list(key), set_={k: stmt.excluded[k] for k in update}
        )

    # -- hot path ---------------------------------------------------------------------------------

    def trial_insert(self) -> UpsertableInsert:
        """The hot path's trial INSERT: the first write wins, another with the same ticket does nothing."""
        return self.insert_or_ignore(
            schema.trials, {k: sa.bindparam(k) for k in TRIAL_KEYS}, ("run_id", "trial_id")
        )

    @abc.abstractmethod
    def compile_hot_path(self, engine: Engine) -> None:
        """Compile the statements of :meth:`add_trial` once, for this engine's dialect."""

    def connect_hot_path(self, engine: Engine) -> None:
        """Open the raw DBAPI connection the hot path writes through.

        Raises:
            StoreError: the database cannot be reached.
        """
        try:
            self._raw = engine.raw_connection()
        except sa.exc.DBAPIError as exc:
            raise store_error(self.location, exc, "cannot connect") from None
        self._cursor = self._raw.dbapi_connection.cursor()

    @property
    def dbapi_connection(self) -> Any:
        """The hot path's DBAPI connection (sqlite3's, psycopg2's or psycopg's), or None."""
        return None if self._raw is None else self._raw.dbapi_connection

    @property
    def connected(self) -> bool:
        """Whether the hot path's connection is open."""
        return self._raw is not None

    @abc.abstractmethod
    def add_trial(self, run_id: int, trial_id: int, row: TrialRow, samples: Sequence[float]) -> bool:
        """Write one trial and its samples in one transaction; False when its ticket was already there.

        Raises:
            StoreError: no such run, or the database cannot be written.
        """

    def abandon(self) -> tuple[Any, ...]:
        """Forget the hot path's connection without closing it (in a forked child); returns what to keep
        referenced so that it is never closed by garbage collection either."""
        kept = (self._raw, self._cursor)
        self._raw = self._cursor = None
        return kept

    def fold_log(self) -> None:
        """Make the database file whole by itself, where the engine keeps a separate log (SQLite's);
        nothing elsewhere."""
        return None

    def close(self) -> None:
        """Close the hot path's connection; a broken one is closed quietly."""
        if self._raw is None:
            return
        with contextlib.suppress(Exception):  # closing a broken connection must not mask the cause
            self._cursor.close()
        try:
            if getattr(self._raw.dbapi_connection, "closed", 0):
                # The server dropped it: the pool would roll it back first and log that failure (a
                # traceback of SQLAlchemy's on stderr); an invalidated one is thrown away as it is.
                self._raw.invalidate()
            else:
                self._raw.close()
        except Exception:  # noqa: BLE001 - closing a broken connection must not mask the cause
            pass
        self._raw = self._cursor = None
