"""A baseline whose value is 0 has no relative improvement: no made-up percentage is printed."""

from __future__ import annotations

import math

from perftune.measure import speedup_ci
from perftune.report import improvement_of
from perftune.space import Config
from perftune.trial import Status, Trial


def test_a_zero_baseline_gives_no_relative_improvement_but_the_difference() -> None:
    ci = speedup_ci([0.0], [3.0], goal="max")
    assert math.isnan(ci.estimate) and math.isnan(ci.lo) and math.isnan(ci.hi)  # before: 4.0, i.e. "+300%"
    assert ci.difference == 3.0 and not ci.ratio
    assert str(ci) == ("n/a: the baseline's value is 0, so there is no relative improvement "
                       "(the winner's differs by +3)")
    # A mean of 0 is nothing to be relative to either.
    assert speedup_ci([-1.0, 1.0], [-2.0, -2.0]).difference == -2.0


def test_a_run_whose_default_printed_0_states_no_improvement() -> None:
    default = Trial(0, Config({"k": 0}), Status.OK, value=0.0, samples=[0.0], technique="default")
    best = Trial(1, Config({"k": 3}), Status.OK, value=3.0, samples=[3.0])
    assert improvement_of(best, default, goal="max") is None  # before: "+300.0%"


def test_a_nonzero_baseline_keeps_its_relative_improvement() -> None:
    ci = speedup_ci([-2.0, -2.0], [1.0, 1.0], goal="max")
    assert not ci.ratio and ci.difference is None and math.isclose(ci.estimate, 2.5)  # +150% of |-2|
    assert speedup_ci([2.0, 2.0], [1.0, 1.0]).estimate == 2.0
