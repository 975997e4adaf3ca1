"""optuna-dashboard on a study that PerftuneSampler ran: the real dashboard server reads the storage and
shows the study's trials, values, intermediate values and parameter importances, in its API and in a
browser (Debian's chromium through Playwright)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

optuna = pytest.importorskip("optuna")
optuna_dashboard = pytest.importorskip("optuna_dashboard")  # installed by the test extra

from perftune.integration.optuna import PerftuneSampler  # noqa: E402

CHROMIUM = os.environ.get("PERFTUNE_CHROMIUM", "/usr/bin/chromium")
N_TRIALS = 14


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def _objective(trial: optuna.trial.Trial) -> float:
    x = trial.suggest_float("x", -3.0, 3.0)
    kind = trial.suggest_categorical("kind", ["slow", "fast"])
    value = (x - 1.0) ** 2 + (0.5 if kind == "slow" else 0.0)
    for step in range(3):
        trial.report(value * (3 - step), step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    trial.set_user_attr("kind_label", kind.upper())
    return value


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, optuna.Study]]:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url = f"sqlite:///{tmp_path_factory.mktemp('optuna') / 'study.db'}"
    study = optuna.create_study(study_name="perftune-sampled", storage=url, sampler=PerftuneSampler(seed=3),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=4))
    study.optimize(_objective, n_trials=N_TRIALS)
    server: WSGIServer = make_server("127.0.0.1", 0, optuna_dashboard.wsgi(url), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", study._study_id, study
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_the_dashboard_api_serves_the_study_as_the_sampler_left_it(served: tuple[str, int, Any]) -> None:
    base, study_id, study = served
    listed = _get(f"{base}/api/studies")["study_summaries"]
    assert [s["study_name"] for s in listed] == ["perftune-sampled"]
    detail = _get(f"{base}/api/studies/{study_id}")
    trials = detail["trials"]
    assert len(trials) == N_TRIALS
    states = {t["state"] for t in trials}
    assert states <= {"Complete", "Pruned"} and "Complete" in states
    by_number = {t.number: t for t in study.trials}
    for shown in trials:
        mine = by_number[shown["number"]]
        assert {p["name"] for p in shown["params"]} == set(mine.params)
        assert len(shown["intermediate_values"]) == len(mine.intermediate_values)
        if mine.state == optuna.trial.TrialState.COMPLETE:
            assert shown["values"] == [pytest.approx(mine.value)]
            attrs = {a["key"]: a["value"] for a in shown["user_attrs"]}
            assert attrs == {"kind_label": mine.params["kind"].upper()}
    best = min(by_number.values(), key=lambda t: t.value if t.value is not None else float("inf"))
    assert [t["number"] for t in detail["best_trials"]] == [best.number]
    importances = _get(f"{base}/api/studies/{study_id}/param_importances")["param_importances"]
    assert {i["name"] for i in importances[0]} == {"x", "kind"}


def test_the_dashboard_page_shows_the_study_in_a_browser(served: tuple[str, int, Any]) -> None:
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    base, study_id, study = served
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base}/dashboard/studies/{study_id}/trials")
            best = study.best_trial
            page.get_by_text("perftune-sampled").first.wait_for(timeout=20_000)
            page.get_by_text(f"Trial {best.number}").first.wait_for(timeout=20_000)
            assert errors == []
        finally:
            browser.close()
