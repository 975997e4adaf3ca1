"""The store's SQL dialects: one per backend, chosen from the URL, with the upserts the store relies on."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from perftune.errors import StoreError
from perftune.store import _dialect, open_store
from perftune.store._dialect import LockWait
from perftune.store._postgres import PostgresDialect
from perftune.store._sqlite import SqliteDialect
from perftune.store._url import dialect_for, resolve_url


@pytest.mark.parametrize(
    ("url", "kind", "name"),
    [
        ("results.db", SqliteDialect, "sqlite"),
        ("sqlite://", SqliteDialect, "sqlite"),
        ("postgresql+psycopg2://tuner@db.example/perftune", PostgresDialect, "postgresql"),
        ("postgres://tuner@db.example/perftune", PostgresDialect, "postgresql"),
    ],
)
def test_the_dialect_follows_the_url(url: str, kind: type, name: str) -> None:
    dialect = dialect_for(resolve_url(url))
    assert isinstance(dialect, kind) and dialect.name == name


def test_insert_or_ignore_keeps_the_first_row_and_upsert_replaces_it() -> None:
    dialect = dialect_for(resolve_url("sqlite://"))
    engine = dialect.create_engine()
    table = sa.Table(
        "kv", sa.MetaData(), sa.Column("k", sa.Integer, primary_key=True), sa.Column("v", sa.Text)
    )
    with engine.begin() as conn:
        table.create(conn)
        conn.execute(dialect.insert_or_ignore(table, {"k": 1, "v": "first"}, ("k",)))
        conn.execute(dialect.insert_or_ignore(table, {"k": 1, "v": "second"}, ("k",)))
        assert conn.execute(sa.select(table.c.v)).scalar_one() == "first"
        conn.execute(dialect.upsert(table, {"k": 1, "v": "third"}, key=("k",), update=("v",)))
        assert conn.execute(sa.select(table.c.v)).scalar_one() == "third"
    engine.dispose()


def test_waiting_for_a_lock_gives_up_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dialect, "LOCK_WAIT_S", 0.0)
    expected = r"^store x\.db: cannot record trial 3: still locked by another process after 0 s$"
    with pytest.raises(StoreError, match=expected):
        LockWait("x.db", "cannot record trial 3").sleep()


def test_the_store_reports_its_dialect_and_writes_through_it() -> None:
    with open_store("sqlite://") as store:
        assert store.dialect == "sqlite"
        run = store.create_run("demo", None, {}, "min", None)
        store.save_checkpoint(run.id, 1, b"one")
        store.save_checkpoint(run.id, 2, b"two")  # an upsert: the run keeps one checkpoint, the newest
        assert store.load_checkpoint(run.id) == (2, b"two")
