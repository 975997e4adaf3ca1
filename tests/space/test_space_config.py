"""Config: frozen, hashable, normalized, JSON round trip."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from perftune.errors import SpaceError
from perftune.space import Config, Int, Levels, Permutation, Selector, Space


def test_normalizes_values() -> None:
    c = Config(
        {"a": np.int64(3), "b": np.float32(0.5), "c": [1, 2], "d": np.array([3, 4]), "e": np.bool_(True)}
    )
    assert c == {"a": 3, "b": 0.5, "c": (1, 2), "d": (3, 4), "e": True}
    assert type(c["a"]) is int and type(c["b"]) is float and type(c["e"]) is bool
    assert type(c["d"][0]) is int


def test_is_a_frozen_hashable_mapping() -> None:
    a = Config({"x": 1, "y": "u"})
    b = Config(y="u", x=1)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert dict(a) == {"x": 1, "y": "u"} and list(a) == ["x", "y"] and "x" in a and len(a) == 2
    assert a != Config(x=2, y="u") and a != {"x": 1}
    with pytest.raises(TypeError):
        a["x"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.z = 1  # type: ignore[attr-defined]


def test_replace_and_without() -> None:
    a = Config(x=1, y=2)
    assert a.replace(y=[3]) == {"x": 1, "y": (3,)}
    assert a == {"x": 1, "y": 2}
    assert a.without("y") == {"x": 1}


def test_json_round_trip_sorted_keys() -> None:
    c = Config({"z": (3, 1, 2), "a": 1.25, "m": "s", "b": True, "lv": Levels((8,), ("q", "m"))})
    text = c.to_json()
    assert text.index('"a"') < text.index('"b"') < text.index('"lv"') < text.index('"m"') < text.index('"z"')
    assert Config.from_json(text) == c
    assert Config.from_json({"x": [1, 2]}) == Config(x=(1, 2))


def test_from_json_with_space_decodes_values() -> None:
    space = Space(
        {
            "order": Permutation(["a", "b", "c"]),
            "sel": Selector(["s", "t"], max_levels=2, size_range=(1, 99)),
            "n": Int(1, 4),
        }
    )
    c = space.sample(np.random.default_rng(0))[0]
    back = Config.from_json(c.to_json(), space)
    assert back == c and space.is_valid(back)
    assert isinstance(back["sel"], Levels) and isinstance(back["order"], tuple)


@pytest.mark.parametrize("text", ["[1, 2]", "{bad json", '{"x": {"y": 1}}'])
def test_from_json_errors(text: str) -> None:
    with pytest.raises(SpaceError):
        Config.from_json(text)


def test_pickles() -> None:
    c = Config(x=1, order=("a", "b"))
    assert hash(c)
    d = pickle.loads(pickle.dumps(c))
    assert d == c and hash(d) == hash(c)


def test_repr() -> None:
    assert repr(Config(x=1)) == "Config({'x': 1})"
