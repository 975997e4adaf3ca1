"""Every public read method of the Store takes a run as get_run does: its id, its name or "latest".

A name used to find the run (get_run) and then match no trial (the SQL compared trials.run_id with the
name), so trials("basic") was [] and export("basic") wrote a header only. Now every method resolves its
run once; anything but an id, a name or "latest" is a clear error.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from perftune.errors import StoreError
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 100, default=0)})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("refs") / "s.db"
    with open_store(str(path)) as st:
        other = st.create_run("other", SPACE, {}, "min", None)
        st.add_trial(other.id, Trial(0, Config({"x": 50}), Status.OK, value=7.0, loss=7.0))
        run = st.create_run("basic", SPACE, {}, "min", None)  # the latest run
        for i, value in enumerate([5.0, 3.0, None, 1.0]):
            status = Status.OK if value is not None else Status.FAILED
            st.add_trial(run.id, Trial(i, Config({"x": i}), status, value=value, loss=value, samples=[]
                                       if value is None else [value], reason=None if value else "boom",
                                       technique="default" if i == 0 else "random"))
        st.save_checkpoint(run.id, 4, b"state")
        st.issue_trials(run.id, [Trial(10, Config({"x": 10}))])
        lease = st.acquire_lease(run.id)
        yield st, run
        st.release_lease(lease)


def _ids(trials: Any) -> list[int]:
    return [t.id for t in trials]


def _export(st: Any, ref: Any) -> list[int]:
    out = io.StringIO()
    st.export(ref, "json", out)
    return [row["trial"] for row in json.loads(out.getvalue())["trials"]]


READS: dict[str, Callable[[Any, Any], Any]] = {
    "trials": lambda st, ref: _ids(st.trials(ref)),
    "best": lambda st, ref: st.best(ref).id,
    "pareto": lambda st, ref: _ids(st.pareto(ref)),
    "count": lambda st, ref: st.count(ref),
    "count of a status": lambda st, ref: st.count(ref, Status.FAILED),
    "stored_ids": lambda st, ref: st.stored_ids(ref),
    "history": lambda st, ref: st.history(ref),
    "trial_summaries": lambda st, ref: st.trial_summaries(ref),
    "trial_page": lambda st, ref: _ids(st.trial_page(ref, limit=None)[1]),
    "trial_page by value": lambda st, ref: _ids(st.trial_page(ref, order_by="value")[1]),
    "trial_keyset_page": lambda st, ref: _ids(st.trial_keyset_page(ref, after=(0, 0))[1]),
    "export": _export,
    "to_dataframe": lambda st, ref: list(st.to_dataframe(ref)["trial"]),
    "load_checkpoint": lambda st, ref: st.load_checkpoint(ref),
    "get_lease": lambda st, ref: st.get_lease(ref).token,
    "trial_leases": lambda st, ref: [lease.trial_id for lease in st.trial_leases(ref)],
    "count_trial_leases": lambda st, ref: st.count_trial_leases(ref),
}


@pytest.mark.parametrize("method", list(READS))
def test_a_read_by_name_or_latest_is_the_read_by_id(store: Any, method: str) -> None:
    st, run = store
    if method == "to_dataframe":
        pytest.importorskip("pandas")
    read = READS[method]
    by_id = read(st, run.id)
    assert by_id not in (None, [], set(), 0)
    for ref in ("basic", str(run.id), "latest"):
        assert read(st, ref) == by_id, ref


@pytest.mark.parametrize("ref", [2.0, None, True, b"basic", ["basic"]])
def test_anything_but_an_id_a_name_or_latest_is_a_clear_error(store: Any, ref: Any) -> None:
    st, run = store
    for method in ("trials", "best", "count", "history", "trial_page", "export"):
        with pytest.raises(TypeError, match="a run is given by its id, its name or 'latest'|run reference"):
            READS[method](st, ref)
    with pytest.raises(TypeError, match=r"give its \.id"):
        st.trials(run)


def test_an_unknown_name_is_no_run_never_an_empty_result(store: Any, tmp_path: Path) -> None:
    st, _ = store
    for method in ("trials", "best", "count", "history", "pareto", "trial_page", "export", "trial_summaries"):
        with pytest.raises(StoreError, match="no run 'nope'"):
            READS[method](st, "nope")
    with pytest.raises(StoreError, match="no run 'nope'"):
        st.export("nope", "csv", str(tmp_path / "nope.csv"))
    assert not (tmp_path / "nope.csv").exists()
