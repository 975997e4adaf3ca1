"""CMA-ES: convergence on smooth problems, restarts, settings."""

from __future__ import annotations

import pytest

from perftune.errors import PerftuneError
from perftune.search import create
from perftune.search._cmaes import CMAESSettings
from perftune.space import Float, Int, Space
from perftune.testing.techniques import AskTellLoop


def _sphere(config: dict) -> float:  # minimum 0 at (1, -2, 0.5)
    return (config["a"] - 1.0) ** 2 + (config["b"] + 2.0) ** 2 + (config["c"] - 0.5) ** 2


def _ellipse(config: dict) -> float:  # a rotated, badly conditioned valley: needs the covariance
    u = config["a"] + config["b"]
    v = config["a"] - config["b"]
    return u**2 + 1000.0 * (v - 0.3) ** 2


def test_converges_on_a_sphere():
    space = Space({"a": Float(-5, 5), "b": Float(-5, 5), "c": Float(-5, 5)})
    loop = AskTellLoop(create("cma-es", space, seed=3), _sphere)
    loop.run(400)
    assert loop.best() < 1e-4


def test_learns_a_rotated_valley():
    space = Space({"a": Float(-5, 5), "b": Float(-5, 5)})
    bests = []
    for seed in range(5):
        loop = AskTellLoop(create("cma-es", space, seed=seed), _ellipse)
        loop.run(500)
        bests.append(loop.best())
    # Random search ends at 1-16 here; a step-size-only method cannot follow the rotated valley.
    assert sorted(bests)[2] < 1e-6, bests


def test_restarts_with_a_larger_population_after_convergence():
    tech = create("cma-es", Space({"a": Float(-5, 5)}), seed=0, settings=CMAESSettings(tol_sigma=1e-3))
    loop = AskTellLoop(tech, lambda c: (c["a"] - 2.0) ** 2)
    loop.run(300)
    assert tech.n_restarts >= 2
    assert tech._lambda > 4
    assert loop.best() < 1e-4


def test_mixed_space_with_integers_stays_valid_and_finds_the_optimum():
    space = Space({"n": Int(0, 100), "x": Float(0, 1)})
    loop = AskTellLoop(create("cma-es", space, seed=1), lambda c: abs(c["n"] - 63) + (c["x"] - 0.25) ** 2)
    loop.run(300)
    assert loop.best() < 0.01
    assert all(space.is_valid(t.config) for t in loop.trials)


@pytest.mark.parametrize("bad", [{"sigma0": 0.0}, {"popsize": -1}, {"popsize": 1}, {"ipop_factor": 0.5},
                                 {"tol_sigma": 0.0}])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(PerftuneError, match="CMAESSettings"):
        CMAESSettings(**bad)
