"""The best that runs, show, the report's and the dashboard's views print is the final answer's value, not
that of a search trial that is not the answer (a gcc flags run that fell back to -O3, a winner that failed
its check)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from perftune.cli import cli
from perftune.report import FinalAnswer, improvement_of, run_view, runs_view
from perftune.space import Config
from perftune.store import open_store
from perftune.targets.flags._tune import FlagsResult
from perftune.trial import Status, Trial


def _invoke(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def _store(db: str, answer: FinalAnswer | None = None) -> None:
    """A run of three trials: the default (x=0, 0.0152), x=1 (0.0135) and the search's best, x=2 (0.012)."""
    with open_store(db) as store:
        run = store.create_run("fl", None, {}, "min", None)
        for i, (value, technique) in enumerate([(0.0152, "default"), (0.0135, "random"), (0.012, "random")]):
            samples = [value * f for f in (0.99, 1.0, 1.01)]
            store.add_trial(run.id, Trial(i, Config({"x": i}), Status.OK, value=value, loss=value,
                                          samples=samples, technique=technique))
        if answer is None:
            trials = store.trials(run.id)
            answer = FinalAnswer(improvement_of(trials[1], trials[0]), trial=1, config={"x": 1},
                                 note="the best trial of the search (trial 2) failed its check")
        store.record_result(run.id, answer.to_json())


def _bests(db: str) -> tuple[float, float, float]:
    """The best of runs --json, of runs_view and of run_view's best configuration."""
    listed = json.loads(_invoke("--store", db, "runs", "--json"))["runs"][0]["best"]
    with open_store(db) as store:
        return listed, runs_view(store)[0]["best"], run_view(store, "fl")["best"]["value"]


def test_a_flags_run_that_fell_back_to_O3_prints_the_value_of_O3(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fl.db'}"
    result = FlagsResult(flags=["-O3"], winner_flags=["-O3"], command_line="gcc -O3 prog.c -o prog",
                         speedup=1.0, ci=(1.0, 1.0), baseline_s=0.0151, tuned_s=0.0151, fell_back=True)
    _store(db, result.final_answer())
    assert _bests(db) == (0.0151, 0.0151, 0.0151)
    table = _invoke("--store", db, "runs")
    assert "0.0151" in table and "0.012" not in table
    shown = _invoke("--store", db, "show", "fl")
    assert "best trial of the search: 0.012 (trial 2)" in shown
    assert "final answer: 0.0151\n" in shown and "final command line: gcc -O3 prog.c -o prog" in shown


def test_a_final_answer_that_is_another_trial_prints_that_trials_value(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'fl.db'}"
    _store(db)
    assert _bests(db) == (0.0135, 0.0135, 0.0135)
    shown = _invoke("--store", db, "show", "fl")
    assert "best trial of the search: 0.012 (trial 2)" in shown
    assert 'final answer: 0.0135 (trial 1) {"x": 1}' in shown
