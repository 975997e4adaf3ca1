"""The report's trial table, after a review: its status filter has every status (pruned trials, pending ones
of a live run), and a table that leaves rows out says so beside its pager, in a real browser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perftune.report import _html, run_view, write_html
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

CHROMIUM = os.environ.get("PERFTUNE_CHROMIUM", "/usr/bin/chromium")
SPACE = Space({"x": Int(0, 1000, default=0)})


def _pruned_run(store: Any, name: str, n: int, *, finish: bool = True) -> Any:
    """A run whose trials are mostly pruned (every third one runs to the end), the best the last one."""
    run = store.create_run(name, SPACE, {}, "min", None)
    for i in range(n):
        if i % 3 == 0 or i == n - 1:
            value = float(1000 - i)
            trial = Trial(i, Config({"x": i}), Status.OK, value=value, loss=value, samples=[value],
                          technique="default" if i == 0 else "random")
        else:
            trial = Trial(i, Config({"x": i}), Status.PRUNED, reason="pruned at step 2", technique="random")
        store.add_trial(run.id, trial)
    if finish:
        store.finish_run(run.id)
    return run


def test_the_table_s_status_filter_lists_pruned_and_pending_for_a_live_run(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.db")) as store:
        _pruned_run(store, "done", 10)
        _pruned_run(store, "live", 10, finish=False)
        done, live = run_view(store, "done")["statuses"], run_view(store, "live")["statuses"]
    assert done == ["ok", "failed", "timeout", "cancelled", "pruned"]
    assert live == ["pending", "ok", "failed", "timeout", "cancelled", "pruned"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def test_the_report_filters_pruned_trials_and_says_which_rows_it_holds(
        chromium: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_html, "REPORT_MAX_TRIALS", 60)
    out = tmp_path / "pruned.html"
    with open_store(str(tmp_path / "s.db")) as store:
        _pruned_run(store, "pruned", 200)
        write_html(store, "pruned", out, plots=True)
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(out.resolve().as_uri())
        page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
        assert page.inner_text("#t-note").strip() == (
            "table: the first 59 of 200 trials and the best trial after them (the dashboard or perftune "
            "export has them all)")
        page.select_option("#t-status", "pruned")
        page.wait_for_function("() => document.getElementById('t-range').textContent.endsWith('of 39')")
        statuses = page.locator("#trial-table tbody td.status").all_inner_texts()
        assert statuses and set(statuses) == {"pruned"}
        # The run's best (its last trial) is in the table: sorting by value shows it first.
        page.select_option("#t-status", "ok")
        page.click("#trial-table th[data-sort='value']")
        page.wait_for_function(
            "() => document.querySelector('#trial-table tbody tr').dataset.trial === '199'")
    finally:
        page.close()
    assert errors == []
