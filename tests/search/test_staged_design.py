"""The default search's initial design moves about as many parameters to an extreme on any space."""

from __future__ import annotations

from perftune.search import StagedBandit
from perftune.search._boundary import DESIGN_MOVES, DESIGN_SETTINGS, Boundary, design_settings
from perftune.space import Choice, Int, Space


def _space(n: int) -> Space:
    return Space({f"p{i}": Int(1, 100) for i in range(n)})


def _mean_at_extreme(space: Space, n: int = 400) -> float:
    design = Boundary(space, seed=7, settings=design_settings(space))
    configs = design.ask(n)  # nothing told yet: every proposal starts from a random configuration
    return sum(sum(1 for v in c.values() if v in (1, 100)) for c in configs) / len(configs)


def test_many_ordered_parameters_move_fewer_of_them() -> None:
    assert design_settings(_space(10)).p_move_random == DESIGN_MOVES / 10
    assert design_settings(_space(20)).p_move_random == DESIGN_MOVES / 20
    # About 3.5 of 10 (and of 20) at an extreme, not 5 (and 10) as with DESIGN_SETTINGS alone.
    assert 3.0 <= _mean_at_extreme(_space(10)) <= 4.2
    assert 3.0 <= _mean_at_extreme(_space(20)) <= 4.4


def test_spaces_of_up_to_seven_ordered_parameters_keep_the_design_it_was_chosen_with() -> None:
    for n in (1, 4, 7):
        assert design_settings(_space(n)) == DESIGN_SETTINGS
    # Unordered choices do not count: a space of 7 ordered and 5 unordered parameters keeps it.
    mixed = Space({**{f"p{i}": Int(1, 9) for i in range(7)},
                   **{f"c{i}": Choice(["a", "b", "c"]) for i in range(5)}})
    assert design_settings(mixed) == DESIGN_SETTINGS


def test_the_default_search_uses_it() -> None:
    tech = StagedBandit(_space(14), seed=1)
    assert tech.design.settings.p_move_random == DESIGN_MOVES / 14
    assert tech.design.settings.p_flip == 0.0


class _AlwaysHigh(Boundary):
    """A boundary search whose moves always go to the largest value."""

    def _low_chance(self, name: str) -> float:
        return 0.0


def _extremes(configs: list) -> tuple[int, int]:
    values = [v for c in configs for v in c.values()]
    return values.count(1), values.count(100)


def test_subclasses_choose_to_which_extreme_parameters_move() -> None:
    space = _space(6)
    # The hook's default is a fair coin: both extremes, about equally often.
    low, high = _extremes(Boundary(space, seed=3, settings=design_settings(space)).ask(60))
    assert low >= 30 and high >= 30 and 0.5 < low / high < 2.0
    # Always the largest: the smallest value only where a random start drew it (1 in 100 values).
    low, high = _extremes(_AlwaysHigh(space, seed=3, settings=design_settings(space)).ask(60))
    assert high >= 60 and low <= 10
