"""The store conformance suite on SQLite (file and memory) and on a throwaway PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest

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
