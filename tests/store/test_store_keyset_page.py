"""Keyset pages of a run's trials (``Store.trial_keyset_page``): read after or before a row, they hold the
rows that ``Store.trial_page`` gives at the same depth, in every order, with every filter, on both
backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perftune.errors import StoreError
from perftune.space import Config, Int, Space
from perftune.store import TRIAL_ORDERS, open_store, trial_sort_key
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 999), "y": Int(0, 9)})
N = 130


def _fill(store, name: str, goal: str = "min") -> int:  # type: ignore[no-untyped-def]
    """Ties in every key (values repeat every 25 trials), and rows without one (failures have no value, no
    duration, some no worker)."""
    run_id = store.create_run(name, SPACE, {}, goal, None).id
    for i in range(N):
        config = Config({"x": i, "y": i % 10})
        if i % 7 == 3:
            trial = Trial(i, config, Status.FAILED if i % 2 else Status.TIMEOUT, reason=f"boom {i}",
                          technique="random", worker=None if i % 3 else "w0")
        else:
            value = float((i * 37) % 25) + 0.25
            loss = value if goal == "min" else -value
            trial = Trial(i, config, Status.OK, value=value, loss=loss, samples=[value],
                          technique="model" if i % 2 else "random", worker=f"w{i % 3}",
                          started_at=1000.0 + i, finished_at=1000.0 + i + (i % 4) * 0.5)
        store.add_trial(run_id, trial)
    return run_id


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A SQLite store with a run of each goal, filled once for the module."""
    with open_store(str(tmp_path_factory.mktemp("keyset") / "s.db")) as st:
        yield st, {goal: _fill(st, goal, goal) for goal in ("min", "max")}


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with open_store(str(tmp_path / "s.db")) as st:
        yield st


FILTERS = [{}, {"status": "ok"}, {"status": "failed"}, {"technique": "model"}, {"text": '"y": 3'}]


def _check_every_page(store, run_id: int, order_by: str) -> None:  # type: ignore[no-untyped-def]
    """Walking forward page after page, then back from the last, gives the offset pages."""
    limit = 9
    for descending in (False, True):
        for filters in FILTERS:
            total, _ = store.trial_page(run_id, limit=0, order_by=order_by, descending=descending, **filters)
            assert total
            expected = [[t.id for t in store.trial_page(run_id, offset=o, limit=limit, order_by=order_by,
                                                        descending=descending, count=False, **filters)[1]]
                        for o in range(0, total, limit)]
            pages: list[list[int]] = []
            after = None
            while True:
                counted, page = store.trial_keyset_page(run_id, after=after, limit=limit, order_by=order_by,
                                                        descending=descending, **filters)
                assert counted == total
                if not page:
                    break
                pages.append([t.id for t in page])
                after = trial_sort_key(page[-1], order_by)
            what = (order_by, descending, filters)
            assert pages == expected, what
            # Back from the last page, each page read before the first row of the one after it.
            back = [pages[-1]]
            before = trial_sort_key(store.trial_page(run_id, offset=(len(pages) - 1) * limit, limit=1,
                                                     order_by=order_by, descending=descending,
                                                     **filters)[1][0], order_by)
            while True:
                _, page = store.trial_keyset_page(run_id, before=before, limit=limit, order_by=order_by,
                                                  descending=descending, count=False, **filters)
                if not page:
                    break
                back.insert(0, [t.id for t in page])
                before = trial_sort_key(page[0], order_by)
            assert back == expected, what


@pytest.mark.parametrize("order_by", TRIAL_ORDERS)
@pytest.mark.parametrize("goal", ["min", "max"])
def test_walking_forward_and_back_gives_the_offset_pages(filled, order_by: str, goal: str) -> None:  # type: ignore[no-untyped-def]
    store, runs = filled
    _check_every_page(store, runs[goal], order_by)


@pytest.mark.postgres
def test_walking_the_pages_on_postgresql(fresh_postgres_url: str) -> None:
    with open_store(fresh_postgres_url) as store:
        for goal in ("min", "max"):
            run_id = _fill(store, goal, goal)
            for order_by in TRIAL_ORDERS:
                _check_every_page(store, run_id, order_by)


def test_a_keyset_page_is_a_whole_trial(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store, "r")
    _, [offset_row] = store.trial_page(run_id, offset=40, limit=1, order_by="value")
    _, [before] = store.trial_page(run_id, offset=39, limit=1, order_by="value")
    _, [row] = store.trial_keyset_page(run_id, after=trial_sort_key(before, "value"), limit=1,
                                       order_by="value")
    assert row == offset_row and row.samples == [row.value] and row.config["x"] == row.id


def test_bad_requests_are_one_store_error(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store, "r")
    with pytest.raises(StoreError, match="cannot sort trials by 'colour'"):
        store.trial_keyset_page(run_id, order_by="colour")
    with pytest.raises(StoreError, match="not both"):
        store.trial_keyset_page(run_id, after=(1.0, 2), before=(1.0, 3))
    with pytest.raises(StoreError, match=r"a trial cursor is \(key, ticket\)"):
        store.trial_keyset_page(run_id, after=(1.0, "x"))  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="no run"):
        store.trial_keyset_page(999)
    with pytest.raises(StoreError, match="cannot sort"):
        trial_sort_key(Trial(1, Config({"x": 1, "y": 1}), Status.OK, value=1.0, loss=1.0), "colour")
