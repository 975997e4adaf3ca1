"""The default search's initial design moves about as many parameters to an extreme on any space."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from perftune.errors import PerftuneError
from perftune.search import StagedBandit
from perftune.search._boundary import (
    CORNER_SETTINGS,
    DESIGN_MOVES,
    DESIGN_SETTINGS,
    Boundary,
    BoundarySettings,
    design_settings,
)
from perftune.space import Choice, Config, Int, Space
from perftune.testing.techniques import AskTellLoop, _loop_copy
from perftune.trial import Status, Trial


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


# ---------------------------------------------------------------- the design leans to what its results favour
# (decision 6 of benchmarks/results/cv_notes.md)


def _low_p0_is_better(config: Config) -> float:
    """Lower ``p0`` is better; the other parameters barely matter (a module-level function: picklable)."""
    return float(config["p0"]) + 0.01 * sum(v for k, v in config.items() if k != "p0" and isinstance(v, int))


def _told(design: Boundary, configs: list[Config]) -> None:
    trials = []
    for i, config in enumerate(configs):
        value = _low_p0_is_better(config)
        trials.append(Trial(id=i, config=config, status=Status.OK, value=value, loss=value))
    design.tell(trials)


def _plain(space: Space) -> BoundarySettings:
    return dataclasses.replace(design_settings(space), lean=0.0, boost=0.0)


def _proposals(design: Boundary, n: int) -> list[Config]:
    """``n`` proposals asked one at a time (an ask may answer "nothing now": the best configuration with
    no parameter moved)."""
    out: list[Config] = []
    for _ in range(20 * n):
        out += design.ask(1)
        if len(out) == n:
            break
    assert len(out) == n
    return out


def _p0_extremes(configs: list[Config]) -> tuple[int, int]:
    return sum(c["p0"] == 1 for c in configs), sum(c["p0"] == 100 for c in configs)


def test_the_default_design_leans_and_the_bandits_corners_do_not() -> None:
    tech = StagedBandit(_space(6), seed=1)
    assert tech.design.settings.lean == 0.35 and tech.design.settings.boost == 0.5
    assert tech.design.settings.learns
    assert not CORNER_SETTINGS.learns and not BoundarySettings().learns


def test_the_lean_moves_extremes_to_the_side_the_results_favour() -> None:
    space = _space(4)
    start = space.sample(np.random.default_rng(1), 12)
    design = Boundary(space, seed=2, settings=design_settings(space))
    _told(design, start)
    design._now = design._trends()
    assert design._now["p0"] > 0.5  # larger p0 ranks worse
    assert design._low_chance("p0") == pytest.approx(0.85)  # the most it leans
    assert design._move_chance("p0", 0.35) > 0.35  # and it moves more often
    low, high = _p0_extremes(_proposals(design, 60))
    # The same start without the lean: both extremes about equally often.
    plain = Boundary(space, seed=2, settings=_plain(space))
    _told(plain, start)
    plain_low, plain_high = _p0_extremes(_proposals(plain, 60))
    assert low > 2 * high and low > plain_low
    assert 0.5 < plain_low / max(1, plain_high) < 2.0


def test_the_lean_waits_for_enough_results() -> None:
    space = _space(4)
    start = space.sample(np.random.default_rng(0), 5)  # one short of trend_after
    a = Boundary(space, seed=5, settings=design_settings(space))
    b = Boundary(space, seed=5, settings=_plain(space))
    _told(a, start)
    _told(b, start)
    assert a.ask(5) == b.ask(5)  # no trend yet: the same draws as the plain design


def test_failures_rank_last_for_the_lean() -> None:
    space = _space(3)
    design = Boundary(space, seed=3, settings=design_settings(space))
    trials = []
    for i, config in enumerate(space.sample(np.random.default_rng(4), 16)):
        if config["p0"] > 50:  # large p0 fails; among the others, p0 does not matter
            trials.append(Trial(id=i, config=config, status=Status.FAILED, reason="launch failed"))
        else:
            value = 1.0 + 0.01 * config["p1"]
            trials.append(Trial(id=i, config=config, status=Status.OK, value=value, loss=value))
    design.tell(trials)
    assert design._trends()["p0"] > 0.5


def test_settings_out_of_range_are_one_line_errors() -> None:
    for bad in ({"lean": 0.7}, {"lean": -0.1}, {"boost": -1.0}, {"trend_after": 1}):
        with pytest.raises(PerftuneError, match="BoundarySettings") as info:
            BoundarySettings(**bad)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)


def test_the_history_it_learns_from_is_bounded() -> None:
    space = _space(2)
    design = Boundary(space, seed=1, settings=design_settings(space))
    _told(design, space.sample(np.random.default_rng(2), Boundary.history_limit + 40))
    assert len(design._hist) == Boundary.history_limit


def test_a_checkpoint_in_the_middle_of_the_design_continues_identically() -> None:
    from perftune.drive._checkpoint import decode, encode

    space = _space(5)
    tech = StagedBandit(space, seed=11)
    loop = AskTellLoop(tech, _low_p0_is_better, lag=1)
    loop.run(10)  # 9 results told: the lean is on, the design not finished
    assert tech.design._now
    blob = encode({"technique": tech.state_dict()}, space)
    assert json.loads(blob)["format"] == "perftune-checkpoint"
    copy = _loop_copy(loop, StagedBandit(space, seed=11))
    copy.technique.load_state_dict(decode(blob, copy.space)["technique"])
    loop.run(40)
    copy.run(40)
    assert copy.proposals == loop.proposals
    assert copy.technique.n_errors == 0 and tech.n_errors == 0


# ------------------------------------------------------- invalid design points move to the nearest valid one
# (decision 7 of benchmarks/results/cv_notes.md)


def _constrained(n: int = 4) -> Space:
    # The sum of the ordered parameters is bounded: most corners with several parameters at their largest
    # value are invalid, as large tiles times large vector widths are on a GEMM space.
    return Space({f"p{i}": Int(1, 8) for i in range(n)} | {"c": Choice(["x", "y"])},
                 [f"{' + '.join(f'p{i}' for i in range(n))} <= 14"])


def _with_trends(space: Space, seed: int, settings: BoundarySettings) -> Boundary:
    design = Boundary(space, seed=seed, settings=settings)
    _told(design, space.sample(np.random.default_rng(seed), 12))
    design._now = design._trends()
    return design


def _distance(space: Space, a: Config, b: Config) -> int:
    return sum(abs(a[n] - b[n]) if n != "c" else int(a[n] != b[n]) for n in space.params)


def test_the_default_design_repairs_to_the_nearest_valid_configuration() -> None:
    assert DESIGN_SETTINGS.nearest_repair and not BoundarySettings().nearest_repair
    assert not CORNER_SETTINGS.nearest_repair
    space = _constrained()
    design = _with_trends(space, 3, design_settings(space))
    corner = Config({"p0": 8, "p1": 8, "p2": 8, "p3": 8, "c": "y"})
    assert not space.is_valid(corner)
    near = design._repaired(corner, ["p0", "p1", "p2", "p3"])
    assert space.is_valid(near)
    every = list(space.enumerate())
    assert _distance(space, corner, near) == min(_distance(space, corner, c) for c in every)
    # Among the nearest, the side the trends favour: larger p0 ranks worse, so p0 gives way first.
    assert design._now["p0"] > 0.5
    ties = [c for c in every if _distance(space, corner, c) == _distance(space, corner, near)]
    assert near["p0"] == min(c["p0"] for c in ties)
    assert near["c"] == "y"  # an unordered parameter is kept where it can be
    assert design._repaired(near, ["p0"]) is near  # a valid configuration is left alone


def test_the_nearest_repair_waits_for_trends_and_can_be_switched_off() -> None:
    space = _constrained()
    corner = Config({"p0": 8, "p1": 8, "p2": 8, "p3": 8, "c": "x"})
    early = Boundary(space, seed=1, settings=design_settings(space))
    moved = ["p0", "p1", "p2", "p3"]
    assert early._repaired(corner, moved) is corner  # no trend yet: the usual repair of ask()
    off = _with_trends(space, 1, dataclasses.replace(design_settings(space), nearest_repair=False))
    assert off._repaired(corner, ["p0", "p1", "p2", "p3"]) is corner
    # A space too large to enumerate within the limit keeps the usual repair as well.
    small_limit = dataclasses.replace(design_settings(space), enumerate_limit=10)
    assert _with_trends(space, 1, small_limit)._repaired(corner, ["p0", "p1", "p2", "p3"]) is corner
    with pytest.raises(PerftuneError, match="BoundarySettings.enumerate_limit"):
        BoundarySettings(enumerate_limit=0)


def test_design_proposals_on_a_constrained_space_are_valid() -> None:
    space = _constrained()
    design = _with_trends(space, 4, design_settings(space))
    proposals = _proposals(design, 40)
    assert all(space.is_valid(c) for c in proposals)
    assert design.n_errors == 0  # a failing repair would fall back to random proposals silently
    assert design._valid_index is not None and len(design._valid_index[0]) == len(list(space.enumerate()))


def test_a_checkpoint_after_a_nearest_repair_continues_identically() -> None:
    from perftune.drive._checkpoint import decode, encode

    space = _constrained(5)
    tech = StagedBandit(space, seed=2)
    loop = AskTellLoop(tech, _low_p0_is_better, lag=0)
    loop.run(12)
    assert tech.design._valid_index is not None  # the nearest repair has run
    blob = encode({"technique": tech.state_dict()}, space)
    copy = _loop_copy(loop, StagedBandit(space, seed=2))
    copy.technique.load_state_dict(decode(blob, copy.space)["technique"])
    assert copy.technique.design._valid_index is None  # rebuilt from the space when needed
    loop.run(30)
    copy.run(30)
    assert copy.proposals == loop.proposals
    assert copy.technique.n_errors == 0 and tech.n_errors == 0
