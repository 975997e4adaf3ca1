"""Scalar parameter types: domains, operators, encodings, serialization and bad definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perftune.errors import SpaceError
from perftune.space import (
    Bool,
    Choice,
    Float,
    Int,
    Levels,
    LogFloat,
    LogInt,
    Ordinal,
    Param,
    Permutation,
    Pow2,
    Schedule,
    Selector,
    parameter_from_dict,
)

ALL_PARAMS: list[Param] = [
    Int(-3, 7),
    Int(5, 5),
    Float(-1.0, 2.0),
    Float(0.5, 0.5),
    LogInt(1, 5000),
    LogFloat(1e-5, 10.0),
    Pow2(1, 1024),
    Pow2(64, 64),
    Choice(["a", "b", 3, 2.5, True]),
    Choice(["only"]),
    Ordinal([1, 2, 4, 8, 16]),
    Bool(),
    Permutation(["a", "b", "c", "d", "e"]),
    Permutation([7]),
    Schedule(["load", "a", "b", "store"], after={"store": ["a", "b"], "a": ["load"], "b": ["load"]}),
    Selector(["insertion", "merge", "radix"], max_levels=3, size_range=(2, 100_000)),
    Selector(["x"], max_levels=1, size_range=(1, 1)),
]


def _ids(p: Param) -> str:
    return repr(p)[:40]


@pytest.mark.parametrize("p", ALL_PARAMS, ids=_ids)
def test_operators_return_legal_values(p: Param) -> None:
    rng = np.random.default_rng(0)
    assert p.contains(p.default_value())
    for _ in range(200):
        v = p.sample(rng)
        assert p.contains(v), v
        w = p.mutate(v, rng, scale=float(rng.choice([0.01, 0.1, 0.5])))
        assert p.contains(w), (v, w)
        x = p.crossover(v, w, rng)
        assert p.contains(x), (v, w, x)
        for n in p.neighbors(v):
            assert p.contains(n) and n != v, (v, n)
        enc = p.encode(v)
        assert enc.shape == (p.n_dims,)
        assert np.all((enc >= 0) & (enc <= 1))
        assert p.contains(p.decode(rng.random(p.n_dims)))


@pytest.mark.parametrize("p", ALL_PARAMS, ids=_ids)
def test_decode_clips_any_vector(p: Param) -> None:
    for fill in (-5.0, 0.0, 1.0, 7.0, float("nan")):
        assert p.contains(p.decode(np.full(p.n_dims, fill)))


@pytest.mark.parametrize("p", ALL_PARAMS, ids=_ids)
def test_mutate_moves_when_there_is_room(p: Param) -> None:
    rng = np.random.default_rng(1)
    n = p.cardinality()
    v = p.default_value()
    if n == 1:
        assert p.mutate(v, rng) == v
        assert p.neighbors(v) == []
    else:
        assert sum(p.mutate(v, rng) != v for _ in range(50)) >= 45


@pytest.mark.parametrize("p", ALL_PARAMS, ids=_ids)
def test_dict_and_json_round_trip(p: Param) -> None:
    q = parameter_from_dict(p.to_dict())
    assert q == p and type(q) is type(p)
    rng = np.random.default_rng(2)
    for _ in range(20):
        v = p.sample(rng)
        assert p.from_json_value(p.to_json_value(v)) == v


@pytest.mark.parametrize("p", ALL_PARAMS, ids=_ids)
def test_values_agree_with_cardinality(p: Param) -> None:
    n = p.cardinality()
    values = p.values()
    if n is None or n > 10_000:
        assert values is None
    else:
        assert values is not None and len(values) == n
        assert len({repr(v) for v in values}) == n
        assert all(p.contains(v) for v in values)


def test_int_encoding_and_neighbors() -> None:
    p = Int(1, 10)
    assert [p.decode(p.encode(v)) for v in range(1, 11)] == list(range(1, 11))
    assert p.neighbors(1) == [2] and p.neighbors(5) == [4, 6]
    assert p.values() == list(range(1, 11))
    assert not p.contains(0) and not p.contains(11) and not p.contains(2.5) and not p.contains(True)
    assert p.contains(np.int64(3))
    assert p.nearest(12.7) == 10 and p.nearest("x") == 1


def test_pow2_neighbors_are_multiplicative() -> None:
    p = Pow2(16, 1024)
    assert p.neighbors(16) == [32]
    assert p.neighbors(64) == [32, 128]
    assert p.values() == [16, 32, 64, 128, 256, 512, 1024]
    assert not p.contains(48)
    assert p.nearest(100) == 128


def test_log_int_samples_are_log_uniform() -> None:
    p = LogInt(1, 10_000)
    rng = np.random.default_rng(3)
    xs = np.array([p.sample(rng) for _ in range(4000)])
    # Each decade gets about a quarter of the samples.
    counts = [np.sum((xs >= 10**k) & (xs < 10 ** (k + 1))) for k in range(4)]
    assert all(700 < c < 1300 for c in counts), counts
    assert all(p.decode(p.encode(v)) == v for v in [1, 2, 3, 99, 100, 101, 9999, 10_000])


def test_log_float_round_trip_is_close() -> None:
    p = LogFloat(1e-6, 1e3)
    for v in (1e-6, 3.3e-4, 1.0, 999.9, 1e3):
        assert math.isclose(p.decode(p.encode(v)), v, rel_tol=1e-9)
    assert LogFloat(2.0, 2.0).sample(np.random.default_rng()) == 2.0


def test_choice_keeps_bool_and_int_apart() -> None:
    # True and 1 cannot both be options (a Config holds True == 1): test_space_review_fixes2.py.
    p = Choice([2, True, "1"])
    assert [p.index(v) for v in (2, True, "1")] == [0, 1, 2]
    assert p.contains(2.0)
    assert not p.contains(1) and not p.contains(3) and not p.contains([1])
    assert p.neighbors(True) == [2, "1"]
    assert [p.decode(p.encode(v)) for v in p.options] == list(p.options)


def test_ordinal_neighbors_are_adjacent() -> None:
    p = Ordinal(["O0", "O1", "O2", "O3"])
    assert p.neighbors("O0") == ["O1"]
    assert p.neighbors("O2") == ["O1", "O3"]


def test_bool() -> None:
    p = Bool()
    assert p.default_value() is False
    assert Bool(default=True).default_value() is True
    assert not p.contains(1) and p.contains(True)
    assert p.to_dict() == {"type": "bool"}


def test_defaults_and_when_survive_to_dict() -> None:
    p = Int(1, 8, default=4, when="flag and mode == 'x'")
    d = p.to_dict()
    assert d == {"type": "int", "lo": 1, "hi": 8, "default": 4, "when": "flag and mode == 'x'"}
    q = parameter_from_dict(d)
    assert q.default == 4 and q.when is not None and q.when.text == "flag and mode == 'x'"


def test_from_dict_accepts_min_max_aliases() -> None:
    assert parameter_from_dict({"type": "pow2", "min": 2, "max": 64}) == Pow2(2, 64)
    assert parameter_from_dict({"type": "Choice", "options": ["a"]}) == Choice(["a"])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Int(5, 1), "empty range"),
        (lambda: Float(2.0, 1.0), "empty range"),
        (lambda: Float(0.0, float("inf")), "finite"),
        (lambda: Int(1.5, 3), "integer"),
        (lambda: LogInt(0, 10), ">= 1"),
        (lambda: LogFloat(0.0, 1.0), "> 0"),
        (lambda: Pow2(3, 64), "lo=3 is not a power of two"),
        (lambda: Pow2(4, 96), "hi=96 is not a power of two"),
        (lambda: Choice([]), "empty list of options"),
        (lambda: Choice("abc"), "must be a list"),
        (lambda: Choice(["a", "a"]), "duplicate option 'a'"),
        (lambda: Choice([[1, 2]]), "must be a str"),
        (lambda: Ordinal([]), "empty list"),
        (lambda: Int(1, 8, default=9), "default 9 is outside the domain [1, 8]"),
        (lambda: Pow2(1, 8, default=3), "default 3 is outside"),
        (lambda: Choice(["a", "b"], default="c"), "default 'c' is outside"),
        (lambda: Bool(default=1), "default 1 is outside"),
        (lambda: Permutation([]), "empty list of items"),
        (lambda: Permutation(["a", "b", "a"]), "duplicate item 'a'"),
        (lambda: Permutation(["a", "b"], default=("a",)), "default"),
        (lambda: Permutation(["a", "b"], crossover="xx"), "unknown crossover"),
        (lambda: Schedule(["a", "b"], after={"c": ["a"]}), "unknown item 'c'"),
        (lambda: Schedule(["a", "b"], after={"a": ["z"]}), "unknown item 'z'"),
        (lambda: Schedule(["a", "b"], after={"a": ["a"]}), "after itself"),
        (lambda: Schedule(["a", "b", "c"], after={"a": ["b"], "b": ["a"]}), "precedence cycle"),
        (lambda: Schedule(["a", "b"], after={"a": ["b"]}, default=("a", "b")), "default"),
        (lambda: Selector([]), "empty list"),
        (lambda: Selector(["a"], max_levels=0), "max_levels"),
        (lambda: Selector(["a"], size_range=(0, 10)), "size_range lo must be >= 1"),
        (lambda: Selector(["a"], size_range=(10, 1)), "empty size_range"),
        (lambda: Int(1, 2, when="a +"), "syntax error"),
    ],
)
def test_bad_definitions_raise_one_clear_line(make: object, message: str) -> None:
    with pytest.raises(SpaceError) as info:
        make()  # type: ignore[operator]
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"type": "integer", "lo": 1, "hi": 2}, "parameter 'x': unknown parameter type 'integer'"),
        ({"lo": 1, "hi": 2}, "parameter 'x': missing 'type'"),
        ({"type": "int", "lo": 1}, "parameter 'x': type 'int' needs 'hi'"),
        ({"type": "int", "lo": 1, "hi": 2, "step": 1}, "parameter 'x': unknown key 'step'"),
        ({"type": "int", "lo": 3, "hi": 2}, "parameter 'x': empty range"),
        ({"type": "int", "lo": 1, "hi": 2, "default": 7}, "parameter 'x': default 7 is outside"),
        ({"type": "choice", "options": []}, "parameter 'x': empty list of options"),
        ("int", "parameter 'x': expected a table"),
    ],
)
def test_parameter_from_dict_errors_name_the_parameter(d: object, message: str) -> None:
    with pytest.raises(SpaceError) as info:
        parameter_from_dict(d, name="x")  # type: ignore[arg-type]
    assert str(info.value).startswith(message), str(info.value)


def test_selector_default_from_dict() -> None:
    p = parameter_from_dict(
        {
            "type": "selector",
            "choices": ["a", "b"],
            "max_levels": 2,
            "size_range": [1, 100],
            "default": {"cutoffs": [10], "choices": ["a", "b"]},
        }
    )
    assert p.default_value() == Levels((10,), ("a", "b"))


def test_single_values_are_constants() -> None:
    rng = np.random.default_rng(0)
    for p, v in [
        (Int(3, 3), 3),
        (Float(1.5, 1.5), 1.5),
        (Pow2(8, 8), 8),
        (Choice(["k"]), "k"),
        (Permutation(["z"]), ("z",)),
    ]:
        assert p.cardinality() == 1
        assert p.sample(rng) == v and p.mutate(v, rng) == v and p.default_value() == v
        assert p.decode(p.encode(v)) == v


@pytest.mark.parametrize("param", [LogFloat(1e-4, 1e-1), LogFloat(1e-6, 3.0), Float(0.0, 0.3),
                                   Float(-1.5, 2.5)])
def test_a_value_through_the_unit_cube_and_back_is_the_value_itself(param: Float) -> None:
    # A measured configuration encoded for a model and decoded again (or a proposal at the boundary)
    # must be the same float, or the cache measures it twice (0.0001 came back as 0.00010000000000000009).
    assert param.decode([0.0]) == param.lo and param.decode([1.0]) == param.hi
    for value in (param.lo, param.hi, 0.0002, 0.001, 0.01, 0.1, 0.25, 1.0):
        if param.lo <= value <= param.hi:
            assert param.decode(param.encode(value)) == value


def test_tune_measures_no_log_scale_value_twice() -> None:
    import perftune
    from perftune.space import Choice, Int, Space

    space = Space({"lr": LogFloat(1e-4, 1e-1), "layers": Int(1, 4), "act": Choice(["relu", "tanh"])})
    for seed in range(2):
        result = perftune.tune(
            lambda c: (c["lr"] - 0.01) ** 2 + 0.1 * c["layers"] + (c["act"] == "tanh"), space,
            budget=50, seed=seed, store=None)
        keys = [(t.config["act"], t.config["layers"], round(math.log(t.config["lr"]), 9))
                for t in result.trials]
        assert len(keys) == len(set(keys))
