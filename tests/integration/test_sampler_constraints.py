"""PerftuneSampler's constraints (docs/optuna.md, "Constraints"): nothing a user declares is dropped silently.

* ``constraints=`` naming something that is not a parameter (a typo, a branch parameter, a measured value)
  gives one warning with the names once the first trial shows the parameters; define-by-run keeps working.
* A constraint on an objective named by ``study.metric_names`` is a one-line error: the sampler's
  constraints are checked before a trial runs, so they cannot read what the trial measures.
* Constraints that no configuration satisfies stop the study with one error naming them, raised by the
  sampler (not a traceback from deep inside perftune's search).
* Optuna's own constraints (``constraints_func=``, ``trial.set_constraint``) are stored as Optuna's samplers
  store them, and the search learns infeasible trials as such.
"""

from __future__ import annotations

import math
import warnings

import pytest

optuna = pytest.importorskip("optuna")  # installed by the test extra; see docs/optuna.md

from optuna.trial import TrialState  # noqa: E402

from perftune.errors import PerftuneError, UnsatisfiableError  # noqa: E402
from perftune.integration.optuna import PerftuneSampler  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.CRITICAL)


def _blocks(trial: optuna.trial.Trial) -> float:
    return -float(trial.suggest_categorical("bx", [8, 16, 32, 64]) * trial.suggest_int("by", 1, 32))


