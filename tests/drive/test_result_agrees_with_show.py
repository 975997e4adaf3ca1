"""What tune() leaves in the store and returns agrees with what ``perftune show`` reads back.

A run started by ``tune(..., budget=N)`` keeps its budget with the run (before, only a budget given to the
Tuner itself was stored, so the views could not show progress and a resumed run had no budget), and
``Result.improvement`` is the number ``show --json`` gives as ``improvement_over_default`` (before, a best
of exactly 0 was an infinite ratio in the API and no ratio in the CLI).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.drive import Tuner
from perftune.space import Int, Space
from perftune.store import open_store


def _show_json(db: str, run: str) -> dict:
    result = CliRunner().invoke(cli, ["--store", db, "show", run, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_budget_given_to_tune_is_stored_with_the_run_and_resumed(tmp_path):
    db = f"sqlite:///{tmp_path / 'b.db'}"
    perftune.tune(lambda c: float(c["x"] + 1), Space({"x": Int(0, 50, default=25)}), budget=7, seed=0,
                  store=db, name="b")
    with open_store(db) as store:
        assert store.get_run("b").settings["budget"]["evals"] == 7
    assert _show_json(db, "b")["run"]["settings"]["budget"]["evals"] == 7
    tuner = Tuner.resume("b", db)
    try:
        assert tuner.budget is not None and tuner.budget.evals == 7
    finally:
        tuner.release()


def test_a_budget_given_to_run_replaces_the_stored_one(tmp_path):
    db = f"sqlite:///{tmp_path / 'r.db'}"
    space = Space({"x": Int(0, 50, default=25)})
    tuner = Tuner(space, store=db, name="r", seed=0)
    try:
        tuner.run(lambda c: float(c["x"] + 1), 4)
        tuner.run(lambda c: float(c["x"] + 1), 9)
    finally:
        tuner.release()
    with open_store(db) as store:
        assert store.get_run("r").settings["budget"]["evals"] == 9
        assert store.count(store.get_run("r").id) == 9


@pytest.mark.parametrize("values, goal", [
    ((4.0, 2.0, 1.0), "min"),      # positive: a ratio
    ((7.0, 3.0, 0.0), "min"),      # a best of exactly 0: no ratio
    ((-5.0, -10.0, -15.0), "min"),  # negative values: no ratio
    ((1.0, 2.0, 4.0), "max"),
    ((0.0, 2.0, 4.0), "max"),      # a default of 0 when maximising: no ratio
])
def test_result_improvement_is_the_number_show_json_gives(tmp_path, values, goal):
    db = f"sqlite:///{tmp_path / 'i.db'}"
    result = perftune.tune(lambda c: values[c["x"]], Space({"x": Int(0, 2, default=0)}), budget=3, seed=0,
                           store=db, name="i", goal=goal)
    shown = _show_json(db, "i")["improvement_over_default"]
    assert result.improvement == shown
    assert (shown is None) == (min(values) <= 0)
