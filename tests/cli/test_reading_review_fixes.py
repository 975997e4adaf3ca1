"""Reading results, after a review of the report, show/runs/best/compare/export and the Store's read API.

Each test is one finding of that review: the report's table holds the whole run (or says what it left out),
compare refuses runs that optimise different things, built-in metrics have units, failures are grouped the
same way everywhere, a failed default configuration is said, a killed driver is said everywhere, an
output never replaces the store it reads, and perftune's own JSON export is a warm-start source.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.drive import Prior, WarmStart
from perftune.report import _html, compare_view, run_view, write_html
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

SPACE = Space({"x": Int(0, 1000, default=0)})


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps table cells at the terminal width


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def _add(store: Any, name: str, values: list[Any], *, goal: str = "min", metric: str | None = None,
         settings: dict[str, Any] | None = None, finish: bool = True) -> Any:
    """A run of ``values`` (trial 0 is the default configuration): a number is a success, a string the
    reason of a failure, a (status, reason) pair a trial of that status."""
    run = store.create_run(name, SPACE, settings or {}, goal, metric)
    for i, v in enumerate(values):
        technique = "default" if i == 0 else "random"
        if isinstance(v, int | float):
            trial = Trial(i, Config({"x": i}), Status.OK, value=float(v),
                          loss=float(v) if goal == "min" else -float(v), samples=[float(v)],
                          technique=technique)
        else:
            status, reason = v if isinstance(v, tuple) else (Status.FAILED, v)
            trial = Trial(i, Config({"x": i}), Status(status), reason=reason, technique=technique)
        store.add_trial(run.id, trial)
    if finish:
        store.finish_run(run.id)
    return run


def _inlined(path: Path) -> dict[str, Any]:
    found = re.search(r"window\.PERFTUNE=(\{.*?\});</script>", path.read_text(), re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))["data"]
    return data


# ---- 1: the report's table holds the run (up to REPORT_MAX_TRIALS) and its best; it says what it left out


def test_the_report_inlines_all_700_trials_of_a_run_and_its_best(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "cap", [1000.0 - i for i in range(700)])  # each beats the ones before: the last is best
        write_html(store, "cap", tmp_path / "cap.html", plots=True)
    data = _inlined(tmp_path / "cap.html")
    assert [r["trial"] for r in data["trials"]] == list(range(700))
    assert data["n_trials_inlined"] == 700 and data["trials_note"] is None
    assert min(r["value"] for r in data["trials"]) == 301.0


def test_a_run_larger_than_the_report_s_table_keeps_its_best_and_says_what_is_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_html, "REPORT_MAX_TRIALS", 100)
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "cap", [1000.0 - i for i in range(300)])
        write_html(store, "cap", tmp_path / "cap.html", plots=True)
    data = _inlined(tmp_path / "cap.html")
    ids = [r["trial"] for r in data["trials"]]
    assert len(ids) == 100 and ids == [*range(99), 299]
    assert data["trials_note"] == ("table: the first 99 of 300 trials and the best trial after them (the "
                                   "dashboard or perftune export has them all)")


# ---- 2: compare refuses runs that optimise different things (and says what each optimises)


def test_compare_refuses_runs_of_other_goals_or_metrics_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "by_time", [5.0, 1.0], metric="time")
        _add(store, "by_tput", [200.0, 1000.0], metric="throughput", goal="max")
        _add(store, "by_size", [90.0, 80.0], metric="size")
        _add(store, "also_time", [4.0, 2.0], metric="time")
        with pytest.raises(Exception, match=r"^compare: the runs optimise different things: by_time "
                                            r"minimises time, by_tput maximises throughput$"):
            compare_view(store, ["by_time", "by_tput"])
        assert [r["run"]["name"] for r in compare_view(store, ["by_time", "also_time"])["runs"]] == [
            "by_time", "also_time"]
    result = CliRunner().invoke(cli, ["--store", db, "compare", "by_time", "by_tput", "by_size"])
    assert result.exit_code == 2
    assert result.output.strip() == ("perftune: error: compare: the runs optimise different things: by_time "
                                     "minimises time, by_tput maximises throughput, by_size minimises size")


def test_compare_refuses_one_metric_under_two_goals_and_two_objective_sets(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    multi = {"objectives": {"names": ["time", "size"], "goals": ["min", "min"]}}
    other = {"objectives": {"names": ["time", "size"], "goals": ["min", "max"]}}
    with open_store(db) as store:
        _add(store, "low", [5.0, 1.0])
        _add(store, "high", [5.0, 9.0], goal="max")
        _add(store, "front", [5.0, 1.0], metric="time", settings=multi)
        _add(store, "other_front", [5.0, 1.0], metric="time", settings=other)
    out = CliRunner().invoke(cli, ["--store", db, "compare", "low", "high"]).output
    assert "low minimises its value, high maximises its value" in out
    out = CliRunner().invoke(cli, ["--store", db, "compare", "front", "other_front"]).output
    assert ("front minimises time and minimises size, other_front minimises time and maximises size"
            in out)


# ---- 6: units of the built-in metrics, and the metric named in show, runs and compare


def test_a_wall_time_run_shows_seconds_and_names_its_metric_everywhere(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "sleepy", [0.0459611, 0.0279357], metric="wall_time")
        _add(store, "sleepy2", [0.05, 0.03], metric="wall_time")
        _add(store, "mine", [80.0, 60.0], metric="gflops", goal="max")
        view = run_view(store, "sleepy")
        assert view["run"]["unit"] == "s" and view["run"]["metric"] == "wall_time"
        write_html(store, "sleepy", tmp_path / "r.html", plots=False)
    show = _invoke("--store", db, "show", "sleepy")
    assert "goal min wall_time (s)" in show.splitlines()[0]
    assert "default configuration: 0.0459611 s" in show and "best: 0.0279357 s (trial 1)" in show
    runs = _invoke("--store", db, "runs")
    assert re.search(r"│ sleepy +│ finished +│ min +│ wall_time +│ 2 +│ 0\.0279357 s +│", runs)
    # A metric of the user's own has no known unit: its values are bare.
    assert re.search(r"│ mine +│ finished +│ max +│ gflops +│ 2 +│ 80 +│", runs)
    compare = _invoke("--store", db, "compare", "sleepy", "sleepy2")
    assert "goal: minimise wall_time (s)" in compare and "0.0279357 s" in compare and "0.03 s" in compare
    assert json.loads(_invoke("--store", db, "compare", "sleepy", "sleepy2", "--json"))["unit"] == "s"
    page = (tmp_path / "r.html").read_text()
    assert "minimise wall_time (s)" in page and "<b>0.0279357 s</b>" in page
    mine = _invoke("--store", db, "show", "mine")
    assert "goal max gflops," in mine.splitlines()[0] and "best: 80 (trial 0)" in mine


# ---- 7: one failure_key in show, show --json, the report and the dashboard


def test_reasons_that_differ_after_130_characters_are_grouped_the_same_in_show_and_the_report(
        tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    head = "RuntimeError: " + "E" * 120  # 134 characters in common
    with open_store(db) as store:
        _add(store, "reasons", [3.0, 1.0, head + "A", head + "B", head + "A", head + "B", head + "B\nat x"])
        failures = run_view(store, "reasons")["failures"]
    shown = json.loads(_invoke("--store", db, "show", "reasons", "--json"))["failures"]
    assert shown == {head + "A": 2, head + "B": 3}
    assert {f["label"]: f["count"] for f in failures} == {f"failed: {k}": n for k, n in shown.items()}
    text = _invoke("--store", db, "show", "reasons")
    assert text.count(head[:60]) == 2


# ---- 8: a failed default configuration is said, with its reason, where the improvement would be


def test_a_failed_default_configuration_is_said_in_show_its_json_and_the_report(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "deffail", ["RuntimeError: default config broken", 5.0, 2.0])
        lines = run_view(store, "deffail")["best"]["lines"]
        write_html(store, "deffail", tmp_path / "r.html", plots=False)
    line = ("default configuration: failed (RuntimeError: default config broken): no improvement can be "
            "computed")
    assert line in _invoke("--store", db, "show", "deffail")
    assert json.loads(_invoke("--store", db, "show", "deffail", "--json"))["note"] == line
    assert lines == [line]
    assert line in (tmp_path / "r.html").read_text()


# ---- 9: a running run whose driver is gone is said to be so by runs, show and the views


def test_a_run_left_running_without_a_driver_says_so_in_show_runs_and_run_view(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "killed", [3.0, 1.0], finish=False)  # no lease: its driver is gone
        live = _add(store, "live", [3.0, 1.0], finish=False)
        lease = store.acquire_lease(live.id)
        try:
            assert run_view(store, "killed")["run"]["driver_gone"] is True
            assert run_view(store, "live")["run"]["driver_gone"] is False
            assert "run killed (id 1), running (no driver)," in _invoke("--store", db, "show", "killed")
            assert "run live (id 2), running," in _invoke("--store", db, "show", "live")
            runs = _invoke("--store", db, "runs")
            assert re.search(r"│ killed +│ running \(no driver\) +│", runs)
            assert re.search(r"│ live +│ running +│", runs)
            shown = json.loads(_invoke("--store", db, "show", "killed", "--json"))
            assert shown["run"]["driver_gone"] is True
            write_html(store, "killed", tmp_path / "r.html", plots=False)
            assert "running (no driver)" in (tmp_path / "r.html").read_text()
        finally:
            store.release_lease(lease)


# ---- 11: an output that is the store's own file (through a link, or named like an output) is refused


def test_export_and_report_never_replace_the_store_they_read(tmp_path: Path) -> None:
    db = tmp_path / "st.db"
    with open_store(str(db)) as store:
        _add(store, "basic", [3.0, 1.0])
    before = db.read_bytes()
    (tmp_path / "link.csv").symlink_to("st.db")
    (tmp_path / "link.html").symlink_to(db)
    (tmp_path / "link.kt.json").symlink_to("st.db")
    for args in (["export", "basic", "-o", str(tmp_path / "link.csv")],
                 ["export", "basic", "-o", str(tmp_path / "link.kt.json")],
                 ["report", "basic", "-o", str(tmp_path / "link.html")]):
        result = CliRunner().invoke(cli, ["--store", str(db), *args])
        assert result.exit_code == 2, result.output
        assert "is the store's own file" in result.output and len(result.output.splitlines()) == 1
    assert db.read_bytes() == before and (tmp_path / "link.csv").is_symlink()
    # A store named like an output (st.json) is its own file too: by its real path, not its extension.
    named = tmp_path / "st.json"
    named.write_bytes(before)
    result = CliRunner().invoke(cli, ["--store", str(named), "export", "basic", "-o", str(named)])
    assert result.exit_code == 2 and "is the store's own file" in result.output
    with open_store(str(named), read_only=True) as store:
        assert store.count("basic") == 2
        with pytest.raises(Exception, match="the store's own file"):
            store.export("basic", "json", os.path.relpath(named))
        (tmp_path / "json-link.html").symlink_to(named)
        with pytest.raises(Exception, match="the store's own file"):
            write_html(store, "basic", tmp_path / "json-link.html", plots=False)
        assert not store.owns_path(tmp_path / "other.csv")


# ---- 12: perftune's own JSON export is a warm-start source; --time-unit for a Kernel Tuner cache


def test_a_json_export_gives_the_prior_of_its_store_run(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "low", [9.0, 4.0, "crashed", 1.0, 4.0, 7.0])
        _add(store, "high", [3.0, 8.0, 1.0, ("cancelled", "run ended")], goal="max")
    for run in ("low", "high"):
        out = tmp_path / f"{run}.json"
        _invoke("--store", db, "export", run, "-o", str(out))
        from_file = Prior.from_sources(WarmStart([str(out)]).sources, SPACE)
        from_store = Prior.from_sources(WarmStart([(db, run)]).sources, SPACE)
        assert from_file.ranked == from_store.ranked and from_file.rank == from_store.rank
        assert len(from_file.ranked) >= 3


def test_export_kt_takes_the_run_s_time_unit(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    with open_store(db) as store:
        _add(store, "k", [2.0, 1.0])
    times = {}
    for unit in ("s", "ms"):
        out = tmp_path / f"k-{unit}.kt.json"
        _invoke("--store", db, "export", "k", "--format", "kt", "--time-unit", unit, "-o", str(out))
        cache = json.loads(out.read_text())["cache"]
        times[unit] = sorted(entry["time"] for entry in cache.values())
    assert times == {"s": [1000.0, 2000.0], "ms": [1.0, 2.0]}
    result = CliRunner().invoke(cli, ["--store", db, "export", "k", "--time-unit", "s", "-o",
                                      str(tmp_path / "k.csv")])
    assert result.exit_code == 2 and "--time-unit is only for --format kt" in result.output
