"""Property-based tests: encode/decode round trips, is_valid against brute force, JSON round trips."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perftune.errors import UnsatisfiableError
from perftune.space import (
    Bool,
    Choice,
    Config,
    Float,
    Int,
    LogFloat,
    LogInt,
    Ordinal,
    Param,
    Permutation,
    Pow2,
    Schedule,
    Selector,
    Space,
    parameter_from_dict,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

small_int = st.integers(-50, 50)
option = st.one_of(st.integers(-5, 5), st.text("abcxyz", min_size=1, max_size=3), st.booleans())


@st.composite
def ints(draw: st.DrawFn) -> Param:
    lo = draw(small_int)
    return Int(lo, lo + draw(st.integers(0, 60)))


@st.composite
def log_ints(draw: st.DrawFn) -> Param:
    lo = draw(st.integers(1, 100))
    return LogInt(lo, lo + draw(st.integers(0, 10**6)))


@st.composite
def pow2s(draw: st.DrawFn) -> Param:
    a = draw(st.integers(0, 20))
    return Pow2(1 << a, 1 << (a + draw(st.integers(0, 12))))


@st.composite
def floats(draw: st.DrawFn) -> Param:
    lo = draw(st.floats(-1e6, 1e6))
    return Float(lo, lo + draw(st.floats(0, 1e6)))


@st.composite
def log_floats(draw: st.DrawFn) -> Param:
    lo = draw(st.floats(1e-9, 1e3))
    return LogFloat(lo, lo * draw(st.floats(1.0, 1e6)))


@st.composite
def choices(draw: st.DrawFn) -> Param:
    # Unique by value: True and 1 (False and 0) cannot both be options, a configuration holds True == 1.
    opts = draw(st.lists(option, min_size=1, max_size=6, unique_by=lambda o: o))
    return draw(st.sampled_from([Choice, Ordinal]))(opts)


@st.composite
def permutations(draw: st.DrawFn) -> Param:
    n = draw(st.integers(1, 9))
    items = [f"i{k}" for k in range(n)]
    return Permutation(items, crossover=draw(st.sampled_from(["pmx", "ox", "cx"])))


@st.composite
def schedules(draw: st.DrawFn) -> Param:
    n = draw(st.integers(1, 8))
    items = list(range(n))
    after: dict[int, list[int]] = {}
    for j in range(n):
        preds = [i for i in range(j) if draw(st.booleans()) and draw(st.booleans())]
        if preds:
            after[j] = preds
    perm = draw(st.permutations(items))  # the given order need not be topological
    return Schedule(perm, after=after)


@st.composite
def selectors(draw: st.DrawFn) -> Param:
    lo = draw(st.integers(1, 1000))
    hi = lo + draw(st.integers(0, 10**6))
    n = draw(st.integers(1, 4))
    return Selector([f"c{k}" for k in range(n)], max_levels=draw(st.integers(1, 5)), size_range=(lo, hi))


discrete_params = st.one_of(
    ints(), log_ints(), pow2s(), choices(), st.just(Bool()), permutations(), schedules(), selectors()
)


@SETTINGS
@given(p=discrete_params, seed=st.integers(0, 2**32 - 1))
def test_discrete_encode_decode_round_trip(p: Param, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(10):
        v = p.sample(rng)
        enc = p.encode(v)
        assert enc.shape == (p.n_dims,) and np.all((enc >= 0) & (enc <= 1))
        assert p.decode(enc) == v
        assert p.contains(p.decode(rng.random(p.n_dims)))
        assert p.contains(p.mutate(v, rng))


@SETTINGS
@given(p=st.one_of(floats(), log_floats()), seed=st.integers(0, 2**32 - 1))
def test_continuous_encode_decode_round_trip(p: Param, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(10):
        v = p.sample(rng)
        back = p.decode(p.encode(v))
        assert math.isclose(back, v, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(p.hi)))  # type: ignore[attr-defined]
        assert p.contains(back)


@SETTINGS
@given(p=st.one_of(discrete_params, floats(), log_floats()), seed=st.integers(0, 2**32 - 1))
def test_param_dict_and_value_json_round_trip(p: Param, seed: int) -> None:
    q = parameter_from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p
    rng = np.random.default_rng(seed)
    v = p.sample(rng)
    assert q.from_json_value(json.loads(json.dumps(p.to_json_value(v)))) == v


# -- is_valid against brute force --------------------------------------------------------------------

CONSTRAINT_TEMPLATES = [
    "{a} + {b} <= {k}",
    "{a} * {b} != {k}",
    "{a} % 3 == 0 or {b} > {k}",
    "{lo} <= {a} - {b} <= {hi}",
    "not ({a} == {k} and {b} == {k})",
    "min({a}, {b}) < {k} if {a} > 0 else abs({b}) >= {k}",
    "{a} in (0, 1, 2, {k})",
    "{a} // 2 + {b} ** 2 > {k}",
    "{a} > {k} and {b} != {k}",
]
WHEN_TEMPLATES = ["{a} > {k}", "{a} != {k} and {b} <= {k}", "{a} in ({k}, 0)", "not {a} % 2"]


def reference_valid(
    names: list[str], whens: dict[str, str], constraints: list[tuple[str, set[str]]], config: dict[str, Any]
) -> bool:
    """Independent definition of validity, with Python's own evaluator, for the tests only."""

    def ev(text: str) -> Any:
        return eval(text, {"__builtins__": {}, "min": min, "max": max, "abs": abs}, dict(config))

    for n in names:  # names are in a valid activity order (when= refers to earlier names only)
        if n in whens:
            try:
                active = bool(ev(whens[n]))
            except NameError:
                active = False
        else:
            active = True
        if active != (n in config):
            return False
    for text, mentioned in constraints:
        if not mentioned <= set(config):
            continue  # mentions an inactive parameter: satisfied
        try:
            if not ev(text):
                return False
        except ArithmeticError:
            return False
    return True


