"""The HTML report of a stored run, through the API and the `perftune report` command."""

from __future__ import annotations

import html.parser
from pathlib import Path

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.errors import PerftuneError
from perftune.report import credit_history, failure_counts, write_html
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial


def objective(config: Config) -> float:
    if config["x"] % 5 == 0:
        raise RuntimeError("kernel launch failed: too many resources requested")
    if config["y"] > 25:
        raise ValueError("wrong result")
    return float((config["x"] - 17) ** 2 + (config["y"] - 3) ** 2 + 1)


class _Collector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture()
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    space = Space({"x": Int(0, 40), "y": Int(0, 30)})
    perftune.tune(objective, space, budget=60, seed=4, store=path, name="demo")
    return path


def _parse(path: Path) -> _Collector:
    c = _Collector()
    c.feed(path.read_text())
    return c


def test_report_shows_best_config_plots_and_failures(db: str, tmp_path: Path) -> None:
    store = open_store(db)
    try:
        best = store.best(store.get_run("demo").id)
        out = write_html(store, "demo", tmp_path / "demo.html")
    finally:
        store.close()
    page = _parse(out)
    text = " ".join(page.text)
    for heading in ("Best configuration", "Convergence", "Technique credits over time", "Failures by reason"):
        assert heading in text
    assert len(page.images) == 3 and all(src.startswith("data:image/png;base64,") for src in page.images)
    assert "RuntimeError: kernel launch failed: too many resources requested" in text
    assert f"{best.value:.6g}" in text
    assert str(best.config["x"]) in text


def test_cli_report_writes_the_page(db: str, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["--store", db, "report", "latest", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    assert "perftune run" in out.read_text()


def test_unknown_run_is_one_clear_error(db: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--store", db, "report", "no-such-run", "-o", str(tmp_path / "x.html")])
    assert result.exit_code == 2
    assert "no-such-run" in result.output
    store = open_store(db)
    try:
        with pytest.raises(PerftuneError):
            write_html(store, "no-such-run", tmp_path / "x.html")
    finally:
        store.close()


def test_run_without_trials_still_gets_a_page(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "empty.db"))
    try:
        store.create_run("empty", Space({"x": Int(0, 3)}), {}, "min", None)
        out = write_html(store, "empty", tmp_path / "empty.html")
    finally:
        store.close()
    text = " ".join(_parse(out).text)
    assert "No successful trial" in text and "No trials yet" in text


def _t(i: int, tech: str, value: float | None, reason: str | None = None) -> Trial:
    status = Status.OK if value is not None else Status.FAILED
    return Trial(id=i, config=Config({"x": i}), status=status, value=value, loss=value, reason=reason,
                 technique=tech)


def test_credit_goes_to_the_techniques_that_improved_the_best() -> None:
    # The default is the baseline: it improves on nothing.
    trials = [_t(0, "default", 10.0), _t(1, "random", 12.0), _t(2, "model", 5.0),
              _t(3, "random", None, "boom"), _t(4, "ga", 4.0)]
    hist = credit_history(trials)
    final = {k: v[-1] for k, v in hist.items()}
    assert final["random"] == 0.0 and final["default"] == 0.0
    assert final["model"] > final["ga"] > 0  # 10 -> 5 is a larger relative gain than 5 -> 4
    assert sum(final.values()) == pytest.approx(1.0)
    assert len(hist["model"]) == len(trials)
    assert failure_counts(trials) == [("failed", "boom", 1)]
