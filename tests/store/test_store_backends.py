"""The store conformance suite on SQLite (file and memory) and on a throwaway PostgreSQL server
(through psycopg2 and through psycopg 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perftune.store import Store
from perftune.testing.stores import StoreConformance


class TestSQLiteFileStore(StoreConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'perftune.db'}"


class TestSQLiteMemoryStore(StoreConformance):
    persistent = False

    @pytest.fixture
    def store_url(self) -> str:
        return "sqlite://"


@pytest.mark.postgres
class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def store_url(self, fresh_postgres_url: str) -> str:
        return fresh_postgres_url


@pytest.mark.postgres
class TestPostgresPsycopg3Store(StoreConformance):
    """The same suite through psycopg 3 (``postgresql+psycopg://``)."""

    @pytest.fixture
    def store_url(self, fresh_postgres_url: str) -> str:
        pytest.importorskip("psycopg", reason="psycopg 3 is not installed (pip install 'perftune[postgres]')")
        assert fresh_postgres_url.startswith("postgresql://")
        return "postgresql+psycopg://" + fresh_postgres_url.removeprefix("postgresql://")

    def test_the_store_runs_on_psycopg3(self, store: Store) -> None:
        assert store.url.startswith("postgresql+psycopg://")
        assert type(store._dbapi).__module__.split(".")[0] == "psycopg"  # not psycopg2's connection
