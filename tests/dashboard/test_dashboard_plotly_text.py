"""Plotly draws a subset of HTML in the text it is given (<a href>, <span style>, <b>): every store string in
the plots (trace names, failure labels, hover text, parameter names, category ticks, titles) is drawn as
the text it is, in the dashboard and in ``perftune report`` (chromium, real processes)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.space import Choice, Config, Int, Space

LINK = '<a href="https://evil.example/phish">CLICK-ME</a>'
BIG = '<span style="font-size:90px;fill:red">BIG</span>'
PARAM = "k" + LINK
SPACE = Space({"x": Int(0, 40), "mode": Choice(["plain" + LINK, "other"]), PARAM: Int(0, 3)})
_LINKS = """() => [...document.querySelectorAll('svg a')].map((a) => a.getAttribute('href') ||
  a.getAttribute('xlink:href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href'))"""
_STYLED = "() => document.querySelectorAll('svg tspan[style*=\"90px\"]').length"
_TEXTS = "(sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent)"


def _objective(config: Config) -> float:
    if config["x"] % 5 == 0:
        raise RuntimeError("reason " + LINK)
    return float((config["x"] - 17) ** 2 + 1 + config[PARAM])


@pytest.fixture(scope="module")
def markup_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("plotly") / "runs.db")
    perftune.tune(_objective, SPACE, budget=40, seed=1, store=path, name="inj")
    perftune.tune(_objective, SPACE, budget=20, seed=2, store=path, name="other")
    con = sqlite3.connect(path)
    con.execute("UPDATE trials SET technique = ? WHERE run_id = 1 AND trial_id % 2 = 0",
                ("tech" + LINK + BIG,))
    con.execute("UPDATE runs SET name = ? WHERE id = 2", ("run" + LINK,))
    con.commit()
    con.close()
    Path(path).chmod(0o600)
    return path


def _draw_everything(page: Any) -> None:
    page.wait_for_function("() => !!window.Plotly", timeout=60_000)
    page.wait_for_function("() => !!document.querySelector('#credits .legendtext')", timeout=60_000)
    page.evaluate("document.getElementById('h-slices').scrollIntoView()")
    page.wait_for_function("() => !!document.querySelector('#slice-0 .main-svg') && "
                           "!!document.querySelector('#parallel .main-svg')", timeout=60_000)
    page.wait_for_function("() => !!document.querySelector('#failures-plot .main-svg')", timeout=60_000)


def _check_run_page(page: Any) -> None:
    _draw_everything(page)
    assert page.evaluate(_LINKS) == []
    assert page.evaluate(_STYLED) == 0
    # The strings are there, as the text they are.
    assert "tech" + LINK + BIG in page.evaluate(_TEXTS, "#credits .legendtext")
    failures = " ".join(page.evaluate(_TEXTS, "#failures-plot .ytick text"))
    assert "reason <a href=" in failures
    parallel = " ".join(page.evaluate(_TEXTS, "#parallel text"))
    assert "k<a href=" in parallel and "plain<a h" in parallel
    slices = " ".join(page.evaluate(_TEXTS, "#slices .gtitle, #slices .xtick text"))
    assert PARAM in slices and "plain" + LINK in slices


def test_store_markup_in_the_dashboard_s_plots_is_text(markup_store: str, start: Any, page: Any,
                                                       browser: Any) -> None:
    dash = start(markup_store)
    page.goto(dash.url + "runs/1")
    _check_run_page(page)
    page.goto(dash.url + "compare?runs=1,2")
    page.wait_for_function("() => !!window.Plotly && !!document.querySelector('#compare-plot .legendtext')",
                           timeout=60_000)
    assert page.evaluate(_LINKS) == []
    assert "run" + LINK in page.evaluate(_TEXTS, "#compare-plot .legendtext")
    assert browser.errors == []


def test_store_markup_in_the_report_s_plots_is_text(markup_store: str, tmp_path: Path, page: Any,
                                                    browser: Any) -> None:
    out = tmp_path / "report.html"
    exe = Path(sys.executable).with_name("perftune")
    done = subprocess.run([str(exe), "report", "1", "-o", str(out), "--store", markup_store],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    page.goto(out.as_uri())
    _check_run_page(page)
    assert browser.errors == []