@st.composite
def small_spaces(
    draw: st.DrawFn,
) -> tuple[list[str], dict[str, Param], dict[str, str], list[tuple[str, set[str]]]]:
    n = draw(st.integers(1, 4))
    names = [f"p{i}" for i in range(n)]
    params: dict[str, Param] = {}
    whens: dict[str, str] = {}
    for i, name in enumerate(names):
        lo = draw(st.integers(-3, 3))
        kind = draw(st.sampled_from(["int", "ordinal", "choice"]))
        if kind == "int":
            p_args: Any = (lo, lo + draw(st.integers(0, 5)))
        else:
            p_args = (sorted(draw(st.sets(st.integers(-3, 6), min_size=1, max_size=5))),)
        when = None
        if i > 0 and draw(st.booleans()):
            a, b = draw(st.sampled_from(names[:i])), draw(st.sampled_from(names[:i]))
            when = draw(st.sampled_from(WHEN_TEMPLATES)).format(a=a, b=b, k=draw(st.integers(-2, 3)))
            whens[name] = when
        cls = {"int": Int, "ordinal": Ordinal, "choice": Choice}[kind]
        params[name] = cls(*p_args, when=when)
    constraints = []
    for _ in range(draw(st.integers(0, 3))):
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        lo = draw(st.integers(-4, 2))
        template = draw(st.sampled_from(CONSTRAINT_TEMPLATES))
        text = template.format(a=a, b=b, k=draw(st.integers(-2, 6)), lo=lo, hi=lo + draw(st.integers(0, 4)))
        constraints.append((text, {a, b} if "{b}" in template else {a}))
    return names, params, whens, constraints


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_spaces(), seed=st.integers(0, 2**32 - 1))
def test_is_valid_agrees_with_brute_force(
    spec: tuple[list[str], dict[str, Param], dict[str, str], list[tuple[str, set[str]]]], seed: int
) -> None:
    names, params, whens, constraints = spec
    space = Space(params, [text for text, _ in constraints])
    domains = [
        [*(params[n].values() or []), None] if n in whens else list(params[n].values() or []) for n in names
    ]
    reference: set[Config] = set()
    for combo in itertools.product(*domains):
        c = {n: v for n, v in zip(names, combo, strict=True) if v is not None}
        ok = reference_valid(names, whens, constraints, c)
        assert space.is_valid(c) == ok, (c, space.why_invalid(c))
        assert (space.why_invalid(c) is None) == ok
        if ok:
            reference.add(Config(c))
    assert set(space.enumerate()) == reference
    assert space.cardinality() == len(reference)
    rng = np.random.default_rng(seed)
    # The constructive search (tables, backjumping) is complete on finite domains: it finds a valid
    # configuration exactly when one exists.
    for _ in range(5):
        found = next(space._search(rng), None)
        assert (found is None) == (not reference)
        assert found is None or Config(found) in reference
    if not reference:
        with pytest.raises(UnsatisfiableError):
            space.sample(rng)
        return
    samples = space.sample(rng, 30)
    assert all(s in reference for s in samples)
    # Constructive sampling (used for spaces too large to enumerate) also returns only valid configs.
    for _ in range(10):
        assert space._sample_one(rng) in reference
    for s in samples[:5]:
        assert space.mutate(s, rng) in reference
        assert space.crossover(s, samples[-1], rng) in reference
        assert all(n in reference for n in space.neighbors(s))
        decoded = space.decode(rng.random(space.n_dims))
        repaired = space.repair(decoded, rng)
        assert repaired in reference
        assert space.decode(space.encode(s)) == s
        assert Config.from_json(s.to_json(), space) == s


mixed_params = st.one_of(
    ints(), pow2s(), choices(), floats(), log_floats(), permutations(), schedules(), selectors()
)


@SETTINGS
@given(ps=st.lists(mixed_params, min_size=1, max_size=5), seed=st.integers(0, 2**32 - 1))
def test_configs_json_round_trip_and_space_dict_round_trip(ps: list[Param], seed: int) -> None:
    space = Space({f"x{i}": p for i, p in enumerate(ps)})
    again = Space.from_dict(json.loads(json.dumps(space.to_dict())))
    assert again.fingerprint() == space.fingerprint()
    rng = np.random.default_rng(seed)
    for c in space.sample(rng, 5):
        assert space.is_valid(c)
        text = c.to_json()
        # The canonical text (the store hashes it): sorted keys, whatever path to_json takes.
        assert text == json.dumps(c.to_json_dict(), sort_keys=True)
        back = Config.from_json(text, space)
        assert back == c and hash(back) == hash(c) and space.is_valid(back)
        assert Config.from_json(json.loads(text), again) == c
