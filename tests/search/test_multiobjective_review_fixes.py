"""Multi-objective defects found in review: non-finite metrics, the live front, pruning, constraint bounds,
hypervolume references and the front that ``perftune show`` lists."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.drive import ASHA, Tuner
from perftune.errors import PerftuneError
from perftune.search import Constraint
from perftune.space import Float, Int, Space
from perftune.store import open_store
from perftune.trial import Status

TWO = {"time": "min", "size": "min"}


def test_a_non_finite_secondary_objective_fails_its_trial_and_keeps_its_metrics() -> None:
    space = Space({"n": Int(0, 5)})

    def objective(config: Any) -> dict[str, float]:
        n = config["n"]
        size = {3: -math.inf, 4: math.nan}.get(n, 10.0 + n)
        return {"time": 1.0 + n, "size": size}

    result = perftune.tune(objective, space, budget=6, seed=0, goal=TWO)
    by_n = {t.config["n"]: t for t in result.trials}
    assert by_n[3].status is by_n[4].status is Status.FAILED
    assert by_n[3].reason == "ValueError: metric 'size' -inf is not finite"
    assert by_n[4].reason == "ValueError: metric 'size' nan is not finite"
    assert by_n[3].metrics["time"] == 4.0 and by_n[3].metrics["size"] == -math.inf  # measured: kept
    assert [t.config["n"] for t in result.pareto] == [0]
    assert result.hypervolume({"time": 10.0, "size": 20.0}) == 9.0 * 10.0


def test_a_non_finite_constraint_metric_fails_its_trial() -> None:
    space = Space({"n": Int(0, 3)})
    result = perftune.tune(lambda c: {"time": 1.0 + c["n"], "rss": math.inf if c["n"] == 2 else 5.0},
                           space, budget=4, seed=0, metric="time", constraints=["rss >= 1"])
    failed = [t for t in result.trials if t.status is Status.FAILED]
    assert [t.config["n"] for t in failed] == [2]
    assert failed[0].reason == "ValueError: metric 'rss' inf is not finite"
    assert result.best is not None and result.best.config["n"] == 0


def test_the_live_front_is_the_result_front_with_ties_and_with_one_objective(tmp_path: Path) -> None:
    space = Space({"n": Int(0, 5)})

    def tied(config: Any) -> dict[str, float]:  # n = 0 and n = 1 measure the same: both on the front
        worse = config["n"] > 1
        return {"time": 2.0 if worse else 1.0, "size": 2.0 if worse else 1.0}

    path = str(tmp_path / "runs.db")
    tuner = Tuner(space, seed=0, goal=TWO, store=path, name="tied")
    result = tuner.run(tied, 6)
    ids = [t.id for t in result.pareto]
    assert len(ids) == 2 and [t.id for t in tuner.pareto] == ids
    with open_store(path) as st:
        assert [t.id for t in st.pareto(st.get_run("tied").id)] == ids

    single = Tuner(space, seed=0)
    result = single.run(lambda c: float(c["n"] > 1), 6)
    assert len(result.pareto) == 2
    assert [t.id for t in single.pareto] == [t.id for t in result.pareto]


def _reporting(config: Any, trial: Any) -> dict[str, float]:
    for step in range(1, 10):
        trial.report(step, config["x"] + 1.0 / step)
        if trial.should_prune():
            raise perftune.Pruned()
    return {"time": config["x"], "size": 1.0 - config["x"]}


def test_pruning_a_run_of_several_objectives_is_refused_before_anything_is_measured(tmp_path: Path) -> None:
    space = Space({"x": Float(0.0, 1.0)})
    message = (r"^tune\(\): cannot prune a run of 2 objectives \(time, size\): ASHA ranks one value per "
               r"trial and would prune the front's trade-offs; pass pruner=False")
    for pruner in (None, True, ASHA(max_steps=9)):
        with pytest.raises(PerftuneError, match=message):
            perftune.tune(_reporting, space, budget=5, seed=0, goal=TWO, pruner=pruner,
                          store=str(tmp_path / "refused.db"))
    with open_store(str(tmp_path / "refused.db")) as st:
        assert st.list_runs() == []  # tune() refused before making a run

    tuner = Tuner(space, seed=0, goal=TWO)
    with pytest.raises(PerftuneError, match=r"^run\(\): cannot prune a run of 2 objectives"):
        tuner.run(_reporting, 5, pruner=ASHA(max_steps=9))
    assert tuner.trials == []

    # pruner=False records the reports and prunes nothing, so every trade-off can be on the front.
    result = perftune.tune(_reporting, space, budget=12, seed=0, goal=TWO, pruner=False)
    assert result.counts() == {"ok": 12}
    assert all(sorted(t.intermediate) == list(range(1, 10)) for t in result.trials)
    assert len(result.pareto) == 12


@pytest.mark.parametrize("text", ["size <= 1.2.3", "a <= .", "a >= 1..", "a < 1e999", "a > +"])
def test_a_malformed_constraint_bound_is_one_line(text: str) -> None:
    with pytest.raises(PerftuneError) as info:
        Constraint.parse(text)
    assert str(info.value) == (f"constraints: cannot read constraint {text!r}; expected 'metric >= number' "
                               "(or <=, >, <)")
    with pytest.raises(PerftuneError, match=r"^tune\(\): constraints: cannot read constraint"):
        perftune.tune(lambda c: 1.0, Space({"n": Int(0, 3)}), budget=1, constraints=[text])


@pytest.mark.parametrize(("text", "bound"), [("a <= .5", 0.5), ("a >= 5.", 5.0), ("a < -1e3", -1000.0),
                                             ("a > +2.5E-1", 0.25), ("a<=7", 7.0)])
def test_numbers_in_constraints_still_read(text: str, bound: float) -> None:
    assert Constraint.parse(text).bound == bound


@pytest.mark.parametrize(("value", "shown"), [("big", "'big'"), (None, "None"), (math.nan, "nan"),
                                              (math.inf, "inf"), (True, "True")])
def test_a_bad_hypervolume_reference_is_one_line(value: Any, shown: str) -> None:
    space = Space({"n": Int(0, 4)})
    result = perftune.tune(lambda c: {"time": 5.0 - c["n"], "size": float(c["n"])}, space, budget=5, seed=0,
                           goal=TWO)
    with pytest.raises(PerftuneError) as info:
        result.hypervolume({"time": value, "size": 5.0})
    assert str(info.value) == (f"hypervolume(): the reference must be a finite number for each objective, "
                               f"got time={shown}")
    assert result.hypervolume({"time": 6, "size": 5.0}) == 15.0


def test_show_lists_the_front_best_first_on_a_maximised_primary(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    space = Space({"n": Int(0, 39)})
    # Every n is a trade-off: accuracy grows with n, and so does time; 40 members, more than show lists.
    perftune.tune(lambda c: {"acc": c["n"] / 39, "time": float(c["n"])}, space, budget=40, seed=0,
                  store=path, name="mx", goal={"acc": "max", "time": "min"})
    out = CliRunner().invoke(cli, ["--store", path, "show", "mx"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Pareto front: 40 trials"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    accuracies = [float(line.split("│")[2]) for line in lines[start:end] if line.startswith("│")]
    assert len(accuracies) == 20
    assert accuracies == sorted(accuracies, reverse=True) and accuracies[0] == 1.0
