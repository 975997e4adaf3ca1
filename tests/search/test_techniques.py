"""Behaviour of individual techniques beyond the conformance suite."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from perftune.search import (
    AUCBandit,
    BanditSettings,
    CoordinateDescent,
    ModelBased,
    ModelSettings,
    NelderMead,
    create,
)
from perftune.search._base import BoundedDict
from perftune.search._coordinate import multiplicative_neighbors
from perftune.space import Choice, Float, Int, Ordinal, Permutation, Pow2, Space
from perftune.testing.techniques import AskTellLoop
from perftune.trial import Status, Trial


def test_bounded_dict_forgets_the_oldest_and_pickles() -> None:
    d = BoundedDict(3)
    for k in range(5):
        d[k] = k * 10
    assert list(d) == [2, 3, 4]
    d[2] = 99  # re-inserting moves to the end
    d[5] = 50
    assert list(d) == [4, 2, 5]
    copy = pickle.loads(pickle.dumps(d))
    assert copy == d and copy.limit == 3 and list(copy) == [4, 2, 5]
    copy[6] = 60  # the rebuilt one keeps its order: it forgets the oldest, not an arbitrary entry
    assert list(copy) == [2, 5, 6] and copy[2] == 99
    assert copy.pop(5) == 50 and list(copy) == [2, 6]


def test_bounded_dict_stays_exact_over_many_evictions() -> None:
    limit = 64
    d = BoundedDict(limit)
    order: list[int] = []  # the reference: insertion order, a set moves to the end
    for i in range(5000):
        for key in (i, i // 3):
            if key in order:
                order.remove(key)
            order.append(key)
            del order[:-limit]
            d[key] = i
    assert list(d) == order and len(d) == limit


def test_multiplicative_neighbours_are_x2_and_half_when_legal() -> None:
    assert sorted(multiplicative_neighbors(Int(1, 100), 8)) == [4, 16]
    assert multiplicative_neighbors(Int(1, 10), 8) == [4]
    assert sorted(multiplicative_neighbors(Pow2(16, 1024), 64)) == [32, 128]
    assert sorted(multiplicative_neighbors(Ordinal([16, 32, 48, 64]), 32)) == [16, 64]
    assert multiplicative_neighbors(Float(0.0, 1.0), 0.4) == [0.8, 0.2]
    assert multiplicative_neighbors(Choice(["a", "b"]), "a") == []


def _block_time(config):  # type: ignore[no-untyped-def]
    return abs(math.log2(config["block"]) - 8) + abs(config["warps"] - 4) * 0.1


def test_coordinate_descent_doubles_its_way_to_the_best_block_size() -> None:
    space = Space({"block": Int(16, 4096), "warps": Int(1, 8)})
    tech = create("coordinate-descent", space, seed=0)
    assert isinstance(tech, CoordinateDescent)
    loop = AskTellLoop(tech, _block_time)
    loop.run(30)
    assert loop.best() == 0.0  # block 256 = 16 * 2**4, warps 4
    blocks = [t.config["block"] for t in loop.trials[:12]]
    assert {32, 64, 128, 256} <= set(blocks)  # x2 moves, not +1 steps


def _fails_above_half(config):  # type: ignore[no-untyped-def]
    if config["x"] > 50:
        raise RuntimeError("out of shared memory")
    return -config["x"] + 0.01 * config["y"]


def test_model_learns_to_avoid_a_failing_region() -> None:
    space = Space({"x": Int(0, 100), "y": Int(0, 20)})
    settings = ModelSettings(p_random=0.0)
    tech = create("model", space, seed=1, settings=settings)
    loop = AskTellLoop(tech, _fails_above_half)
    loop.run(80)
    late = loop.trials[40:]
    n_failed = sum(1 for t in late if t.status is Status.FAILED)
    assert n_failed <= 12, f"{n_failed} of the last 40 proposals fell in the failing region"
    assert loop.best() is not None and loop.best() <= -45


def test_model_training_set_and_refits_stay_bounded() -> None:
    space = Space({"x": Float(0, 1), "c": Choice(["a", "b", "c"])})
    settings = ModelSettings(window=40, n_best=8, refit_every_max=4, n_candidates=30, n_trees=4)
    tech = ModelBased(space, seed=2, settings=settings)
    rng = np.random.default_rng(0)
    for i, config in enumerate(space.sample(rng, 300)):
        tech.tell(
            [Trial(id=i, config=config, status=Status.OK, value=float(config["x"]), loss=float(config["x"]))]
        )
    made = tech._training_set()
    assert made is not None and len(made[0]) <= 48
    fits_before = tech.n_fits
    for i in range(40):
        (config,) = tech.ask(1)
        value = float(config["x"])
        tech.tell([Trial(id=1000 + i, config=config, status=Status.OK, value=value, loss=value)])
    assert 40 // 4 - 1 <= tech.n_fits - fits_before <= 40 // 4 + 1  # refit every 4th result, not every one


def test_model_scores_every_configuration_of_a_small_space() -> None:
    space = Space({"a": Int(0, 9), "b": Int(0, 9)}, constraints=["a + b <= 12"])
    tech = ModelBased(space, seed=3, settings=ModelSettings(p_random=0.0, min_points=4))
    loop = AskTellLoop(tech, _bowl_ab)
    loop.run(25)
    assert tech._enum is not None and len(tech._enum) == sum(1 for _ in space.enumerate())
    assert loop.best() == 0.0
    state = pickle.loads(pickle.dumps(tech))
    assert state._enum is None  # derived data is not checkpointed


def _bowl_ab(config):  # type: ignore[no-untyped-def]
    return float((config["a"] - 7) ** 2 + (config["b"] - 2) ** 2)


def test_model_features_for_permutations_and_inactive_parameters() -> None:
    space = Space(
        {
            "algo": Choice(["a", "b", "c"]),
            "tile": Int(1, 8, when="algo == 'b'"),
            "order": Permutation(["i", "j", "k"]),
        }
    )
    tech = ModelBased(space, seed=0)
    configs = space.sample(np.random.default_rng(1), 20)
    rows = tech._features.rows(configs)
    # one-hot algo, tile's encoding, order's ranks and pairwise orders, tile's power-of-two divisibility
    assert rows.shape == (20, 3 + 1 + 3 + 3 + 1)
    for config, row in zip(configs, rows, strict=True):
        assert row[:3].sum() == 1.0
        assert (row[3] == -1.0) == ("tile" not in config)


def test_nelder_mead_converges_on_a_smooth_valley() -> None:
    space = Space({"x": Float(-10, 10), "y": Float(-10, 10)})
    tech = create("nelder-mead", space, seed=4)
    assert isinstance(tech, NelderMead)
    loop = AskTellLoop(tech, _valley)
    loop.run(150)
    assert loop.best() is not None and loop.best() < 1e-3


def _valley(config):  # type: ignore[no-untyped-def]
    return (config["x"] - 3.0) ** 2 + 10 * (config["y"] - 0.5 * config["x"]) ** 2


@pytest.mark.parametrize("name", ["nelder-mead", "pattern-search", "coordinate-descent"])
def test_procedural_techniques_keep_proposing_when_results_never_come(name: str) -> None:
    space = Space({"x": Float(-1, 1), "y": Int(0, 50)})
    tech = create(name, space, seed=5)
    seen = []
    for _ in range(100):
        got = tech.ask(1)
        assert len(got) == 1
        seen.extend(got)
    assert len(set(seen)) == 100
    assert all(space.is_valid(c) for c in seen)
    assert tech.n_errors == 0


@pytest.mark.parametrize("name", ["nelder-mead", "pattern-search", "coordinate-descent"])
def test_in_an_ensemble_a_waiting_procedure_proposes_nothing_and_never_hangs(name: str) -> None:
    space = Space({"x": Float(-1, 1), "y": Int(0, 50)})
    tech = create(name, space, seed=5)
    tech.fill_while_waiting = False
    first = []
    while got := tech.ask(1):  # the first batch, then nothing while its results are out
        first.extend(got)
    assert first and all(c in tech._batch for c in first)
    waits = 1  # the empty ask that ended the first batch
    while not (got := tech.ask(1)):
        waits += 1
        assert waits <= tech.stall_asks + 1, "a batch whose results never come must be given up"
    assert tech.n_waits == waits >= tech.stall_asks
    assert got[0] not in first and space.is_valid(got[0])
    assert tech.n_errors == 0


def test_the_default_search_on_finite_spaces_lets_a_waiting_procedure_give_its_turn() -> None:
    finite = Space({"a": Int(0, 30), "b": Pow2(1, 256), "c": Choice(["p", "q", "r"])})
    on_reals = Space({"x": Float(-1, 1), "y": Float(-1, 1)})
    staged = create("default", finite, seed=3)
    cd = staged.bandit.techniques[staged.bandit.names.index("coordinate-descent")]
    assert cd.fill_while_waiting is False
    continuous = create("default", on_reals, seed=3)
    ps = continuous.bandit.techniques[continuous.bandit.names.index("pattern-search")]
    assert ps.fill_while_waiting is True

    def proposals_of_cd(fill: bool) -> tuple[int, int]:
        """Coordinate descent's proposals in 60 asks whose results never come, and its waits."""
        settings = BanditSettings(techniques=("coordinate-descent", "random"), fill_while_waiting=fill)
        bandit = AUCBandit(finite, seed=4, settings=settings)
        for _ in range(60):
            assert len(bandit.ask(1)) == 1  # the driver always gets a proposal
        member = bandit.techniques[0]
        return bandit.counts["coordinate-descent"], member.n_waits

    cd_fills, waits_fill = proposals_of_cd(True)
    cd_yields, waits_yield = proposals_of_cd(False)
    assert waits_fill == 0 and waits_yield > 0
    assert cd_yields < cd_fills  # no fillers: the turns went to the other member


def _tour_length(config):  # type: ignore[no-untyped-def]
    pts = {k: (math.cos(k * 2 * math.pi / 9), math.sin(k * 2 * math.pi / 9)) for k in range(9)}
    tour = config["tour"]
    return sum(math.dist(pts[tour[i]], pts[tour[(i + 1) % len(tour)]]) for i in range(len(tour)))


@pytest.mark.parametrize("name", ["ga", "annealing", "bandit"])
def test_permutation_search_beats_random_on_a_small_tour(name: str) -> None:
    space = Space({"tour": Permutation([0, 3, 6, 1, 4, 7, 2, 5, 8])})

    def best(tech_name: str, seed: int) -> float:
        loop = AskTellLoop(create(tech_name, space, seed=seed), _tour_length)
        loop.run(150)
        value = loop.best()
        assert value is not None
        return value

    mine = np.median([best(name, s) for s in (1, 2, 3)])
    ref = np.median([best("random", s) for s in (1, 2, 3)])
    assert mine < ref
