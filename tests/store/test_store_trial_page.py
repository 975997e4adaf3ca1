"""The store's read views for the dashboard: trial summaries, pages filtered and sorted in the database,
and deleting a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perftune.errors import StoreError
from perftune.space import Config, Int, Space
from perftune.store import LeaseError, TrialSummary, open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 99), "y": Int(0, 9)})


def _fill(store, name: str = "r", n: int = 30) -> int:  # type: ignore[no-untyped-def]
    run_id = store.create_run(name, SPACE, {}, "min", None).id
    for i in range(n):
        config = Config({"x": i, "y": i % 10})
        if i % 4 == 3:
            trial = Trial(i, config, Status.FAILED, reason=f"boom {i}", technique="random",
                          worker=f"w{i % 2}")
        else:
            value = float((i * 37) % 50) + 0.5
            trial = Trial(i, config, Status.OK, value=value, loss=value, samples=[value, value + 0.1],
                          technique="model" if i % 2 else "random", worker=f"w{i % 2}",
                          started_at=1000.0 + i, finished_at=1000.0 + i + (i % 5))
        store.add_trial(run_id, trial)
    return run_id


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    # The same queries on both backends: NULLs last, LIKE with its wildcards escaped, the loss index.
    sqlite = request.param == "sqlite"
    url = str(tmp_path / "s.db") if sqlite else request.getfixturevalue("fresh_postgres_url")
    with open_store(url) as st:
        yield st


def test_summaries_hold_every_trial_without_configs(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store)
    rows = store.trial_summaries(run_id)
    assert [r.trial_id for r in rows] == list(range(30))
    assert isinstance(rows[3], TrialSummary) and rows[3].status == "failed" and rows[3].reason == "boom 3"
    assert rows[1].value == rows[1].loss == 37.5 and rows[1].technique == "model" and rows[1].worker == "w1"
    with pytest.raises(StoreError, match="no run"):
        store.trial_summaries(999)


def test_a_page_is_sorted_filtered_and_counted_in_the_database(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store)
    everything = store.trials(run_id)
    total, page = store.trial_page(run_id, offset=5, limit=5)
    assert total == 30 and [t.id for t in page] == [5, 6, 7, 8, 9]
    assert page[0].samples == everything[5].samples and page[0].config == everything[5].config

    ok = sorted((t for t in everything if t.ok), key=lambda t: (t.value, t.id))
    total, page = store.trial_page(run_id, order_by="value", limit=None)
    assert total == 30
    # Failures have no value: they sort last, whichever the direction.
    assert [t.id for t in page[: len(ok)]] == [t.id for t in ok]
    assert all(t.status is Status.FAILED for t in page[len(ok):])
    _, page = store.trial_page(run_id, order_by="value", descending=True, limit=3)
    assert [t.value for t in page] == sorted((t.value for t in ok), reverse=True)[:3]

    total, page = store.trial_page(run_id, status="failed", limit=100)
    assert total == 7 and {t.status for t in page} == {Status.FAILED}
    total, page = store.trial_page(run_id, technique="model", status="ok", limit=100)
    assert total == sum(1 for t in everything if t.technique == "model" and t.ok)
    total, page = store.trial_page(run_id, text="BOOM 1", limit=100)  # the reason, case-insensitively
    assert [t.id for t in page] == [11, 15, 19] and total == 3
    total, page = store.trial_page(run_id, text='"y": 7', limit=100)  # the configuration's JSON
    assert {json.loads(t.config.to_json())["y"] for t in page} == {7} and total == 3
    total, page = store.trial_page(run_id, text="100%_", limit=100)  # LIKE wildcards are literal
    assert total == 0 and page == []
    total, page = store.trial_page(run_id, trial_ids=[2, 4, 500], limit=None)
    assert [t.id for t in page] == [2, 4] and total == 2
    _, page = store.trial_page(run_id, order_by="duration", descending=True, limit=1)
    assert page[0].finished_at - page[0].started_at == 4.0


def test_bad_sort_key_and_unknown_run_are_store_errors(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store, n=3)
    with pytest.raises(StoreError, match="cannot sort trials by 'colour'"):
        store.trial_page(run_id, order_by="colour")
    with pytest.raises(StoreError, match="no run"):
        store.trial_page(12345)


def test_delete_run_removes_it_and_everything_it_holds(store) -> None:  # type: ignore[no-untyped-def]
    keep = _fill(store, "keep", 5)
    gone = _fill(store, "gone", 8)
    store.save_checkpoint(gone, 8, b"state")
    store.delete_run(gone)
    assert [r.name for r in store.list_runs()] == ["keep"]
    with pytest.raises(StoreError, match="no run"):
        store.get_run("gone")
    assert store.count(keep) == 5 and len(store.trials(keep)[0].samples) == 2
    with pytest.raises(StoreError, match="no run"):
        store.delete_run(gone)
    # The name can be used again, and the new run starts empty.
    again = _fill(store, "gone", 2)
    assert store.count(again) == 2 and store.load_checkpoint(again) is None


def test_a_run_being_driven_is_not_deleted(store) -> None:  # type: ignore[no-untyped-def]
    run_id = _fill(store, "busy", 2)
    lease = store.acquire_lease(run_id)
    with pytest.raises(LeaseError, match="stop it before deleting it"):
        store.delete_run(run_id)
    store.release_lease(lease)
    store.delete_run(run_id)
    assert store.list_runs() == []
