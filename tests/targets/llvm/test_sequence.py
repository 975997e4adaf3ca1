from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perftune.space import Space
from perftune.targets.llvm._sequence import PassSequence

OPTIONS = ["a", "b", "c", "d"]
SEQ = PassSequence(OPTIONS, max_length=6, default=("a", "b"))


@given(st.lists(st.sampled_from(OPTIONS), max_size=6))
@settings(max_examples=100, deadline=None)
def test_encode_decode_round_trip(items: list[str]) -> None:
    value = tuple(items)
    assert SEQ.decode(SEQ.encode(value)) == value


@given(st.lists(st.floats(0, 1), min_size=6, max_size=6))
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
