"""The SQLite dialect of the store: one file (or memory), WAL mode, one writer at a time.

SQLite lets one process write at a time: writes start with ``BEGIN IMMEDIATE`` (with the driver's
deferred transactions, two writers can both hold a read lock and deadlock when they upgrade), and a
writer that finds the database locked waits and retries (:class:`~perftune.store._dialect.LockWait`).
A new store file is built beside its path, mode 0600, and linked into place only when complete, so
that a path that exists always holds a whole store.

An existing file is input from whoever could write it: anything but a regular file is refused before
SQLite opens it (a FIFO would block the open for ever), and so is a database holding a view or a
trigger (perftune creates none: a view named like one of its tables could make every read run for
ever, a trigger would run on perftune's own writes). Long statements stay interruptible: SQLite calls
a progress handler, in which Python runs the handlers of Ctrl-C and SIGTERM.

A store shared by several users: a reader never leaves -wal or -shm files that the store's owner cannot
write (see ``_reader_would_strand_files``), and a writer that finds one names it in one line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import stat
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.pool import NullPool, StaticPool

from perftune.errors import StoreError
from perftune.store import _schema as schema
from perftune.store._dialect import SAMPLE_KEYS, TRIAL_KEYS, Dialect, LockWait, TrialRow, refusal, store_error

__all__ = ["SQLITE_BUSY_TIMEOUT_MS", "SQLITE_MAGIC", "SQLITE_PROGRESS_STEPS", "SqliteDialect",
           "foreign_objects", "is_memory"]

# A writer waits this long inside SQLite for the lock before the retry loop in Python takes over.
SQLITE_BUSY_TIMEOUT_MS = 5_000
#: Pages of write-ahead log after which a commit checkpoints it into the database file.
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 4_000
#: The first 16 bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
#: SQLite calls the progress handler every this many virtual-machine steps (a fraction of a millisecond):
#: Python runs pending signal handlers there, so that Ctrl-C and SIGTERM end a long statement.
SQLITE_PROGRESS_STEPS = 50_000

# What sqlite_master may hold that perftune does not create: views and triggers, and virtual tables.
_FOREIGN_OBJECTS_SQL = ("SELECT type, name FROM sqlite_master WHERE type IN ('view', 'trigger') "
                        "OR (type = 'table' AND upper(substr(sql, 1, 20)) = 'CREATE VIRTUAL TABLE') "
                        "ORDER BY type, name LIMIT 3")

_warned_modes: set[str] = set()  # store files warned about, once per process


def is_memory(url: URL) -> bool:
    """Whether ``url`` is an in-memory SQLite database."""
    return url.database in (None, "", ":memory:")


def _progress() -> int:
    # Calling Python at all is the point: the interpreter runs pending signal handlers here, and one that
    # raises (Ctrl-C, the CLI's SIGTERM) makes SQLite abort the statement ("interrupted").
    return 0


def foreign_objects(rows: Sequence[tuple[Any, Any]]) -> str | None:
    """What a store holds that perftune never creates (``(type, name)`` rows of sqlite_master), as words."""
    if not rows:
        return None
    kind = {"table": "virtual table"}
    return ", ".join(f"{kind.get(str(t), str(t))} {str(n)!r}" for t, n in rows)


def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any, *, read_only: bool = False) -> None:
    # The store issues BEGIN IMMEDIATE itself for writes: with the driver's implicit deferred
    # transactions, two writers can both hold a read lock and deadlock when they upgrade.
    dbapi_connection.isolation_level = None
    dbapi_connection.set_progress_handler(_progress, SQLITE_PROGRESS_STEPS)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:
            # Nothing is written, not even the switch to WAL mode: a command that only reads a store
            # leaves its file as it was.
            cursor.execute("PRAGMA query_only = ON")
            return
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


def _side_files(path: Path) -> tuple[Path, Path]:
    """The write-ahead log and its shared-memory index, beside the store file (WAL mode)."""
    return Path(f"{path}-wal"), Path(f"{path}-shm")


def _reader_would_strand_files(path: Path) -> bool:
    """Whether a reader that opened ``path`` now would create -wal and -shm files its owner cannot write.

    With no -wal file, no process has the store open (SQLite creates it on a connection's first read and
    removes it when the last writer closes), so a reader would create both, and a read-only connection
    never removes them. SQLite gives them the reader's uid (as root, the store file's) and the store
    file's mode: when that is not the store's owner, or the mode does not let the owner write, the owner's
    next write fails ("attempt to write a readonly database") until someone removes them. Such a reader
    reads the file as it is instead (``immutable=1``): without a -wal file it holds every committed trial.
    """
    return _reader_is_foreign(path) and not _side_files(path)[0].exists()


def _reader_is_foreign(path: Path) -> bool:
    """Whether -wal and -shm files this process created for ``path`` would not be writable by its owner:
    SQLite gives them the creator's uid (as root, the store file's) and the store file's mode."""
    try:
        info = path.stat()
    except OSError:
        return False
    creator = info.st_uid if os.geteuid() == 0 else os.geteuid()
    return creator != info.st_uid or not info.st_mode & stat.S_IWUSR


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


