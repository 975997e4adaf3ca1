"""The PostgreSQL dialect of the store: one database shared by many drivers on many machines.

PostgreSQL serialises writers itself, so nothing is retried; a fresh database is migrated by one
driver at a time under an advisory lock, and the hot path writes a trial and its samples in one
round trip. The driver is psycopg2 or psycopg 3 (:mod:`perftune.store._url` picks it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import URL, Connection, Engine

from perftune.errors import StoreError
from perftune.store import _schema as schema
from perftune.store._dialect import TRIAL_KEYS, ConnectionLost, Dialect, TrialRow, store_error

__all__ = ["PG_DRIVERS", "POSTGRES_CONNECT_TIMEOUT_S", "PostgresDialect"]

POSTGRES_CONNECT_TIMEOUT_S = 10
#: SQLAlchemy driver name -> (module to import, pip package to name when it is missing).
PG_DRIVERS = {"psycopg2": ("psycopg2", "psycopg2-binary"), "psycopg": ("psycopg", "psycopg[binary]")}
# Any constant will do, as long as every perftune driver takes the same one.
_MIGRATION_LOCK = 7410526
#: The server's clock: leases and heartbeats are judged by one clock, not each machine's own.
_SERVER_CLOCK = sa.text("SELECT extract(epoch FROM clock_timestamp())::float8")
# What would run inside perftune's statements on its own tables, in the schema they are found in: one of
# them replaced by a view (or another kind of relation), a trigger on one, a rule on one.
_FOREIGN_OBJECTS_SQL = sa.text("""
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table'
       ELSE 'relation' END, c.relname
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relname = ANY(:names) AND c.relkind NOT IN ('r', 'p')
UNION ALL
SELECT 'trigger', t.tgname
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relname = ANY(:names) AND NOT t.tgisinternal
UNION ALL
SELECT 'rule', r.rulename
  FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relname = ANY(:names) AND c.relkind IN ('r', 'p')
LIMIT 3
""")


def _read_only_session(dbapi_connection: Any, _record: Any) -> None:
    # A store opened by a command that only reads: the server refuses every write of this session.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    finally:
        cursor.close()
    dbapi_connection.commit()


class PostgresDialect(Dialect):
    """PostgreSQL: an advisory lock around migrations, one statement per recorded trial.

    Example:
        >>> from sqlalchemy.engine import make_url
        >>> url = make_url("postgresql+psycopg2://tuner@db.example/perftune")
        >>> PostgresDialect(url, "postgresql+psycopg2://tuner@db.example/perftune").name
        'postgresql'
    """

    name = "postgresql"

    def __init__(self, url: URL, location: str) -> None:
        super().__init__(url, location)
        self._trial_sql = ""
        self._dbapi: Any = None  # the psycopg2 or the psycopg (3) module, for its exception classes

    def create_engine(self, *, must_exist: bool = False) -> Engine:
        url = self.url
        module, package = PG_DRIVERS.get(url.get_driver_name(), PG_DRIVERS["psycopg2"])
        try:
            __import__(module)
        except ImportError:
            raise StoreError(
                f"store {self.location!r} needs {module}: pip install 'perftune[postgres]' "
                f"(or pip install '{package}')"
            ) from None
        engine = sa.create_engine(
            url,
            pool_pre_ping=True,
            connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S, "application_name": "perftune"},
        )
        if self.read_only:
            event.listen(engine, "connect", _read_only_session)
        return engine

    def check_fork(self) -> None:
        pass  # a forked child opens connections of its own to the same server

    def begin_write(self, conn: Connection) -> None:
        pass  # SQLAlchemy's implicit BEGIN: PostgreSQL takes row locks as the transaction writes

    def is_locked(self, exc: BaseException) -> bool:
        return False  # PostgreSQL waits for locks itself; an error that reaches here is final

    def foreign_objects(self, conn: Connection) -> str | None:
        rows = conn.execute(_FOREIGN_OBJECTS_SQL, {"names": sorted(schema.metadata.tables)}).all()
        return ", ".join(f"{kind} {str(name)!r}" for kind, name in rows) if rows else None

    def lost(self, exc: BaseException) -> bool:
        if not isinstance(exc, sa.exc.DBAPIError):
            return False
        if exc.connection_invalidated:
            return True
        dbapi = getattr(self, "_dbapi", None)
        # "could not connect" while the server restarts; "server closed the connection" mid-transaction.
        return dbapi is not None and isinstance(exc.orig, dbapi.OperationalError | dbapi.InterfaceError) \
            and "connect" in str(exc.orig).lower()

    def now(self, conn: Connection) -> float:
        # clock_timestamp(), not now(): now() is the start of the transaction, and a claim waits for locks.
        return float(conn.execute(_SERVER_CLOCK).scalar_one())

    def lock_schema(self, conn: Connection) -> None:
        # Several drivers may open a fresh database at once: one migrates, the others wait.
        conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))

    def insert(self, table: sa.Table) -> pg_dialect.Insert:
        return pg_dialect.insert(table)

    def compile_hot_path(self, engine: Engine) -> None:
        self._dbapi = engine.dialect.dbapi
        trial_sql = str(self.trial_insert().compile(dialect=engine.dialect))
        # One round trip per trial instead of one per row: the trial INSERT and the samples, passed as
        # an array, in one statement; the samples are written only when the trial row was new. The
        # result is 1 when the trial was stored, 0 when it was there.
        self._trial_sql = (
            f"WITH new_trial AS ({trial_sql} RETURNING run_id, trial_id), "
            "new_samples AS (INSERT INTO samples (run_id, trial_id, idx, value) "
            "SELECT new_trial.run_id, new_trial.trial_id, s.idx - 1, s.value FROM new_trial, "
            "unnest(%(sample_values)s::double precision[]) WITH ORDINALITY AS s(value, idx)) "
            "SELECT count(*) FROM new_trial"
        )

    def add_trial(self, run_id: int, trial_id: int, row: TrialRow, samples: Sequence[float]) -> bool:
        params: dict[str, Any] = dict(zip(TRIAL_KEYS, row, strict=True))
        params["sample_values"] = list(samples)
        dbapi = self._dbapi
        cursor, conn = self._cursor, self.dbapi_connection
        try:
            cursor.execute(self._trial_sql, params)
            inserted = cursor.fetchone()[0] == 1
            conn.commit()
            return bool(inserted)
        except dbapi.IntegrityError:
            conn.rollback()
            raise StoreError(f"store {self.location}: no run with id {run_id}") from None
        except dbapi.Error as exc:
            if conn.closed:  # the server went away (a restart, a failover): the store reconnects
                line = store_error(self.location, exc, f"cannot record trial {trial_id}")
                raise ConnectionLost(str(line)) from None
            conn.rollback()
            raise store_error(self.location, exc, f"cannot record trial {trial_id}") from None
        except BaseException:
            if not conn.closed:
                conn.rollback()
            raise
