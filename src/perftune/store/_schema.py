"""Tables of the results store and the versioned migrations that build them.

A new store is built by running every migration in order, so a store created by an older perftune
and a fresh one end with the same schema. Each migration defines the tables it creates with its own
frozen ``Table`` objects: the module-level tables below describe the *latest* schema and are what
the queries use; they may change, the migrations never do.

To change the schema: append a ``Migration`` with the next version, update the tables below, and
add a test that upgrades a store built by the previous version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = [
    "SCHEMA_VERSION",
    "Migration",
    "checkpoints",
    "leases",
    "meta",
    "metadata",
    "migrations",
    "runs",
    "samples",
    "trial_leases",
    "trials",
]


@dataclass(frozen=True)
class Migration:
    """One step of the schema history.

    Attributes:
        version: The schema version after this step.
        description: What the step does, for humans.
        apply: Runs the DDL (and any data fix-up) inside the caller's transaction.

    Example:
        >>> [(m.version, m.description) for m in migrations][0]
        (1, 'runs, trials, samples and the meta table')
    """

    version: int
    description: str
    apply: Callable[[Connection], None]


def _v1_tables(md: sa.MetaData) -> None:
    sa.Table(
        "meta",
        md,
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    sa.Table(
        "runs",
        md,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("goal", sa.String(8), nullable=False),
        sa.Column("metric", sa.String(200)),
        sa.Column("space", sa.Text),
        sa.Column("space_fingerprint", sa.String(64)),
        sa.Column("settings", sa.Text),
        sa.Column("environment", sa.Text),
    )
    sa.Table(
        "trials",
        md,
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("trial_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("value", sa.Float),
        sa.Column("loss", sa.Float),
        sa.Column("metrics", sa.Text),
        sa.Column("technique", sa.String(100)),
        sa.Column("worker", sa.String(200)),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        sa.Index("ix_trials_config_hash", "run_id", "config_hash"),
    )
    sa.Table(
        "samples",
        md,
        sa.Column("run_id", sa.Integer, primary_key=True),
        sa.Column("trial_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.ForeignKeyConstraint(["run_id", "trial_id"], ["trials.run_id", "trials.trial_id"]),
    )


def _v2_checkpoints(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "checkpoints",
        md,
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True, autoincrement=False),
        sa.Column("n_trials", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("blob", sa.LargeBinary, nullable=False),
    )


def _v3_leases(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "leases",
        md,
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True, autoincrement=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )


def _v5_trial_leases(md: sa.MetaData) -> sa.Table:
    return sa.Table(
        "trial_leases",
        md,
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True, autoincrement=False),
        sa.Column("trial_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("technique", sa.String(100)),
        sa.Column("status", sa.String(16), nullable=False),  # pending, claimed, done
        sa.Column("token", sa.String(64)),
        sa.Column("host", sa.String(255)),
        sa.Column("pid", sa.Integer),
        sa.Column("n_issues", sa.Integer, nullable=False),
        sa.Column("lost", sa.Text),  # JSON list of the holders that died with it
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("claimed_at", sa.Float),
        sa.Column("heartbeat_at", sa.Float),
        sa.Index("ix_trial_leases_status", "run_id", "status"),
    )


def _migrate_v1(conn: Connection) -> None:
    md = sa.MetaData()
    _v1_tables(md)
    md.create_all(conn)


def _migrate_v2(conn: Connection) -> None:
    # v2: checkpoints (one per run), when a run finished, and an index that makes best() a lookup.
    md = sa.MetaData()
    _v1_tables(md)
    _v2_checkpoints(md).create(conn)
    conn.execute(sa.text("ALTER TABLE runs ADD COLUMN finished_at FLOAT"))
    sa.Index("ix_trials_loss", md.tables["trials"].c.run_id, md.tables["trials"].c.loss).create(conn)


def _migrate_v3(conn: Connection) -> None:
    # v3: one lease per run, so that a run is driven by one driver at a time.
    md = sa.MetaData()
    _v1_tables(md)
    _v3_leases(md).create(conn)


def _migrate_v4(conn: Connection) -> None:
    # v4: what a reporting objective reported on its way (multi-fidelity, docs/fidelity.md), as JSON
    # {step: value} on the trial's row: written with the trial in the hot path's one INSERT, NULL for
    # every trial of an older store and for objectives that report nothing.
    conn.execute(sa.text("ALTER TABLE trials ADD COLUMN intermediate TEXT"))


def _migrate_v5(conn: Connection) -> None:
    # v5: shared runs. A lease per issued trial (which worker measures it, its heartbeat), and the
    # heartbeat timeout a run lease's holder promises (NULL: the reader's, LEASE_TIMEOUT_S).
    md = sa.MetaData()
    _v1_tables(md)
    _v5_trial_leases(md).create(conn)
    conn.execute(sa.text("ALTER TABLE leases ADD COLUMN timeout_s FLOAT"))


migrations: list[Migration] = [
    Migration(1, "runs, trials, samples and the meta table", _migrate_v1),
    Migration(2, "checkpoints table, runs.finished_at, index on (run_id, loss)", _migrate_v2),
    Migration(3, "leases table (which driver drives a run)", _migrate_v3),
    Migration(4, "trials.intermediate (reported intermediate values)", _migrate_v4),
    Migration(5, "trial_leases table (shared runs), leases.timeout_s", _migrate_v5),
]
SCHEMA_VERSION: int = migrations[-1].version

# The latest schema, used by the queries.
metadata = sa.MetaData()
_v1_tables(metadata)
_v2_checkpoints(metadata)
_v3_leases(metadata)
_v5_trial_leases(metadata)
meta = metadata.tables["meta"]
runs = metadata.tables["runs"]
runs.append_column(sa.Column("finished_at", sa.Float))
trials = metadata.tables["trials"]
trials.append_column(sa.Column("intermediate", sa.Text))
sa.Index("ix_trials_loss", trials.c.run_id, trials.c.loss)
samples = metadata.tables["samples"]
checkpoints = metadata.tables["checkpoints"]
leases = metadata.tables["leases"]
leases.append_column(sa.Column("timeout_s", sa.Float))
trial_leases = metadata.tables["trial_leases"]

assert [m.version for m in migrations] == list(range(1, len(migrations) + 1)), "migrations out of order"