def _optimize_recording(study: optuna.Study, objective: object, n_trials: int) -> list[str]:
    """Run the study; the messages of the UserWarnings it gave (each one, not once per place)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study.optimize(objective, n_trials=n_trials)
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


# ---------------------------------------------------------------------- names that are not parameters


def test_a_misspelt_parameter_warns_once_naming_it_and_the_parameter_meant() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["bx * byy <= 256"]))
    messages = _optimize_recording(study, _blocks, n_trials=6)
    assert messages == [
        "PerftuneSampler: constraint 'bx * byy <= 256' is not applied: no finished trial suggested 'byy' "
        "(did you mean 'by'?): a typo, a parameter of a branch not taken yet, or a measured value (bound "
        "those with constraints_func); it applies once every name it reads is in the relative search space"]
    assert len(study.trials) == 6  # a warning, not an error: the study runs on


def test_a_constraint_on_a_measured_value_without_metric_names_warns_and_points_to_constraints_func() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["accuracy >= 0.99"]))
    messages = _optimize_recording(study, lambda t: t.suggest_float("x", 0, 1), n_trials=4)
    assert len(messages) == 1
    assert ("constraint 'accuracy >= 0.99' is not applied: no finished trial suggested 'accuracy'"
            in messages[0])
    assert "constraints_func" in messages[0] and "did you mean" not in messages[0]


def test_a_constraint_on_a_branch_parameter_warns_once_and_define_by_run_keeps_working() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["depth <= 3"],
                                                        warn_independent_sampling=False))

    def objective(trial: optuna.trial.Trial) -> float:
        model = trial.suggest_categorical("model", ["linear", "tree"])
        lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        if model == "tree":
            return abs(math.log10(lr) + 2) + trial.suggest_int("depth", 1, 12) / 12
        return 1.0 + abs(math.log10(lr) + 1)

    messages = _optimize_recording(study, objective, n_trials=12)
    assert len(messages) == 1 and messages[0].startswith(
        "PerftuneSampler: constraint 'depth <= 3' is not applied: ")
    assert "'depth'" in messages[0]
    assert len(study.trials) == 12 and all(t.state == TrialState.COMPLETE for t in study.trials)


def test_a_constraint_on_a_parameter_sampled_independently_says_so() -> None:
    sampler = PerftuneSampler(seed=0, constraints=["x + y <= 12"], warn_independent_sampling=False)
    study = optuna.create_study(sampler=sampler)
    # y's range moves from trial to trial: it never joins the relative search space.
    messages = _optimize_recording(
        study, lambda t: float(t.suggest_int("x", 0, 9) + t.suggest_int("y", t.number, 9 + t.number)),
        n_trials=5)
    assert messages == [
        "PerftuneSampler: constraint 'x + y <= 12' is not applied: 'y' is not suggested by every completed "
        "trial, or from distributions neither of which holds the other, so sampled independently; it "
        "applies once every name it reads is in the relative search space"]


def test_constraints_over_parameters_give_no_warning() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["bx * by <= 256"]))
    assert _optimize_recording(study, _blocks, n_trials=8) == []
    assert all(t.params["bx"] * t.params["by"] <= 256 for t in study.trials[1:])


def test_a_constraint_on_a_named_objective_is_a_one_line_error() -> None:
    study = optuna.create_study(directions=["minimize", "maximize"],
                                sampler=PerftuneSampler(seed=0, constraints=["accuracy >= 0.99"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(["time", "accuracy"])
    with pytest.raises(PerftuneError) as caught:
        study.optimize(lambda t: (1 - t.suggest_float("x", 0, 1), 1 - 0.05 * t.params["x"]), n_trials=5)
    message = str(caught.value)
    assert message.startswith("PerftuneSampler: constraint 'accuracy >= 0.99' reads 'accuracy', an objective "
                              "of the study (study.metric_names), not a parameter")
    assert "constraints_func" in message and "set_constraint" in message and "\n" not in message
    assert len(study.trials) == 2  # the first trial is sampled independently; the second one stops


# ---------------------------------------------------------------------- constraints nothing satisfies


def test_an_unsatisfiable_constraint_is_one_error_from_the_sampler_naming_it() -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints=["x > 100"]))
    with pytest.raises(UnsatisfiableError) as caught:
        study.optimize(lambda t: float(t.suggest_int("x", 0, 10)), n_trials=5)
    assert str(caught.value) == (
        "PerftuneSampler: no configuration of the study's parameters (x: Int(0, 10)) satisfies "
        "constraints=['x > 100']: constraint 'x > 100' holds for no values of 'x': constraints may be "
        "unsatisfiable")
    assert caught.value.__suppress_context__  # raised by the sampler, not out of perftune's search
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL]


def test_constraints_unsatisfiable_together_name_every_constraint() -> None:
    sampler = PerftuneSampler(seed=0, constraints=["x + y >= 15", "x <= 3", "y <= 9"])
    study = optuna.create_study(sampler=sampler)
    with pytest.raises(UnsatisfiableError) as caught:
        study.optimize(lambda t: float(t.suggest_int("x", 0, 9) + t.suggest_int("y", 0, 9)), n_trials=4)
    assert str(caught.value).startswith(
        "PerftuneSampler: no configuration of the study's parameters (x: Int(0, 9), y: Int(0, 9)) satisfies "
        "constraints=['x + y >= 15', 'x <= 3', 'y <= 9']: ")


# ---------------------------------------------------------------------- Optuna's constraints


def _corner(trial: optuna.trial.Trial) -> float:
    """Best in the infeasible corner: the feasible optimum is x + y = 0.4, value 1.6."""
    x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
    trial.set_user_attr("excess", x + y - 0.4)
    return 2 - x - y


def _excess(trial: optuna.trial.FrozenTrial) -> list[float]:
    return [trial.user_attrs["excess"]]


@pytest.mark.parametrize("seed", [0, 1])
def test_constraints_func_is_stored_as_optunas_samplers_do_and_the_search_learns_it(seed: int) -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=seed, constraints_func=_excess))
    study.optimize(_corner, n_trials=30)
    assert all(t.system_attrs["constraints"] == [t.user_attrs["excess"]] or
               t.system_attrs["constraints"] == (t.user_attrs["excess"],) for t in study.trials)
    assert study.best_trial.user_attrs["excess"] <= 0  # Optuna's best_trial reads the stored values
    assert study.best_value < 1.65
    # Infeasible trials are learnt as such: most of the later proposals are feasible.
    assert sum(t.user_attrs["excess"] <= 0 for t in study.trials[10:]) >= 5

    unconstrained = optuna.create_study(sampler=PerftuneSampler(seed=seed))
    unconstrained.optimize(_corner, n_trials=30)  # the control: it heads for the infeasible corner
    assert sum(t.user_attrs["excess"] <= 0 for t in unconstrained.trials[10:]) <= 2


def test_constraints_func_keeps_infeasible_trials_off_the_pareto_front() -> None:
    # The metric-constraint idiom of docs/multiobjective.md ("accuracy >= 0.99"), the Optuna way.
    sampler = PerftuneSampler(seed=0, constraints_func=lambda t: [0.99 - t.user_attrs["accuracy"]])
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)

    def objective(trial: optuna.trial.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0, 1)
        y = trial.suggest_float("y", 0, 1)
        accuracy = 1 - 0.05 * (x + y)
        trial.set_user_attr("accuracy", accuracy)
        return 2 - x - y, accuracy

    study.optimize(objective, n_trials=40)
    assert study.best_trials and all(t.values[1] >= 0.99 for t in study.best_trials)
    assert sum(t.user_attrs["accuracy"] >= 0.99 for t in study.trials[20:]) >= 8


@pytest.mark.skipif(not hasattr(optuna.trial.Trial, "set_constraint"),
                    reason="trial.set_constraint is Optuna 5's")
def test_constraints_set_by_the_objective_are_learnt_without_constraints_func() -> None:
    def objective(trial: optuna.trial.Trial) -> float:
        value = _corner(trial)
        trial.set_constraint("sum", trial.user_attrs["excess"])
        return value

    study = optuna.create_study(sampler=PerftuneSampler(seed=0))
    study.optimize(objective, n_trials=30)
    assert study.best_trial.user_attrs["excess"] <= 0 and study.best_value < 1.65
    assert sum(t.user_attrs["excess"] <= 0 for t in study.trials[10:]) >= 5


def test_pruned_trials_get_constraint_values_and_failed_ones_none() -> None:
    def objective(trial: optuna.trial.Trial) -> float:
        trial.set_user_attr("excess", float(trial.number % 2))
        x = trial.suggest_int("x", 0, 9)
        if trial.number == 1:
            raise optuna.TrialPruned()
        if trial.number == 2:
            raise ValueError("boom")
        return float(x)

    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints_func=_excess))
    study.optimize(objective, n_trials=4, catch=(ValueError,))
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL,
                                               TrialState.COMPLETE]
    assert [list(t.system_attrs.get("constraints", [])) for t in study.trials] == [[0.0], [1.0], [], [1.0]]
    assert study.best_trial.number == 0


@pytest.mark.parametrize(("func", "message"), [
    (lambda t: "0",
     "PerftuneSampler: constraints_func must return a sequence of floats, got '0' for trial 0"),
    (lambda t: [float("nan")], "PerftuneSampler: constraints_func returned NaN for trial 0: [nan]"),
])
def test_a_bad_constraints_func_result_is_a_one_line_error(func: object, message: str) -> None:
    study = optuna.create_study(sampler=PerftuneSampler(seed=0, constraints_func=func))  # type: ignore[arg-type]
    with pytest.raises(PerftuneError) as caught:
        study.optimize(lambda t: float(t.suggest_int("x", 0, 3)), n_trials=2)
    assert str(caught.value) == message


def test_a_constraints_func_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(PerftuneError, match=r"^PerftuneSampler: constraints_func must be a function of a "
                                            r"trial that returns a sequence of floats, got \[0\]$"):
        PerftuneSampler(constraints_func=[0])  # type: ignore[arg-type]
