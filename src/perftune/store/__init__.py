"""The results store: runs, trials, samples and checkpoints (SQLite by default, PostgreSQL to share).

Example:
    >>> from perftune.store import open_store
    >>> with open_store("sqlite://") as store:  # in memory; None means $PERFTUNE_STORE or perftune.db
    ...     run = store.create_run("demo", None, {}, "min", None)
    ...     store.get_run("latest").name
    'demo'
"""

from __future__ import annotations

from perftune.store._environment import capture_environment
from perftune.store._keyset import trial_sort_key
from perftune.store._schema import SCHEMA_VERSION, Migration, migrations
from perftune.store._store import (
    EXPORT_SCHEMA,
    LEASE_TIMEOUT_S,
    MAX_ISSUES,
    TRIAL_ORDERS,
    HistoryPoint,
    Lease,
    LeaseError,
    RunInfo,
    Store,
    StoreDamageError,
    TrialLease,
    TrialSummary,
    config_hash,
    open_store,
)
from perftune.store._url import DEFAULT_URL, ENV_VAR

__all__ = [
    "DEFAULT_URL",
    "ENV_VAR",
    "EXPORT_SCHEMA",
    "SCHEMA_VERSION",
    "LEASE_TIMEOUT_S",
    "HistoryPoint",
    "Lease",
    "LeaseError",
    "MAX_ISSUES",
    "Migration",
    "RunInfo",
    "Store",
    "StoreDamageError",
    "TRIAL_ORDERS",
    "TrialLease",
    "TrialSummary",
    "capture_environment",
    "config_hash",
    "migrations",
    "open_store",
    "trial_sort_key",
]
