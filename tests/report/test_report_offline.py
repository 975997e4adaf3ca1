"""The report in a real browser: every kind of run opens offline (no request leaves the page), its views
render without console errors, and a 300-flag run's best configuration fits one screen."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perftune.drive import Tuner
from perftune.report import FinalAnswer, Improvement, record_final_answer, write_html
from perftune.store import open_store
from perftune.targets import TargetObjective, TaskRunner, get, names
from perftune.trial import Status, Trial

CHROMIUM = os.environ.get("PERFTUNE_CHROMIUM", "/usr/bin/chromium")
_DRAWN = "(id) => { const e = document.getElementById(id); return !!e && !!e.querySelector('.main-svg'); }"


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


def _open_offline(chromium: Any, path: Path, height: int = 900) -> tuple[Any, list[str], list[str]]:
    """Open ``path`` with every request but the file itself blocked; returns (page, requests, errors)."""
    page = chromium.new_page(viewport={"width": 1280, "height": height})
    requests: list[str] = []
    errors: list[str] = []
    url = path.resolve().as_uri()

    def route(r: Any) -> None:
        if r.request.url == url:
            r.continue_()
        else:
            requests.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return page, requests, errors


def _run_kind(kind: str, folder: Path, db: str) -> None:
    """A short run of the target ``kind`` on its own example, through the driver as ``perftune run`` does."""
    example = get(kind).example(str(folder))
    if example.skip:
        pytest.skip(f"{kind}: {example.skip}")
    target = example.target
    with open_store(db) as store:
        if isinstance(target, TaskRunner):
            target.run_task(budget=["4"], workers=1, store=store, seed=0, name=kind)
            return
        # The trials are measured by the driver, then stored as a run of that kind: the choice target's
        # search state cannot be checkpointed yet (its design holds Levels objects), which is not
        # what this test is about.
        space = target.space()
        result = Tuner(space, goal=target.goal, seed=0).run(TargetObjective(target), 6)
        run_id = store.create_run(kind, space, {"target": kind}, target.goal, None).id
        for trial in result.trials:
            store.add_trial(run_id, trial)
        store.finish_run(run_id)


@pytest.mark.slow
@pytest.mark.parametrize("kind", names())
def test_the_report_of_every_kind_of_run_opens_offline(kind: str, chromium: Any,
                                                       public_tmp_path: Path) -> None:
    folder = public_tmp_path / kind
    folder.mkdir(mode=0o755)
    db = str(public_tmp_path / "runs.db")
    _run_kind(kind, folder, db)
    out = public_tmp_path / f"{kind}.html"
    with open_store(db) as store:
        write_html(store, kind, out)
    page, requests, errors = _open_offline(chromium, out)
    try:
        for element_id in ("convergence", "credits", "proposals"):
            page.wait_for_function(_DRAWN, arg=element_id, timeout=60_000)
        page.wait_for_function("() => document.querySelectorAll('#trial-table tbody tr').length > 0")
        assert page.inner_text("#run-summary").count(kind) >= 1
        # The table works offline too: sorting by value puts the best first.
        page.click("#trial-table th[data-sort='value']")
        page.wait_for_function(
            "() => document.querySelector(\"th[data-sort='value']\").textContent.endsWith('▲')")
    finally:
        page.close()
    assert requests == [] and errors == []


def test_a_300_flag_run_fits_its_best_configuration_in_one_screen(chromium: Any, tmp_path: Path,
                                                                 flags_info: Any) -> None:
    from perftune.targets.flags import build_space, render

    space = build_space(flags_info)
    assert len(space.names) >= 300
    db = str(tmp_path / "flags.db")
    rng = np.random.default_rng(0)
    configs = [space.default()] + space.sample(rng, n=39)
    with open_store(db) as store:
        run_id = store.create_run("flags300", space, {"target": "flags"}, "min", None).id
        for i, config in enumerate(configs):
            value = float(1.0 + rng.random())
            samples = [value * f for f in (0.99, 1.0, 1.01)]
            store.add_trial(run_id, Trial(i, config, Status.OK, value=value, loss=value, samples=samples,
                                          technique="default" if i == 0 else "random"))
        best = store.best(run_id)
        # The worst case for reading: a final answer that kept every option of a random configuration.
        flags = render(best.config, flags_info)
        assert len(flags) > 150
        record_final_answer(store, run_id, FinalAnswer(Improvement(1.3, 1.2, 1.4, baseline="-O3"),
                                                       command_line="gcc " + " ".join(flags) + " prog.c",
                                                       config={"flags": flags}))
        out = write_html(store, "flags300", tmp_path / "flags300.html")
    page, requests, errors = _open_offline(chromium, out, height=1000)
    try:
        page.wait_for_selector("#final-flags")
        bottom = page.evaluate("document.getElementById('best').getBoundingClientRect().bottom")
        assert bottom <= 1000, f"the best configuration ends {bottom:.0f} px down"
        # Each option is there, without the prefix its group names (-f, -fno-, --param).
        shown = page.inner_text("#final-flags").split()
        for flag in flags:
            for prefix in ("-fno-", "-f", "--param=", "--param "):
                if flag.startswith(prefix):
                    flag = flag[len(prefix):]
                    break
            assert flag in shown
        assert "improvement over -O3: 1.300x (95% CI 1.200x to 1.400x)" in page.inner_text("#best")
        # The search's best trial, with its hundreds of knobs, is one click away and not on screen.
        assert not page.is_visible("#best details .grid")
        page.click("#best details summary")
        assert page.is_visible("#best details .grid")
    finally:
        page.close()
    assert requests == [] and errors == []


@pytest.fixture(scope="module")
def flags_info(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from perftune.targets.flags import discover

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg"))
    try:
        yield discover("gcc")
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
