"""Fixes from the search-side review (/tmp/review_search/report.md): divisibility and membership
constraints on wide ranges, constraints that raise, True/1 options, integers wider than 64 bits, narrow
real ranges far from 0, and the messages about names and value types."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.errors import SpaceError, UnsatisfiableError
from perftune.space import Bool, Choice, Float, Int, LogFloat, Ordinal, PassSequence, Pow2, Selector, Space

# ---- item 1: a divisibility or membership constraint on a wide Int ----------------------------------


def test_divisibility_on_a_wide_int_samples_many_multiples() -> None:
    space = Space({"x": Int(1, 2**20)}, constraints=["x % 4096 == 0"])
    configs = space.sample(np.random.default_rng(0), 100)
    values = [c["x"] for c in configs]
    assert all(v % 4096 == 0 for v in values)
    assert len(set(values)) > 50, sorted(set(values))[:5]


@pytest.mark.parametrize("text", ["x % 1000 == 0", "0 == x % 1000", "x % 1000 == 7 and x > 5"])
def test_congruences_are_drawn_uniformly(text: str) -> None:
    space = Space({"x": Int(0, 10**6), "y": Int(0, 3)}, constraints=[text])
    values = [c["x"] for c in space.sample(np.random.default_rng(1), 200)]
    assert all(space.is_valid({"x": v, "y": 0}) for v in values)
    assert len(set(values)) > 150
    assert np.mean(values) == pytest.approx(5e5, rel=0.2)  # not piled up at an end of the range


def test_a_modulus_read_from_another_parameter() -> None:
    space = Space({"n": Int(1, 10**6), "block": Pow2(1, 256)}, constraints=["n % block == 0"])
    configs = space.sample(np.random.default_rng(2), 100)
    assert all(c["n"] % c["block"] == 0 for c in configs)
    assert len({c["n"] for c in configs}) > 90


def test_a_congruence_without_solution_in_range_is_unsatisfiable() -> None:
    space = Space({"x": Int(1, 10**7)}, constraints=["x % 8 == 9"])
    with pytest.raises(UnsatisfiableError):
        space.sample(np.random.default_rng(0), 1)


def test_membership_in_a_few_values_of_a_wide_int_samples_each_of_them() -> None:
    space = Space({"x": Int(0, 10**6)}, constraints=["x in (5, 900000, 123456)"])
    values = {c["x"] for c in space.sample(np.random.default_rng(0), 60)}
    assert values == {5, 900000, 123456}


def test_a_mutation_of_a_divisible_int_moves_to_another_multiple() -> None:
    space = Space({"n": Int(1, 2**20), "unroll": Int(1, 8)}, constraints=["n % 4096 == 0"])
    rng = np.random.default_rng(3)
    start = space.sample(rng, 1)[0]
    moved = {space.mutate(start, rng)["n"] for _ in range(40)}
    assert all(n % 4096 == 0 for n in moved)
    assert len(moved - {start["n"]}) >= 5


def test_repair_goes_to_a_multiple_next_to_the_value() -> None:
    space = Space({"n": Int(1, 2**20)}, constraints=["n % 4096 == 0"])
    fixed = space.repair({"n": 300_000}, np.random.default_rng(0))
    assert fixed is not None and fixed["n"] in (299_008, 303_104)


# ---- item 3: a callable constraint that raises ---------------------------------------------------------


def test_a_typo_in_a_callable_constraint_is_an_error_naming_the_key() -> None:
    space = Space({"block": Int(1, 64)}, constraints=[lambda c: c["blok"] <= 32])
    with pytest.raises(SpaceError, match=r"constraint .*lambda.*'blok'.*not a parameter.*mean 'block'"):
        space.sample(np.random.default_rng(0), 1)
    with pytest.raises(SpaceError, match="'blok'"):
        space.is_valid({"block": 3})


def test_a_callable_constraint_reading_an_inactive_parameter_holds() -> None:
    space = Space(
        {"vector": Bool(), "width": Int(2, 16, when="vector")},
        constraints=[lambda c: c["width"] <= 8],
    )
    assert space.is_valid({"vector": False})
    assert not space.is_valid({"vector": True, "width": 9})
    configs = space.sample(np.random.default_rng(0), 50)
    assert {c["vector"] for c in configs} == {False, True}


def test_an_exception_of_a_callable_constraint_is_named_when_nothing_is_valid() -> None:
    space = Space({"x": Int(0, 100)}, constraints=[lambda c: c["x"] + "1" > 3])
    with pytest.raises(UnsatisfiableError, match=r"constraint .*lambda.* raised TypeError: unsupported"):
        space.sample(np.random.default_rng(0), 1)


def test_an_exception_of_an_expression_is_named_when_it_holds_for_no_value() -> None:
    space = Space({"algo": Choice(["a", "b"]), "x": Int(0, 10)}, constraints=["algo > 5"])
    with pytest.raises(UnsatisfiableError, match=r"'algo > 5'.*raised TypeError"):
        space.sample(np.random.default_rng(0), 1)


# ---- item 4: True and 1 are one value in a configuration ------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Choice([1, True]),
        lambda: Choice([0, "a", False]),
        lambda: Ordinal([1.0, True]),
        lambda: PassSequence([1, True], max_length=2),
        lambda: Selector([0, False], max_levels=1, size_range=(1, 4)),
    ],
)
def test_a_bool_and_the_number_equal_to_it_cannot_both_be_options(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpaceError, match="cannot both be options"):
        make()


def test_bools_and_other_numbers_are_still_options() -> None:
    space = Space({"c": Choice(["a", True, 3, 2.5])})
    assert space.cardinality() == 4
    assert len(set(space.enumerate())) == 4


# ---- item 5: integers wider than int64 -----------------------------------------------------------------


def test_a_wide_int_samples_over_its_whole_range() -> None:
    p = Int(0, 10**30)
    rng = np.random.default_rng(0)
    values = [p.sample(rng) for _ in range(200)]
    assert all(p.contains(v) for v in values)
    assert len(set(values)) == 200
    assert max(values) > 10**29 and min(values) < 10**29
    assert Int(-(10**25), 10**25).sample(rng) != Int(-(10**25), 10**25).sample(rng)


def test_a_space_with_a_conditional_wide_int_mutates() -> None:
    space = Space({"a": Bool(), "y": Int(0, 10**30, when="a")})
    rng = np.random.default_rng(1)
    config = space.sample(rng, 1)[0]
    for _ in range(30):
        config = space.mutate(config, rng)
        assert space.is_valid(config)


# ---- item 10: a narrow real range far from 0 -----------------------------------------------------------


@pytest.mark.parametrize("p", [Float(1e9, 1e9 + 1e-3), LogFloat(1e9, 1e9 + 1e-3), Float(-5e12, -5e12 + 1.0)])
def test_a_narrow_real_range_far_from_zero_keeps_many_values(p) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    values = [p.sample(rng) for _ in range(200)]
    assert all(p.contains(v) for v in values)
    assert len(set(values)) > 100


def test_ordinary_real_ranges_still_come_back_tidy() -> None:
    p = Float(0.0, 1.0)
    assert p.decode(p.encode(0.0001)) == 0.0001
    q = LogFloat(1e-4, 1e-1)
    assert q.decode(q.encode(0.003)) == 0.003


# ---- item 12: names no expression can read, and the type of a value -------------------------------------


def test_a_constraint_on_a_name_that_is_no_identifier_says_why() -> None:
    with pytest.raises(SpaceError, match=r"'my-param' is not a Python identifier"):
        Space({"my-param": Int(0, 3)}, constraints=["my-param > 1"])
    with pytest.raises(SpaceError, match=r"'my-param' is not a Python identifier"):
        Space({"my-param": Int(0, 3), "b": Int(0, 3, when="my-param > 1")})
    # Such a name is fine where no expression reads it (the adapt module names sites "doc-order").
    assert Space({"my-param": Int(0, 3)}).is_valid({"my-param": 2})


def test_a_value_of_the_wrong_type_is_reported_as_such() -> None:
    space = Space({"x": Int(0, 50), "f": Float(0.0, 1.0)})
    assert space.why_invalid({"x": 3.0, "f": 0.5}) == "parameter 'x': must be an integer, got 3.0"
    assert space.why_invalid({"x": True, "f": 0.5}) == "parameter 'x': must be an integer, got True"
    assert space.why_invalid({"x": 3, "f": "a"}) == "parameter 'f': must be a number, got 'a'"
    assert space.why_invalid({"x": 51, "f": 0.5}) == "parameter 'x': 51 is outside the domain [0, 50]"
