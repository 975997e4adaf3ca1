"""PerftuneSampler in Optuna studies: what a user of Optuna relies on keeps working, and perftune searches.

Optuna's own sampler suites run in test_optuna_sampler_conformance.py; this file covers the rest of the
contract (docs/optuna.md): every distribution through ``study.optimize``, seeds, directions, several
objectives, a pruner, RDB storage shared by two studies and resumed by a new sampler, enqueued trials,
failures, define-by-run spaces, constraints, threads and the one-line errors.
"""

from __future__ import annotations

import importlib
import math
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")  # installed by the test extra; see docs/optuna.md

from optuna.distributions import (  # noqa: E402
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

from perftune.errors import PerftuneError  # noqa: E402
from perftune.integration.optuna import PerftuneSampler  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


class RecordingSampler(PerftuneSampler):
    """The real sampler, noting which hooks Optuna called (a subclass, not a stand-in)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.finished: list[tuple[int, TrialState]] = []
        self.relative: list[int] = []

    def sample_relative(self, study: Any, trial: Any, search_space: dict[str, BaseDistribution]) -> Any:
        params = super().sample_relative(study, trial, search_space)
        if params:
            self.relative.append(trial.number)
        return params

    def after_trial(self, study: Any, trial: Any, state: TrialState, values: Any) -> None:
        self.finished.append((trial.number, state))
        super().after_trial(study, trial, state, values)


DISTRIBUTIONS = {
    "float": FloatDistribution(-3.0, 5.0),
    "float-log": FloatDistribution(1e-5, 10.0, log=True),
    "float-step": FloatDistribution(-1.0, 2.0, step=0.1),
    "int": IntDistribution(-20, 40),
    "int-log": IntDistribution(1, 4096, log=True),
    "int-step": IntDistribution(0, 96, step=8),
    "categorical": CategoricalDistribution(["quick", None, 3, 2.5, True]),
    "categorical-numbers": CategoricalDistribution([256, 16, 64, 32, 128]),
}
# A target inside each distribution, to check that the search moves towards it.
TARGETS: dict[str, Any] = {"float": 1.7, "float-log": 0.02, "float-step": 1.3, "int": 11, "int-log": 300,
                           "int-step": 56, "categorical": None, "categorical-numbers": 64}


# How close 40 trials get, as the median over SEEDS (the best value also needs other == 0): a tenth of the
# range for real numbers, exact for integers and choices; for the integer log scale 20% (over 30 seeds the
# default's median is 0.12 and its worst 0.37; uniform random's median is 0.48). One seed is not enough:
# seed 3 alone gives 0.26 (388 for 300), though the search is better than before over 30 seeds.
TOLERANCE = {"float": 0.8, "float-log": 0.1 * math.log(1e6), "float-step": 0.1 + 1e-9, "int-log": 0.2}
SEEDS = (3, 4, 5, 6, 7)


def _distance(name: str, value: Any) -> float:
    target = TARGETS[name]
    choices = getattr(DISTRIBUTIONS[name], "choices", None)
    if choices is not None:
        return float(choices.index(value) != choices.index(target))
    if name.endswith("log"):
        return abs(math.log(value) - math.log(target))
    return abs(value - target)


def _suggest(trial: optuna.trial.Trial, name: str, distribution: BaseDistribution) -> Any:
    if isinstance(distribution, FloatDistribution):
        return trial.suggest_float(name, distribution.low, distribution.high, log=distribution.log,
                                   step=distribution.step)
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int(name, distribution.low, distribution.high, log=distribution.log,
                                 step=distribution.step)
    assert isinstance(distribution, CategoricalDistribution)
    return trial.suggest_categorical(name, distribution.choices)


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_each_distribution_through_optimize(name: str) -> None:
    distribution = DISTRIBUTIONS[name]

    def objective(trial: optuna.trial.Trial) -> float:
        value = _suggest(trial, "x", distribution)
        other = trial.suggest_int("other", 0, 3)
        return _distance(name, value) + other

    bests = []
    for seed in SEEDS[1:]:
        other_study = optuna.create_study(sampler=PerftuneSampler(seed=seed))
        other_study.optimize(objective, n_trials=40)
        bests.append(other_study.best_value)
    sampler = RecordingSampler(seed=SEEDS[0])
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=40)
    bests.append(study.best_value)
    for trial in study.trials:
        value = trial.params["x"]
        assert distribution._contains(distribution.to_internal_repr(value)), (name, value)
        if isinstance(distribution, IntDistribution):
            assert type(value) is int
        elif isinstance(distribution, FloatDistribution):
            assert type(value) is float
            if distribution.step is not None:
                k = (value - distribution.low) / distribution.step
                assert abs(k - round(k)) < 1e-9 and repr(value) == repr(round(value, 10))
    # From the second trial on, perftune proposes every parameter (the first has no search space yet).
    assert sampler.relative == list(range(1, 40))
    assert statistics.median(bests) <= TOLERANCE.get(name, 0.0), bests
    assert study.best_params["other"] == 0


def _quadratic(trial: optuna.trial.Trial) -> float:
    x = trial.suggest_float("x", -10, 10)
    n = trial.suggest_int("n", 1, 64, log=True)
    kind = trial.suggest_categorical("kind", ["a", "b", "c"])
    return (x - 2.5) ** 2 + abs(n - 12) + (kind != "b")


def _params(seed: int | None, n_trials: int = 40) -> list[dict[str, Any]]:
    study = optuna.create_study(sampler=PerftuneSampler(seed=seed))
    study.optimize(_quadratic, n_trials=n_trials)
    return [t.params for t in study.trials]


def test_seeded_studies_reproduce_and_seeds_differ() -> None:
    first = _params(7)
    assert first == _params(7)
    assert first != _params(8)
    assert _params(None, 10) != _params(None, 10)


def test_maximize_and_minimize_both_reach_the_optimum() -> None:
    for direction, sign in (("minimize", 1), ("maximize", -1)):
        study = optuna.create_study(direction=direction, sampler=PerftuneSampler(seed=0))
        study.optimize(lambda t, s=sign: s * (t.suggest_int("x", 0, 200) - 133) ** 2, n_trials=50)
        assert study.best_params == {"x": 133}


def test_several_objectives_give_a_spread_front() -> None:
    def zdt1(trial: optuna.trial.Trial) -> tuple[float, float]:
        xs = [trial.suggest_float(f"x{i}", 0, 1) for i in range(4)]
        g = 1 + 9 * sum(xs[1:]) / 3
        return xs[0], g * (1 - math.sqrt(xs[0] / g))

    def hypervolume(study: optuna.Study) -> float:  # of the front, reference point (1.1, 11)
        front = sorted(t.values for t in study.best_trials)
        area, last_f2 = 0.0, 11.0
        for f1, f2 in front:
            area += (1.1 - f1) * (last_f2 - f2)
            last_f2 = f2
        return area

    # Over three seeds (one seed's front size moves with any change of the search's path: 4 to 17 points
    # over seeds 0-7, random search's 5 to 10): every front has several points, and the fronts cover more
    # than random search's on the same seeds.
    ours, theirs = [], []
    for seed in range(3):
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=PerftuneSampler(seed=seed))
        study.optimize(zdt1, n_trials=150)
        assert len(study.best_trials) >= 4
        ours.append(hypervolume(study))
        random = optuna.create_study(directions=["minimize", "minimize"],
                                     sampler=optuna.samplers.RandomSampler(seed=seed))
        random.optimize(zdt1, n_trials=150)
        theirs.append(hypervolume(random))
    assert statistics.mean(ours) > statistics.mean(theirs)


def test_several_objectives_with_a_maximised_one_and_named_metrics() -> None:
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=PerftuneSampler(seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(["time", "accuracy"])
    study.optimize(lambda t: (t.suggest_int("a", 0, 30),
                              t.suggest_int("b", 0, 30) - t.suggest_int("a", 0, 30)), n_trials=80)
    assert any(t.params == {"a": 0, "b": 30} for t in study.best_trials)  # the corner dominates everything


PRUNERS = {
    "median": lambda: optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=2),
    "successive-halving": lambda: optuna.pruners.SuccessiveHalvingPruner(),
    "hyperband": lambda: optuna.pruners.HyperbandPruner(min_resource=1, max_resource=10),
}


@pytest.mark.parametrize("pruner", list(PRUNERS))
def test_works_with_pruners(pruner: str) -> None:
    sampler = RecordingSampler(seed=2)
    study = optuna.create_study(sampler=sampler, pruner=PRUNERS[pruner]())

    def objective(trial: optuna.trial.Trial) -> float:
        x = trial.suggest_float("x", -5, 5)
        y = trial.suggest_int("y", 0, 10)
        loss = 0.0
        for step in range(10):
            loss = (x - 1) ** 2 + (y - 3) ** 2 + 10.0 / (step + 1)
            trial.report(loss, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return loss

    study.optimize(objective, n_trials=60)
    states = [t.state for t in study.trials]
    assert states.count(TrialState.PRUNED) >= 5 and states.count(TrialState.COMPLETE) >= 5
    assert sorted(sampler.finished) == [(t.number, t.state) for t in study.trials]  # after_trial for each
    assert sampler.relative == list(range(1, 60))
    assert study.best_value < 1.0 + 0.3


def test_rdb_storage_shared_by_two_studies_and_resumed_by_a_new_sampler(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"

    def objective(trial: optuna.trial.Trial) -> float:
        x = trial.suggest_int("x", 0, 5)
        y = trial.suggest_categorical("y", ["a", "b", "c", "d"])
        trial.set_user_attr("label", f"{x}{y}")
        trial.report(float(x), 0)
        return float(x + "abcd".index(y))

    first = optuna.create_study(study_name="first", storage=url, sampler=PerftuneSampler(seed=0))
    second = optuna.create_study(study_name="second", storage=url, direction="maximize",
                                 sampler=PerftuneSampler(seed=0))
    for _ in range(3):  # interleaved, as two jobs on one database would run
        first.optimize(objective, n_trials=4)
        second.optimize(objective, n_trials=4)
    # A new process (here: a new sampler on the loaded study) learns the 12 trials from the storage and
    # proposes none of them again: the 24 configurations are all measured once before any repeat.
    resumed = optuna.load_study(study_name="first", storage=url, sampler=PerftuneSampler(seed=5))
    resumed.optimize(objective, n_trials=12)

    summaries = {s.study_name: s for s in optuna.get_all_study_summaries(url)}
    assert summaries["first"].n_trials == 24 and summaries["second"].n_trials == 12
    trials = optuna.load_study(study_name="first", storage=url).trials
    assert len({(t.params["x"], t.params["y"]) for t in trials}) == 24
    # What optuna-dashboard reads is there: states, values, parameters, intermediate values, attributes.
    assert all(t.state == TrialState.COMPLETE and t.value is not None for t in trials)
    assert all(t.user_attrs["label"] == f"{t.params['x']}{t.params['y']}" for t in trials)
    assert all(t.intermediate_values == {0: float(t.params["x"])} for t in trials)
    maximize = optuna.study.StudyDirection.MAXIMIZE
    assert optuna.load_study(study_name="second", storage=url).direction == maximize


_WORKER = """
import sys, optuna
from perftune.integration.optuna import PerftuneSampler
optuna.logging.set_verbosity(optuna.logging.ERROR)
sampler = PerftuneSampler(seed=int(sys.argv[2]))
study = optuna.load_study(study_name="shared", storage=sys.argv[1], sampler=sampler)
objective = lambda t: float(t.suggest_int("x", 0, 4) * 10 + t.suggest_int("y", 0, 7))
study.optimize(objective, n_trials=int(sys.argv[3]))
"""


def test_processes_sharing_a_study_learn_each_others_trials(tmp_path: Path) -> None:
    import subprocess

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(study_name="shared", storage=url)
    subprocess.run([sys.executable, "-c", _WORKER, url, "1", "12"], check=True, timeout=120)
    done = optuna.load_study(study_name="shared", storage=url).trials
    first = {(t.params["x"], t.params["y"]) for t in done}
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, url, str(seed), "8"]) for seed in (2, 3)]
    assert [w.wait(timeout=120) for w in workers] == [0, 0]
    trials = optuna.load_study(study_name="shared", storage=url).trials
    assert len(trials) == 28 and all(t.state == TrialState.COMPLETE for t in trials)
    # Each new process read the 12 finished trials from the storage before proposing: none is repeated.
    later = [(t.params["x"], t.params["y"]) for t in trials[12:]]
    assert len(first) == 12 and not first & set(later)


def test_enqueued_trials_are_measured_and_learnt() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0))
    study.enqueue_trial({"x": 17, "kind": "c"})
    study.enqueue_trial({"x": 3})  # partial: the rest from the sampler
    study.optimize(lambda t: abs(t.suggest_int("x", 0, 20) - 3) + (t.suggest_categorical(
        "kind", ["a", "b", "c"]) != "a"), n_trials=40)
    trials = study.trials
    assert trials[0].params == {"x": 17, "kind": "c"}
    assert trials[1].params["x"] == 3 and trials[1].params["kind"] in ("a", "b", "c")
    configs = [(t.params["x"], t.params["kind"]) for t in trials]
    assert len(set(configs)) == len(configs)  # enqueued ones were told: never proposed again
    assert study.best_params == {"x": 3, "kind": "a"}


def test_failures_do_not_break_the_search() -> None:
    sampler = RecordingSampler(seed=4)
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.trial.Trial) -> float:
        x = trial.suggest_int("x", 0, 40)
        y = trial.suggest_int("y", 0, 40)
        if x + y > 60:
            raise ValueError("out of memory")
        if x == y:
            return float("nan")  # Optuna records a NaN as a failed trial
        return float((x - 30) ** 2 + (y - 29) ** 2)

    study.optimize(objective, n_trials=80, catch=(ValueError,))
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert failed and len(failed) < 40
    assert study.best_value <= 2.0
    configs = [(t.params["x"], t.params["y"]) for t in study.trials]
    assert len(set(configs)) == len(configs)  # failures are learnt too: never measured twice
    assert (failed[0].number, TrialState.FAIL) in sampler.finished


def test_define_by_run_branches_are_sampled_independently() -> None:
    sampler = RecordingSampler(seed=0)
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.trial.Trial) -> float:
        model = trial.suggest_categorical("model", ["linear", "tree"])
        lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
        if model == "tree":
            depth = trial.suggest_int("depth", 1, 12)
            return abs(math.log10(lr) + 2) + abs(depth - 7) / 7
        return 1.0 + abs(math.log10(lr) + 1)

    study.optimize(objective, n_trials=50)
    space = sampler.infer_relative_search_space(study, study.trials[-1])
    assert sorted(space) == ["lr", "model"]  # depth is suggested by some trials only
    assert all(1 <= t.params["depth"] <= 12 for t in study.trials if "depth" in t.params)
    assert study.best_params["model"] == "tree" and study.best_value < 0.5


def test_a_space_that_grows_after_the_first_trials_changes_the_relative_space() -> None:
    sampler = RecordingSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: float(t.suggest_int("x", 0, 9)), n_trials=3)
    # The objective now also suggests y (a new version of the user's code): x stays perftune's, y is
    # independent until every completed (or pruned) trial has it, as with Optuna's relative samplers.
    study.optimize(lambda t: float(t.suggest_int("x", 0, 9) + t.suggest_int("y", 0, 9)), n_trials=20)
    assert sorted(sampler.infer_relative_search_space(study, study.trials[-1])) == ["x"]
    xs = [t.params["x"] for t in study.trials]
    assert len(set(xs)) == 10 and min(t.value for t in study.trials) == 0 + min(
        t.params.get("y", 0) for t in study.trials if t.params["x"] == 0)

    fresh = optuna.create_study(sampler=RecordingSampler(seed=0))
    fresh.optimize(lambda t: float(t.suggest_int("x", 0, 9) + t.suggest_int("y", 0, 9)), n_trials=5)
    assert sorted(fresh.sampler.infer_relative_search_space(fresh, fresh.trials[-1])) == ["x", "y"]


def test_a_range_that_moves_leaves_the_relative_space_and_one_that_grows_stays() -> None:
    sampler = PerftuneSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", t.number, t.number + 1) + t.suggest_float("y", 0, 1),
                   n_trials=10)
    assert list(sampler.infer_relative_search_space(study, study.trials[-1])) == ["y"]

    sampler = PerftuneSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", 0, 1 + t.number) + t.suggest_float("y", 0, 1), n_trials=10)
    assert sampler.infer_relative_search_space(study, study.trials[-1]) == {
        "x": FloatDistribution(0, 10), "y": FloatDistribution(0, 1)}


def test_a_widened_range_is_searched_and_the_earlier_trials_are_learnt(tmp_path: Path) -> None:
    # A study resumed after the user widened a range: the parameter stays perftune's, over the new range,
    # and the technique is told the earlier trials (they are points of the wider space).
    storage = f"sqlite:///{tmp_path / 'w.db'}"

    def objective(high: int) -> Any:
        return lambda t: abs(t.suggest_int("n", 1, high) - 100) + (t.suggest_float("x", 0, 1) - 0.5) ** 2

    first = optuna.create_study(study_name="w", storage=storage, sampler=PerftuneSampler(seed=0))
    first.optimize(objective(64), n_trials=20)
    sampler = RecordingSampler(seed=0)
    again = optuna.create_study(study_name="w", storage=storage, sampler=sampler, load_if_exists=True)
    again.optimize(objective(128), n_trials=30)
    assert sampler.infer_relative_search_space(again, again.trials[-1]) == {
        "n": IntDistribution(1, 128), "x": FloatDistribution(0, 1)}
    assert len(sampler.relative) == 30
    search = sampler._search
    assert search is not None and len(search.measured) == 50  # the 20 earlier trials too
    assert max(t.params["n"] for t in again.trials[20:]) > 64


def test_a_trial_pruned_before_suggesting_every_parameter_leaves_them_searched() -> None:
    # The documented way to reject an invalid configuration: prune before suggesting the rest. The later
    # parameters must not go to random sampling for the rest of the study.
    def objective(trial: optuna.trial.Trial) -> float:
        bx = trial.suggest_categorical("bx", [1, 2, 4, 8, 16, 32, 64])
        by = trial.suggest_categorical("by", [1, 2, 4, 8, 16, 32, 64])
        if bx * by > 256:
            raise optuna.TrialPruned()
        unroll = trial.suggest_int("unroll", 1, 16)
        s = trial.suggest_float("s", 0, 1)
        return abs(unroll - 11) + (s - 0.37) ** 2 * 10 + abs(bx * by - 128) / 128

    bests = []
    for seed in range(3):
        sampler = PerftuneSampler(seed=seed)
        study = optuna.create_study(sampler=sampler)
        study.enqueue_trial({"bx": 64, "by": 64})  # the first trial is pruned after two parameters
        study.optimize(objective, n_trials=60)
        assert study.trials[0].state == TrialState.PRUNED
        assert sorted(sampler.infer_relative_search_space(study, study.trials[-1])) == [
            "bx", "by", "s", "unroll"]
        bests.append(study.best_value)
    # Random sampling of unroll and s leaves about 1.0 (the reviewer's median over six seeds: 0.98).
    assert statistics.median(bests) < 0.1


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_an_infinite_value_is_told_as_a_failure(value: float) -> None:
    sampler = PerftuneSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: value if t.suggest_int("x", 0, 100) > 50 else float(t.params["x"]), n_trials=30)
    search = sampler._search
    assert search is not None
    told = {config["x"]: trial for config, trial in search.measured.items()}
    failed = [trial for x, trial in told.items() if x > 50]
    assert failed and all(trial.status.name == "FAILED" and "not a finite number" in (trial.reason or "")
                          for trial in failed)
    assert all(trial.status.name == "OK" for x, trial in told.items() if x <= 50)


def test_a_study_deleted_and_created_again_under_its_name_is_a_new_study() -> None:
    storage = optuna.storages.InMemoryStorage()
    sampler = PerftuneSampler(seed=0)
    study = optuna.create_study(study_name="exp", storage=storage, sampler=sampler)
    study.optimize(lambda t: float((t.suggest_int("x", 0, 100) - 90) ** 2), n_trials=30)
    optuna.delete_study(study_name="exp", storage=storage)
    study = optuna.create_study(study_name="exp", storage=storage, sampler=sampler)
    study.optimize(lambda t: float((t.suggest_int("x", 0, 100) - 10) ** 2), n_trials=30)
    assert len(sampler._history) == 30  # the new study's trials only, every one learnt
    assert study.best_value <= 4


def test_constraints_are_honoured_by_every_proposal() -> None:
    sampler = RecordingSampler(seed=0, constraints=["bx * by <= 256", "bx >= by"])
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.trial.Trial) -> float:
        bx = trial.suggest_categorical("bx", [1, 2, 4, 8, 16, 32, 64])
        by = trial.suggest_categorical("by", [1, 2, 4, 8, 16, 32, 64])
        return -float(bx * by) + 0.1 * bx

    study.optimize(objective, n_trials=30)
    proposed = [t.params for t in study.trials if t.number in sampler.relative]
    assert len(proposed) == 29
    assert all(p["bx"] * p["by"] <= 256 and p["bx"] >= p["by"] for p in proposed)
    assert study.best_params == {"bx": 16, "by": 16}


def test_a_constraint_may_read_a_single_valued_parameter() -> None:
    sampler = RecordingSampler(seed=0, constraints=["(a * k) % 8 == 0"])
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.trial.Trial) -> float:
        k = trial.suggest_categorical("k", [2])  # one value: Optuna fills it, perftune's space holds it
        return float(trial.suggest_int("a", 1, 40) * k)

    study.optimize(objective, n_trials=12)
    assert sorted(sampler.infer_relative_search_space(study, study.trials[-1])) == ["a"]
    assert all(t.params["a"] * 2 % 8 == 0 for t in study.trials if t.number in sampler.relative)
    assert len(sampler.relative) == 11
    assert min(t.value for t in study.trials if t.number in sampler.relative) == 8.0  # a = 4


def test_threads_share_one_search_without_measuring_twice() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0))
    study.optimize(lambda t: float(abs(t.suggest_int("x", 0, 99) - 40)), n_trials=40, n_jobs=2)
    xs = [t.params["x"] for t in study.trials]
    assert len(xs) == 40 and len(set(xs)) == 40
    assert study.best_value <= 5


def test_a_small_space_is_exhausted_before_anything_repeats() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0))
    study.optimize(lambda t: float(t.suggest_int("a", 0, 3) * t.suggest_int("b", 0, 5)), n_trials=30)
    configs = [(t.params["a"], t.params["b"]) for t in study.trials]
    assert len(set(configs[:24])) == 24 and len(configs) == 30


def test_the_sampler_pickles_with_its_search() -> None:
    import pickle

    sampler = PerftuneSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(_quadratic, n_trials=5)
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.infer_relative_search_space(study, study.trials[-1]) == sampler.infer_relative_search_space(
        study, study.trials[-1])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seed": -1}, "PerftuneSampler: seed must be a non-negative integer, got -1"),
    ({"technique": "no-such"}, "PerftuneSampler: unknown technique 'no-such'"),
    ({"constraints": "x < 3"}, "PerftuneSampler: constraints must be a list of expressions"),
    ({"constraints": ["x <"]}, "PerftuneSampler: constraints[0]: "),
    ({"independent_sampler": "random"}, "PerftuneSampler: independent_sampler must be an Optuna sampler"),
    ({"ordered_categoricals": "False"}, "PerftuneSampler: ordered_categoricals must be True or False"),
    ({"warn_independent_sampling": 0}, "PerftuneSampler: warn_independent_sampling must be True or False"),
])
def test_bad_arguments_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(PerftuneError) as caught:
        PerftuneSampler(**kwargs)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_another_technique_by_name() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, technique="de"))
    study.optimize(lambda t: (t.suggest_float("x", -4, 4) - 1) ** 2, n_trials=40)
    assert study.best_value < 0.1


def test_import_without_optuna_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "optuna"
                 or m.startswith("perftune.integration.optuna")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "optuna", None)  # its import now fails as when it is not installed
    with pytest.raises(ImportError) as caught:
        importlib.import_module("perftune.integration.optuna")
    assert str(caught.value) == "perftune.integration.optuna needs Optuna: pip install 'perftune[optuna]'"
    assert caught.value.name == "optuna" and caught.value.__suppress_context__


def test_a_constraint_on_a_parameter_searched_by_position_is_refused() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["mode != 'b'"]))
    with pytest.raises(PerftuneError, match=r"constraint \"mode != 'b'\" reads mode, whose values perftune "
                                            r"searches by position"):
        study.optimize(lambda t: float(t.suggest_categorical("mode", ["a", "b", None]) is None), n_trials=3)


@pytest.mark.parametrize("module", ["perftune.integration", "perftune.integration.optuna",
                                    "perftune.integration.optuna._space",
                                    "perftune.integration.optuna._sampler"])
def test_docstring_examples_run(module: str) -> None:
    import doctest

    finder, runner = doctest.DocTestFinder(exclude_empty=True), doctest.DocTestRunner()
    tests = [t for t in finder.find(importlib.import_module(module), module) if t.examples]
    for test in tests:
        runner.run(test)
    assert tests and runner.failures == 0


@pytest.mark.parametrize(("low", "high", "step"), [(0.0, 1.0, 1e-9), (0.0, 1e4, 1e-3), (1e5, 2e5, 0.01)])
def test_a_fine_step_gives_values_on_optunas_grid(low: float, high: float, step: float) -> None:
    # Values rounded to the step's decimals left Optuna's grid by more than its 1e-8 tolerance: Optuna
    # refused perftune's value and sampled the parameter at random, without a word.
    sampler = RecordingSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    relative: list[dict[str, Any]] = []
    original = sampler.sample_relative

    def recording(study: Any, trial: Any, space: Any) -> Any:
        params = original(study, trial, space)
        relative.append(params)
        return params

    sampler.sample_relative = recording  # type: ignore[method-assign]
    study.optimize(lambda t: t.suggest_float("x", low, high, step=step) + t.suggest_float("y", 0, 1),
                   n_trials=12)
    distribution = FloatDistribution(low, high, step=step)
    proposed = [params["x"] for params in relative if params]
    assert len(proposed) == 11 and all(distribution._contains(x) for x in proposed)
    used = [t.params["x"] for t in study.trials[1:]]
    assert used == proposed  # Optuna took every proposal
