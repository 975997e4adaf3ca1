"""The size ladder never saves a selector it measured slower than the declared defaults.

The README's shape: one site with insertion sort (fast on tiny inputs, quadratic) and merge sort (the
default, recursive through the site). Time is a virtual clock that the alternatives advance by the work
they do (n^2 for insertion sort, 8n per merge level), with a seeded jitter of up to 10% per run as the
stand-in for measurement noise, so every test is deterministic and checks behaviour, not wall time.
Before the fix the ladder carried only three candidates to the largest size, ranked one size down,
where a candidate running insertion sort above a cutoff between the two sizes ties with its parent;
for some seeds all three ran insertion sort on 4096 elements (about 40x the default) and that was saved.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from perftune.space import Config, Int, Levels, Space
from perftune.targets.choice import (
    AlgorithmSite,
    LadderSettings,
    _tune,
    increa,
    tune_sites,
)

README_SIZES = ([16, 256, 4096], [64, 512, 4096])


class Clock:
    """Virtual seconds: the sites' alternatives advance it by their work."""

    def __init__(self, seed: int) -> None:
        self.now = 0.0
        self.rng = np.random.default_rng(seed)

    def perf_counter(self) -> float:
        return self.now


def readme_sort(name: str, clock: Clock) -> tuple[AlgorithmSite, object]:
    """The README's site (insertion and merge, merge the default and recursive) on a virtual clock."""
    site = AlgorithmSite(name, default="merge", size=len)
    unit = 1e-8

    @site.alternative("insertion")
    def insertion_sort(xs):
        clock.now += unit * len(xs) ** 2
        return sorted(xs)

    @site.alternative("merge")
    def merge_sort(xs):
        n = len(xs)
        clock.now += unit * 8 * n
        if n <= 1:
            return list(xs)
        mid = n // 2
        left, right = site(xs[:mid]), site(xs[mid:])
        return sorted(left + right)

    def program(xs):
        start = clock.now
        out = site(xs)
        clock.now += (clock.now - start) * clock.rng.uniform(0.0, 0.1)  # measurement noise
        return out

    return site, program


def cost(site: AlgorithmSite, clock: Clock, cutoffs, choices, n: int) -> float:
    """Noise-free virtual time of the site with a selector on an input of size ``n``."""
    with site.use(cutoffs, choices):
        start = clock.now
        site(list(range(n)))
        return clock.now - start


def make_input(n: int, rng: np.random.Generator) -> list[int]:
    return rng.integers(0, 1000, size=n).tolist()


@pytest.fixture
def clock(monkeypatch):
    clk = Clock(seed=0)
    monkeypatch.setattr(_tune, "time", types.SimpleNamespace(perf_counter=clk.perf_counter))
    return clk


@pytest.mark.parametrize("sizes", README_SIZES, ids=["16-4096", "64-4096"])
@pytest.mark.parametrize("seed", range(6))
def test_saved_selector_is_never_slower_than_the_default_at_a_tuned_size(clock, seed, sizes):
    clock.rng = np.random.default_rng(1000 + seed)
    site, program = readme_sort(f"never-worse-{seed}-{sizes[0]}", clock)
    result = tune_sites(program, [site], make_input=make_input, sizes=sizes, seed=seed)
    cut, names = result.choices.sites[site.name]
    for n in sizes:
        tuned, default = cost(site, clock, cut, names, n), cost(site, clock, (), ("merge",), n)
        assert tuned <= default, f"saved {cut} {names}: {tuned:.3g} s at n={n} against {default:.3g} s"
    # The top level serves the largest sizes: with insertion sort quadratic, it is merge sort.
    assert names[-1] == "merge"


@pytest.mark.parametrize("seed", range(4))
def test_the_ladder_measures_the_default_and_the_previous_best_at_every_size(clock, seed):
    clock.rng = np.random.default_rng(seed)
    site, program = readme_sort(f"never-worse-rungs-{seed}", clock)
    default = Config({site.name: Levels((), ("merge",))})
    result = tune_sites(program, [site], make_input=make_input, sizes=[16, 256, 4096], seed=seed)
    ladder = result.ladder
    assert ladder.baselines == [default]
    assert all(r.baseline_value is not None for r in ladder.rungs)
    # The default reached the largest size and is among the final, ranked candidates.
    assert default in [c for c, _ in ladder.survivors]
    values = dict(ladder.survivors)
    assert ladder.survivors[0][1] <= values[default]
    # The result reports the comparison it was kept on.
    assert result.default_time_s is not None and result.time_s <= result.default_time_s
    assert all(tuned <= default_s for _, tuned, default_s in result.comparison)


