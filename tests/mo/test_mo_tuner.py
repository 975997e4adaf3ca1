"""Several objectives and constraints through perftune.tune, the Tuner and the store."""

from __future__ import annotations

import math
from typing import Any

import pytest

import perftune
from perftune import PerftuneError, Status
from perftune.search import Objectives, dominates, hypervolume
from perftune.space import Float, Int, Space


def _two(c: Any) -> dict[str, float]:
    """A small discrete problem with a known front: time falls with n, size grows with n, m is noise."""
    n, m = c["n"], c["m"]
    return {"time": 10.0 - n + 0.5 * m, "size": float(n * n) + m, "accuracy": 1.0 - 0.01 * m}


SPACE = Space({"n": Int(0, 6), "m": Int(0, 3)})


def _brute_front(values: list[tuple[float, float]]) -> set[tuple[float, float]]:
    return {v for v in values if not any(dominates(w, v) for w in values)}


def test_pareto_is_the_non_dominated_set_of_everything_measured() -> None:
    r = perftune.tune(_two, SPACE, budget=28, seed=0, goal={"time": "min", "size": "min"})
    assert r.counts() == {"ok": 28}  # the whole space
    measured = [(t.metrics["time"], t.metrics["size"]) for t in r.trials]
    front = {(t.metrics["time"], t.metrics["size"]) for t in r.pareto}
    assert front == _brute_front(measured)
    assert {t.config["m"] for t in r.pareto} == {0}
    assert r.best is not None and r.best.value == min(v[0] for v in measured)  # best: the primary


def test_metrics_with_goals_is_the_same_as_a_goal_mapping() -> None:
    a = perftune.tune(_two, SPACE, budget=15, seed=3, goal={"time": "min", "accuracy": "max"})
    b = perftune.tune(_two, SPACE, budget=15, seed=3, metrics=["time", "accuracy"], goal=["min", "max"])
    assert [t.config for t in a.trials] == [t.config for t in b.trials]
    assert a.objectives == b.objectives
    assert [t.id for t in a.pareto] == [t.id for t in b.pareto]


def test_seeded_multi_objective_runs_repeat_and_differ_by_seed() -> None:
    def configs(seed: int) -> list[Any]:
        r = perftune.tune(_two, SPACE, budget=20, seed=seed, goal={"time": "min", "size": "min"})
        return [t.config for t in r.trials]

    assert configs(5) == configs(5)
    assert configs(5) != configs(6)


def test_the_default_search_with_several_objectives_is_the_mo_bandit() -> None:
    tuner = perftune.Tuner(SPACE, seed=0, goal={"time": "min", "size": "min"})
    assert tuner.technique.name == "mo-bandit"
    assert perftune.Tuner(SPACE, seed=0).technique.name == "staged"  # one objective: unchanged


def test_single_objective_runs_are_unchanged_by_the_objectives_plumbing() -> None:
    r1 = perftune.tune(lambda c: (c["n"] - 2) ** 2 + c["m"], SPACE, budget=12, seed=4)
    r2 = perftune.tune(lambda c: (c["n"] - 2) ** 2 + c["m"], SPACE, budget=12, seed=4, goal="min")
    assert [t.config for t in r1.trials] == [t.config for t in r2.trials]
    assert r1.pareto == [r1.best]


def test_constraints_make_trials_infeasible_not_failed() -> None:
    r = perftune.tune(_two, SPACE, budget=28, seed=1, goal={"time": "min", "size": "min"},
                      constraints=["accuracy >= 0.985"])
    infeasible = [t for t in r.trials if t.config["m"] >= 2]
    assert infeasible and all(t.status is Status.OK and t.loss is None for t in infeasible)
    assert all((t.reason or "").startswith("infeasible: accuracy >= 0.985") for t in infeasible)
    assert all(t.config["m"] <= 1 for t in r.pareto)


def test_a_constraint_in_a_single_objective_run_excludes_the_unconstrained_best() -> None:
    def objective(c: Any) -> dict[str, float]:
        return {"time": 10.0 - c["n"], "accuracy": 1.0 - 0.02 * c["n"]}

    r = perftune.tune(objective, Space({"n": Int(0, 9)}), budget=10, seed=0, metric="time",
                      constraints=["accuracy >= 0.9"])
    assert r.best is not None and r.best.config["n"] == 5  # n = 6..9 are faster but not accurate enough
    assert sum(1 for t in r.trials if t.loss is None) == 4


