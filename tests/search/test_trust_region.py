"""Trust-region search: quadratic steps, radius control, settings."""

from __future__ import annotations

import pytest

from perftune.errors import PerftuneError
from perftune.search import create
from perftune.search._trust import TrustRegionSettings
from perftune.space import Float, Int, Space
from perftune.testing.techniques import AskTellLoop


def _valley(config: dict) -> float:  # rotated, badly conditioned; minimum 0 at a = b + 0.3, a + b = 0
    u = config["a"] + config["b"]
    v = config["a"] - config["b"]
    return u**2 + 1000.0 * (v - 0.3) ** 2


def test_follows_a_rotated_valley_far_better_than_random():
    space = Space({"a": Float(-5, 5), "b": Float(-5, 5)})
    mine, ref = [], []
    for seed in range(3):
        loop = AskTellLoop(create("trust-region", space, seed=seed), _valley)
        loop.run(150)
        mine.append(loop.best())
        ref_loop = AskTellLoop(create("random", space, seed=seed), _valley)
        ref_loop.run(150)
        ref.append(ref_loop.best())
    assert max(mine) < 1e-6, mine
    assert min(ref) > 1e-3, ref


def test_radius_shrinks_on_failures_and_restarts():
    space = Space({"a": Float(0, 1)})
    tech = create("trust-region", space, seed=0, settings=TrustRegionSettings(radius0=0.1, min_radius=1e-4))
    loop = AskTellLoop(tech, lambda c: abs(c["a"] - 0.5))  # not smooth at the optimum: steps keep failing
    loop.run(200)
    assert tech.n_restarts >= 1
    assert loop.best() < 1e-3


def test_integer_parameters_stay_valid():
    space = Space({"n": Int(0, 50), "x": Float(0, 1)})
    loop = AskTellLoop(
        create("trust-region", space, seed=2), lambda c: (c["n"] - 17) ** 2 + (c["x"] - 0.7) ** 2
    )
    loop.run(120)
    assert all(space.is_valid(t.config) for t in loop.trials)
    assert loop.best() < 0.01


@pytest.mark.parametrize(
    "bad", [{"radius0": 0.0}, {"min_radius": 1.0}, {"shrink": 1.0}, {"grow": 0.5}, {"memory": 2}]
)
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(PerftuneError, match="TrustRegionSettings"):
        TrustRegionSettings(**bad)
