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
import sys

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from perftune.errors import StoreError
from perftune.store._dialect import Dialect
from perftune.store._postgres import PG_DRIVERS, PostgresDialect
from perftune.store._sqlite import SQLITE_MAGIC, SqliteDialect

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "SQLITE_MAGIC",
    "create_engine_for",
    "describe",
    "dialect_for",
    "resolve_url",
]

DEFAULT_URL = "sqlite:///perftune.db"
ENV_VAR = "PERFTUNE_STORE"

_MAX_URL_FILE_BYTES = 4096
_warned_passwords: set[str] = set()  # URLs warned about, once per process


def describe(url: URL) -> str:
    """A short, password-free description of a store URL for messages."""
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def _masked(text: str) -> str:
    """``text`` with whatever sits between ``://USER:`` and the last ``@`` before the path replaced by ***
    (a malformed URL cannot be parsed to hide its password, and it may come from a private @FILE).

    Example:
        >>> _masked("postgresql ://tuner:S3cret@db.example/perftune")
        'postgresql ://tuner:***@db.example/perftune'
        >>> _masked("postgresql://tuner:p@ss:w/rd@db:5x/perftune")
        'postgresql://tuner:***@db:5x/perftune'
        >>> _masked("sqlite:///results.db")
        'sqlite:///results.db'
    """
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}{sep}{user}{':***' if colon else ''}@{host}"


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
            raise StoreError(f"malformed store URL {_masked(text)!r}: expected sqlite:///PATH or "
                             "postgresql://...")
        return URL.create("sqlite", database=text)
    try:
        parsed = sa.make_url(text)
    except (sa.exc.ArgumentError, ValueError) as error:  # ValueError: a port that is not a number
        port = " (its port is not a number)" if isinstance(error, ValueError) else ""
        raise StoreError(
            f"malformed store URL {_masked(text)!r}{port}: expected sqlite:///PATH or "
            "postgresql://USER:PASSWORD@HOST:PORT/DB (a password with @ : / # ? % or a space must be "
            "percent-encoded: @ is %40)"
        ) from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":  # the spelling many hosting services hand out
        backend = "postgresql"
    if backend == "sqlite":
        if driver not in ("", "pysqlite"):
            raise StoreError(f"store URL {text!r}: unsupported SQLite driver {driver!r} (use sqlite:///PATH)")
        return parsed.set(drivername="sqlite")
    if backend == "postgresql":
        if driver not in ("", *PG_DRIVERS):
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
    for driver, (module, _) in PG_DRIVERS.items():
        try:
            __import__(module)
        except ImportError:
            continue
        return driver
    return "psycopg2"


def dialect_for(url: URL) -> Dialect:
    """The dialect of a resolved URL (:func:`resolve_url`): SQLite or PostgreSQL."""
    location = describe(url)
    if url.get_backend_name() == "sqlite":
        return SqliteDialect(url, location)
    return PostgresDialect(url, location)


def create_engine_for(url: URL, *, must_exist: bool = False) -> Engine:
    """Create an engine for a resolved URL; nothing is connected or written yet.

    Raises:
        StoreError: the SQLite file's folder does not exist, the file is missing while
            ``must_exist``, or the PostgreSQL driver is not installed.
    """
    return dialect_for(url).create_engine(must_exist=must_exist)