def test_a_missing_objective_metric_fails_the_trial_with_its_name() -> None:
    tuner = perftune.Tuner(SPACE, seed=0, goal={"time": "min", "sizes": "min"})
    r = tuner.run(lambda c: {"time": 1.0 + c["n"], "size": 2.0}, 10)
    assert r.counts() == {"failed": 3} and r.stop_reason.startswith("metric missing")  # not all 10
    assert "no numeric metric 'sizes' (has: size, time); did you mean 'size'?" in (r.trials[0].reason or "")
    assert r.pareto == []
    with pytest.raises(PerftuneError, match="stopped after 3 trials whose results all lack a metric"):
        perftune.tune(lambda c: {"time": 1.0 + c["n"]}, SPACE, budget=10, seed=0,
                      goal={"time": "min", "size": "min"})


@pytest.mark.parametrize("kwargs, message", [
    ({"goal": {"time": "fastest"}}, "the goal of 'time' must be 'min' or 'max'"),
    ({"goal": "min", "constraints": ["accuracy >> 1"]}, "cannot read constraint 'accuracy >> 1'"),
    ({"goal": "min", "constraints": "accuracy >= 1"}, "constraints must be a list"),
    ({"goal": ["min"], "metrics": ["a", "b"]}, "2 metrics but 1 goals"),
    ({"goal": {"a": "min"}, "metrics": ["a"]}, "not both"),
    ({"goal": {"a": "min", "b": "min"}, "metric": "b"}, "must be the first objective"),
])
def test_bad_objectives_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PerftuneError) as info:
        perftune.tune(_two, SPACE, budget=2, **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("tune(): ")


def test_the_store_keeps_the_objectives_and_resume_continues_the_front(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'mo.db'}"
    goal = {"time": "min", "size": "min"}
    tuner = perftune.Tuner(SPACE, seed=2, goal=goal, store=url, name="mo", constraints=["accuracy >= 0.985"])
    for _ in range(10):
        trial = tuner.ask()
        assert trial is not None
        tuner.tell(trial, _two(trial.config))
    tuner.close()
    from perftune.store import open_store

    store = open_store(url)
    info = store.get_run("mo")
    assert info.settings["objectives"] == {"names": ["time", "size"], "goals": ["min", "min"],
                                           "constraints": ["accuracy >= 0.985"]}
    assert [t.id for t in store.pareto(info.id)] == [t.id for t in tuner.pareto]

    resumed = perftune.Tuner.resume("mo", store=url)
    assert resumed.objectives == tuner.objectives
    assert resumed.technique.name == "mo-bandit"
    result = resumed.run(_two, 18)
    assert len(result.trials) == 18
    measured = [(t.metrics["time"], t.metrics["size"]) for t in result.trials if t.config["m"] <= 1]
    assert {(t.metrics["time"], t.metrics["size"]) for t in result.pareto} == _brute_front(measured)


def test_the_multi_objective_search_beats_random_on_zdt1() -> None:
    n = 8
    space = Space({f"x{i}": Float(0.0, 1.0) for i in range(n)})

    def zdt1(c: Any) -> dict[str, float]:
        x = [c[f"x{i}"] for i in range(n)]
        g = 1.0 + 9.0 * sum(x[1:]) / (n - 1)
        return {"f1": x[0], "f2": g * (1.0 - math.sqrt(x[0] / g))}

    def hv(technique: str, seed: int) -> float:
        r = perftune.tune(zdt1, space, budget=120, seed=seed, goal={"f1": "min", "f2": "min"},
                          technique=technique)
        return r.hypervolume({"f1": 1.1, "f2": 11.0})

    for seed in (0, 1):
        assert hv("default", seed) > hv("random", seed)
        assert hv("nsga2", seed) > hv("random", seed)
    objectives = Objectives(("f1", "f2"), ("min", "min"))
    assert hypervolume([(0.0, 1.0), (1.0, 0.0)], (1.1, 11.0)) > 0 and objectives.is_multi
