"""``elite-neighbours`` widens its neighbourhoods late in a run that stopped improving (default search)."""

from __future__ import annotations

import pytest

from perftune.errors import PerftuneError
from perftune.search import EliteNeighbours, EliteNeighboursSettings, StagedBandit
from perftune.search._boundary import ELITE_SETTINGS
from perftune.space import Config, Int, Ordinal, Space
from perftune.trial import Status, Trial

# ``mode`` is an ordered parameter of four values (adjacent moves: 0 -> 1 only); ``block`` has many.
SPACE = Space({"mode": Ordinal([0, 1, 2, 3]), "block": Int(1, 1000)})
BEST = Config({"mode": 0, "block": 40})
RUNNER_UP = Config({"mode": 0, "block": 20})  # one move from the best: never a distinct elite
TARGET = Config({"mode": 2, "block": 20})  # a non-adjacent move of the runner-up


def _tell(tech: EliteNeighbours, configs: list[Config], start: int = 0) -> None:
    for i, config in enumerate(configs, start):
        loss = {BEST: 1.0, RUNNER_UP: 1.01}.get(config, 2.0 + i)  # nothing else comes close to the best
        tech.tell([Trial(id=i, config=config, status=Status.OK, value=loss, loss=loss)])


def _filler(n: int) -> list[Config]:
    # Distinct configurations far from the best two, in a fixed order.
    return [Config({"mode": 3, "block": b}) for b in range(1, n + 1)]


def _proposals(tech: EliteNeighbours, n: int) -> list[Config]:
    out = []
    for i in range(n):
        (config,) = tech.ask(1)
        out.append(config)
        _tell(tech, [config], start=10_000 + i)
    return out


def test_by_default_it_keeps_adjacent_moves_around_distinct_elites() -> None:
    tech = EliteNeighbours(SPACE, seed=3)
    _tell(tech, [BEST, RUNNER_UP, *_filler(40)])
    assert TARGET not in _proposals(tech, 12)


def test_once_widened_it_tries_non_adjacent_values_around_the_best_few() -> None:
    settings = EliteNeighboursSettings(widen_after=32, widen_min_results=20)
    tech = EliteNeighbours(SPACE, seed=3, settings=settings)
    _tell(tech, [BEST, RUNNER_UP, *_filler(40)])  # 40 results in a row without a new best
    assert TARGET in _proposals(tech, 12)


def test_it_widens_neither_early_nor_while_the_run_improves() -> None:
    late_only = EliteNeighboursSettings(widen_after=32, widen_min_results=500)
    early = EliteNeighbours(SPACE, seed=3, settings=late_only)
    _tell(early, [BEST, RUNNER_UP, *_filler(40)])
    assert TARGET not in _proposals(early, 12)
    improving = EliteNeighbours(SPACE, seed=3, settings=EliteNeighboursSettings(widen_after=64))
    _tell(improving, [BEST, RUNNER_UP, *_filler(40)])  # 41 without a new best: fewer than 64
    assert TARGET not in _proposals(improving, 12)


def test_the_default_search_widens_after_100_results_and_32_without_a_new_best() -> None:
    assert (ELITE_SETTINGS.widen_min_results, ELITE_SETTINGS.widen_after) == (100, 32)
    tech = StagedBandit(SPACE, seed=1)
    arm = tech.bandit.techniques[tech.bandit.names.index("elite-neighbours")]
    assert arm.settings == ELITE_SETTINGS
    assert EliteNeighbours(SPACE, seed=1).settings.widen_after == 0  # the technique alone: unchanged


def test_settings_are_checked() -> None:
    with pytest.raises(PerftuneError, match="widen_after"):
        EliteNeighboursSettings(widen_after=-1)