def test_increa_carries_the_previous_best_and_the_baselines_to_every_rung():
    # A rugged objective: the leader at each size is not the leader one size up, and the default is
    # never near the top one size down but is what wins at the last size.
    space = Space({"x": Int(0, 100, default=0)})
    measured: list[tuple[int, int]] = []

    def objective(config, size):
        x = config["x"]
        measured.append((x, size))
        if size == 1000:
            return 0.0 if x == 0 else 1.0 + abs(x - 50)
        return float(abs(x - 50)) + (100.0 if x == 0 else 0.0)

    result = increa(objective, space, sizes=[10, 100, 1000], seed=3, baselines=[space.default()])
    assert {s for x, s in measured if x == 0} == {10, 100, 1000}
    assert result.best["x"] == 0 and result.baselines == [space.default()]
    previous_best = min((x for x, s in measured if s == 100), key=lambda x: abs(x - 50))
    assert (previous_best, 1000) in measured

    # Without baselines (the default: each costs a measurement at every size), none is carried.
    off = increa(objective, space, sizes=[10, 100, 1000], seed=3)
    assert off.baselines == [] and off.rungs[-1].baseline_value is None


def test_a_rung_without_room_for_a_new_candidate_says_so():
    # Four values, all explored at the smallest size: the leader there is the optimum, so the one slot
    # these settings give the next size goes to it, and nothing new is tried there.
    space = Space({"x": Int(0, 3, default=0)})
    result = increa(
        lambda c, size: float(abs(c["x"] - 2)),
        space,
        sizes=[10, 100],
        seed=0,
        settings=LadderSettings(population=4, generations=1, keep=0.1, min_keep=1, grow=2),
    )
    assert any("size 100" in note and "no candidate" in note for note in result.notes)


def test_a_selector_slower_than_the_default_somewhere_is_dropped(clock, monkeypatch):
    # "bulk" has a fixed cost: it wins at the largest size only. Whatever the ladder ranks first, a
    # selector running it at a smaller tuned size, where it loses to the default, must not be saved.
    site = AlgorithmSite("never-worse-drop", default="plain", size=len)

    @site.alternative("plain")
    def plain(xs):
        clock.now += 1e-6 * len(xs)
        return sorted(xs)

    @site.alternative("bulk")
    def bulk(xs):
        clock.now += 1e-6 * (2000 if len(xs) < 4096 else 2048)
        return sorted(xs)

    plain_only = Config({site.name: Levels((), ("plain",))})
    bulk_only = Config({site.name: Levels((), ("bulk",))})
    rows, problem = _tune._compare(bulk_only, plain_only, lambda c, n: _timed(site, c, n, clock),
                                   [16, 256, 4096], 3)
    assert problem is not None and "size 256" in problem and [r[0] for r in rows] == [4096, 256]

    real_increa = _tune.increa

    def ladder_ranking_bulk_first(*args, **kwargs):
        result = real_increa(*args, **kwargs)
        result.survivors.insert(0, (bulk_only, 2048e-6))
        return result

    monkeypatch.setattr(_tune, "increa", ladder_ranking_bulk_first)
    result = tune_sites(site, [site], make_input=make_input, sizes=[16, 256, 4096], seed=0)
    cut, names = result.choices.sites[site.name]
    for n in (16, 256, 4096):
        assert cost(site, clock, cut, names, n) <= cost(site, clock, (), ("plain",), n)
    assert (cut, names) != ((), ("bulk",))
    assert any("dropped" in note and "size 256" in note for note in result.notes)
    assert all(tuned <= default for _, tuned, default in result.comparison)


def _timed(site: AlgorithmSite, config, n: int, clock: Clock) -> float:
    with site.use(config[site.name]):
        start = clock.now
        site(list(range(n)))
        return clock.now - start


def test_tuning_before_any_tuned_choices_file_exists_warns_nothing(clock, tmp_path, monkeypatch):
    # The usual first step; pytest turns any warning into an error here (filterwarnings = error).
    from perftune.targets.choice import _site

    monkeypatch.setenv("PERFTUNE_CHOICES", str(tmp_path / "none-yet.json"))
    monkeypatch.setattr(_site, "_LOADED", None)  # a fresh process: the file is read on first use
    site, program = readme_sort("first-tuning", clock)
    result = tune_sites(program, [site], make_input=make_input, sizes=[16, 256], seed=0)
    assert site.name in result.choices.sites
