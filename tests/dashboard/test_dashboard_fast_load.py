"""How the dashboard loads fast on a big run: keyset pages of the trial table, plotly.js loaded asynchronously
and cached for good under a versioned URL, and a convergence plot drawn first from a sample, then whole."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 9999), "y": Int(0, 9)})
N_TRIALS = 2600  # more than 2,000 successful trials: the convergence plot's first draw is a sample


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A finished run of 2,600 trials with repeated values (ties) and failures (no value)."""
    path = str(tmp_path_factory.mktemp("big") / "big.db")
    with open_store(path) as store:
        run_id = store.create_run("big", SPACE, {"budget": {"evals": N_TRIALS}}, "min", None).id
        for i in range(N_TRIALS):
            config = Config({"x": i, "y": i % 10})
            if i % 10 == 9:
                trial = Trial(i, config, Status.FAILED, reason="exit 1", technique="random", worker="w0")
            else:
                value = 1.0 + (i * 7919) % 500 / 100
                trial = Trial(i, config, Status.OK, value=value, loss=value, samples=[value],
                              technique="model" if i % 2 else "random", worker="w1",
                              started_at=1000.0 + i, finished_at=1000.5 + i)
            store.add_trial(run_id, trial)
        store.finish_run(run_id)
    return path


@pytest.fixture(scope="module")
def big(big_store: str, start_for_module: Any) -> Any:
    return start_for_module(big_store)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def _page(big: Any, **query: Any) -> Any:
    return _get(big.url + "api/runs/big/trials?" + urllib.parse.urlencode(query))


@pytest.mark.parametrize("sort,status", [("trial", ""), ("value", "ok"), ("value", ""), ("technique", "")])
@pytest.mark.parametrize("descending", ["0", "1"])
def test_next_and_prev_cursors_give_the_offset_pages(big: Any, sort: str, status: str,
                                                    descending: str) -> None:
    q = {"limit": 100, "sort": sort, "status": status, "descending": descending}
    first = _page(big, offset=0, **q)
    total = first["total"]
    expected = [[r["trial"] for r in _page(big, offset=o, **q)["rows"]] for o in range(0, total, 100)]
    pages, page = [], first
    while page["rows"]:
        pages.append([r["trial"] for r in page["rows"]])
        assert page["total"] == total
        page = _page(big, after=page["last"], offset=len(pages) * 100, **q)
    assert pages == expected
    # Back from the last page through each page's first row.
    page = _page(big, offset=(len(expected) - 1) * 100, **q)
    back = [[r["trial"] for r in page["rows"]]]
    while True:
        page = _page(big, before=page["first"], **q)
        if not page["rows"]:
            break
        back.insert(0, [r["trial"] for r in page["rows"]])
    assert back == expected


