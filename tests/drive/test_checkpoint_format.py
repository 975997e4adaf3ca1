"""The checkpoint format (drive/_checkpoint.py) and the run lease, through the Python API."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perftune
from perftune import Tuner
from perftune.drive._checkpoint import CheckpointError, decode, encode
from perftune.search._base import BoundedDict
from perftune.space import Choice, Config, Float, Int, Permutation, Space
from perftune.store import LeaseError, open_store
from perftune.trial import Status, Trial


def _space() -> Space:
    return Space({"x": Int(0, 20), "f": Float(0.0, 1.0), "c": Choice(["a", "b"]),
                  "p": Permutation(["u", "v", "w"])})


def _objective(config: Config) -> float:
    return (config["x"] - 7) ** 2 + config["f"]


def _doc(state: Any, configs: list[Any] | None = None, **header: Any) -> bytes:
    return json.dumps({"format": "perftune-checkpoint", "version": 2, "perftune": perftune.__version__,
                       "configs": configs or [], "state": state, **header}).encode()


# ---------------------------------------------------------------- round trips


def test_every_kind_of_value_round_trips_exactly() -> None:
    space = _space()
    config = Config({"x": 3, "f": 0.1 + 0.2, "c": "b", "p": ("w", "u", "v")})
    bounded = BoundedDict(3)
    bounded[config] = 1.5
    rng = np.random.default_rng(5)
    rng.random(3)
    value = {
        "none": None, "bool": True, "int": 2**70, "float": 0.1, "nan": math.nan, "inf": -math.inf,
        "str": "$not-a-tag", "list": [1, [2]], "tuple": (1, (2, "x")), "set": {1, 2},
        "frozen": frozenset({3}),
        "deque": collections.deque([1, 2], maxlen=5), "bounded": bounded, "keys": {(1, 2): "t", 3: "i"},
        "$dollar": 1, "config": config, "space": space, "status": Status.TIMEOUT,
        "trial": Trial(id=4, config=config, status=Status.OK, value=2.0, loss=2.0, samples=[2.0]),
        "array": np.arange(6, dtype=np.int32).reshape(2, 3), "farray": np.array([0.5, np.nan]),
        "scalar": np.float32(1.25), "rng": rng,
    }
    back = decode(encode({"v": value}, space), space)["v"]
    assert back["nan"] != back["nan"] and back["inf"] == -math.inf
    for key in ("none", "bool", "int", "float", "str", "list", "tuple", "set", "frozen", "keys", "$dollar",
                "config", "status", "trial"):
        assert back[key] == value[key] and type(back[key]) is type(value[key]), key
    assert back["space"] is space and hash(back["config"]) == hash(config)
    assert back["deque"] == value["deque"] and back["deque"].maxlen == 5
    assert type(back["bounded"]) is BoundedDict and back["bounded"].limit == 3
    assert back["bounded"][config] == 1.5
    for k in range(3):  # the decoded one keeps its order: the oldest entry (config) is forgotten first
        back["bounded"][k] = k
    assert list(back["bounded"]) == [0, 1, 2]
    assert back["array"].dtype == np.int32 and (back["array"] == value["array"]).all()
    assert np.array_equal(back["farray"], value["farray"], equal_nan=True)
    assert type(back["scalar"]) is np.float32 and back["scalar"] == 1.25
    assert (back["rng"].random(4) == rng.random(4)).all()


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.lists(inner, max_size=4).map(tuple)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    | st.dictionaries(st.integers() | st.tuples(st.integers(), st.text(max_size=3)), inner, max_size=4)
    | st.sets(st.integers() | st.text(max_size=4), max_size=4)
    | st.frozensets(st.integers(), max_size=4),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 is not 1.0, a tuple is not a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@settings(max_examples=200, deadline=None)
@given(_values)
def test_plain_values_round_trip_with_their_types(value: Any) -> None:
    space = _space()
    assert _same(decode(encode({"v": value}, space), space)["v"], value)


def test_state_that_is_not_data_is_refused_when_written_naming_it() -> None:
    with pytest.raises(CheckpointError, match=r"state\.technique\.hook holds a builtins\.function"):
        encode({"technique": {"hook": lambda: None}}, _space())
    bounded = BoundedDict(8)
    bounded[1] = 1.0
    bounded[(2, "b")] = [lambda: None]
    with pytest.raises(CheckpointError, match=r"state\.cache\[\(2, 'b'\)\]\[0\] holds a builtins\.function"):
        encode({"cache": bounded}, _space())
    with pytest.raises(CheckpointError, match="dtype object is not data"):
        encode({"a": np.array([object()])}, _space())


# ---------------------------------------------------------------- hostile documents


@pytest.mark.parametrize(
    "state",
    [
        {"$obj": "os:system", "attrs": {}},
        {"$obj": "subprocess:Popen", "attrs": {"args": ["touch", "x"]}},
        {"$rng": {"bit_generator": "os.system", "state": {}}},
        {"$ndarray": "|O", "shape": [1], "data": "AAAAAAAAAAA="},
        {"$ndarray": "V8", "shape": [1], "data": "AAAAAAAAAAA="},
        {"$ndarray": "<f8", "shape": [4], "data": "AAAAAAAAAAA="},  # shorter than its shape
        {"$npscalar": "O", "v": 1},
        {"$status": "os.system"},
        {"$trial": {"id": 1, "__class__": "os.system"}},
        {"$config": 3},
        {"$unknown": 1},
        {"$tuple": [1], "$set": [2]},
        {"$float": "1e999999"},
        {"$deque": [1], "maxlen": -1},
        {"$bounded": 0, "items": []},
    ],
)
def test_a_hostile_or_broken_value_is_refused_and_nothing_named_is_called(
    state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import os

    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    real_import = importlib.import_module

    def watched_import(name: str, *args: Any) -> Any:
        assert name.startswith("perftune."), f"decoding imported {name}"
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", watched_import)
    with pytest.raises(CheckpointError, match="^checkpoint is corrupt: ") as info:
        decode(_doc({"driver": state}), _space())
    assert "\n" not in str(info.value) and calls == []


def test_deep_nesting_is_corrupt_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    blob = _doc(None).replace(b'"state": null', b'"state": ' + deep.encode())
    with pytest.raises(CheckpointError, match="corrupt"):
        decode(blob, _space())


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"\x80\x04K\x01.", "is in the old pickle format"),
        (b"{", "is corrupt (not JSON)"),
        (b"[]", "is not a perftune checkpoint"),
        (json.dumps({"format": "something-else"}).encode(), "is not a perftune checkpoint"),
        (_doc({}, version=1), "has format v1; this perftune reads v2"),
        (_doc({}, perftune="99.0"), "was written by perftune 99.0"),
        (_doc({}, configs=[1]), "is corrupt: the configuration table is not a list of objects"),
        (_doc([]), "the state is not an object"),
    ],
)
def test_foreign_old_and_corrupt_blobs_are_one_line(blob: bytes, message: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode(blob, _space(), what="the checkpoint of run 'r'")
    text = str(info.value)
    assert text.startswith("the checkpoint of run 'r' ") and message in text and "\n" not in text


# ---------------------------------------------------------------- through the Tuner


def test_resume_continues_identically_through_the_json_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_space(), seed=11, store=url, name="j", checkpoint_every=3).run(_objective, 17)
    with open_store(url) as store:
        _, blob = store.load_checkpoint(store.get_run("j").id)
    assert json.loads(blob)["format"] == "perftune-checkpoint"
    resumed = Tuner.resume("j", url).run(_objective, 40)
    straight = perftune.tune(_objective, _space(), budget=40, seed=11)
    assert [t.config for t in resumed.trials] == [t.config for t in straight.trials]


def test_a_corrupt_checkpoint_gives_a_checkpoint_error_and_frees_the_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_space(), seed=1, store=url, name="c").run(_objective, 3)
    with open_store(url) as store:
        run = store.get_run("c")
        store.save_checkpoint(run.id, 3, b'{"format": "perftune-checkpoint"')
        expected = r"^resume: the checkpoint of run 'c' is corrupt \(not JSON\)$"
        with pytest.raises(CheckpointError, match=expected):
            Tuner.resume("c", store)
        assert store.get_lease(run.id) is None  # the failed resume gave the lease back


# ---------------------------------------------------------------- the lease


def test_a_second_tuner_on_a_driven_run_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    first = Tuner(_space(), seed=1, store=url, name="busy", budget=4)
    trial = first.ask()
    assert trial is not None
    first.tell(trial, 1.0)
    with pytest.raises(LeaseError, match=r"^run 'busy' is being driven by [^:]+:\d+ since \d{4}-\d\d-\d\d "):
        Tuner.resume("busy", url)
    first.close()  # gives the run back
    with open_store(url) as store:
        assert store.get_lease(store.get_run("busy").id) is None
    again = Tuner.resume("busy", url)
    assert len(again.run(_objective, 4).trials) == 4


def test_the_lease_is_given_back_when_a_run_is_interrupted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    tuner = Tuner(_space(), seed=2, store=url, name="ki")

    def interrupting(config: Config) -> float:
        if len(tuner.trials) == 3:
            raise KeyboardInterrupt
        return _objective(config)

    with pytest.raises(KeyboardInterrupt) as caught:
        tuner.run(interrupting, 10)
    # The traceback ends with how to continue (the command line prints its resume line; Python had none).
    assert caught.value.__notes__ == [
        f"perftune: run 'ki' was interrupted after 3 trials; continue it with perftune.Tuner.resume('ki', "
        f"{url!r}).run(objective, budget)"]
    with open_store(url) as store:
        run = store.get_run("ki")
        assert run.status == "interrupted" and store.get_lease(run.id) is None
    assert len(Tuner.resume("ki", url).run(_objective, 10).trials) == 10


def test_a_driver_whose_lease_was_taken_over_stops_writing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    slow = Tuner(_space(), seed=3, store=url, name="split", checkpoint_every=1)
    with open_store(url) as store:
        run = store.get_run("split")
        store.acquire_lease(run.id, timeout_s=0.0)  # another driver decides the first one is dead
        with pytest.raises(LeaseError, match="taken over"):
            slow.run(_objective, 5)
        assert store.count(run.id) <= 1  # it stopped at its next heartbeat
        assert store.get_run("split").status == "running"  # and did not mark the other driver's run


class _PlainPlugin:
    """A plug-in technique written to the protocol only: no base class, no state_dict()."""

    name = "test-plain-plugin-state"

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        self.space = space
        self.rng = np.random.default_rng(seed)
        self.asked: list[Config] = []
        self.seen: dict[Config, float | None] = {}

    def ask(self, n: int) -> list[Config]:
        out = [c for c in self.space.sample(self.rng, n) if c not in self.seen]
        self.asked.extend(out)
        return out

    def tell(self, trials: Any) -> None:
        for trial in trials:
            self.seen[trial.config] = trial.loss


def test_a_plugin_without_state_dict_is_checkpointed_by_its_attributes(tmp_path: Path) -> None:
    from perftune import search

    search.register(_PlainPlugin)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_space(), seed=4, store=url, name="plug", technique=_PlainPlugin.name).run(_objective, 9)
    resumed = Tuner.resume("plug", url)
    assert isinstance(resumed.technique, _PlainPlugin) and len(resumed.technique.asked) >= 8  # restored
    result = resumed.run(_objective, 20)
    straight = perftune.tune(_objective, _space(), budget=20, seed=4, technique=_PlainPlugin.name)
    assert [t.config for t in result.trials] == [t.config for t in straight.trials]


@pytest.mark.parametrize(
    "edit",
    [
        lambda state: state["driver"].update(queue=[["not a config", "seed"]]),
        lambda state: state["driver"].update(pending=[[0, 5, "random"]]),
        lambda state: state["driver"].update(rng={"bit_generator": "PCG64", "state": {}}),
        lambda state: state["driver"].update(technique_name="no-such-technique"),
    ],
    ids=["queue", "pending", "rng", "technique"],
)
def test_a_well_formed_but_wrong_state_is_refused_before_anything_runs(tmp_path: Path, edit: Any) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_space(), seed=1, store=url, name="w").run(_objective, 3)
    with open_store(url) as store:
        run = store.get_run("w")
        document = json.loads(store.load_checkpoint(run.id)[1])
        edit(document["state"])
        store.save_checkpoint(run.id, 3, json.dumps(document).encode())
        expected = r"^resume: the checkpoint of run 'w' (is corrupt|does not fit)"
        with pytest.raises(CheckpointError, match=expected):
            Tuner.resume("w", store)
        assert store.count(run.id) == 3


def test_a_trial_in_a_technique_state_must_be_a_trial() -> None:
    config = {"x": 1, "f": 0.5, "c": "a", "p": ["u", "v", "w"]}
    blob = _doc({"t": {"$trial": {"id": 0, "config": {"$config": 0}, "status": "ok"}}}, configs=[config])
    with pytest.raises(CheckpointError, match="corrupt: bad trial"):
        decode(blob, _space())


def test_a_store_write_that_fails_leaves_the_ticket_to_the_resume(tmp_path: Path) -> None:
    # A dropped database connection failed one add_trial: the ticket had already left the pending list,
    # the crash checkpoint lost it, and the resumed seeded run waited for it forever at full CPU.
    from perftune.errors import StoreError

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    tuner = Tuner(_space(), seed=4, store=url, name="w")
    real = tuner._store.add_trial
    calls = [0]

    def failing_once(run_id: int, trial: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:
            raise StoreError("cannot record trial 2: server closed the connection unexpectedly")
        return real(run_id, trial)

    tuner._store.add_trial = failing_once  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        tuner.run(_objective, 12)
    resumed = Tuner.resume("w", url).run(_objective, 12)
    reference = Tuner(_space(), seed=4).run(_objective, 12)
    assert sorted(t.id for t in resumed.trials) == list(range(12))
    assert [dict(t.config) for t in sorted(resumed.trials, key=lambda t: t.id)] == [
        dict(t.config) for t in sorted(reference.trials, key=lambda t: t.id)]
