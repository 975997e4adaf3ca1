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
