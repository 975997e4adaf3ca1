"""Bottom-up tuning of algorithm sites and the INCREA ladder."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.space import Float, Int, Levels, Space
from perftune.targets.choice import (
    ChoiceError,
    ChoicesFile,
    LadderSettings,
    increa,
    tune_sites,
    use_choices,
)


def test_tuned_sort_cutoffs_increase_and_round_trip(examples_path, tmp_path):
    import sort

    result = tune_sites(
        sort.hybrid_sort,
        [sort.sort_site],
        make_input=sort.random_input,
        sizes=[32, 128, 512],
        check=sort.is_sorted_copy,
        settings=LadderSettings(population=10, generations=2),
        seed=4,
    )
    cut, names = result.choices.sites["sort"]
    assert all(b > a for a, b in zip(cut, cut[1:], strict=False))
    assert len(names) == len(cut) + 1 and set(names) <= set(sort.sort_site.alternatives)
    assert result.ladder.rungs[0].n_measurements > result.ladder.rungs[-1].n_measurements
    path = result.save(tmp_path / "tuned.json")
    assert ChoicesFile.read(path).sites["sort"] == (cut, names)
    use_choices(path, strict=True)
    data = sort.random_input(3000, np.random.default_rng(0))
    assert sort.hybrid_sort(data) == sorted(data)
    assert sort.sort_site.source == "file" and sort.sort_site.levels == Levels(cut, names)


def _tune_small(sort, *, seed):
    """A small, checked tuning of the sort example's site at sizes 16 and 64."""
    return tune_sites(
        sort.hybrid_sort,
        [sort.sort_site],
        make_input=sort.random_input,
        sizes=[16, 64],
        check=sort.is_sorted_copy,
        settings=LadderSettings(population=8, generations=1),
        seed=seed,
    )


def test_wrong_leaf_is_never_chosen(examples_path):
    import sort

    @sort.sort_site.alternative("broken")
    def broken(xs):
        return list(xs)[::-1]

    result = _tune_small(sort, seed=0)
    assert "broken" not in result.choices.sites["sort"][1]
    assert any("wrong output" in reason for _, _, reason in result.ladder.failures)


def test_fast_wrong_leaf_falls_back_to_a_checked_seed(examples_path):
    # The attack: an alternative that is right (and fastest) only at the sizes the ladder measures,
    # so every survivor carries it; the final check must catch it and fall back to a checked seed.
    import sort

    @sort.sort_site.alternative("fastwrong")
    def fastwrong(xs):
        return sorted(xs) if len(xs) in (16, 64) else []

    result = _tune_small(sort, seed=1)
    names = result.choices.sites["sort"][1]
    assert "fastwrong" not in names and set(names) <= set(sort.sort_site.alternatives)
    assert any("fastwrong" in str(config) for config, _, _ in result.ladder.failures)
    assert result.time_s > 0


def test_tune_sites_bad_input(examples_path):
    import sort

    with pytest.raises(ChoiceError, match="no algorithm sites"):
        tune_sites(sort.hybrid_sort, [], make_input=sort.random_input, sizes=[8])
    with pytest.raises(ChoiceError, match="strictly increasing"):
        tune_sites(sort.hybrid_sort, [sort.sort_site], make_input=sort.random_input, sizes=[64, 8])


def _noisy(seed):
    rng = np.random.default_rng(seed)

    def objective(config, size):
        true = (config["x"] - 0.3) ** 2 + 0.1 * (config["k"] - 7) ** 2 / size + 1.0
        return true * (1 + 0.05 * rng.standard_normal())

    return objective


def test_increa_finds_the_optimum_on_a_noisy_objective():
    space = Space({"x": Float(0.0, 1.0), "k": Int(0, 20)})
    res = increa(
        _noisy(1),
        space,
        sizes=[1, 4, 16],
        seed=2,
        cost=lambda c, size, v: float(size),
        settings=LadderSettings(population=16, generations=3),
    )
    assert abs(res.best["x"] - 0.3) < 0.2
    assert res.cost_s == sum(r.cost_s for r in res.rungs)
    # Most of the measurements happen at the cheapest size.
    assert res.rungs[0].n_measurements > res.rungs[-1].n_measurements
    assert res.rungs[-1].cost_s / 16 == res.rungs[-1].n_measurements


def test_increa_survives_failing_configurations():
    def objective(config, size):
        if config["x"] > 0.5:
            raise RuntimeError("crash")
        return config["x"]

    res = increa(objective, Space({"x": Float(0.0, 1.0)}), sizes=[1, 2], seed=0)
    assert res.best["x"] <= 0.5 and res.failures
    with pytest.raises(ChoiceError, match="no configuration could be measured"):
        increa(lambda c, s: 1 / 0, Space({"x": Float(0.0, 1.0)}), sizes=[1, 2], seed=0)
    with pytest.raises(ChoiceError, match="sizes is empty"):
        increa(objective, Space({"x": Float(0.0, 1.0)}), sizes=[])


def test_increa_can_explore_with_a_perftune_technique():
    space = Space({"x": Float(0.0, 1.0), "k": Int(0, 20)})
    res = increa(
        _noisy(3),
        space,
        sizes=[1, 4, 16],
        seed=5,
        technique="bandit",
        cost=lambda c, size, v: float(size),
        settings=LadderSettings(population=12, generations=2),
    )
    assert space.is_valid(res.best)
    assert res.value < 1.2
    assert res.rungs[0].n_measurements >= 12 + 2 * 6


def test_simplify_levels_merges_equal_neighbours():
    from perftune.targets.choice import simplify_levels

    assert simplify_levels([2, 24, 254], ["merge", "insertion", "insertion", "radix"]) == (
        (2, 254),
        ("merge", "insertion", "radix"),
    )
    assert simplify_levels([5], ["quick", "quick"]) == ((), ("quick",))
