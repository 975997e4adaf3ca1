"""A run where every trial failed says why, once: result.best is None and the caller needs the reason."""

from __future__ import annotations

import warnings

import pytest

import perftune
from perftune.errors import RunWarning
from perftune.space import Int, Space


def test_a_run_whose_every_trial_fails_warns_once_with_the_most_common_reason():
    def broken(config):
        raise NameError("name 'run_my_kernel' is not defined")

    expected = r"every trial failed \(4\).*\(4 of 4\): NameError: name 'run_my_kernel'"
    with pytest.warns(RunWarning, match=expected) as caught:
        result = perftune.tune(broken, Space({"x": Int(0, 9)}), budget=4, seed=0)
    assert result.best is None and len(caught) == 1
    assert caught[0].filename == __file__  # it points at the caller's line


def test_one_success_is_enough_for_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunWarning)
        result = perftune.tune(lambda c: 1.0 / c["x"], Space({"x": Int(0, 3, default=0)}), budget=4, seed=0)
    assert result.best is not None and not result.default.ok


def test_a_run_whose_first_trials_all_fail_the_same_way_stops_there():
    # An Optuna-style objective given to tune() (it calls trial.suggest_float on a config): with a time
    # budget it failed 8006 times before the one warning.
    from perftune.drive._tuner import SAME_FAILURE_TRIALS

    def optuna_style(config):
        return config.suggest_float("x", 0, 1)

    with pytest.warns(RunWarning, match=r"every trial failed \(20\).*AttributeError.*the run stopped there"):
        result = perftune.tune(optuna_style, Space({"x": Int(0, 999)}), budget=500, seed=0)
    assert len(result.trials) == SAME_FAILURE_TRIALS == 20
    assert result.stop_reason.startswith("every trial failed the same way: 20 trials in a row")


def test_failures_with_other_reasons_or_after_a_success_do_not_stop_the_run():
    def varied(config):
        raise ValueError(f"no kernel for x={config['x']}")  # each failure says something else

    with pytest.warns(RunWarning):
        assert len(perftune.tune(varied, Space({"x": Int(0, 999)}), budget=40, seed=0).trials) == 40

    def mostly_failing(config):
        if config["x"] != 0:
            raise RuntimeError("out of shared memory")
        return 1.0

    result = perftune.tune(mostly_failing, Space({"x": Int(0, 999, default=0)}), budget=40, seed=0)
    assert len(result.trials) == 40 and result.best is not None
