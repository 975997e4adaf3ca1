"""A PostgreSQL store whose connections drop (a server restart, a failover, a killed backend) connects
again and goes on, quietly, instead of ending the driver; an SQLite store has nothing to reconnect."""

from __future__ import annotations

import pytest

from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

pytestmark = pytest.mark.postgres

APP = "perftune"  # the application name the store gives its connections


def _trial(i: int) -> Trial:
    return Trial(id=i, config=Config({"x": i}), status=Status.OK, value=float(i), loss=float(i),
                 samples=[float(i)], technique="random")


def _drop_connections(admin_url: str) -> int:
    """End every server process of the store's connections, as a restart would; returns how many."""
    import psycopg2

    admin = psycopg2.connect(admin_url)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = %s AND pid <> pg_backend_pid()", (APP,))
            return len(cur.fetchall())
    finally:
        admin.close()


def test_a_dropped_connection_is_made_again_and_nothing_is_lost(
        postgres_url: str, fresh_postgres_url: str, capfd: pytest.CaptureFixture[str]) -> None:
    with open_store(fresh_postgres_url) as st:
        run = st.create_run("r", Space({"x": Int(0, 9)}), {}, "min", None)
        assert st.add_trial(run.id, _trial(0))
        assert _drop_connections(postgres_url) >= 1
        assert st.add_trial(run.id, _trial(1))  # the driver's hot path connects again
        assert st.get_run(run.id).name == "r"  # and so do the pooled connections
        assert _drop_connections(postgres_url) >= 1
        st.finish_run(run.id)  # a write transaction
        assert st.add_trial(run.id, _trial(2))
        assert [t.id for t in st.trials(run.id)] == [0, 1, 2]
        assert st.get_run(run.id).status == "finished"
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception during reset" not in err, err
