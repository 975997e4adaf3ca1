"""The Pareto front of multi-objective runs in a real browser: the dashboard's run page and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.report import write_html
from perftune.space import Config, Int, Space
from perftune.store import open_store

SPACE = Space({"x": Int(0, 40), "y": Int(0, 30)})
_DRAWN = "(id) => { const e = document.getElementById(id); return !!e && !!e.querySelector('.main-svg'); }"
# The number of points of the plot's trace named "Pareto front (N)" (2 objectives: a scatter; 3: parcoords).
_FRONT_POINTS = """() => {
    const t = document.getElementById('pareto').data.find((d) => (d.name || '').startsWith('Pareto front'));
    return t.type === 'parcoords' ? t.dimensions[0].values.length : t.x.length;
}"""


def metrics(config: Config) -> dict[str, float]:
    x, y = config["x"], config["y"]
    return {"time": float(x + 1 + y % 3), "size": float(41 - x + y % 5), "energy": float((x - 20) ** 2 + y)}


@pytest.fixture(scope="module")
def mo_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("mo") / "runs.db")
    perftune.tune(metrics, SPACE, budget=50, seed=1, store=path, name="twoobj",
                  goal={"time": "min", "size": "min"})
    perftune.tune(metrics, SPACE, budget=40, seed=2, store=path, name="threeobj",
                  goal={"time": "min", "size": "min", "energy": "min"})
    perftune.tune(lambda c: float(c["x"] + 1), SPACE, budget=10, seed=3, store=path, name="oneobj")
    return path


def _front(store_path: str, run: str) -> list[Any]:
    with open_store(store_path) as store:
        return store.pareto(store.get_run(run).id)


def test_the_run_page_draws_the_front_of_a_two_objective_run(mo_store: str, start: Any, page: Any,
                                                             browser: Any, screenshot: Any) -> None:
    front = _front(mo_store, "twoobj")
    dash = start(mo_store)
    page.goto(dash.url + "runs/twoobj")
    page.wait_for_function(_DRAWN, arg="pareto", timeout=60_000)
    assert page.is_visible("#h-pareto")
    assert page.evaluate(_FRONT_POINTS) == len(front) >= 2
    legend = page.eval_on_selector_all("#pareto .legendtext", "els => els.map((e) => e.textContent)")
    assert legend == ["trials (50)", f"Pareto front ({len(front)})"]
    rows = page.locator("#pareto-table tr[data-trial]")
    assert sorted(int(r) for r in rows.evaluate_all("els => els.map((e) => e.dataset.trial)")) == \
        sorted(t.id for t in front)
    # The table reads along the first objective, with each trial's values of both.
    shown = [[float(c) for c in r.split("\t")[1:3]] for r in rows.all_inner_texts()]
    assert shown == sorted([t.metrics["time"], t.metrics["size"]] for t in front)
    assert f"{len(front)} trials on the front of time (min), size (min)" in page.inner_text("#pareto-note")
    page.evaluate("document.getElementById('h-pareto').scrollIntoView()")
    screenshot(page, "dashboard-pareto")

    # A single-objective run has no front: the section stays hidden.
    page.goto(dash.url + "runs/oneobj")
    page.wait_for_function(_DRAWN, arg="convergence", timeout=60_000)
    assert not page.is_visible("#h-pareto")
    assert browser.errors == []


def test_the_report_of_a_three_objective_run_draws_its_front_offline(mo_store: str, page: Any, browser: Any,
                                                                     tmp_path: Path) -> None:
    front = _front(mo_store, "threeobj")
    with open_store(mo_store) as store:
        out = write_html(store, "threeobj", tmp_path / "threeobj.html")
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()
                                      if route.request.url.startswith("file:") else route.abort()))
    page.goto(out.as_uri())
    page.wait_for_function(_DRAWN, arg="pareto", timeout=60_000)
    assert page.evaluate(_FRONT_POINTS) == len(front) >= 2
    assert page.locator("#pareto-table tr[data-trial]").count() == len(front)
    assert page.locator("#pareto .parcoords").count() == 1
    assert all(u.startswith("file:") for u in requests)
    assert browser.errors == []


def test_the_pareto_endpoint_serves_the_view(mo_store: str, start: Any) -> None:
    import json
    import urllib.request

    from perftune.report import pareto_view

    dash = start(mo_store)
    with urllib.request.urlopen(dash.url + "api/runs/twoobj/pareto", timeout=30) as response:
        served = json.loads(response.read())["pareto"]
    with urllib.request.urlopen(dash.url + "api/runs/oneobj/pareto", timeout=30) as response:
        assert json.loads(response.read()) == {"pareto": None}
    with open_store(mo_store) as store:
        assert served == json.loads(json.dumps(pareto_view(store, "twoobj")))


def test_the_front_follows_a_growing_run(tmp_path: Path, start: Any, page: Any, browser: Any) -> None:
    from perftune.trial import Status, Trial

    path = str(tmp_path / "live.db")
    with open_store(path) as store:
        run = store.create_run("growing", SPACE, {"objectives": {"names": ["time", "size"],
                                                                 "goals": ["min", "max"], "constraints": []}},
                               "min", "time")

        def add(i: int, time_s: float, size: float) -> None:
            store.add_trial(run.id, Trial(i, Config({"x": i, "y": 0}), Status.OK, value=time_s, loss=time_s,
                                          metrics={"time": time_s, "size": size}, technique="random"))

        for i, (t, s) in enumerate([(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)]):
            add(i, t, s)  # (3, 2) is dominated by (2, 3): time is minimised, size maximised
        dash = start(path)
        page.goto(dash.url + "runs/growing")
        page.wait_for_function(_DRAWN, arg="pareto", timeout=60_000)
        assert page.evaluate(_FRONT_POINTS) == 2
        assert "time (min), size (max)" in page.inner_text("#pareto-note")
        add(3, 1.5, 5.0)  # dominates (2, 3): the front becomes (1, 1), (1.5, 5)
        page.wait_for_function(
            "() => [...document.querySelectorAll('#pareto-table tr[data-trial]')].map((r) => r.dataset.trial)"
            ".join(',') === '0,3'", timeout=20_000)  # the poll is 1 s; a loaded CI box redraws slowly
        assert page.evaluate(_FRONT_POINTS) == 2
    assert browser.errors == []
