"""The default search explores uniformly while a run is stuck on a plateau (StagedSettings.stuck_patience).

The held-out problem: a deceptive plateau (the search review of 2026-12-07). Every corner and the far
field of an Int^3 cube score 1.0, the value rises towards a pit of radius 12 that goes down to 0. The
boundary design and the portfolio's local searches stay on the plateau (no technique ever earns
credit there); uniform random sampling finds the pit.
"""

from __future__ import annotations

import math

import pytest

import perftune
from perftune.errors import PerftuneError
from perftune.search import StagedSettings, create
from perftune.space import Int, Space

PIT_SPACE = Space({"a": Int(0, 99), "b": Int(0, 99), "c": Int(0, 99)})


def pit(c) -> float:
    d = math.dist((c["a"], c["b"], c["c"]), (37, 61, 45))
    return d / 12.0 if d < 12 else 1.0 + (60.0 - min(d, 60.0)) / 60.0


def test_the_default_settings_explore_when_stuck():
    assert StagedSettings().stuck_patience > 0
    assert create("default", PIT_SPACE, seed=0).settings.stuck_patience > 0


@pytest.mark.parametrize("kw", [{"stuck_patience": -1}, {"stuck_share": 1.5}, {"stuck_every": 0},
                                {"stuck_ties": -1}])
def test_bad_settings_are_one_error(kw):
    with pytest.raises(PerftuneError, match="StagedSettings.stuck_"):
        StagedSettings(**kw)


def test_a_plateau_gets_uniform_proposals_once_stuck_and_none_before():
    # A constant objective: the first result is the best for good, so the run is stuck from the
    # 32nd result after it on (patience 32, and half the run).
    def labels(patience: int) -> list[str | None]:
        res = perftune.tune(lambda c: 1.0, PIT_SPACE, budget=120, seed=3,
                            technique=("default", StagedSettings(stuck_patience=patience)))
        return [t.technique for t in res.trials]

    on, off = labels(32), labels(0)
    assert on[:33] == off[:33]  # the same run until it is stuck (the driver's stand-ins included)
    later = on[40:]
    assert off[40:].count("random") == 0
    share = later.count("random") / len(later)
    assert 0.4 <= share <= 0.6, share  # every other proposal while stuck


def test_a_new_best_ends_the_stuck_phase():
    tech = create("default", PIT_SPACE, seed=1,
                  settings=StagedSettings(stuck_patience=4, stuck_ties=2, n_design=0))
    from perftune.trial import Status, Trial

    def told(config, value, i):
        return Trial(id=i, config=config, status=Status.OK, value=value, loss=value)

    for i in range(6):
        (config,) = tech.ask(1)
        tech.tell([told(config, 5.0, i)])
    assert tech.stuck()
    (config,) = tech.ask(1)
    tech.tell([told(config, 1.0, 6)])
    assert tech.since_best == 0 and not tech.stuck()


def test_a_stall_without_ties_is_left_to_the_bandit():
    # Measured times rarely tie: a run that stops improving on them is not a plateau (uniform proposals
    # there cost the development spaces' late finds, decision 8 of benchmarks/results/cv_notes.md).
    counter = iter(range(10_000))
    res = perftune.tune(lambda c: 1.0 + next(counter) * 1e-6, PIT_SPACE, budget=120, seed=3)
    assert "random" not in [t.technique for t in res.trials][40:]


@pytest.mark.slow
def test_the_pit_of_a_deceptive_plateau_is_found():
    def found(settings: StagedSettings) -> int:
        runs = [perftune.tune(pit, PIT_SPACE, budget=300, seed=s, technique=("default", settings))
                for s in range(10)]
        return sum(r.best.value < 1 for r in runs)

    off, on = found(StagedSettings(stuck_patience=0)), found(StagedSettings())
    # Measured (seeds 0-9): 2 of 10 without, 8 of 10 with; uniform random alone: 9 of 10.
    assert on >= 6 and on > off, (on, off)


def test_spaces_with_real_numbers_keep_their_portfolios_as_chosen():
    from perftune.space import Float

    mixed = Space({"x": Float(0.0, 1.0), "k": Int(0, 9)})
    assert create("default", mixed, seed=0).stuck_patience == 0
    assert create("default", PIT_SPACE, seed=0).stuck_patience == StagedSettings().stuck_patience
