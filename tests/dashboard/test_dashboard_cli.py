"""``perftune runs delete`` and ``perftune compare``: the dashboard's ideas in a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.space import Config, Float, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial


def _invoke(*args: str, code: int = 0, stdin: str | None = None) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, list(args), input=stdin)
    assert result.exit_code == code, result.output
    return result.output


def test_runs_delete_asks_for_yes_and_removes_only_that_run(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    space = Space({"x": Int(0, 20)})
    perftune.tune(lambda c: float(c["x"]), space, budget=6, seed=0, store=db, name="first")
    perftune.tune(lambda c: float(c["x"]), space, budget=4, seed=1, store=db, name="second")
    out = _invoke("--store", db, "runs", "delete", "first", code=2)
    assert out.strip() == ("perftune: error: runs delete: would delete run 'first' (id 1, 6 trials) "
                           f"from {db}; "
                           "pass --yes to confirm")
    out = _invoke("runs", "--store", db, "delete", "first", "--yes")
    assert out.strip() == f"deleted run 'first' (id 1, 6 trials) from {db}"
    listed = json.loads(_invoke("--store", db, "runs", "--json"))["runs"]
    assert [r["name"] for r in listed] == ["second"] and listed[0]["trials"] == 4
    out = _invoke("--store", db, "runs", "delete", "first", "-y", code=2)
    assert "no run 'first'" in out and "Traceback" not in out


def test_runs_without_a_subcommand_still_lists(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 5)}), budget=3, seed=0, store=db, name="only")
    assert "only" in _invoke("--store", db, "runs")
    assert json.loads(_invoke("runs", "--store", db, "--json"))["runs"][0]["name"] == "only"


def _run(store, name: str, values: list[float], space: Space) -> None:  # type: ignore[no-untyped-def]
    run_id = store.create_run(name, space, {}, "min", None).id
    for i, v in enumerate(values):
        samples = [v * 0.99, v, v * 1.01]
        store.add_trial(run_id, Trial(i, Config({"x": float(i)}), Status.OK, value=v, loss=v, samples=samples,
                                      technique="default" if i == 0 else "random"))


def test_compare_prints_best_so_far_and_the_speedup_with_its_interval(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    space = Space({"x": Float(0, 100)})
    with open_store(db) as store:
        _run(store, "slow", [10.0, 9.0, 8.0] + [8.0] * 27, space)
        _run(store, "fast", [10.0, 6.0, 4.0] + [4.0] * 7, space)
        _run(store, "other-space", [1.0, 2.0], Space({"y": Int(0, 3)}))
    payload = json.loads(_invoke("--store", db, "compare", "slow", "fast", "--json"))
    slow, fast = payload["runs"]
    assert slow["best_at"] == {"10": 8.0, "25": 8.0, "30": 8.0}
    assert fast["best_at"] == {"10": 4.0, "25": None, "30": None}  # fast has 10 trials only
    imp = fast["improvement_over_first"]
    assert imp["estimate"] == 2.0 and imp["low"] < 2.0 < imp["high"]
    assert slow["improvement_over_first"] is None
    assert imp["text"].startswith("improvement over the best of slow: 2.000x (95% CI")
    text = _invoke("--store", db, "compare", "slow", "fast")
    assert "fast: improvement over the best of slow: 2.000x (95% CI" in text
    assert "(reference)" in text and "best at 25" in text

    out = _invoke("--store", db, "compare", "slow", "other-space", code=2)
    assert "compare: the runs do not share a search space" in out
    out = _invoke("--store", db, "compare", "slow", code=2)
    assert out.strip() == "perftune: error: compare: give two or more runs"
    assert "no run 'nope'" in _invoke("--store", db, "compare", "slow", "nope", code=2)


def test_dashboard_mistakes_are_one_line(tmp_path: Path) -> None:
    import socket

    db = str(tmp_path / "d.db")
    perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 5)}), budget=2, seed=0, store=db, name="d")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _invoke("dashboard", "--store", db, "--port", str(port), code=2)
    assert out.strip().splitlines()[-1] == (f"perftune: error: dashboard: cannot listen on 127.0.0.1:{port}: "
                                            "Address already in use")
    out = _invoke("dashboard", "--store", str(tmp_path / "missing.db"), code=2)
    assert "missing.db" in out and "Traceback" not in out
    assert not (tmp_path / "missing.db").exists()  # read-only: never creates a store
    assert _invoke("dashboard", "--store", db, "--token", " ", code=2).strip() == (
        "perftune: error: dashboard: --token must not be empty")


def test_dashboard_without_its_extra_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    db = str(tmp_path / "e.db")
    perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 5)}), budget=2, seed=0, store=db, name="e")
    for name in [m for m in sys.modules if m.split(".")[0] in ("starlette", "uvicorn")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)
    out = _invoke("dashboard", "--store", db, code=2)
    assert out.strip() == ("perftune: error: the dashboard needs starlette and uvicorn: "
                           "pip install 'perftune[dashboard]'")
