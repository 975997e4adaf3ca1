"""Turning what the user typed (``--store``, ``$PERFTUNE_STORE``, a path) into a SQLAlchemy engine.

Only two backends are supported: SQLite (the default, one file) and PostgreSQL through psycopg2
(shared by many drivers). Everything that can go wrong here is a user mistake and becomes a
one-line :class:`~perftune.errors.StoreError`; nothing is created on disk before the URL is known
to be good.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import StaticPool

from perftune.errors import StoreError

__all__ = ["DEFAULT_URL", "ENV_VAR", "create_engine_for", "describe", "resolve_url"]

DEFAULT_URL = "sqlite:///perftune.db"
ENV_VAR = "PERFTUNE_STORE"

# A writer waits this long inside SQLite for the lock before the retry loop in Python takes over.
SQLITE_BUSY_TIMEOUT_MS = 5_000
POSTGRES_CONNECT_TIMEOUT_S = 10


def describe(url: URL) -> str:
    """A short, password-free description of a store URL for messages."""
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def resolve_url(url: str | os.PathLike[str] | None) -> URL:
    """Parse a store URL or path; ``None`` means ``$PERFTUNE_STORE`` or ``sqlite:///perftune.db``.

    Raises:
        StoreError: the URL is malformed or names an unsupported backend.
    """
    if url is None:
        url = os.environ.get(ENV_VAR) or DEFAULT_URL
    text = os.fspath(url).strip()
    if not text:
        raise StoreError("empty store URL: give a path like results.db or a URL like sqlite:///results.db")
    if "://" not in text:
        # A bare path means a SQLite file.
        if ":" in text.split("/")[0] and text != ":memory:" and not os.path.isabs(text):
            raise StoreError(f"malformed store URL {text!r}: expected sqlite:///PATH or postgresql://...")
        return URL.create("sqlite", database=text)
    try:
        parsed = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise StoreError(
            f"malformed store URL {text!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB"
        ) from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":  # the spelling many hosting services hand out
        backend = "postgresql"
    if backend == "sqlite":
        if driver not in ("", "pysqlite"):
            raise StoreError(f"store URL {text!r}: unsupported SQLite driver {driver!r} (use sqlite:///PATH)")
        return parsed.set(drivername="sqlite")
    if backend == "postgresql":
        if driver not in ("", "psycopg2"):
            raise StoreError(
                f"store URL {describe(parsed)!r}: unsupported PostgreSQL driver {driver!r} "
                "(use postgresql://..., served by psycopg2)"
            )
        if not parsed.database:
            raise StoreError(
                f"store URL {describe(parsed)!r} names no database: use postgresql://USER@HOST/DB"
            )
        return parsed.set(drivername="postgresql+psycopg2")
    raise StoreError(
        f"unsupported store URL scheme {parsed.drivername!r} in {describe(parsed)!r}: "
        "use sqlite:///PATH or postgresql://USER@HOST/DB"
    )


def _is_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:")


def _on_sqlite_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # The store issues BEGIN IMMEDIATE itself for writes: with the driver's implicit deferred
    # transactions, two writers can both hold a read lock and deadlock when they upgrade.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL is crash-safe for the database; a power cut may lose the last commits.
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def create_engine_for(url: URL, *, must_exist: bool = False) -> Engine:
    """Create an engine for a resolved URL; nothing is connected or written yet.

    Raises:
        StoreError: the SQLite file's folder does not exist, the file is missing while
            ``must_exist``, or the PostgreSQL driver is not installed.
    """
    if url.get_backend_name() == "sqlite":
        if _is_memory(url):
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
            engine = sa.create_engine(
                url,
                connect_args={
                    "check_same_thread": False,
                    "isolation_level": None,
                    "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
                },
            )
        event.listen(engine, "connect", _on_sqlite_connect)
        return engine
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        raise StoreError(
            f"store {describe(url)!r} needs psycopg2: pip install 'perftune[postgres]'"
        ) from None
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, "application_name": "perftune"},
    )