@pytest.mark.parametrize("cursor", ["nonsense", "[1.5]", '[1.5, "x"]', "[[1], 2]"])
def test_a_bad_cursor_is_a_400_with_one_line(big: Any, cursor: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        _page(big, after=cursor)
    assert err.value.code == 400
    message = json.loads(err.value.read())["error"]
    assert "is not a page cursor" in message and "\n" not in message


def test_the_assets_are_versioned_and_immutable_the_runs_page_parses_no_plotly(big: Any) -> None:
    with urllib.request.urlopen(big.url + "runs/big", timeout=60) as r:
        run_html = r.read().decode()
    with urllib.request.urlopen(big.url, timeout=60) as r:
        runs_html = r.read().decode()
    # plotly.js is no script of the page: views.js inserts it (the run page preloads it).
    src = run_html.split('<link rel="preload" as="script" href="')[1].split('"')[0]
    assert src.startswith("static/plotly.min.js?v=") and 'src="static/plotly' not in run_html
    assert "preload" not in runs_html  # fetched by the script once the runs are drawn
    for url in (src, run_html.split('<script src="')[1].split('"')[0],
                run_html.split('stylesheet" href="')[1].split('"')[0]):
        with urllib.request.urlopen(big.url + url, timeout=60) as r:
            assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable", url
    # Another version (a page from before an upgrade) or none: never kept without asking.
    for url in ("static/views.js?v=0", "static/views.js"):
        with urllib.request.urlopen(big.url + url, timeout=60) as r:
            assert r.headers["Cache-Control"] == "no-cache"


_POINTS = "() => { const d = document.getElementById('convergence').data; return d ? d[0].x.length : 0; }"


def test_the_run_page_draws_a_sample_first_then_every_value(big: Any, page: Any, browser: Any) -> None:
    seen: list[int] = []
    page.expose_function("recordPoints", lambda n: seen.append(n))
    # Each draw of the convergence plot is recorded as Plotly finishes it.
    page.add_init_script("""
        new MutationObserver(() => {
          const c = document.getElementById('convergence');
          if (c && c.dataset.complete && c.data && c.dataset.seen !== c.dataset.complete) {
            c.dataset.seen = c.dataset.complete;
            window.recordPoints(c.data[0].x.length);
          }
        }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-complete']});
    """)
    page.goto(big.url)
    page.wait_for_selector("#runs tbody tr[data-run='big']")
    page.wait_for_function("() => !!window.Plotly", timeout=60_000)  # fetched after the runs were drawn
    page.goto(big.url + "runs/big")
    page.wait_for_selector("#convergence[data-complete='true']", timeout=60_000)
    n_ok = N_TRIALS - N_TRIALS // 10
    assert page.evaluate(_POINTS) == n_ok
    assert page.evaluate("() => document.getElementById('convergence').data[0].type") == "scattergl"
    assert seen[0] <= 1000 < n_ok == seen[-1]
    title = page.inner_text("#convergence .gtitle") if page.locator("#convergence .gtitle").count() else ""
    assert "first sample" not in title
    # The failures are drawn whole too.
    names = page.evaluate("() => document.getElementById('convergence').data.map((t) => t.name)")
    assert f"failed ({N_TRIALS // 10})" in names
    # Paging the table reads after the last row: the same rows as the offset page.
    page.wait_for_function("() => document.getElementById('t-range').textContent === '1–25 of 2600'")
    for _ in range(3):
        page.click("#t-next")
    page.wait_for_function("() => document.getElementById('t-range').textContent === '76–100 of 2600'")
    shown = [int(t) for t in page.locator("#trial-table tbody td:first-child").all_inner_texts()]
    assert shown == list(range(75, 100))
    page.click("#t-prev")
    page.wait_for_function("() => document.getElementById('t-range').textContent === '51–75 of 2600'")
    shown = [int(t) for t in page.locator("#trial-table tbody td:first-child").all_inner_texts()]
    assert shown == list(range(50, 75))
    assert browser.errors == []


def test_the_report_draws_the_whole_sample_too(big_store: str, tmp_path: Path, page: Any,
                                               browser: Any) -> None:
    from perftune.report import write_html

    with open_store(big_store) as store:
        out = write_html(store, "big", tmp_path / "big.html")
    page.goto(out.as_uri())
    page.wait_for_selector("#convergence[data-complete='true']", timeout=60_000)
    assert page.evaluate(_POINTS) == N_TRIALS - N_TRIALS // 10
    assert browser.errors == []


def test_before_plotly_the_convergence_is_an_even_sample_drawn_as_svg(big: Any, page: Any,
                                                                     browser: Any) -> None:
    held: list[Any] = []
    page.route("**/static/plotly.min.js*", lambda route: held.append(route))  # answered at the end
    page.goto(big.url + "runs/big")
    quick = "#convergence > svg.quick-plot"
    page.wait_for_selector(quick, timeout=60_000)
    values = page.locator(f"{quick} g.quick-trace[data-name='trial value']")
    n_ok = N_TRIALS - N_TRIALS // 10
    n_points = int(values.get_attribute("data-points") or 0)
    assert 500 <= n_points <= 1001 < n_ok and values.locator("circle").count() == n_points
    # Evenly spread over the whole run: the first and the last successful trial are among them.
    titles = values.locator("circle title").all_text_contents()
    assert titles[0].startswith("0: ") and titles[-1].startswith(f"{N_TRIALS - 2}: ")
    failed = page.locator(f"{quick} g.quick-trace[data-name='failed ({N_TRIALS // 10})']")
    assert 0 < int(failed.get_attribute("data-points") or 0) <= 1001
    best = page.locator(f"{quick} g.quick-trace[data-name='best so far']")
    assert float(best.get_attribute("data-last") or "nan") == 1.0
    assert page.evaluate("() => window.Plotly === undefined")
    for route in held:
        route.continue_()
    page.wait_for_selector("#convergence[data-complete='true']", timeout=60_000)
    assert page.locator("svg.quick-plot").count() == 0
    assert browser.errors == []
