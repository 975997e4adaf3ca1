"""Permutations, schedules and selectors: moves, crossovers, precedence, levels."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from perftune.errors import SpaceError
from perftune.space import Levels, Permutation, Schedule, Selector

ITEMS = list("abcdefgh")


@pytest.mark.parametrize("method", ["pmx", "ox", "cx"])
def test_crossovers_give_permutations(method: str) -> None:
    p = Permutation(ITEMS, crossover=method)
    rng = np.random.default_rng(0)
    for _ in range(300):
        a, b = p.sample(rng), p.sample(rng)
        child = getattr(p, method)(a, b, rng)
        assert sorted(child) == ITEMS
        assert p.crossover(a, b, rng) is not None
        assert p.contains(p.crossover(a, b, rng))


def test_cx_keeps_every_position_from_a_parent() -> None:
    p = Permutation(ITEMS)
    rng = np.random.default_rng(1)
    for _ in range(100):
        a, b = p.sample(rng), p.sample(rng)
        child = p.cx(a, b, rng)
        assert all(c in (x, y) for c, x, y in zip(child, a, b, strict=True))


def test_ox_keeps_a_segment_of_the_first_parent() -> None:
    p = Permutation(ITEMS)
    rng = np.random.default_rng(2)
    a, b = tuple(ITEMS), tuple(reversed(ITEMS))
    for _ in range(50):
        child = p.ox(a, b, rng)
        same = [i for i in range(len(ITEMS)) if child[i] == a[i]]
        assert len(same) >= 2  # the copied segment has at least two items


def test_pmx_of_identical_parents_is_the_parent() -> None:
    p = Permutation(ITEMS)
    rng = np.random.default_rng(3)
    a = p.sample(rng)
    assert all(p.pmx(a, a, rng) == a for _ in range(20))


@pytest.mark.parametrize("move", ["swap", "insert", "invert"])
def test_moves_change_the_order(move: str) -> None:
    p = Permutation(ITEMS)
    rng = np.random.default_rng(4)
    a = tuple(ITEMS)
    for _ in range(50):
        b = getattr(p, move)(a, rng)
        assert sorted(b) == ITEMS and b != a


def test_permutation_encoding_is_random_keys() -> None:
    p = Permutation(ITEMS)
    rng = np.random.default_rng(5)
    for _ in range(50):
        v = p.sample(rng)
        assert p.decode(p.encode(v)) == v
    # Lower key first.
    assert p.decode([0.9, 0.1, 0.5, 0.2, 0.3, 0.4, 0.6, 0.7]) == ("b", "d", "e", "f", "c", "g", "h", "a")


def test_permutation_cardinality_and_values() -> None:
    assert Permutation(list("abcd")).cardinality() == 24
    assert len(Permutation(list("abcdefg")).values() or []) == 5040
    assert Permutation(ITEMS).values() is None  # 40320 > 10000


def test_permutation_contains() -> None:
    p = Permutation(["a", "b", "c"])
    assert p.contains(("c", "a", "b")) and p.contains(["c", "a", "b"])
    assert not p.contains(("a", "b")) and not p.contains(("a", "a", "b")) and not p.contains("abc")
    assert not p.contains(("a", "b", "z")) and not p.contains((["a"], "b", "c"))


SCHED = Schedule(
    ["load", "unpack", "compute", "reduce", "store", "log"],
    after={"unpack": ["load"], "compute": ["unpack"], "reduce": ["compute"], "store": ["reduce", "unpack"]},
)


def _respects(order: tuple[str, ...]) -> bool:
    pos = {x: i for i, x in enumerate(order)}
    return all(pos[p] < pos[i] for i, ps in SCHED.to_dict()["after"].items() for p in ps)


def test_schedule_operators_keep_precedence() -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        a, b = SCHED.sample(rng), SCHED.sample(rng)
        for v in (
            a,
            SCHED.swap(a, rng),
            SCHED.insert(a, rng),
            SCHED.invert(a, rng),
            SCHED.mutate(a, rng),
            SCHED.pmx(a, b, rng),
            SCHED.ox(a, b, rng),
            SCHED.cx(a, b, rng),
            SCHED.decode(rng.random(SCHED.n_dims)),
            *SCHED.neighbors(a),
        ):
            assert SCHED.contains(v) and _respects(v), v


def test_schedule_counts_linear_extensions() -> None:
    brute = [p for p in itertools.permutations(SCHED.items) if _respects(p)]
    assert SCHED.cardinality() == len(brute) == 6
    assert sorted(SCHED.values() or []) == sorted(brute)
    assert Schedule(list("abcd")).cardinality() == 24
    chain = Schedule(list("abcdefghij"), after={"b": "a", "c": "b"})
    assert chain.cardinality() == math.factorial(10) // 6


def test_schedule_default_is_a_topological_order() -> None:
    s = Schedule(["c", "b", "a"], after={"c": ["a"], "b": ["a"]})
    assert s.default_value() == ("a", "c", "b")
    assert s.contains(s.default_value())


def test_schedule_mutation_explores_all_orders() -> None:
    rng = np.random.default_rng(7)
    seen = {SCHED.default_value()}
    v = SCHED.default_value()
    for _ in range(500):
        v = SCHED.mutate(v, rng)
        seen.add(v)
    assert len(seen) == 6


def test_schedule_with_integer_items_round_trips_through_json() -> None:
    import json

    from perftune.space import parameter_from_dict

    s = Schedule([1, 2, 3], after={3: [1]})
    d = json.loads(json.dumps(s.to_dict()))
    assert parameter_from_dict(d) == s


# -- selector -------------------------------------------------------------------------------------


def test_levels_choose() -> None:
    lv = Levels((10, 100), ("a", "b", "c"))
    assert [lv.choose(n) for n in (0, 9, 10, 99, 100, 10**9)] == ["a", "a", "b", "b", "c", "c"]
    assert lv.n_levels == 3
    assert hash(lv) == hash(Levels([10, 100], ["a", "b", "c"]))
    assert Levels.from_json(lv.to_json()) == lv


@pytest.mark.parametrize(
    ("cutoffs", "choices", "message"),
    [
        ((10, 10), ("a", "b", "c"), "strictly increasing"),
        ((10,), ("a",), "one more choice"),
        ((1.5,), ("a", "b"), "integer"),
    ],
)
def test_bad_levels(cutoffs: tuple, choices: tuple, message: str) -> None:
    with pytest.raises(SpaceError, match=message):
        Levels(cutoffs, choices)


def test_selector_samples_cover_levels_and_log_cutoffs() -> None:
    sel = Selector(["a", "b", "c"], max_levels=4, size_range=(1, 1_000_000))
    rng = np.random.default_rng(8)
    samples = [sel.sample(rng) for _ in range(2000)]
    assert {s.n_levels for s in samples} == {1, 2, 3, 4}
    cuts = np.array([c for s in samples for c in s.cutoffs])
    # log-uniform: about half the cutoffs below sqrt(1e6) = 1000
    assert 0.4 < np.mean(cuts < 1000) < 0.6
    assert all(sel.contains(s) for s in samples)


def test_selector_encoding_round_trip_and_dims() -> None:
    sel = Selector(["a", "b", "c"], max_levels=3, size_range=(4, 4096))
    assert sel.n_dims == 6
    rng = np.random.default_rng(9)
    for _ in range(300):
        v = sel.sample(rng)
        assert sel.decode(sel.encode(v)) == v
    for v in [Levels((), ("c",)), Levels((4, 5), ("a", "a", "b")), Levels((4096,), ("b", "a"))]:
        assert sel.decode(sel.encode(v)) == v


def test_selector_contains_and_cardinality() -> None:
    sel = Selector(["a", "b"], max_levels=2, size_range=(1, 10))
    assert sel.cardinality() == 2 + 10 * 4
    assert len(sel.values() or []) == 42
    assert not sel.contains(Levels((11,), ("a", "b")))
    assert not sel.contains(Levels((1, 2), ("a", "b", "a")))
    assert not sel.contains(Levels((), ("z",)))
    assert not sel.contains(("a",))


def test_selector_neighbors() -> None:
    sel = Selector(["a", "b"], max_levels=3, size_range=(1, 1024))
    v = Levels((16,), ("a", "b"))
    ns = sel.neighbors(v)
    assert Levels((8,), ("a", "b")) in ns and Levels((32,), ("a", "b")) in ns
    assert Levels((16,), ("b", "b")) in ns and Levels((), ("a",)) in ns and Levels((), ("b",)) in ns
    assert Levels((16, 128), ("a", "b", "a")) in ns
    assert all(sel.contains(n) for n in ns)


def test_selector_crossover_takes_small_sizes_from_a() -> None:
    sel = Selector(["a", "b", "c"], max_levels=4, size_range=(1, 10**6))
    rng = np.random.default_rng(10)
    a, b = Levels((), ("a",)), Levels((), ("b",))
    for _ in range(50):
        child = sel.crossover(a, b, rng)
        assert child.choices == ("a", "b") and sel.contains(child)
