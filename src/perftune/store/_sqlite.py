"""The SQLite dialect of the store: one file (or memory), WAL mode, one writer at a time.

SQLite lets one process write at a time: writes start with ``BEGIN IMMEDIATE`` (with the driver's
deferred transactions, two writers can both hold a read lock and deadlock when they upgrade), and a
writer that finds the database locked waits and retries (:class:`~perftune.store._dialect.LockWait`).
A new store file is built beside its path, mode 0600, and linked into place only when complete, so
that a path that exists always holds a whole store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import StaticPool

from perftune.errors import StoreError
from perftune.store import _schema as schema
from perftune.store._dialect import SAMPLE_KEYS, TRIAL_KEYS, Dialect, LockWait, TrialRow, store_error

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "SQLITE_MAGIC", "SqliteDialect", "is_memory"]

# A writer waits this long inside SQLite for the lock before the retry loop in Python takes over.
SQLITE_BUSY_TIMEOUT_MS = 5_000
#: Pages of write-ahead log after which a commit checkpoints it into the database file.
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 4_000
#: The first 16 bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

_warned_modes: set[str] = set()  # store files warned about, once per process


def is_memory(url: URL) -> bool:
    """Whether ``url`` is an in-memory SQLite database."""
    return url.database in (None, "", ":memory:")


def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # The store issues BEGIN IMMEDIATE itself for writes: with the driver's implicit deferred
    # transactions, two writers can both hold a read lock and deadlock when they upgrade.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL is crash-safe for the database; a power cut may lose the last commits.
        cursor.execute("PRAGMA synchronous = NORMAL")
        # A checkpoint (copy the log into the database, two fsyncs) every 4,000 pages of log (16 MB),
        # not SQLite's 1,000: a trial's commit writes about six pages, mostly the same ones, so this
        # is a quarter of the checkpoints: 90-105 us per trial's insert and commit against 109-127
        # (paired runs of the raw statements, benchmarks/results/overhead.md).
        cursor.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _read_only_place(path: Path) -> bool:
    """Whether an existing store file can be neither written nor given its -wal/-shm files beside it
    (a read-only mount), with no -wal file whose commits an immutable reader would miss."""
    return (path.exists() and not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK)
            and not Path(f"{path}-wal").exists())


def _is_locked(exc: BaseException) -> bool:
    orig = getattr(exc, "orig", exc)
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    text = str(orig).lower()
    return "locked" in text or "busy" in text


class SqliteDialect(Dialect):
    """SQLite: pragmas on every connection, ``BEGIN IMMEDIATE`` writes, retries while locked.

    Example:
        >>> from sqlalchemy.engine import URL
        >>> SqliteDialect(URL.create("sqlite", database=":memory:"), ":memory:").name
        'sqlite'
    """

    name = "sqlite"

    def create_engine(self, *, must_exist: bool = False) -> Engine:
        url = self.url
        if is_memory(url):
            if must_exist:
                raise StoreError("an in-memory store is always empty: give a store file or URL")
            engine = sa.create_engine(
                "sqlite://",
                poolclass=StaticPool,
                connect_args={"check_same_thread": False, "isolation_level": None},
            )
        else:
            path = Path(url.database or "")
            if path.is_dir():
                raise StoreError(f"store {str(path)!r} is a directory, not a SQLite file")
            if not path.exists():
                if must_exist:
                    raise StoreError(f"no store at {str(path)!r}")
                parent = path.parent
                if not parent.is_dir():
                    raise StoreError(
                        f"cannot create store {str(path)!r}: folder {str(parent)!r} does not exist"
                    )
            if must_exist and _read_only_place(path):
                # A store on a read-only file system (an archive, a snapshot): SQLite cannot make the
                # -wal and -shm files WAL mode needs, so it is opened immutable, for reading only.
                return sa.create_engine(
                    "sqlite://",
                    creator=lambda: sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True,
                                                    check_same_thread=False, isolation_level=None),
                )
            engine = sa.create_engine(
                url,
                connect_args={
                    "check_same_thread": False,
                    "isolation_level": None,
                    "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                },
            )
        event.listen(engine, "connect", _on_connect)
        return engine

    def prepare_database(self, initialise: Callable[[URL], None]) -> bool:
        if is_memory(self.url):
            return True
        path = Path(self.url.database or "")
        if not path.exists():
            _create_store_file(path, self.url, initialise)
        _check_file(path)
        _warn_if_readable_by_others(path)
        return False  # an existing file is a perftune store or is refused: never initialised here

    def fold_log(self) -> None:
        """Fold the write-ahead log into the database file: the ``.db`` file then holds every trial by
        itself (a copy or a backup of it alone is whole). The checkpoint is PASSIVE: it waits for no
        one, and frames another process still reads stay in the log until the last connection closes
        (SQLite folds them in then)."""
        conn = self.dbapi_connection
        if conn is not None and not is_memory(self.url):
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def close(self) -> None:
        """Fold the write-ahead log into the database file, then close the hot path's connection."""
        self.fold_log()
        super().close()

    def check_fork(self) -> None:
        if is_memory(self.url):
            raise RuntimeError("an in-memory store cannot be used by a forked process: use a store file")

    def begin_write(self, conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    def is_locked(self, exc: BaseException) -> bool:
        return _is_locked(exc)

    def lock_schema(self, conn: Connection) -> None:
        pass  # BEGIN IMMEDIATE has made the migrating writer the only one already

    def insert(self, table: sa.Table) -> sqlite_dialect.Insert:
        return sqlite_dialect.insert(table)

    def compile_hot_path(self, engine: Engine) -> None:
        trial_sql = self.trial_insert().compile(dialect=engine.dialect)
        sample_sql = sa.insert(schema.samples).values({k: sa.bindparam(k) for k in SAMPLE_KEYS}).compile(
            dialect=engine.dialect
        )
        # add_trial passes tuples in the order of TRIAL_KEYS / SAMPLE_KEYS for the qmark style.
        assert tuple(trial_sql.positiontup or ()) == TRIAL_KEYS
        assert tuple(sample_sql.positiontup or ()) == SAMPLE_KEYS
        self._trial_sql = str(trial_sql)
        self._sample_sql = str(sample_sql)

    def add_trial(self, run_id: int, trial_id: int, row: TrialRow, samples: Sequence[float]) -> bool:
        cursor, conn = self._cursor, self.dbapi_connection
        sample_rows = [(run_id, trial_id, i, v) for i, v in enumerate(samples)]
        what = f"cannot record trial {trial_id}"
        wait = LockWait(self.location, what)
        while True:
            try:
                cursor.execute("BEGIN IMMEDIATE")
                cursor.execute(self._trial_sql, row)
                inserted = cursor.rowcount == 1
                if inserted and sample_rows:
                    cursor.executemany(self._sample_sql, sample_rows)
                conn.commit()
                return bool(inserted)
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.rollback()
                if not _is_locked(exc):
                    raise store_error(self.location, exc, what) from None
                wait.sleep()
            except sqlite3.IntegrityError:
                conn.rollback()
                raise StoreError(f"store {self.location}: no run with id {run_id}") from None
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise


def _check_file(path: Path) -> None:
    """Refuse, untouched, a file that is not a perftune store (nor a new, empty one of ours)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot open store {str(path)!r}: {exc.strerror or exc}") from None
    if not head:
        raise StoreError(f"{str(path)!r} is not a perftune store (an empty file); "
                         "give a new path to create a store")
    if head != SQLITE_MAGIC:
        raise StoreError(f"{str(path)!r} is not a perftune store (not a SQLite database)")
    # Read-only, before the store's own connection switches the file to WAL mode (a write).
    # On a read-only file system, immutable: no -wal or -shm file is needed (or could be made).
    query = "immutable=1" if _read_only_place(path) else "mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True)) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.Error:
        return  # locked or unreadable: the store's own checks report it
    if not names:
        raise StoreError(f"{str(path)!r} is not a perftune store (an empty SQLite database)")
    if "meta" not in names:
        listed = ", ".join(sorted(names)[:5])
        raise StoreError(f"{str(path)!r} is not a perftune store (it holds tables {listed})")


def _warn_if_readable_by_others(path: Path) -> None:
    """One line when an existing store of ours (made by an older perftune, or chmod-ed) is not private."""
    try:
        info = path.stat()
    except OSError:
        return
    mode = info.st_mode & 0o777
    key = str(path.resolve())
    if not mode & 0o077 or info.st_uid != os.geteuid() or key in _warned_modes:
        return
    _warned_modes.add(key)
    print(f"perftune: warning: store {str(path)!r} can be read by other users (mode {mode:04o}), "
          f"evaluated programs included: chmod 600 {str(path)!r}", file=sys.stderr)


def _create_store_file(path: Path, url: URL, initialise: Callable[[URL], None]) -> None:
    """Build a new store beside ``path`` (mode 0600) and link it into place only when complete.

    So a path that exists always holds a whole store (or is someone else's file, refused), even when
    several drivers create the same store at once: the first link wins, the others use its store.
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.new")
    try:
        # Only the owner may read results, settings and environment (the candidate runs as someone
        # else where a sandbox is used); SQLite gives its -wal and -shm files the mode of the database.
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        initialise(url.set(database=str(tmp)))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another driver created it first
        except OSError:
            if not path.exists():  # a file system without hard links
                os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot create store {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            # Nothing to remove (or nothing may be: a read-only file system) must not hide the cause.
            with contextlib.suppress(OSError):
                leftover.unlink()
