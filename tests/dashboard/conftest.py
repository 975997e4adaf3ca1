"""Fixtures of the dashboard's tests: a store with runs, a real ``perftune dashboard`` process, a browser.

The browser is Debian's chromium driven by Playwright (``executable_path``: Playwright's own browser
builds cannot be downloaded here). Every page opened through ``page`` records its console errors and
uncaught exceptions; a test ends by asserting there were none.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.space import Choice, Config, Int, Space

CHROMIUM = os.environ.get("PERFTUNE_CHROMIUM", "/usr/bin/chromium")
SPACE = Space({"x": Int(0, 40), "y": Int(0, 30), "mode": Choice(["a", "b", "c"])})


def objective(config: Config) -> float:
    if config["x"] % 7 == 3:
        raise RuntimeError("kernel launch failed: too many resources requested")
    return float((config["x"] - 17) ** 2 + (config["y"] - 3) ** 2 + 1 + 5 * (config["mode"] == "b"))


@pytest.fixture(scope="module")
def filled_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite store with two finished runs of the same space (``alpha``, ``beta``)."""
    path = str(tmp_path_factory.mktemp("dash") / "runs.db")
    perftune.tune(objective, SPACE, budget=70, seed=1, store=path, name="alpha")
    perftune.tune(objective, SPACE, budget=50, seed=2, store=path, name="beta")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Dashboard:
    """A running ``perftune dashboard`` process."""

    url: str
    process: subprocess.Popen[str]
    stderr_lines: list[str] = field(default_factory=list)


def start_dashboard(store: str, *extra: str, host: str = "127.0.0.1", probe: str | None = None) -> Dashboard:
    port = free_port()
    exe = Path(sys.executable).with_name("perftune")
    proc = subprocess.Popen([str(exe), "dashboard", "--store", store, "--host", host, "--port", str(port),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(probe or url, timeout=2).close()
            break
        except urllib.error.HTTPError:
            break  # it answers (403 without a token)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out, err = proc.communicate()
                raise RuntimeError(f"perftune dashboard did not start: {err}") from None
            time.sleep(0.1)
    return Dashboard(url, proc)


def stop_dashboard(dash: Dashboard) -> str:
    dash.process.terminate()
    try:
        _, err = dash.process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        dash.process.kill()
        _, err = dash.process.communicate()
    return err


@pytest.fixture(scope="module")
def dashboard(filled_store: str) -> Iterator[Dashboard]:
    dash = start_dashboard(filled_store)
    yield dash
    stop_dashboard(dash)


@dataclass
class Browser:
    """A Playwright browser and the console errors of every page it opened."""

    browser: Any
    errors: list[str] = field(default_factory=list)

    def new_page(self, **kwargs: Any) -> Any:
        page = self.browser.new_page(viewport={"width": 1280, "height": 900}, **kwargs)
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        return page


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not shutil.which(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield Browser(b)
        finally:
            b.close()


@pytest.fixture()
def page(browser: Browser) -> Iterator[Any]:
    browser.errors.clear()
    p = browser.new_page()
    yield p
    p.close()


def _starter() -> Iterator[Any]:
    started: list[Dashboard] = []

    def make(store: str, *extra: str, host: str = "127.0.0.1", probe: str | None = None) -> Dashboard:
        dash = start_dashboard(store, *extra, host=host, probe=probe)
        started.append(dash)
        return dash

    yield make
    for dash in started:
        stop_dashboard(dash)


@pytest.fixture()
def start() -> Iterator[Any]:
    """``start(store, *options, host=...)``: a dashboard process, stopped at the end of the test."""
    yield from _starter()


@pytest.fixture(scope="module")
def start_for_module() -> Iterator[Any]:
    """As ``start``, for a module's fixtures: the dashboard is stopped at the end of the module. (Test
    modules cannot ``from conftest import``: in a whole-suite run that name is another folder's
    conftest.)"""
    yield from _starter()


@pytest.fixture()
def screenshot() -> Any:
    """``screenshot(page, name)`` saves NAME.png in ``$PERFTUNE_SCREENSHOTS`` when set (the docs' images)."""

    def save(page: Any, name: str, *, full_page: bool = False) -> None:
        folder = os.environ.get("PERFTUNE_SCREENSHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)

    return save
