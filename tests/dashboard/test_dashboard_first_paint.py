"""The first paint: until plotly.js has arrived (seconds on a first visit), the convergence and compare plots
are drawn as a static SVG by perftune's own script; Plotly's interactive plot replaces it when it is there.

plotly.js is held back in the browser (a Playwright route that answers only when the test says so), so
that each test sees both states of the same page.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perftune.space import Config
from perftune.store import open_store
from perftune.trial import Status, Trial

_PLOTLY = "**/static/plotly.min.js*"
_QUICK = "#convergence > svg.quick-plot"


class HeldBack:
    """Holds every request for plotly.js until ``release()``."""

    def __init__(self, page: Any) -> None:
        self.routes: list[Any] = []
        self.released = False
        page.route(_PLOTLY, self._hold)

    def _hold(self, route: Any) -> None:
        if self.released:
            route.continue_()
        else:
            self.routes.append(route)

    def release(self) -> None:
        self.released = True
        for route in self.routes:
            route.continue_()


@pytest.fixture()
def held(page: Any) -> Iterator[HeldBack]:
    yield HeldBack(page)


def _trials(store_path: str, run: str) -> list[Any]:
    with open_store(store_path) as store:
        return store.trials(store.get_run(run).id)


def _trace(page: Any, plot: str, name: str) -> Any:
    return page.locator(f"{plot} g.quick-trace[data-name='{name}']")


def test_the_run_page_draws_its_convergence_as_svg_before_plotly_then_plotly_replaces_it(
        dashboard: Any, filled_store: str, page: Any, browser: Any, held: HeldBack, screenshot: Any) -> None:
    trials = _trials(filled_store, "alpha")
    ok = [t for t in trials if t.ok]
    n_failed = sum(1 for t in trials if t.status is Status.FAILED)
    page.goto(dashboard.url + "runs/alpha")
    page.wait_for_selector(_QUICK)
    page.wait_for_function("() => document.getElementById('t-range').textContent === '1–25 of 70'")
    page.wait_for_function("() => !!document.getElementById('plotly-js')")  # asked for after the first paint
    assert held.routes, "plotly.js was never requested"
    assert page.evaluate("() => window.Plotly === undefined")
    assert page.locator("#convergence .main-svg").count() == 0
    page.evaluate("document.getElementById('h-convergence').scrollIntoView()")
    screenshot(page, "dashboard-first-paint")

    # Every successful trial is a point (70 trials: no sampling), every failure a mark along the top.
    assert _trace(page, _QUICK, "trial value").locator("circle").count() == len(ok)
    assert _trace(page, _QUICK, "trial value").get_attribute("data-points") == str(len(ok))
    assert _trace(page, _QUICK, f"failed ({n_failed})").get_attribute("data-points") == str(n_failed)
    # The best-so-far line ends at the best value, at the height of the lowest point.
    best = _trace(page, _QUICK, "best so far")
    assert float(best.get_attribute("data-last") or "nan") == pytest.approx(min(t.value for t in ok))
    line_bottom = best.locator("path").evaluate("(p) => { const b = p.getBBox(); return b.y + b.height; }")
    lowest = max(float(c) for c in _trace(page, _QUICK, "trial value").locator("circle").evaluate_all(
        "(cs) => cs.map((c) => c.getAttribute('cy'))"))
    assert line_bottom == pytest.approx(lowest, abs=0.2)
    # Axes with their titles and round ticks; the legend names the traces.
    assert page.text_content(f"{_QUICK} .quick-xtitle") == "trial"
    assert page.text_content(f"{_QUICK} .quick-ytitle") == "value"
    xticks = [float(t) for t in page.locator(f"{_QUICK} .quick-xticks text").all_text_contents()]
    assert len(xticks) >= 3 and xticks == sorted(xticks) and min(xticks) <= 10 and max(xticks) >= 60
    yticks = [float(t) for t in page.locator(f"{_QUICK} .quick-yticks text").all_text_contents()]
    assert len(yticks) >= 3 and yticks == sorted(yticks)
    with urllib.request.urlopen(dashboard.url + "api/runs/alpha", timeout=30) as r:
        log_y = json.loads(r.read())["convergence"]["log_y"]
    assert log_y  # values from 3 to about 1,000: a log axis, ticked at powers of ten
    assert all(math.log10(v) == round(math.log10(v)) for v in yticks)
    legend = page.locator(f"{_QUICK} .quick-legend text").all_text_contents()
    assert legend == ["trial value", "best so far", f"failed ({n_failed})"]
    # The credits (lines) are drawn the same way; bars wait for Plotly.
    assert page.locator("#credits > svg.quick-plot").count() == 1
    assert page.locator("#failures-plot > svg").count() == 0

    # Slice plots too, once their section nears the screen: a choice parameter's axis names its values.
    page.evaluate("document.getElementById('h-slices').scrollIntoView()")
    page.wait_for_selector("#slices svg.quick-plot", timeout=60_000)
    titles = page.locator("#slices svg.quick-plot .quick-title").all_text_contents()
    assert set(titles) == {"x", "y", "mode"}
    mode = page.locator("#slices svg.quick-plot", has=page.locator(".quick-title", has_text="mode"))
    assert mode.locator(".quick-xticks text").all_text_contents() == ["a", "b", "c"]
    assert page.locator("#parallel svg").count() == 0  # parallel coordinates wait for Plotly

    held.release()
    page.wait_for_selector("#convergence .main-svg", timeout=60_000)
    page.wait_for_selector("#credits .main-svg", timeout=60_000)
    page.wait_for_selector("#slices .main-svg", timeout=60_000)
    assert page.locator("svg.quick-plot").count() == 0
    names = page.evaluate("() => document.getElementById('convergence').data.map((t) => t.name)")
    assert names == ["trial value", "best so far", f"failed ({n_failed})"]
    assert browser.errors == []


def test_a_plot_drawn_after_plotly_arrived_is_plotly_at_once(dashboard: Any, page: Any, browser: Any) -> None:
    page.goto(dashboard.url + "runs/alpha")
    page.wait_for_selector("#convergence .main-svg", timeout=60_000)
    page.wait_for_function("() => !!window.Plotly")
    page.select_option("#x-axis", "time")
    page.wait_for_function(
        "() => document.querySelector('#convergence .xtitle').textContent.startsWith('time')")
    assert page.locator("svg.quick-plot").count() == 0
    assert browser.errors == []


def test_the_compare_view_draws_its_curves_as_svg_before_plotly(dashboard: Any, page: Any, browser: Any,
                                                                held: HeldBack) -> None:
    page.goto(dashboard.url + "compare?runs=alpha,beta")
    quick = "#compare-plot > svg.quick-plot"
    page.wait_for_selector(quick)
    assert page.locator(f"{quick} .quick-legend text").all_text_contents() == ["alpha", "beta"]
    assert page.text_content(f"{quick} .quick-ytitle") == "best value so far"
    for name in ("alpha", "beta"):
        assert page.locator(f"{quick} g.quick-trace[data-name='{name}'] path").count() == 1
    held.release()
    page.wait_for_selector("#compare-plot .main-svg", timeout=60_000)
    assert page.locator("svg.quick-plot").count() == 0
    assert browser.errors == []


def test_the_report_draws_the_svg_plot_before_its_inlined_plotly_runs(filled_store: str, tmp_path: Path,
                                                                      page: Any, browser: Any) -> None:
    from perftune.report import write_html

    with open_store(filled_store) as store:
        out = write_html(store, "alpha", tmp_path / "alpha.html")
    requests: list[str] = []
    page.route("**/*", lambda route: route.continue_() if route.request.url == out.as_uri()
               else (requests.append(route.request.url), route.abort()))
    # Records whether the static plot was in the page while plotly.js had not run yet.
    page.add_init_script("""
        window.__quickBeforePlotly = false;
        new MutationObserver(() => {
          if (document.querySelector('#convergence > svg.quick-plot') && window.Plotly === undefined)
            window.__quickBeforePlotly = true;
        }).observe(document, {subtree: true, childList: true});
    """)
    page.goto(out.as_uri())
    page.wait_for_selector("#convergence .main-svg", timeout=60_000)
    assert page.evaluate("() => window.__quickBeforePlotly")
    assert page.locator("svg.quick-plot").count() == 0
    assert requests == [] and browser.errors == []


def test_new_trials_appear_in_the_svg_plot_while_plotly_is_held_back(tmp_path: Path, start: Any, page: Any,
                                                                     browser: Any, held: HeldBack) -> None:
    path = str(tmp_path / "live.db")
    with open_store(path) as store:
        run = store.create_run("live", None, {"budget": {"evals": 20}}, "min", None)
        for i in range(3):
            store.add_trial(run.id, Trial(i, Config({"x": i}), Status.OK, value=10.0 - i, loss=10.0 - i,
                                          technique="random", started_at=1000.0 + i, finished_at=1000.5 + i))
        dash = start(path)
        page.goto(dash.url + "runs/live")
        page.wait_for_selector(_QUICK)
        assert _trace(page, _QUICK, "trial value").get_attribute("data-points") == "3"
        store.add_trial(run.id, Trial(3, Config({"x": 3}), Status.OK, value=1.5, loss=1.5, technique="model",
                                      started_at=1003.0, finished_at=1003.5))
        page.wait_for_function("() => document.getElementById('t-range').textContent === '1–4 of 4'",
                               timeout=2000)
        page.wait_for_function(
            "(s) => document.querySelector(s + \" g.quick-trace[data-name='trial value']\").dataset.points"
            " === '4'", arg=_QUICK, timeout=2000)
        assert _trace(page, _QUICK, "best so far").get_attribute("data-last") == "1.5"
        assert page.evaluate("() => window.Plotly === undefined")
        held.release()
        page.wait_for_selector("#convergence .main-svg", timeout=60_000)
        page.wait_for_function("() => document.getElementById('convergence').data[0].x.length === 4")
    assert page.locator("svg.quick-plot").count() == 0
    assert browser.errors == []
