"""Space review fixes: sparse equality constraints sample and repair, a fallback enumeration for small
spaces that sampling misses, a bound on constraint work, NaN/inf options refused, huge Float ranges,
and Schedule counts that are cheap and exact for independent parts."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

import perftune
from perftune.errors import ExpressionError, SpaceError, UnsatisfiableError
from perftune.space import (
    Choice,
    Expression,
    Float,
    Int,
    Ordinal,
    PassSequence,
    Permutation,
    Schedule,
    Selector,
    Space,
    _permutation,
    _space,
)

# -- M5: sparse constraints -----------------------------------------------------------------------------


def _block() -> Space:
    return Space({"bx": Int(1, 1024), "by": Int(1, 1024)}, ["bx * by == 1024"])


def test_an_exact_block_size_samples_all_its_solutions() -> None:
    space = _block()
    found = Counter(tuple(c.values()) for c in space.sample(0, 300))
    assert all(bx * by == 1024 for bx, by in found)
    assert len(found) == 11  # every power-of-two split of 1024


@pytest.mark.parametrize(
    ("params", "constraint"),
    [
        ({"bx": Int(1, 4096), "by": Int(1, 4096)}, "bx * by == 1024"),
        ({"a": Int(0, 10**9), "b": Int(0, 10**9)}, "a == b"),
        ({"a": Int(0, 10**6), "b": Int(0, 10**6)}, "a + b == 10**6"),
        ({"a": Int(1, 10**6), "b": Int(1, 10**6)}, "a > 0 and a * b == 1024"),  # an equality in an `and`
    ],
)
def test_sparse_equalities_over_large_ranges_sample(params: dict, constraint: str) -> None:
    space = Space(params, [constraint])
    configs = space.sample(0, 20)
    assert all(space.is_valid(c) for c in configs)
    stats: dict[str, int] = {}
    assert next(space._search(np.random.default_rng(1), stats=stats), None) is not None
    assert stats["evals"] < _space.SAMPLE_BUDGET // 4  # solved, not stumbled upon


def test_tune_runs_on_an_exact_block_size() -> None:
    result = perftune.tune(lambda c: float(abs(c["bx"] - c["by"])), _block(), budget=12, seed=0)
    assert result.best is not None and result.best.value == 0.0
    assert all(t.config["bx"] * t.config["by"] == 1024 for t in result.trials)


def test_repair_changes_one_parameter_when_that_suffices() -> None:
    space = _block()
    assert space.repair({"bx": 32, "by": 30}, 0) == {"bx": 32, "by": 32}
    assert space.repair({"bx": 30, "by": 32}, 0) == {"bx": 32, "by": 32}
    wide = Space({"a": Int(0, 10**9), "b": Int(0, 10**9)}, ["a == b"])
    assert dict(wide.repair({"a": 5, "b": 7}, 0) or {}) in ({"a": 5, "b": 5}, {"a": 7, "b": 7})


def test_a_non_monotone_equality_still_samples_by_drawing() -> None:
    # a % 8 - 3 has the same sign at both ends of the range: bisection says nothing, draws find it.
    space = Space({"a": Int(0, 10**6), "b": Int(0, 10)}, ["a % 8 == 3", "b <= 10"])
    assert all(c["a"] % 8 == 3 for c in space.sample(0, 10))


def test_a_small_space_that_sampling_misses_is_enumerated_once() -> None:
    # An inequality window no equation solves: 490,000 combinations, 2 valid ones.
    space = Space({"a": Int(0, 700), "b": Int(0, 700)}, ["a * b >= 400000 and a * b <= 400003"])
    configs = space.sample(0, 40)
    assert {tuple(c.values()) for c in configs} == {(625, 640), (640, 625)}
    assert space.cardinality() == 2 and len(list(space.enumerate())) == 2


def test_the_fallback_enumeration_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_space, "FALLBACK_ENUMERATE_BUDGET", 300_000)
    # 360,000 combinations: more than the fallback may go through, so sampling's failure stands.
    big = Space({"a": Int(1, 600), "b": Int(1, 600)}, ["a * b >= 359000 and a * b <= 359001"])
    with pytest.raises(UnsatisfiableError) as info:
        big.sample(0)
    n_tries = int(str(info.value).split(" after ")[1].split()[0])
    assert n_tries <= _space.SAMPLE_BUDGET + 100
    # 250,000 combinations, none valid: enumerated within the bound, then refused.
    none = Space({"a": Int(1, 500), "b": Int(1, 500)}, ["a * b > 250000"])
    with pytest.raises(UnsatisfiableError) as info:
        none.sample(0)
    n_tries = int(str(info.value).split(" after ")[1].split()[0])
    assert 250_000 <= n_tries <= _space.SAMPLE_BUDGET + 300_000
    assert none.cardinality() == 0


# -- M4: constraint work --------------------------------------------------------------------------------


def test_the_constant_parts_of_an_expression_are_bounded_in_total() -> None:
    text = "x in (" + ",".join(["(0,)*10000"] * 200) + ")"
    with pytest.raises(ExpressionError, match="constant parts build more than 1000000 units") as info:
        Expression(text)
    assert "\n" not in str(info.value) and len(str(info.value)) < 500
    assert Expression("x in (" + ",".join(["(0,)*10000"] * 50) + ")").evaluate({"x": 1}) is False


def test_an_expression_knows_a_bound_of_its_work() -> None:
    sizes = {"x": None, "y": None, "s": 8}
    assert Expression("x * y >= 32 and x * y <= 1024", value_sizes=sizes).work < 50
    assert Expression("(x, y) in ((1, 2), (3, 4))", value_sizes=sizes).work < 50
    hostile = Expression("x not in (" + ",".join(["(x,)*10000"] * 30) + ")", value_sizes=sizes)
    assert hostile.work >= 30 * 10_000
    assert Expression("s * x == 'ab'", value_sizes=sizes).work >= 10_000  # a repetition by x: its cap


# -- L3, L4: non-finite options and huge ranges -------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "make", [lambda v: Choice([v, 1.0]), lambda v: Ordinal([1.0, v]), lambda v: Permutation([v, 1.0]),
             lambda v: Schedule([1.0, v]), lambda v: Selector([v, 2.0]),
             lambda v: PassSequence([v, "a"], max_length=3)],
)
def test_non_finite_options_are_refused(bad: float, make: object) -> None:
    with pytest.raises(SpaceError, match="is not a finite number"):
        make(bad)  # type: ignore[operator]


def test_a_float_range_wider_than_a_float_samples_the_whole_range() -> None:
    p = Float(-1e308, 1e308)
    assert p.decode([0.0]) == -1e308 and p.decode([1.0]) == 1e308 and p.decode([0.5]) == 0.0
    assert p.encode(0.0)[0] == 0.5 and p.encode(1e308)[0] == 1.0
    rng = np.random.default_rng(0)
    samples = {p.sample(rng) for _ in range(50)}
    assert len(samples) == 50 and all(p.contains(v) for v in samples)
    space = Space({"x": p})
    result = perftune.tune(lambda c: abs(c["x"]), space, budget=20, seed=0)
    assert len({t.config["x"] for t in result.trials}) == 20
    assert all(space.is_valid(t.config) for t in result.trials)


# -- L5: Schedule counts --------------------------------------------------------------------------------


def _pairs(n: int) -> Schedule:
    return Schedule(list(range(n)), after={i: [i - 1] for i in range(1, n, 2)})


@pytest.mark.parametrize("n", [30, 40, 60])
def test_a_schedule_of_independent_pairs_is_counted_exactly_and_lazily(n: int) -> None:
    space = Space({"order": _pairs(n)})
    assert space.params["order"]._count is None  # building the space counts nothing
    assert space.cardinality() == math.factorial(n) // 2 ** (n // 2)


def test_schedule_counts_match_brute_force_and_the_bound_is_an_upper_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(2, 7))
        after = {i: [j for j in range(i) if rng.random() < 0.35] for i in range(n)}
        brute = sum(1 for p in itertools.permutations(range(n)) if Schedule(list(range(n)), after=after)
                    .contains(p))
        assert Schedule(list(range(n)), after=after).cardinality() == brute
        with monkeypatch.context() as m:
            m.setattr(_permutation, "_MAX_COUNT_WORK", 0)  # no exact counting: the chain bound
            bound = Schedule(list(range(n)), after=after).cardinality()
        assert brute <= bound <= math.factorial(n)


def test_schedule_counting_is_bounded_in_work(monkeypatch: pytest.MonkeyPatch) -> None:
    # One connected part of 40 items (a ladder of two chains with rungs): far too many downsets to count.
    n = 40
    after = {i: [i - 2] + ([i - 1] if i % 4 == 1 else []) for i in range(2, n)}
    schedule = Schedule(list(range(n)), after=after)
    steps = []
    original = Schedule._count_part

    def counted(self: Schedule, part: list[int], budget: list[int]) -> int | None:
        before = budget[0]
        try:
            return original(self, part, budget)
        finally:
            steps.append(before - budget[0])

    monkeypatch.setattr(Schedule, "_count_part", counted)
    count = schedule.cardinality()
    assert sum(steps) <= _permutation._MAX_COUNT_WORK + n  # stopped at the bound...
    assert count <= math.factorial(n) // (math.factorial(20) ** 2)  # ...and bounded by its two chains
