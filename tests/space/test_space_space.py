"""Space: validity, when=, constraints, sampling under constraints, repair, operators, serialization."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from perftune.errors import ExpressionError, SpaceError, UnsatisfiableError
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
)


def convolution() -> Space:
    """The benchmark-hub convolution_milo T1 space (10 parameters, 4 conditions)."""
    return Space(
        {
            "block_size_x": Ordinal([16 * i for i in range(1, 17)], default=16),
            "block_size_y": Ordinal([1, 2, 4, 8, 16], default=16),
            "tile_size_x": Ordinal([1, 2, 3, 4]),
            "tile_size_y": Ordinal([1, 2, 3, 4]),
            "read_only": Choice([0, 1]),
            "use_padding": Choice([0, 1], default=1),
            "use_shmem": Choice([0, 1], default=1),
            "use_cmem": Choice([1]),
            "filter_height": Choice([15]),
            "filter_width": Choice([15]),
        },
        constraints=[
            "use_padding==0 or block_size_x % 32 != 0",
            "block_size_x*block_size_y<=1024",
            "use_padding==0 or use_shmem != 0",
            "use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+"
            "(filter_height-1)))) < 12*1024",
        ],
    )


def brute_force(space: Space) -> set[Config]:
    names = space.names
    out = set()
    # None stands for "absent", only possible for parameters with a when= condition.
    domains = [[*(space.params[n].values() or [])] + ([None] if space.params[n].when else []) for n in names]
    for combo in itertools.product(*domains):
        c = Config({n: v for n, v in zip(names, combo, strict=True) if v is not None})
        if space.is_valid(c):
            out.add(c)
    return out


def test_convolution_enumeration_matches_brute_force() -> None:
    space = convolution()
    valid = brute_force(space)
    assert set(space.enumerate()) == valid
    assert space.cardinality() == len(valid) == 4362
    rng = np.random.default_rng(0)
    samples = space.sample(rng, n=3000)
    assert all(c in valid for c in samples)
    assert len(set(samples)) > 1500
    assert space.is_valid(space.default())


def test_when_makes_parameters_absent() -> None:
    space = Space(
        {
            "unroll": Bool(),
            "factor": Pow2(2, 16, when="unroll"),
            "algo": Choice(["naive", "tiled", "blocked"]),
            "tile": Int(2, 8, when="algo in ('tiled', 'blocked')"),
            "inner": Int(1, 4, when="algo == 'blocked' and tile > 4"),
        }
    )
    assert space.default() == {"unroll": False, "algo": "naive"}
    assert space.is_valid({"unroll": True, "factor": 4, "algo": "naive"})
    assert not space.is_valid({"unroll": False, "factor": 4, "algo": "naive"})
    assert not space.is_valid({"unroll": True, "algo": "naive"})
    assert space.is_valid({"unroll": False, "algo": "blocked", "tile": 3})
    assert space.is_valid({"unroll": False, "algo": "blocked", "tile": 5, "inner": 2})
    assert not space.is_valid({"unroll": False, "algo": "blocked", "tile": 5})
    assert not space.is_valid({"unroll": False, "algo": "tiled", "tile": 3, "inner": 2})
    assert "inactive" in (space.why_invalid({"unroll": False, "factor": 4, "algo": "naive"}) or "")
    assert "missing" in (space.why_invalid({"unroll": True, "algo": "naive"}) or "")
    rng = np.random.default_rng(1)
    samples = space.sample(rng, 500)
    assert all(space.is_valid(c) for c in samples)
    assert any("inner" in c for c in samples) and any("factor" not in c for c in samples)
    assert space.cardinality() == len(brute_force(space)) == (1 + 4) * (1 + 7 + 3 + 4 * 4)


def test_constraint_on_inactive_parameter_counts_as_satisfied() -> None:
    space = Space({"flag": Bool(), "n": Int(1, 10, when="flag")}, constraints=["n > 5"])
    assert space.is_valid({"flag": False})
    assert not space.is_valid({"flag": True, "n": 3})
    assert space.is_valid({"flag": True, "n": 7})
    assert set(space.enumerate()) == {Config(flag=False), *(Config(flag=True, n=k) for k in range(6, 11))}


def test_constraint_mentioning_inactive_parameter_is_satisfied_even_if_it_would_short_circuit() -> None:
    # "a > 3 and b != 1" evaluates to False for a=0 without reading b; it mentions b, which is
    # inactive, so it counts as satisfied (docs/CONTRACTS.md).
    space = Space(
        {"a": Int(0, 5), "flag": Bool(), "b": Int(0, 5, when="flag")}, constraints=["a > 3 and b != 1"]
    )
    assert space.is_valid({"a": 0, "flag": False})
    assert not space.is_valid({"a": 0, "flag": True, "b": 2})
    assert space.is_valid({"a": 4, "flag": True, "b": 2})
    assert space.why_invalid({"a": 0, "flag": False}) is None
    assert len(list(space.enumerate())) == 6 + 2 * 5
    rng = np.random.default_rng(0)
    assert any(c == {"a": 0, "flag": False} for c in space.sample(rng, 200))


def test_is_valid_rejects_wrong_keys_and_values() -> None:
    space = Space({"x": Int(1, 5), "y": Float(0.0, 1.0)})
    assert space.is_valid({"x": 1, "y": 0.5})
    assert not space.is_valid({"x": 1})
    assert not space.is_valid({"x": 1, "y": 0.5, "z": 1})
    assert not space.is_valid({"x": 6, "y": 0.5})
    assert not space.is_valid({"x": "1", "y": 0.5})
    assert space.why_invalid({"x": 1, "y": 0.5, "zz": 1}) == "unknown parameter 'zz'"
    assert space.why_invalid({"x": 9, "y": 0.5}) == "parameter 'x': 9 is outside the domain [1, 5]"
    assert space.why_invalid({"x": 1, "y": 0.5}) is None


def test_constraint_that_raises_is_a_violation() -> None:
    space = Space({"a": Int(0, 3), "b": Int(0, 3)}, constraints=["a // b >= 1"])
    assert not space.is_valid({"a": 2, "b": 0})
    assert "ZeroDivisionError" in (space.why_invalid({"a": 2, "b": 0}) or "")
    assert space.is_valid({"a": 2, "b": 1})
    assert all(c["b"] != 0 and c["a"] >= c["b"] for c in space.enumerate())


def test_callable_constraints() -> None:
    def small(c: Config) -> bool:
        return c["a"] + c["b"] <= 3

    space = Space({"a": Int(0, 3), "b": Int(0, 3)}, constraints=[small, "a != 1"])
    assert {tuple(c.values()) for c in space.enumerate()} == {
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (2, 0),
        (2, 1),
        (3, 0),
    }
    d = space.to_dict()
    assert d["constraints"][0] == {"callable": f"{__name__}.test_callable_constraints.<locals>.small"}
    with pytest.raises(SpaceError, match="callable"):
        Space.from_dict(d)


def test_sampling_a_heavily_constrained_large_space() -> None:
    # 32^6 ~ 1e9 combinations; about 0.3% satisfy the constraints.
    names = [f"p{i}" for i in range(6)]
    space = Space(
        {n: Pow2(1, 1 << 31) for n in names},
        constraints=["p0 * p1 * p2 <= 1024", "p3 * p4 == p5", "p0 < p1 < p2", "p5 >= 1024"],
    )
    rng = np.random.default_rng(2)
    samples = space.sample(rng, n=300)
    assert all(space.is_valid(c) for c in samples)
    assert len(set(samples)) > 250


def test_sampling_constrained_floats() -> None:
    space = Space(
        {"x": Float(0.0, 1.0), "y": Float(0.0, 1.0), "z": LogFloat(1e-3, 1.0)},
        constraints=["x + y <= 0.05", "z > 10 * x"],
    )
    rng = np.random.default_rng(3)
    samples = space.sample(rng, 200)
    assert all(space.is_valid(c) for c in samples)


def test_unsatisfiable_constraints_raise() -> None:
    space = Space({"a": Int(1, 10), "b": Int(1, 10)}, constraints=["a + b > 100"])
    with pytest.raises(
        UnsatisfiableError, match="constraint 'a \\+ b > 100' holds for no values of 'a', 'b'"
    ):
        space.sample(np.random.default_rng(0))
    two = Space({"a": Int(1, 10), "b": Int(1, 10)}, constraints=["a > 5", "a + b < 5"])
    with pytest.raises(UnsatisfiableError, match="constraints may be unsatisfiable"):
        two.sample(np.random.default_rng(0))
    big = Space({"a": Float(0, 1), "b": Int(1, 10**9)}, constraints=["a > 2"])
    with pytest.raises(UnsatisfiableError, match="constraints may be unsatisfiable"):
        big.sample(np.random.default_rng(0))
    assert space.repair({"a": 1, "b": 1}, np.random.default_rng(0)) is None


def test_repair_keeps_what_it_can() -> None:
    space = convolution()
    rng = np.random.default_rng(4)
    bad = dict(space.default())
    bad["block_size_x"] = 64  # breaks "use_padding==0 or block_size_x % 32 != 0"
    assert not space.is_valid(bad)
    for _ in range(50):
        fixed = space.repair(bad, rng)
        assert fixed is not None and space.is_valid(fixed)
        assert sum(fixed[k] != v for k, v in bad.items()) <= 3
    # Illegal values are clipped into their domains.
    fixed = space.repair({**space.default(), "tile_size_x": 99, "read_only": "yes"}, rng)
    assert fixed is not None and space.is_valid(fixed)


def test_operators_return_valid_configs() -> None:
    space = Space(
        {
            "bx": Pow2(1, 1024),
            "by": Pow2(1, 1024),
            "algo": Choice(["a", "b", "c"]),
            "k": Int(1, 16, when="algo != 'a'"),
            "order": Permutation(["i", "j", "k"]),
            "passes": Schedule(["p", "q", "r"], after={"r": ["p"]}),
            "sel": Selector(["x", "y"], max_levels=3, size_range=(1, 1000)),
            "lr": LogFloat(1e-4, 1.0),
        },
        constraints=["32 <= bx * by <= 256", "algo == 'a' or k * bx <= 512"],
    )
    rng = np.random.default_rng(5)
    pop = space.sample(rng, 50)
    for c in pop:
        assert space.is_valid(c)
        m = space.mutate(c, rng)
        assert space.is_valid(m) and m != c
        assert space.is_valid(space.mutate(c, rng, rate=1.0, scale=0.5))
        x = space.crossover(c, pop[int(rng.integers(len(pop)))], rng)
        assert space.is_valid(x)
        ns = space.neighbors(c)
        assert ns and all(space.is_valid(n) and n != c for n in ns)
        assert len(set(ns)) == len(ns)
        v = space.encode(c)
        assert v.shape == (space.n_dims,)
        d = space.decode(v)
        assert d == {**c, "lr": d["lr"]} and abs(d["lr"] - c["lr"]) < 1e-9
        r = space.repair(space.decode(rng.random(space.n_dims)), rng)
        assert r is not None and space.is_valid(r)


def test_neighbors_fill_newly_active_parameters() -> None:
    space = Space({"on": Bool(), "n": Int(1, 3, default=2, when="on")})
    assert space.neighbors({"on": False}) == [Config(on=True, n=2)]
    assert Config(on=False) in space.neighbors({"on": True, "n": 2})


def test_sample_is_reproducible() -> None:
    space = convolution()
    a = space.sample(np.random.default_rng(42), 20)
    b = convolution().sample(np.random.default_rng(42), 20)
    assert a == b
    s2 = Space({"x": Float(0, 1), "y": Int(0, 10**6)}, constraints=["x * y < 1000"])
    assert s2.sample(7, 10) == s2.sample(7, 10)


def test_to_dict_from_dict_and_fingerprint() -> None:
    space = convolution()
    d = space.to_dict()
    assert set(d) == {"params", "constraints"}
    again = Space.from_dict(d)
    assert again == space and again.fingerprint() == space.fingerprint()
    other = Space.from_dict({**d, "constraints": d["constraints"][:-1]})
    assert other.fingerprint() != space.fingerprint()
    assert len(space.fingerprint()) == 64


def test_pickle_round_trip_keeps_behaviour() -> None:
    space = convolution()
    space.sample(np.random.default_rng(0))
    again = pickle.loads(pickle.dumps(space))
    assert again == space
    assert again.sample(np.random.default_rng(9), 5) == space.sample(np.random.default_rng(9), 5)


def test_bad_spaces() -> None:
    with pytest.raises(SpaceError, match="parameter 'x': expected a parameter"):
        Space({"x": 3})  # type: ignore[dict-item]
    with pytest.raises(SpaceError, match="cycle"):
        Space({"a": Int(1, 2, when="b > 1"), "b": Int(1, 2, when="a > 1")})
    with pytest.raises(ExpressionError, match="refers to itself"):
        Space({"a": Int(1, 2, when="a > 1")})
    with pytest.raises(SpaceError, match="must be an expression string or a callable"):
        Space({"a": Int(1, 2)}, constraints=[3])  # type: ignore[list-item]
    with pytest.raises(SpaceError, match="parameter 'w': unknown parameter type 'widget'"):
        Space.from_dict({"params": {"w": {"type": "widget"}}})
    with pytest.raises(SpaceError, match="cannot be enumerated"):
        list(Space({"x": Float(0, 1)}).enumerate())


def test_constants_and_empty_space() -> None:
    space = Space({"a": Int(3, 3), "b": Choice(["only"])})
    assert space.sample(0, 3) == [Config(a=3, b="only")] * 3
    assert space.cardinality() == 1 and space.neighbors(space.default()) == []
    assert space.mutate(space.default(), 0) == space.default()
    empty = Space({})
    assert empty.sample(0) == [Config()] and empty.is_valid({}) and empty.n_dims == 0
    assert list(empty.enumerate()) == [Config()]


def test_enumerate_limit_and_order() -> None:
    space = Space({"a": Int(1, 3), "b": Bool()}, constraints=["a != 2"])
    assert list(space.enumerate(limit=2)) == [Config(a=1, b=False), Config(a=1, b=True)]
    assert space.cardinality() == 4


def test_enumerated_sampling_keeps_log_scale() -> None:
    space = Space({"n": LogInt(1, 10_000), "odd": Bool()}, constraints=["n % 2 == 1 or not odd"])
    rng = np.random.default_rng(11)
    xs = np.array([c["n"] for c in space.sample(rng, 4000)])
    assert space._enumerated is not None  # small enough to be enumerated
    counts = [np.sum((xs >= 10**k) & (xs < 10 ** (k + 1))) for k in range(4)]
    assert all(700 < c < 1300 for c in counts), counts


def gemm() -> Space:
    """CLBlast GEMM: 1.3 million combinations, too many valid ones to enumerate."""
    dims = [8, 16, 32]
    return Space(
        {
            "MWG": Pow2(16, 128),
            "NWG": Pow2(16, 128),
            "KWG": Pow2(16, 32),
            "MDIMC": Ordinal(dims),
            "NDIMC": Ordinal(dims),
            "MDIMA": Ordinal(dims),
            "NDIMB": Ordinal(dims),
            "KWI": Ordinal([2, 8]),
            "VWM": Pow2(1, 8),
            "VWN": Pow2(1, 8),
            "STRM": Bool(),
            "STRN": Bool(),
            "SA": Bool(),
            "SB": Bool(),
        },
        constraints=[
            "KWG % KWI == 0",
            "MWG % (MDIMC * VWM) == 0",
            "NWG % (NDIMC * VWN) == 0",
            "MWG % (MDIMA * VWM) == 0",
            "NWG % (NDIMB * VWN) == 0",
            "KWG % ((MDIMC * NDIMC) // MDIMA) == 0",
            "KWG % ((MDIMC * NDIMC) // NDIMB) == 0",
        ],
    )


def test_large_finite_space_is_sampled_constructively() -> None:
    space = gemm()
    rng = np.random.default_rng(12)
    samples = space.sample(rng, 300)
    assert space._enumerated is None  # too many valid configurations to keep
    assert all(space.is_valid(c) for c in samples)
    assert len(set(samples)) > 290
    # Every value that some valid configuration uses shows up.
    assert {c["MDIMC"] for c in samples} == {8, 16, 32}
    assert {c["VWM"] for c in samples} == {1, 2, 4, 8}
    for c in samples[:50]:
        assert space.is_valid(space.mutate(c, rng))
        assert space.is_valid(space.crossover(c, samples[-1], rng))
        assert all(space.is_valid(n) for n in space.neighbors(c))
        repaired = space.repair(space.decode(rng.random(space.n_dims)), rng)
        assert repaired is not None and space.is_valid(repaired)
    # The constructive sampler alone, without its plain draws, also gives valid configurations.
    found = [next(space._search(rng)) for _ in range(100)]
    assert all(space.is_valid(f) for f in found)


def test_pruning_and_tables_keep_every_valid_configuration() -> None:
    space = Space(
        {"a": Pow2(1, 256), "b": Pow2(1, 256), "c": Int(0, 40), "d": Choice(["x", "y", "z"])},
        constraints=["a * b <= 64", "a < b", "c % a == 0", "d != 'x' or c > 30", "b + c >= 20"],
    )
    brute = {
        Config(a=a, b=b, c=c, d=d)
        for a in (1 << k for k in range(9))
        for b in (1 << k for k in range(9))
        for c in range(41)
        for d in "xyz"
        if a * b <= 64 and a < b and c % a == 0 and (d != "x" or c > 30) and b + c >= 20
    }
    assert set(space.enumerate()) == brute
    rng = np.random.default_rng(13)
    assert all(Config(next(space._search(rng))) in brute for _ in range(200))


class Evens(Param):
    """A user-defined parameter type that only lists its values (no iter_values)."""

    type_name = "evens"

    def __init__(self, n: int, **kw: object) -> None:
        self.n = n
        super().__init__(**kw)  # type: ignore[arg-type]

    def natural_default(self) -> int:
        return 0

    def contains(self, value: object) -> bool:
        return isinstance(value, int) and value % 2 == 0 and 0 <= value < 2 * self.n

    def cardinality(self) -> int:
        return self.n

    def values(self) -> list[int]:
        return [2 * k for k in range(self.n)]

    def sample(self, rng: np.random.Generator) -> int:
        return 2 * int(rng.integers(self.n))

    def encode(self, value: object) -> np.ndarray:
        return np.array([(int(value) // 2 + 0.5) / self.n])  # type: ignore[call-overload]

    def decode(self, vec: object) -> int:
        return 2 * min(int(float(vec[0]) * self.n), self.n - 1)  # type: ignore[index]


def test_user_defined_parameter_types_work_in_a_space() -> None:
    space = Space({"e": Evens(50), "k": Int(0, 9)}, constraints=["e % 3 == 0", "e + k > 90"])
    valid = {Config(e=e, k=k) for e in range(0, 100, 2) for k in range(10) if e % 3 == 0 and e + k > 90}
    assert set(space.enumerate()) == valid
    rng = np.random.default_rng(14)
    assert all(c in valid for c in space.sample(rng, 100))
    assert all(Config(next(space._search(rng))) in valid for _ in range(50))
    assert all(space.mutate(c, rng) in valid for c in space.sample(rng, 20))


def test_when_may_name_a_parameter_declared_later() -> None:
    space = Space({"x": Int(1, 3, when="flag"), "flag": Bool(default=True)})
    assert space.default() == {"x": 1, "flag": True}
    assert list(space.default()) == ["x", "flag"]  # declaration order
    assert set(space.enumerate()) == {Config(flag=False), *(Config(flag=True, x=k) for k in (1, 2, 3))}


def test_many_conditional_flags() -> None:
    # The shape of a compiler-flags space: hundreds of on/off flags, parameters that exist only
    # when their flag is on, and a few constraints.
    n = 300
    params: dict[str, Param] = {f"f{i}": Bool() for i in range(n)}
    params |= {f"p{i}": Int(0, 100, when=f"f{i}") for i in range(n // 2)}
    space = Space(params, constraints=["p0 + p1 < 150", "not (f7 and f8)"])
    rng = np.random.default_rng(15)
    samples = space.sample(rng, 50)
    assert all(space.is_valid(c) for c in samples)
    for c in samples[:10]:
        m = space.mutate(c, rng)
        assert space.is_valid(m) and m != c
        ns = space.neighbors(c)
        assert len(ns) >= n - 2 and all(space.is_valid(x) for x in ns)
        assert any(("p3" in x) != ("p3" in c) for x in ns)  # flipping f3 adds or removes p3


def test_equal_spaces_hash_equally() -> None:
    assert hash(convolution()) == hash(convolution()) and convolution() == convolution()
    assert len({convolution(), convolution(), gemm()}) == 2
