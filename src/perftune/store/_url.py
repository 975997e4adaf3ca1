"""Turning what the user typed (``--store``, ``$PERFTUNE_STORE``, a path) into a SQLAlchemy engine.

Two backends are supported: SQLite (the default, one file) and PostgreSQL (shared by many drivers)
through psycopg2 (``postgresql://``, ``postgresql+psycopg2://``) or psycopg 3
(``postgresql+psycopg://``; plain ``postgresql://`` uses it when psycopg2 is not installed). Other
SQLAlchemy URLs are refused with a line saying so: the store relies on SQL that only these two speak
(``ON CONFLICT``, advisory locks).

``@PATH`` instead of a URL reads the URL from the first line of the file ``PATH``, so that a password
need not appear on a command line (where every process of the machine can read it).

Everything that can go wrong here is a user mistake and becomes a one-line
:class:`~perftune.errors.StoreError`; nothing is created on disk before the URL is known to be good.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import StaticPool

from perftune.errors import StoreError

__all__ = ["DEFAULT_URL", "ENV_VAR", "SQLITE_MAGIC", "create_engine_for", "describe", "resolve_url"]

DEFAULT_URL = "sqlite:///perftune.db"
ENV_VAR = "PERFTUNE_STORE"

# A writer waits this long inside SQLite for the lock before the retry loop in Python takes over.
SQLITE_BUSY_TIMEOUT_MS = 5_000
POSTGRES_CONNECT_TIMEOUT_S = 10
#: The first 16 bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
_MAX_URL_FILE_BYTES = 4096

# SQLAlchemy driver name -> (module to import, pip package to name when it is missing).
_PG_DRIVERS = {"psycopg2": ("psycopg2", "psycopg2-binary"), "psycopg": ("psycopg", "psycopg[binary]")}
_warned_passwords: set[str] = set()  # URLs warned about, once per process


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
    if text.startswith("@"):
        text = _read_url_file(text[1:])
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
        if driver not in ("", *_PG_DRIVERS):
            raise StoreError(
                f"store URL {describe(parsed)!r}: unsupported PostgreSQL driver {driver!r} "
                "(use postgresql://... with psycopg2, or postgresql+psycopg://... with psycopg 3)"
            )
        if not parsed.database:
            raise StoreError(
                f"store URL {describe(parsed)!r} names no database: use postgresql://USER@HOST/DB"
            )
        _warn_if_password_in_argv(parsed, text)
        return parsed.set(drivername=f"postgresql+{driver or _default_pg_driver()}")
    raise StoreError(
        f"unsupported store URL scheme {parsed.drivername!r} in {describe(parsed)!r}: perftune stores "
        "live in SQLite (sqlite:///PATH) or PostgreSQL (postgresql://USER@HOST/DB)"
    )


def _read_url_file(path: str) -> str:
    """The URL on the first line of the file ``path`` (``--store @path``)."""
    where = os.path.expanduser(path.strip())
    if not where:
        raise StoreError("store URL '@': name a file after the @, e.g. --store @~/.perftune-store")
    try:
        with open(where, "rb") as f:
            raw = f.read(_MAX_URL_FILE_BYTES)
    except OSError as exc:
        raise StoreError(f"store URL file {where!r}: {exc.strerror or exc}") from None
    lines = raw.decode("utf-8", errors="replace").strip().splitlines()
    if not lines or not lines[0].strip():
        raise StoreError(f"store URL file {where!r} is empty: write the store URL on its first line")
    text = lines[0].strip()
    if text.startswith("@"):
        raise StoreError(f"store URL file {where!r} names another file: write the URL itself")
    return text


def _warn_if_password_in_argv(url: URL, text: str) -> None:
    """One line when the URL ``text``, password included, is an argument of this process."""
    if not url.password or text in _warned_passwords:
        return
    if any(text in arg for arg in sys.argv):
        _warned_passwords.add(text)
        print(
            f"perftune: warning: the password of store {describe(url)} is on the command line, where "
            "other processes can read it: use $PERFTUNE_STORE or --store @FILE (a file holding the URL)",
            file=sys.stderr,
        )


def _default_pg_driver() -> str:
    """psycopg2 when it is installed, else psycopg 3 when that is, else psycopg2 (named when missing)."""
    for driver, (module, _) in _PG_DRIVERS.items():
        try:
            __import__(module)
        except ImportError:
            continue
        return driver
    return "psycopg2"


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
    module, package = _PG_DRIVERS.get(url.get_driver_name(), _PG_DRIVERS["psycopg2"])
    try:
        __import__(module)
    except ImportError:
        raise StoreError(
            f"store {describe(url)!r} needs {module}: pip install 'perftune[postgres]' "
            f"(or pip install '{package}')"
        ) from None
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, "application_name": "perftune"},
    )
