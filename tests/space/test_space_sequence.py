"""``PassSequence``: a sequence of options with repetition, its operators and its stored form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perftune.errors import SpaceError
from perftune.space import Choice, Config, Int, PassSequence, Space, parameter_from_dict

OPTIONS = ["a", "b", "c", "d"]
SEQ = PassSequence(OPTIONS, max_length=6, default=("a", "b"))


@given(st.lists(st.sampled_from(OPTIONS), max_size=6))
@settings(max_examples=100, deadline=None)
def test_encode_decode_round_trip(items: list[str]) -> None:
    value = tuple(items)
    assert SEQ.decode(SEQ.encode(value)) == value


@given(st.lists(st.floats(-1, 2) | st.just(float("nan")), min_size=6, max_size=6))
@settings(max_examples=100, deadline=None)
def test_any_vector_decodes_to_a_legal_value(vec: list[float]) -> None:
    assert SEQ.contains(SEQ.decode(np.array(vec)))


def test_operators_stay_in_the_domain() -> None:
    rng = np.random.default_rng(0)
    value = SEQ.default_value()
    kinds = set()
    for _ in range(300):
        new = SEQ.mutate(value, rng, scale=0.2)
        assert SEQ.contains(new) and new != value
        kinds.add(len(new) - len(value))
        child = SEQ.crossover(value, SEQ.sample(rng), rng)
        assert SEQ.contains(child)
        value = new
    assert {-1, 0, 1} <= kinds  # deletions, replacements/swaps, insertions
    for n in SEQ.neighbors(("a", "b", "c")):
        assert SEQ.contains(n)
    assert ("b", "a", "c") in SEQ.neighbors(("a", "b", "c")) and ("a", "c") in SEQ.neighbors(("a", "b", "c"))


def test_works_in_a_space() -> None:
    space = Space({"passes": SEQ})
    config = space.default()
    assert space.is_valid(config) and config["passes"] == ("a", "b")
    rng = np.random.default_rng(1)
    assert all(space.is_valid(c) for c in space.sample(rng, 5))
    assert space.is_valid(space.mutate(config, rng))


def test_a_space_with_a_pass_sequence_round_trips_through_its_dict() -> None:
    space = Space(
        {
            "passes": PassSequence(OPTIONS, max_length=5, default=["c", "c"], when="opt > 0"),
            "opt": Int(0, 3, default=1),
            "mode": Choice(["x", "y"]),
        },
        constraints=["opt < 3"],
    )
    again = Space.from_dict(space.to_dict())
    assert again.to_dict() == space.to_dict()
    assert again.params["passes"] == space.params["passes"]
    assert again.default()["passes"] == ("c", "c")
    config = space.sample(np.random.default_rng(3), 4)[-1]
    assert Config.from_json(config.to_json(), again) == config and again.is_valid(config)


def test_the_stored_form_is_the_llvm_targets_form() -> None:
    # Runs stored before the type moved into perftune.space hold exactly this dictionary.
    stored = {"type": "pass-sequence", "options": ["mem2reg", "gvn"], "max_length": 160}
    param = parameter_from_dict(stored, name="passes")
    assert isinstance(param, PassSequence) and param.max_length == 160
    assert param.to_dict() == stored
    assert param.from_json_value(["gvn", "gvn"]) == ("gvn", "gvn")


def test_the_llvm_target_exports_the_same_type() -> None:
    from perftune.targets.llvm import PassSequence as FromLlvm

    assert FromLlvm is PassSequence


def test_options_of_other_types_are_told_apart() -> None:
    seq = PassSequence([2, True, "1"], max_length=3)
    assert seq.contains((2, True, "1")) and not seq.contains((1,)) and not seq.contains(([1],))
    assert seq.decode(seq.encode((True, 2))) == (True, 2)
    assert seq.nearest(["1", "zz", 2, 2, 2]) == ("1", 2, 2)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({"type": "pass-sequence", "options": [], "max_length": 3}, "empty list of options"),
        ({"type": "pass-sequence", "options": ["a", "a"], "max_length": 3}, "duplicate option 'a'"),
        ({"type": "pass-sequence", "options": ["a"], "max_length": 0}, "max_length must be at least 1"),
        ({"type": "pass-sequence", "options": ["a"], "max_length": "x"}, "max_length must be an integer"),
        ({"type": "pass-sequence", "options": ["a"]}, "needs 'max_length'"),
        ({"type": "pass-sequence", "options": ["a"], "max_length": 2, "default": ["b"]}, "outside the"),
        ({"type": "pass-sequence", "options": ["a"], "max_length": 1, "default": ["a", "a"]}, "outside"),
        ({"type": "pass-sequence", "options": ["a"], "max_length": 2, "default": "a"}, "must be a list"),
    ],
)
def test_bad_definitions_are_one_line_space_errors_naming_the_parameter(d: dict, message: str) -> None:
    with pytest.raises(SpaceError, match=message) as info:
        parameter_from_dict(d, name="passes")
    assert str(info.value).startswith("parameter 'passes': ") and "\n" not in str(info.value)
