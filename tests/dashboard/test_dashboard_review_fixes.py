"""The dashboard after a review of reading results: runs that optimise different things are not compared
(the page, its API and the runs page's button say so in the line `perftune compare` prints), a run whose
driver is gone says "running (no driver)", and a built-in metric's values carry their unit."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 100, default=0)})
REFUSAL = "compare: the runs optimise different things: fast minimises wall_time, tput maximises throughput"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def _store(tmp_path: Path) -> str:
    path = str(tmp_path / "s.db")
    with open_store(path) as store:
        for name, goal, metric, values, finish in (("fast", "min", "wall_time", [0.5, 0.25], True),
                                                   ("tput", "max", "throughput", [10.0, 30.0], True),
                                                   ("killed", "min", "wall_time", [0.5, 0.4], False)):
            run = store.create_run(name, SPACE, {}, goal, metric)
            for i, v in enumerate(values):
                store.add_trial(run.id, Trial(i, Config({"x": i}), Status.OK, value=v,
                                              loss=v if goal == "min" else -v, samples=[v],
                                              technique="default" if i == 0 else "random"))
            if finish:
                store.finish_run(run.id)
    return path


def test_different_aims_are_refused_and_a_killed_driver_is_said(tmp_path: Path, start: Any, page: Any,
                                                                browser: Any) -> None:
    dash = start(_store(tmp_path))
    status, body = _get(dash.url + "api/compare?runs=fast,tput")
    assert status == 400 and json.loads(body)["error"] == REFUSAL
    status, body = _get(dash.url + "compare?runs=fast,tput")
    assert status == 400 and REFUSAL in body
    status, body = _get(dash.url + "api/runs/killed/version")
    assert status == 200 and json.loads(body)["driver_gone"] is True

    page.goto(dash.url)
    page.wait_for_selector("#runs tbody tr[data-run='tput']")
    page.check("#runs tr[data-run='fast'] input.pick")
    page.check("#runs tr[data-run='tput'] input.pick")
    assert page.is_disabled("#compare")
    assert "optimise different things" in page.inner_text("#compare-note")
    row = page.inner_text("#runs tr[data-run='killed']")
    assert "running (no driver)" in row and "0.4 s" in row

    page.goto(dash.url + "runs/killed")
    page.wait_for_function("() => (document.getElementById('run-summary') || {}).textContent"
                           " && document.getElementById('run-summary').textContent.includes('no driver')")
    summary = page.inner_text("#run-summary")
    assert "running (no driver)" in summary and "minimise wall_time (s)" in summary and "0.4 s" in summary
    assert browser.errors == []
