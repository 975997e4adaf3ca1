"""The HTML report of a stored run, through the API and the `perftune report` command."""

from __future__ import annotations

import html.parser
import re
from collections.abc import Iterator
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
    # The plots are Plotly's, drawn in the page from inlined data by inlined plotly.js: no image, no URL.
    source = out.read_text()
    assert page.images == [] and "window.PERFTUNE=" in source and "plotly.js" in source
    assert not re.search(r"""<(script|link)[^>]*\s(src|href)=["']?(https?:)?//""", source)
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


@pytest.fixture()
def no_plotly(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The core install: ``import plotly`` fails as it does when the plot extra is missing."""
    import sys

    from perftune.report import plotly_js

    plotly_js.cache_clear()
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)
    yield
    plotly_js.cache_clear()


def test_without_plotly_the_page_has_the_tables_and_names_the_extra(db: str, tmp_path: Path,
                                                                         no_plotly: None) -> None:
    from perftune.report import plots_available

    assert not plots_available()
    store = open_store(db)
    try:
        run_id = store.get_run("demo").id
        best = store.best(run_id)
        n_failed = sum(1 for t in store.trials(run_id) if not t.ok)
        out = write_html(store, "demo", tmp_path / "demo.html")
    finally:
        store.close()
    page = _parse(out)
    text = " ".join(page.text)
    assert page.images == [] and "window.PERFTUNE" not in out.read_text()
    assert text.count("pip install 'perftune[plot]'") == 3  # where each of the three plots would be
    for heading in ("Best configuration", "Convergence", "Technique credits over time", "Failures by reason"):
        assert heading in text
    assert "RuntimeError: kernel launch failed: too many resources requested" in text
    assert n_failed > 0 and f"{best.value:.6g}" in text
    assert "new best" in text  # the convergence curve as a table: every trial that improved the best


def test_without_plotly_the_command_still_writes_the_page(db: str, tmp_path: Path,
                                                              no_plotly: None) -> None:
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["--store", db, "report", "latest", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out} (tables only; for the plots: pip install 'perftune[plot]')"
    assert "Best configuration" in out.read_text()


def test_asking_for_plots_without_plotly_is_one_error_naming_the_extra(db: str, tmp_path: Path,
                                                                           no_plotly: None) -> None:
    store = open_store(db)
    try:
        with pytest.raises(PerftuneError, match=r"pip install 'perftune\[plot\]'"):
            write_html(store, "demo", tmp_path / "x.html", plots=True)
    finally:
        store.close()
    assert not (tmp_path / "x.html").exists()


def test_improvements_table_lists_each_new_best_in_order(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "t.db"))
    try:
        space = Space({"x": Int(0, 9)})
        run_id = store.create_run("steps", space, {}, "min", None).id
        for i, (x, value) in enumerate([(0, 10.0), (1, 12.0), (2, 5.0), (3, None), (4, 4.0)]):
            store.add_trial(run_id, Trial(id=i, config=Config({"x": x}),
                                          status=Status.OK if value is not None else Status.FAILED,
                                          value=value, loss=value, reason=None if value else "boom",
                                          technique="random"))
        out = write_html(store, "steps", tmp_path / "s.html", plots=False)
    finally:
        store.close()
    page = out.read_text()
    table = page.split("<th>new best</th>", 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<tr><td>(\d+)</td><td>([0-9.]+)</td>", table) == [("0", "10"), ("2", "5"), ("4", "4")]


def test_plots_false_leaves_them_out_without_blaming_plotly(db: str, tmp_path: Path) -> None:
    pytest.importorskip("plotly", reason="the plot extra is not installed")
    store = open_store(db)
    try:
        out = write_html(store, "demo", tmp_path / "demo.html", plots=False)
    finally:
        store.close()
    page = _parse(out)
    assert page.images == [] and "plotly" not in " ".join(page.text)
    assert "Failures by reason" in " ".join(page.text)


def _pruned_or_failed(config: Config) -> float:
    from perftune.trial import Pruned

    if config["x"] % 3 == 0:
        raise Pruned("stopped at step 1 of 27")
    if config["x"] % 7 == 0:
        raise RuntimeError("kernel launch failed")
    return float(config["x"])


def test_pruned_trials_are_counted_apart_from_the_failures(tmp_path: Path) -> None:
    from perftune.report import run_view, runs_view

    path = f"sqlite:///{tmp_path / 'prune.db'}"
    perftune.tune(_pruned_or_failed, Space({"x": Int(0, 41)}), budget=42, seed=1, store=path, name="pr")
    store = open_store(path)
    trials = store.trials(store.get_run("pr").id)
    n_pruned = sum(t.status is Status.PRUNED for t in trials)
    n_failed = sum(t.status is Status.FAILED for t in trials)
    assert n_pruned >= 10 and n_failed >= 3
    view = run_view(store, "pr")
    assert view["pruned"] == n_pruned
    assert view["run"]["n_failed"] == n_failed
    [row] = [r for r in runs_view(store) if r["name"] == "pr"]
    assert row["n_failed"] == n_failed
    assert {f["status"] for f in view["failures"]} == {"failed"}
    assert sum(f["count"] for f in view["failures"]) == n_failed
    assert all(s != "pruned" for s, _, _ in failure_counts(trials))
    page = write_html(store, "pr", tmp_path / "pr.html").read_text()
    start = page.index("<h2>Failures by reason</h2>")
    failures_part = page[start:page.index("</table>", start)]
    assert f"{n_pruned} trials pruned early" in failures_part
    assert "stopped at step 1" not in failures_part


def test_cancelled_trials_are_not_counted_as_failures(tmp_path: Path) -> None:
    from perftune.drive import Tuner
    from perftune.report import run_view, runs_view

    path = f"sqlite:///{tmp_path / 'cancel.db'}"
    tuner = Tuner(Space({"x": Int(0, 41)}), seed=0, store=path, name="cx")
    for i in range(6):
        trial = tuner.ask()
        if i < 3:
            tuner.tell(trial, float(trial.config["x"]))
        elif i == 3:
            tuner.tell(trial, error="crashed")
        else:  # what a time budget does to evaluations in flight at its end
            tuner.tell(trial, status=Status.CANCELLED, error="time budget reached")
    tuner.close()
    store = open_store(path)
    view = run_view(store, "cx")
    assert view["run"]["n_failed"] == 1 and view["cancelled"] == 2
    assert [(f["status"], f["count"]) for f in view["failures"]] == [("failed", 1)]  # listed apart
    [row] = [r for r in runs_view(store) if r["name"] == "cx"]
    assert row["n_failed"] == 1 and row["n_trials"] == 6
    assert failure_counts(store.trials(store.get_run("cx").id)) == [("failed", "crashed", 1)]
    page = write_html(store, "cx", tmp_path / "cx.html").read_text()
    assert "2 trials cancelled by the run" in page
    shown = CliRunner().invoke(cli, ["--store", path, "show", "cx"]).output
    assert "cancelled: 2 trials stopped by the run's end" in shown and "time budget reached" not in shown
