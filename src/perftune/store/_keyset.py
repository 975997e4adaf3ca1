"""Keyset pagination of a run's trials: a page read after (or before) a known row, at the same cost anywhere.

``Store.trial_page(offset=90_000)`` makes the database walk the 90,000 rows it skips; a page read *after the
last row of the previous page* starts where that row is in the order, through the same index:
``(run_id, trial_id)`` when sorting by ticket and ``(run_id, loss)`` when sorting by value. The order is
:meth:`Store.trial_page`'s, row for row: the sort key, trials without one last (in both directions), ties
broken by ticket.

Trials without a key (a failure has no value) are read apart from those with one, so that each part is an
index walk: a database cannot walk an index in the order "key IS NULL, key, ticket".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from perftune.errors import StoreError
from perftune.store import _schema as schema
from perftune.trial import Trial

if TYPE_CHECKING:
    from perftune.store._store import Store

__all__ = ["keyset_page", "trial_sort_key"]

#: The sort keys of :meth:`Store.trial_page` (``value`` is stored as the loss: the goal's order).
_KEYS = ("trial", "value", "status", "technique", "worker", "started_at", "duration")


def trial_sort_key(trial: Trial, order_by: str) -> tuple[Any, int]:
    """Where ``trial`` is in the order ``order_by``: ``(key, ticket)``, the cursor of a keyset page.

    The key of ``value`` is the trial's loss (the value when minimising, its negation when maximising), as
    the store sorts it; None when the trial has no key (it sorts last).

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Status
        >>> trial_sort_key(Trial(7, Config({}), Status.OK, value=2.5, loss=2.5), "value")
        (2.5, 7)

    Raises:
        StoreError: an unknown ``order_by``.
    """
    if order_by not in _KEYS:
        raise StoreError(f"cannot sort trials by {order_by!r}: use one of {', '.join(_KEYS)}")
    key: Any = {
        "trial": trial.id, "value": trial.loss, "status": trial.status.value, "technique": trial.technique,
        "worker": trial.worker, "started_at": trial.started_at,
        "duration": None if trial.started_at is None or trial.finished_at is None
        else trial.finished_at - trial.started_at,
    }[order_by]
    return key, trial.id


def keyset_page(
    store: Store,
    run_id: int,
    *,
    after: tuple[Any, int] | None = None,
    before: tuple[Any, int] | None = None,
    limit: int = 50,
    order_by: str = "trial",
    descending: bool = False,
    status: str | None = None,
    technique: str | None = None,
    text: str | None = None,
    count: bool = True,
) -> tuple[int | None, list[Trial]]:
    """The ``limit`` trials that follow ``after`` (or precede ``before``) in the order of ``order_by``.

    The arguments and the order are :meth:`Store.trial_page`'s; ``after``/``before`` are
    :func:`trial_sort_key` of a row (the last of the page before, the first of the page after). Neither:
    the first page.

    Raises:
        StoreError: no such run, an unknown ``order_by``, both ``after`` and ``before``, or a cursor whose
            ticket is not an integer.
    """
    if order_by not in _KEYS:
        raise StoreError(f"cannot sort trials by {order_by!r}: use one of {', '.join(_KEYS)}")
    if after is not None and before is not None:
        raise StoreError("a page is read after a row or before one, not both")
    cursor = after if after is not None else before
    if cursor is not None and (len(cursor) != 2 or isinstance(cursor[1], bool)
                               or not isinstance(cursor[1], int)):
        raise StoreError(f"a trial cursor is (key, ticket), not {cursor!r}")
    forward = before is None
    limit = max(0, int(limit))
    t, s = schema.trials, schema.samples
    where = trial_filters(run_id, status, technique, text)
    if order_by == "value":
        goal = store.get_run(run_id).goal
        order_by, descending = "loss", descending != (goal == "max")
    key: Any = {"trial": t.c.trial_id, "loss": t.c.loss, "status": t.c.status, "technique": t.c.technique,
                "worker": t.c.worker, "started_at": t.c.started_at,
                "duration": t.c.finished_at - t.c.started_at}[order_by]
    # Read in the page's direction: forward, the key as asked and tickets ascending; backward, both reversed
    # (and the rows turned round at the end).
    key_up = descending != forward
    by_key = key.asc() if key_up else key.desc()
    by_ticket = t.c.trial_id.asc() if forward else t.c.trial_id.desc()
    beyond_ticket = t.c.trial_id > cursor[1] if forward and cursor else (
        t.c.trial_id < cursor[1] if cursor else sa.true())

    def keyed(value: Any) -> Any:
        """The rows with a key that lie beyond the cursor (a cursor without a key: every one of them)."""
        if order_by == "trial":
            # The ticket is the key: no ties, no rows without one.
            ahead = sa.true() if cursor is None else (key > cursor[1] if key_up else key < cursor[1])
            return sa.select(t).where(*where, ahead).order_by(by_key)
        if cursor is None:
            condition: Any = key.is_not(None)
        elif value is None:
            condition = key.is_not(None) if not forward else sa.false()
        else:
            # "key >= v AND (key > v OR ticket beyond)": the first part is an index range.
            reach = key >= value if key_up else key <= value
            passed = key > value if key_up else key < value
            condition = sa.and_(reach, sa.or_(passed, beyond_ticket))
        return sa.select(t).where(*where, condition).order_by(by_key, by_ticket)

    def unkeyed(value: Any) -> Any:
        """The rows without a key that lie beyond the cursor (they come after every keyed row)."""
        if cursor is None or value is None:
            condition = sa.and_(key.is_(None), beyond_ticket if cursor is not None else sa.true())
        else:
            condition = key.is_(None) if forward else sa.false()
        return sa.select(t).where(*where, condition).order_by(by_ticket)

    parts = [keyed] if order_by == "trial" else ([keyed, unkeyed] if forward else [unkeyed, keyed])

    def read(conn: Connection) -> tuple[int | None, list[Any], Sequence[Any]]:
        total = None
        if count:
            total = int(conn.execute(sa.select(sa.func.count()).select_from(t).where(*where)).scalar_one())
        rows: list[Any] = []
        for part in parts:
            if len(rows) >= limit:
                break
            rows += conn.execute(part(cursor[0] if cursor else None).limit(limit - len(rows))).all()
        if not rows and not total:
            store._require_run(conn, run_id)
        ids = [r.trial_id for r in rows]
        srows = conn.execute(
            sa.select(s.c.trial_id, s.c.value).where(s.c.run_id == run_id, s.c.trial_id.in_(ids))
            .order_by(s.c.trial_id, s.c.idx)
        ).all() if ids else []
        return total, rows, srows

    total, rows, srows = store._run(read, "cannot read trials", write=False)
    if not forward:
        rows.reverse()
    by_trial: dict[int, list[float]] = {}
    for trial_id, value in srows:
        by_trial.setdefault(trial_id, []).append(value)
    space = store._space(run_id)
    return total, [store._trial_from_row(r._mapping, by_trial.get(r.trial_id, []), space) for r in rows]


def trial_filters(run_id: int, status: str | None, technique: str | None, text: str | None) -> list[Any]:
    """The WHERE clauses of a trial page (offset or keyset), so that both pages hold the same rows."""
    t = schema.trials
    where: list[Any] = [t.c.run_id == run_id]
    if status:
        where.append(t.c.status == status)
    if technique:
        where.append(t.c.technique == technique)
    if text:
        pattern = "%" + text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append(sa.or_(sa.func.lower(t.c.config).like(pattern, escape="\\"),
                            sa.func.lower(sa.func.coalesce(t.c.reason, "")).like(pattern, escape="\\")))
    return where
