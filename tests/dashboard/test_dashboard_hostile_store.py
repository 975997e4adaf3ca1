"""The dashboard over a store written by someone else: every string shows as text and no script of the
store runs (chromium, a real ``perftune dashboard``), trial ids are integers or the run is an error, the
pages carry a Content-Security-Policy, and a run whose name holds "/" or "," opens and compares."""

from __future__ import annotations

import json
import re
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest

import perftune
from perftune.space import Choice, Config, Int, Space
from perftune.store import open_store

_DRAWN = "(id) => { const e = document.getElementById(id); return !!e && !!e.querySelector('.main-svg'); }"
_PWNED = "() => document.documentElement.getAttribute('data-pwned') || (window.__pwned ? 'window' : null)"
SLASHED = "a/b,c"


def hostile(tag: str) -> str:
    """Markup that runs script if it is ever parsed as HTML; then the end of a <script> and the start of a
    comment (which would end or hide the rest of a script that holds it)."""
    return (f"<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','{tag}');"
            f"window.__pwned=1\"></script><!--")


def _objective(config: Config) -> float:
    if config["x"] % 5 == 0:
        raise RuntimeError(hostile("reason"))
    return float((config["x"] - 17) ** 2 + 1 + 3 * (config["mode"] != hostile("choice")))


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``evil/<markup>`` (markup in every string it shows), ``tid`` (its best trial's id stored as text),
    and two plain runs of one space, ``a/b,c`` and ``beta``."""
    path = str(tmp_path_factory.mktemp("hostile") / "runs.db")
    space = Space({"x": Int(0, 40), "mode": Choice([hostile("choice"), "plain", "-neg"]),
                   "k" + hostile("param"): Int(0, 3)})
    perftune.tune(_objective, space, budget=30, seed=1, store=path, name="evil")
    perftune.tune(_objective, space, budget=12, seed=2, store=path, name="tid")
    plain = Space({"x": Int(0, 40), "y": Int(0, 30)})
    for seed, name in ((1, SLASHED), (2, "beta")):
        perftune.tune(lambda c: float((c["x"] - 17) ** 2 + (c["y"] - 3) ** 2 + 1), plain, budget=20,
                      seed=seed, store=path, name=name)
    con = sqlite3.connect(path)
    try:
        (run_id,) = con.execute("select id from runs where name = 'evil'").fetchone()
        con.execute("update trials set technique = ?, worker = ? where run_id = ? and trial_id % 2 = 0",
                    (hostile("technique"), hostile("worker"), run_id))
        (environment,) = con.execute("select environment from runs where id = ?", (run_id,)).fetchone()
        env = json.loads(environment or "{}")
        env["hostname"] = hostile("host")
        con.execute("update runs set environment = ?, metric = ?, name = ? where id = ?",
                    (json.dumps(env), hostile("metric"), "evil/" + hostile("name"), run_id))
        (tid,) = con.execute("select id from runs where name = 'tid'").fetchone()
        (best,) = con.execute("select trial_id from trials where run_id = ? and status = 'ok' order by value "
                              "limit 1", (tid,)).fetchone()
        text_id = hostile("trial-id")
        con.execute("update samples set trial_id = ? where run_id = ? and trial_id = ?", (text_id, tid, best))
        con.execute("update trials set trial_id = ? where run_id = ? and trial_id = ?", (text_id, tid, best))
        con.commit()
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def dash(hostile_store: str, start_for_module: Any) -> Any:
    return start_for_module(hostile_store)


def _ids(store_path: str) -> dict[str, int]:
    with open_store(store_path) as store:
        return {("evil" if r.name.startswith("evil/") else r.name): r.id for r in store.list_runs()}


def _get(url: str) -> tuple[int, dict[str, str], Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read()) if "json" in r.headers["content-type"] \
                else r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_every_string_of_a_hostile_store_shows_as_text_and_runs_no_script(dash: Any, page: Any, browser: Any,
                                                                          hostile_store: str) -> None:
    page.goto(dash.url)
    page.wait_for_selector("#runs tbody tr")
    assert page.locator("#runs tbody tr").count() == 4
    runs = page.inner_text("#runs")
    assert hostile("name") in runs and hostile("host") in runs
    assert page.evaluate(_PWNED) is None

    page.locator("#runs a", has_text="evil/").click()
    for element_id in ("convergence", "credits", "failures-plot"):
        page.wait_for_function(_DRAWN, arg=element_id, timeout=60_000)
    page.evaluate("document.getElementById('h-slices').scrollIntoView()")
    page.wait_for_function(_DRAWN, arg="parallel", timeout=60_000)
    page.wait_for_function(_DRAWN, arg="slice-0", timeout=60_000)
    # The page's Content-Security-Policy leaves Plotly's WebGL parallel coordinates drawn.
    assert page.locator("#parallel .parcoords").count() == 1
    page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
    summary = page.inner_text("#run-summary")
    assert hostile("name") in summary and hostile("metric") in summary and hostile("host") in summary
    best = page.inner_text("#best")
    assert hostile("param") in best and hostile("choice") in best
    table = page.inner_text("#trial-table")
    assert all(hostile(tag) in table for tag in ("technique", "worker", "reason"))
    assert all(t.isdigit() for t in page.eval_on_selector_all("#trial-table tbody tr",
                                                               "els => els.map((e) => e.dataset.trial)"))
    assert hostile("technique") in page.inner_text("#techniques")
    assert hostile("reason") in page.inner_text("#failure-table")
    page.wait_for_timeout(1500)  # a poll or two more
    assert page.evaluate(_PWNED) is None
    assert page.locator("img").count() == 0
    assert browser.errors == []


def test_a_trial_id_stored_as_text_is_an_error_not_markup(dash: Any, page: Any, hostile_store: str) -> None:
    ids = _ids(hostile_store)
    for resource in ("", "/trials", "/parameters"):
        code, _, body = _get(f"{dash.url}api/runs/{ids['tid']}{resource}")
        assert code == 404 and re.search(r"run 'tid'.* not an integer", body["error"]), (resource, body)
    # The views of the other runs give every trial id as an integer.
    _, _, view = _get(f"{dash.url}api/runs/{ids['evil']}")
    conv = view["convergence"]
    assert all(type(i) is int for i in conv["trial"] + conv["best_trial"] + [view["best"]["trial"]])
    _, _, trials = _get(f"{dash.url}api/runs/{ids['evil']}/trials?limit=500")
    assert trials["rows"] and all(type(r["trial"]) is int for r in trials["rows"])

    page.goto(dash.url + "runs/tid")
    page.wait_for_selector("#summary .error")
    assert re.search(r"run 'tid'.* not an integer", page.inner_text("#summary"))
    page.wait_for_timeout(1500)
    assert page.evaluate(_PWNED) is None and page.locator("img").count() == 0


def test_the_pages_carry_a_content_security_policy(dash: Any, hostile_store: str) -> None:
    policies = []
    for path in ("", "runs/tid", "compare?runs=a%2Fb%2Cc,beta"):
        code, headers, html = _get(dash.url + path)
        assert code == 200, path
        policy = headers["content-security-policy"]
        nonce = policy.split("'nonce-")[1].split("'")[0]
        assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert f'<script nonce="{nonce}">window.PERFTUNE=' in html
        policies.append(policy)
    assert len(set(policies)) == 3  # a nonce per response
    # Every other response forbids everything (JSON, errors).
    for path in ("api/runs", "runs/no-such-run"):
        request = urllib.request.Request(dash.url + path)
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                policy = r.headers["content-security-policy"]
        except urllib.error.HTTPError as error:
            policy = error.headers["content-security-policy"]
        assert policy.startswith("default-src 'none'"), path


def test_a_run_named_with_a_slash_and_a_comma_opens_and_compares(dash: Any, page: Any, browser: Any,
                                                                 hostile_store: str) -> None:
    quoted = urllib.parse.quote(SLASHED, safe="")
    code, _, version = _get(f"{dash.url}api/runs/{quoted}/version")
    assert code == 200 and version["n_trials"] == 20
    code, _, body = _get(f"{dash.url}api/runs/{quoted}/trials?limit=5")
    assert code == 200 and len(body["rows"]) == 5
    code, _, body = _get(f"{dash.url}api/compare?runs={quoted},beta")
    assert code == 200 and [r["run"]["name"] for r in body["runs"]] == [SLASHED, "beta"]

    requests: list[str] = []
    page.on("response", lambda r: requests.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(dash.url)
    page.wait_for_selector(f"#runs tbody tr[data-run='{SLASHED}']")
    page.locator("#runs a", has_text=SLASHED).click()
    page.wait_for_function(_DRAWN, arg="convergence", timeout=60_000)
    page.wait_for_function("() => document.getElementById('t-range').textContent === '1–20 of 20'")
    assert page.inner_text("#run-summary").startswith(f"run\t{SLASHED} (id")
    page.wait_for_timeout(1500)  # polls of the run's version

    page.goto(dash.url)
    page.wait_for_selector(f"#runs tbody tr[data-run='{SLASHED}']")
    page.check(f"#runs tr[data-run='{SLASHED}'] .pick")
    page.check("#runs tr[data-run='beta'] .pick")
    page.click("#compare")
    page.wait_for_url(f"**/compare?runs={quoted},beta")
    page.wait_for_function(_DRAWN, arg="compare-plot", timeout=60_000)
    names = [r.split("\t")[0] for r in page.locator("#compare-table tr").all_inner_texts()[1:]]
    assert names == [SLASHED, "beta"]
    assert page.title() == f"perftune compare: {SLASHED} vs beta"
    # The compare table links the run's own page.
    page.locator("#compare-table a", has_text=SLASHED).click()
    page.wait_for_function("() => document.getElementById('t-range').textContent === '1–20 of 20'")
    assert requests == [] and browser.errors == []
