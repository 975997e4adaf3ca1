"""The dashboard in a real browser (chromium through Playwright) against a real ``perftune dashboard``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from perftune.space import Config
from perftune.store import open_store
from perftune.trial import Status, Trial

# A plot is drawn when Plotly has put its SVG (or WebGL canvas) into the element.
_DRAWN = "(id) => { const e = document.getElementById(id); return !!e && !!e.querySelector('.main-svg'); }"

#: How long a page may take to show a new trial (it polls every second; see the live test).
LIVE_MS = 10_000


def _svg_texts(page: Any, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map((e) => e.textContent)")


def _wait_drawn(page: Any, *ids: str, timeout_ms: int = 60_000) -> None:
    for element_id in ids:
        page.wait_for_function(_DRAWN, arg=element_id, timeout=timeout_ms)


def test_every_view_renders_without_console_errors(dashboard: Any, page: Any, browser: Any,
                                                   screenshot: Any) -> None:
    page.goto(dashboard.url)
    page.wait_for_selector("#runs tbody tr[data-run='alpha']")
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 2
    alpha = page.locator("#runs tbody tr[data-run='alpha'] td").all_inner_texts()
    assert alpha[1] == "alpha" and alpha[3] == "finished" and alpha[5] == "70 of 70"  # tune()'s budget: 70
    screenshot(page, "dashboard-runs")
    # The page polls every second; rows that did not change stay the same elements, so that a click is not
    # lost while they would be swapped (press on the old row, release on the new one).
    page.evaluate("() => { window.alphaRow = document.querySelector(\"#runs tr[data-run='alpha']\"); }")
    page.wait_for_timeout(2500)  # two polls at least
    assert page.evaluate("() => window.alphaRow.isConnected")

    page.locator("#runs a", has_text="alpha").click()
    page.wait_for_url("**/runs/alpha")
    _wait_drawn(page, "convergence", "credits", "proposals", "failures-plot", "importance")
    # Parallel coordinates and slices are drawn when their section nears the screen.
    assert not page.evaluate(_DRAWN, "parallel")
    page.evaluate("document.getElementById('h-slices').scrollIntoView()")
    _wait_drawn(page, "parallel", "slice-0")
    page.evaluate("window.scrollTo(0, 0)")
    assert "Method: permutation importance of a random forest" in page.inner_text("#importance-method")
    assert page.locator("#trial-table tbody tr").count() == 25
    assert page.inner_text("#t-range") == "1–25 of 70"
    # The legend of the credit plot names every technique that proposed a trial.
    legend = _svg_texts(page, "#credits .legendtext")
    techniques = {row.split("\t")[0] for row in page.locator("#techniques tr").all_inner_texts()[1:]}
    assert set(legend) == techniques and "default" in legend
    # Failure labels say the status once.
    labels = page.locator("#failure-table td:nth-child(2)").all_inner_texts()
    assert labels and all(not label.startswith("failed: failed") for label in labels)
    assert "failed: RuntimeError: kernel launch failed: too many resources requested" in labels
    screenshot(page, "dashboard-run")
    page.evaluate("document.getElementById('h-importance').scrollIntoView()")
    screenshot(page, "dashboard-parameters")
    page.evaluate("document.getElementById('h-credits').scrollIntoView()")
    screenshot(page, "dashboard-credits")

    # Convergence on a time axis: the same points, x in seconds.
    page.select_option("#x-axis", "time")
    page.wait_for_function(
        "() => document.querySelector('#convergence .xtitle').textContent.startsWith('time')")
    assert browser.errors == []


def test_a_new_trial_appears_while_the_page_is_open(filled_store: str, start: Any, page: Any, browser: Any,
                                                   tmp_path: Any) -> None:
    store = open_store(filled_store)
    try:
        run = store.create_run("live", None, {"budget": {"evals": 20}}, "min", None)
        for i in range(3):
            now = time.time()
            store.add_trial(run.id, Trial(i, Config({"x": i}), Status.OK, value=10.0 - i, loss=10.0 - i,
                                          technique="random", started_at=now, finished_at=now))
        dash = start(filled_store)
        page.goto(dash.url + "runs/live")
        page.wait_for_function("() => document.getElementById('t-range').textContent === '1–3 of 3'")
        _wait_drawn(page, "convergence")
        assert "3 of 20 trials" in page.inner_text("#run-summary")
        # A first new trial while the page may still be settling (plotly.js compiling, the parameter views'
        # first fit: seconds on a loaded 2-core machine, when CI failed this test at 2 s): not the bound.
        store.add_trial(run.id, Trial(3, Config({"x": 3}), Status.OK, value=9.0, loss=9.0, technique="model",
                                      started_at=time.time(), finished_at=time.time()))
        page.wait_for_function("() => document.getElementById('t-range').textContent === '1–4 of 4'",
                               timeout=20_000)
        store.add_trial(run.id, Trial(4, Config({"x": 4}), Status.OK, value=1.5, loss=1.5, technique="model",
                                      started_at=time.time(), finished_at=time.time()))
        # Pages poll every second, so a quiet machine shows it within about 1 s; the bound here is generous:
        # this checks that the page follows the store, not how fast (under the test suite's own load on 2
        # cores a refresh sometimes took over 2 s). LIVE_MS is the wait.
        page.wait_for_function("() => document.getElementById('t-range').textContent === '1–5 of 5'",
                               timeout=LIVE_MS)
        assert "5 of 20 trials" in page.inner_text("#run-summary")
        page.wait_for_function("() => document.getElementById('best').textContent.includes('value 1.5')",
                               timeout=LIVE_MS)
        # The runs page follows the store too.
        page.goto(dash.url)
        page.wait_for_selector("#runs tbody tr[data-run='live']")
        store.add_trial(run.id, Trial(5, Config({"x": 5}), Status.FAILED, reason="boom", technique="random"))
        page.wait_for_function(
            "() => document.querySelector(\"#runs tr[data-run='live']\").children[5].textContent"
            " === '6 of 20'",
            timeout=LIVE_MS)
    finally:
        store.close()
    assert browser.errors == []


def _table(page: Any) -> list[list[str]]:
    return [row.split("\t") for row in page.locator("#trial-table tbody tr").all_inner_texts()]


def _wait_table(page: Any, expected_range: str) -> None:
    page.wait_for_function("(r) => document.getElementById('t-range').textContent === r", arg=expected_range)


def test_the_trial_table_filters_sorts_and_pages_on_the_server(dashboard: Any, filled_store: str, page: Any,
                                                               browser: Any, screenshot: Any) -> None:
    store = open_store(filled_store)
    try:
        trials = store.trials(store.get_run("alpha").id)
    finally:
        store.close()
    n_failed = sum(1 for t in trials if t.status is Status.FAILED)
    ok_values = sorted(t.value for t in trials if t.ok)
    page.goto(dashboard.url + "runs/alpha")
    _wait_table(page, "1–25 of 70")

    page.select_option("#t-status", "failed")
    _wait_table(page, f"1–{min(25, n_failed)} of {n_failed}")
    rows = _table(page)
    assert {r[1] for r in rows} == {"failed"} and all("kernel launch failed" in r[7] for r in rows)

    page.select_option("#t-status", "ok")
    page.click("#trial-table th[data-sort='value']")
    page.wait_for_function("() => document.querySelector(\"th[data-sort='value']\").textContent"
                           ".endsWith('▲')")
    _wait_table(page, f"1–25 of {len(ok_values)}")
    shown = [float(r[2]) for r in _table(page)]
    assert shown == pytest.approx(ok_values[:25], rel=1e-5)
    page.click("#trial-table th[data-sort='value']")
    page.wait_for_function("() => document.querySelector(\"th[data-sort='value']\").textContent"
                           ".endsWith('▼')")
    page.wait_for_function("(v) => parseFloat(document.querySelector('#trial-table tbody td.value')"
                           ".textContent) === v",
                           arg=ok_values[-1])
    assert [float(r[2]) for r in _table(page)] == pytest.approx(ok_values[::-1][:25], rel=1e-5)

    page.click("#t-next")
    _wait_table(page, f"26–{min(50, len(ok_values))} of {len(ok_values)}")
    assert [float(r[2]) for r in _table(page)] == pytest.approx(ok_values[::-1][25:50], rel=1e-5)

    # Free text matches the configuration (and the reason), typed into the filter box.
    page.select_option("#t-status", "")
    page.fill("#t-text", '"mode": "c"')
    n_c = sum(1 for t in trials if t.config["mode"] == "c")
    _wait_table(page, f"1–{min(25, n_c)} of {n_c}")
    assert all('"mode": "c"' in r[8] for r in _table(page))
    page.evaluate("document.getElementById('h-trials').scrollIntoView()")
    screenshot(page, "dashboard-trials")
    assert browser.errors == []


def test_compare_view_of_two_runs(dashboard: Any, page: Any, browser: Any, screenshot: Any) -> None:
    page.goto(dashboard.url)
    page.wait_for_selector("#runs tbody tr[data-run='beta']")
    assert page.is_disabled("#compare")
    page.check("#runs tr[data-run='alpha'] input.pick")
    page.check("#runs tr[data-run='beta'] input.pick")
    assert not page.is_disabled("#compare")
    page.click("#compare")
    page.wait_for_url("**/compare?runs=alpha,beta")
    _wait_drawn(page, "compare-plot")
    assert _svg_texts(page, "#compare-plot .legendtext") == ["alpha", "beta"]
    assert page.locator("#compare-plot .scatterlayer .trace").count() == 2
    names = [r.split("\t")[0] for r in page.locator("#compare-table tr").all_inner_texts()[1:]]
    assert names == ["alpha", "beta"]
    screenshot(page, "dashboard-compare")
    assert browser.errors == []


def _status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, method=method, data=b"{}" if method != "GET" else None,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_the_dashboard_refuses_writes(dashboard: Any, filled_store: str, page: Any, browser: Any) -> None:
    for path in ("", "runs/alpha", "api/runs", "api/runs/alpha", "api/runs/alpha/trials", "api/anything"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            assert _status(dashboard.url + path, method) == 405, (method, path)
    # From the page itself too: a script on the page cannot write either.
    page.goto(dashboard.url + "runs/alpha")
    page.wait_for_selector("#run-summary")
    answer = page.evaluate("""async () => {
        const r = await fetch('api/runs/alpha', {method: 'DELETE'});
        return [r.status, r.headers.get('allow'), await r.text()];
    }""")
    assert answer[0] == 405 and answer[1] == "GET, HEAD" and "read-only" in answer[2]
    store = open_store(filled_store)
    try:
        assert [r.name for r in store.list_runs()][:2] == ["alpha", "beta"]
        assert store.count(store.get_run("alpha").id) == 70
    finally:
        store.close()
    browser.errors.clear()  # the 405 above is logged by the browser on purpose


def test_a_token_guards_every_page_and_any_other_address_needs_one(filled_store: str, start: Any,
                                                                   page: Any, browser: Any) -> None:
    dash = start(filled_store, "--token", "s3cret")
    assert _status(dash.url) == 403 and _status(dash.url + "api/runs") == 403
    assert _status(dash.url + "api/runs", headers={"Authorization": "Bearer s3cret"}) == 200
    assert _status(dash.url + "api/runs?token=wrong") == 403
    # Opened once with the token, the page keeps it in a cookie for its own requests.
    page.goto(dash.url + "?token=s3cret")
    page.wait_for_selector("#runs tbody tr[data-run='alpha']")
    assert browser.errors == []

    # Listening on every address without --token: a token is generated, printed, and required.
    open_dash = start(filled_store, host="0.0.0.0")
    assert _status(open_dash.url + "api/runs") == 403
    open_dash.process.terminate()
    _, err = open_dash.process.communicate(timeout=10)
    printed = [word for word in err.split() if "?token=" in word]
    assert printed, err
    token = printed[0].split("?token=", 1)[1]
    assert len(token) >= 20


def test_api_pages_are_json_and_bad_input_is_one_line(dashboard: Any) -> None:
    with urllib.request.urlopen(dashboard.url + "api/runs/alpha/trials?limit=5&sort=value", timeout=10) as r:
        page = json.loads(r.read())
    assert page["total"] == 70 and len(page["rows"]) == 5
    for url, code, words in ((dashboard.url + "api/runs/nope", 404, "no run 'nope'"),
                             (dashboard.url + "api/runs/alpha/trials?sort=colour", 400, "cannot sort"),
                             (dashboard.url + "api/runs/alpha/trials?limit=ten", 400, "must be integers"),
                             (dashboard.url + "api/compare?runs=alpha", 400, "two or more")):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(url, timeout=10)
        assert info.value.code == code
        assert words in json.loads(info.value.read())["error"]