def _raise_if_interrupted(exc: BaseException) -> None:
    """A statement that SQLite aborted because a signal handler raised in the progress handler (Ctrl-C,
    SIGTERM): that exception was swallowed by sqlite3, so it is raised again as KeyboardInterrupt."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.OperationalError) and str(orig) == "interrupted":
        raise KeyboardInterrupt from None


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
                engine = sa.create_engine(
                    "sqlite://",
                    creator=lambda: sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True,
                                                    check_same_thread=False, isolation_level=None),
                )
                event.listen(engine, "connect", functools.partial(_on_connect, read_only=True))
                return engine
            if self.read_only:
                # A command that only reads: SQLite itself refuses every write (no WAL switch, no upgrade).
                # A reader of a WAL-mode store still needs its -wal and -shm files (the shared index of the
                # log: this is how it sees a writer's new trials), and SQLite creates them when they are
                # missing; a read-only connection cannot checkpoint, so it leaves them when it closes. They
                # are not removed here: another process may have the store open, and removing its log
                # would lose its writes. The next writer folds them in and removes them.
                # A reader that would leave files the store's owner cannot write (another user; a store
                # whose mode lets no one write it) opens it immutable while no -wal file exists, so
                # creating none; each connection decides anew (no pool): once a writer has the store
                # open, its -wal and -shm files are there, and a reader sees its new trials through them.
                # (An immutable read takes no lock: a writer that started after it and folded its log
                # into the file during that one read could show it a mix of old and new pages.)
                resolved = path.resolve()

                def connect() -> sqlite3.Connection:
                    query = "immutable=1" if _reader_would_strand_files(resolved) else "mode=ro"
                    return sqlite3.connect(f"{resolved.as_uri()}?{query}", uri=True, check_same_thread=False,
                                           isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)

                engine = sa.create_engine(url, creator=connect,
                                          **({"poolclass": NullPool} if _reader_is_foreign(resolved) else {}))
                event.listen(engine, "connect", functools.partial(_on_connect, read_only=True))
                return engine
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
        if not self.read_only:
            _check_side_files(path)
        _warn_if_readable_by_others(path)
        return False  # an existing file is a perftune store or is refused: never initialised here

    def fold_log(self) -> None:
        """Fold the write-ahead log into the database file: the ``.db`` file then holds every trial by
        itself (a copy or a backup of it alone is whole). The checkpoint is PASSIVE: it waits for no
        one, and frames another process still reads stay in the log until the last connection closes
        (SQLite folds them in then)."""
        conn = self.dbapi_connection
        if conn is not None and not is_memory(self.url) and not self.read_only:
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

    def raise_if_interrupted(self, exc: BaseException) -> None:
        _raise_if_interrupted(exc)

    def foreign_objects(self, conn: Connection) -> str | None:
        return foreign_objects([(r[0], r[1]) for r in conn.exec_driver_sql(_FOREIGN_OBJECTS_SQL)])

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
                _raise_if_interrupted(exc)
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


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _not_a_regular_file(path: Path, mode: int) -> StoreError | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((words for test, words in _FILE_KINDS if test(mode)), "not a regular file")
    return StoreError(f"store {str(path)!r} is {kind}, not a SQLite file")


def _read_head(path: Path) -> bytes:
    """The first bytes of ``path``, which must be a regular file: anything else (a FIFO, whose open blocks
    until a writer comes; a device) is refused before it is opened for reading, and again once opened."""
    try:
        refused = _not_a_regular_file(path, os.stat(path).st_mode)
        if refused is not None:
            raise refused
        # O_NONBLOCK: a FIFO put in its place since cannot block the open either.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        try:
            refused = _not_a_regular_file(path, os.fstat(fd).st_mode)
            if refused is not None:
                raise refused
            return os.read(fd, len(SQLITE_MAGIC))
        finally:
            os.close(fd)
    except OSError as exc:
        raise StoreError(f"cannot open store {str(path)!r}: {exc.strerror or exc}") from None


def _check_file(path: Path) -> None:
    """Refuse, untouched, a file that is not a perftune store (nor a new, empty one of ours)."""
    head = _read_head(path)
    if not head:
        raise StoreError(f"{str(path)!r} is not a perftune store (an empty file); "
                         "give a new path to create a store")
    if head != SQLITE_MAGIC:
        raise StoreError(f"{str(path)!r} is not a perftune store (not a SQLite database)")
    # Read-only, before the store's own connection switches the file to WAL mode (a write).
    # On a read-only file system, immutable: no -wal or -shm file is needed (or could be made); nor made
    # where its owner could not write them (see _reader_would_strand_files).
    query = "immutable=1" if _read_only_place(path) or _reader_would_strand_files(path) else "mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True)) as conn:
            # Only sqlite_master is read: no view or trigger of the file runs here.
            names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            found = foreign_objects(conn.execute(_FOREIGN_OBJECTS_SQL).fetchall())
    except sqlite3.Error:
        return  # locked or unreadable: the store's own checks report it
    if found is not None:
        raise refusal(repr(str(path)), found)
    if not names:
        raise StoreError(f"{str(path)!r} is not a perftune store (an empty SQLite database)")
    if "meta" not in names:
        listed = ", ".join(sorted(names)[:5])
        raise StoreError(f"{str(path)!r} is not a perftune store (it holds tables {listed})")


def _owner_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _check_side_files(path: Path) -> None:
    """Refuse, in one line naming it, a -wal or -shm file beside the store that this process cannot write.

    SQLite would open it read-only and fail the first write with "attempt to write a readonly database",
    naming no file. A reader of another user leaves such files (an older perftune's, or one that opened
    the store while a writer had it open), and so does a reader of a store chmod-ed read-only.
    """
    import shlex

    blocked = []
    for side in _side_files(path):
        try:
            info = side.stat()
        except OSError:
            continue
        if not os.access(side, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
            blocked.append((side, info))
    if not blocked:
        return
    named = ", ".join(f"{str(side)!r} (owner {_owner_name(info.st_uid)}, mode {info.st_mode & 0o777:04o})"
                      for side, info in blocked)
    # The index (-shm) is rebuilt from the log, and an empty log holds nothing: both may go. A log with
    # frames holds commits not yet in the store file: it is replaced by a copy of one's own, never removed.
    removable: list[str] = []
    copied: list[str] = []
    for side, info in blocked:
        kind = removable if side.name.endswith("-shm") or not info.st_size else copied
        kind.append(shlex.quote(str(side)))
    fixes = ([f"rm {' '.join(removable)}"] if removable else []) + [
        f"cp {k} {k}.copy && mv {k}.copy {k} (it holds writes not yet in the store file)" for k in copied]
    raise StoreError(f"store {str(path)!r}: this user cannot write {named}, which SQLite needs for every "
                     "write (left by a read-only command of another user, or while the store was read-only): "
                     f"while no one has the store open, {'; '.join(fixes)}")


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
    # Its -wal and -shm files too, made with the store's mode of their day, where they are as open and
    # hold something (SQLite gives an empty one the store's mode when it opens it).
    files = " ".join(repr(str(f)) for f in (path, *_side_files(path)) if f == path or _open_to_others(f))
    print(f"perftune: warning: store {str(path)!r} can be read by other users (mode {mode:04o}), "
          f"evaluated programs included: chmod 600 {files}", file=sys.stderr)


def _open_to_others(path: Path) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return bool(info.st_mode & 0o077 and info.st_size)


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
