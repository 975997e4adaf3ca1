"""The Pareto view's data (report and dashboard) against :meth:`Store.pareto`, on real tuned runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import perftune
from perftune.report import pareto_view, run_view
from perftune.space import Config, Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 40), "y": Int(0, 30)})


def three_metrics(config: Config) -> dict[str, float]:
    x, y = config["x"], config["y"]
    return {"time": float(x + 1 + y % 3), "size": float(41 - x + y % 5), "energy": float((x - 20) ** 2 + y),
            "accuracy": 1.0 - (y % 7) / 10}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("pareto") / "runs.db")
    perftune.tune(three_metrics, SPACE, budget=60, seed=3, store=path, name="two",
                  goal={"time": "min", "size": "min"}, constraints=["accuracy >= 0.6"])
    perftune.tune(three_metrics, SPACE, budget=40, seed=4, store=path, name="three",
                  goal={"time": "min", "size": "min", "energy": "min"})
    perftune.tune(lambda c: float(c["x"]), SPACE, budget=10, seed=5, store=path, name="single")
    return path


@pytest.mark.parametrize(("run", "names"), [("two", ["time", "size"]), ("three", ["time", "size", "energy"])])
def test_the_view_gives_the_stores_front_and_every_successful_trial(store_path: str, run: str,
                                                                    names: list[str]) -> None:
    with open_store(store_path) as store:
        info = store.get_run(run)
        front = store.pareto(info.id)
        ok = [t for t in store.trials(info.id) if t.ok]
        view = pareto_view(store, run)
    assert view is not None
    assert [o["name"] for o in view["objectives"]] == names
    assert {o["goal"] for o in view["objectives"]} == {"min"}
    assert 1 <= view["n_front"] == len(front) < len(ok)
    assert view["front"]["trial"] == [t.id for t in front]
    for name in names:
        assert view["front"]["values"][name] == [t.metrics[name] for t in front]
    assert view["front"]["config"] == [t.config.to_json() for t in front]
    # Every successful trial is in the cloud, with its objective values and whether it was feasible.
    assert view["trial"] == [t.id for t in ok] and view["n_ok"] == view["n_shown"] == len(ok)
    by_id = {t.id: t for t in ok}
    for i, trial_id in enumerate(view["trial"]):
        assert [view["values"][n][i] for n in names] == [by_id[trial_id].metrics[n] for n in names]
        assert view["feasible"][i] == (by_id[trial_id].metrics["accuracy"] >= 0.6 or run == "three")
    # No point of the cloud dominates a point of the front.
    for k in range(view["n_front"]):
        f = [view["front"]["values"][n][k] for n in names]
        for i in range(view["n_ok"]):
            p = [view["values"][n][i] for n in names]
            assert not (view["feasible"][i] and all(a <= b for a, b in zip(p, f, strict=True)) and p != f)
    json.dumps(view, allow_nan=False)


def test_the_two_objective_run_has_infeasible_trials_left_off_the_front(store_path: str) -> None:
    with open_store(store_path) as store:
        view = pareto_view(store, "two")
    assert view is not None and not all(view["feasible"])
    infeasible = {t for t, ok in zip(view["trial"], view["feasible"], strict=True) if not ok}
    assert not infeasible & set(view["front"]["trial"])


def test_the_cloud_is_thinned_but_the_front_is_whole(store_path: str) -> None:
    with open_store(store_path) as store:
        view = pareto_view(store, "two", max_points=10)
        n_front = len(store.pareto(store.get_run("two").id))
    assert view is not None and view["n_shown"] <= 11 < view["n_ok"] and len(view["trial"]) == view["n_shown"]
    assert view["n_front"] == n_front == len(view["front"]["trial"])


def test_a_single_objective_run_has_no_pareto_view(store_path: str) -> None:
    with open_store(store_path) as store:
        assert pareto_view(store, "single") is None
        assert run_view(store, "single")["objectives"] is None
        # The run page knows from its own view that there is a front to load, and of which objectives.
        assert run_view(store, "three")["objectives"] == [{"name": "time", "goal": "min"},
                                                          {"name": "size", "goal": "min"},
                                                          {"name": "energy", "goal": "min"}]


def test_the_report_inlines_the_front(store_path: str, tmp_path: Path) -> None:
    from perftune.report import write_html

    with open_store(store_path) as store:
        out = write_html(store, "three", tmp_path / "three.html")
    assert '"pareto":{"objectives":[{"name":"time"' in out.read_text(encoding="utf-8")
