"""A default configuration that breaks a metric constraint is infeasible: it is no baseline, so no view
computes an improvement over it, and show says why (as it does for a default that failed)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from perftune.cli import cli
from perftune.drive import tune
from perftune.report import run_view, runs_view
from perftune.space import Int, Space
from perftune.store import open_store

LINE = "default configuration: infeasible (accuracy >= 0.99 (accuracy=0.985)): no improvement can be computed"


def _objective(config: dict) -> dict[str, float]:
    x, y = config["x"], config["y"]
    return {"time": x + 0.1 * y, "size": 100 / x + y, "accuracy": 0.98 + 0.001 * y}


def _invoke(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def test_an_infeasible_default_is_no_baseline(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'mo.db'}"
    space = Space({"x": Int(1, 30, default=5), "y": Int(1, 30, default=5)})
    result = tune(_objective, space, budget=20, seed=0, store=db, goal={"time": "min", "size": "min"},
                  constraints=["accuracy >= 0.99"])
    assert result.default is not None and result.default.reason.startswith("infeasible")
    assert result.best is not None and result.best.value < result.default.value
    assert result.improvement is None and result.speedup() is None
    shown = _invoke("--store", db, "show", "latest")
    assert LINE in shown and "improvement over" not in shown
    data = json.loads(_invoke("--store", db, "show", "latest", "--json"))
    assert data["improvement"] is None and data["improvement_over_default"] is None and data["note"] == LINE
    assert json.loads(_invoke("--store", db, "runs", "--json"))["runs"][0]["improvement"] is None
    with open_store(db) as store:
        assert runs_view(store)[0]["improvement"] is None
        assert run_view(store, "latest")["best"]["lines"] == [LINE]
