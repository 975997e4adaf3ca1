"""The checkpoint format: the driver's and the techniques' state as versioned, declarative JSON.

A checkpoint is data, never code. Decoding reads JSON and rebuilds a closed set of value types; it
never imports a module or calls a callable named by the data, so a hostile row in a shared store
cannot run anything on the machine that resumes (pickles could: that is why they are gone).

What can be encoded (anything else is refused when the checkpoint is *written*, naming the attribute,
so that a technique that holds something else overrides ``state_dict``):

* ``None``, bools, ints, floats (NaN and infinities included), strings;
* lists, tuples, sets, frozensets, deques (with their ``maxlen``), dicts with any encodable keys,
  :class:`~perftune.search.BoundedDict`;
* numpy scalars and arrays of boolean, integer or floating dtypes; numpy ``Generator`` objects and
  bit-generator states of the bit generators numpy ships;
* :class:`~perftune.space.Config` (decoded by the run's space), :class:`~perftune.trial.Trial`,
  :class:`~perftune.trial.Status`, the run's space itself (by reference);
* objects with ``state_dict()``/``load_state_dict()`` (nested techniques: their state is loaded
  into the objects that the owner's constructor built);
* instances of the helper classes listed in ``_STATE_CLASSES``.

Example:
    >>> from perftune.space import Config, Int, Space
    >>> space = Space({"x": Int(0, 9)})
    >>> blob = encode({"best": Config({"x": 3}), "seen": {1, 2}}, space)
    >>> decode(blob, space)["best"]["x"]
    3
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import importlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from perftune.errors import StoreError

__all__ = ["FORMAT", "FORMAT_VERSION", "CheckpointError", "data_problem", "decode", "encode"]

FORMAT = "perftune-checkpoint"
#: Version of the layout below; v1 was a pickle of the driver (refused: it can run code).
FORMAT_VERSION = 2

# Helper classes whose instances are rebuilt from their attributes (object.__new__, then the
# attributes): a fixed table, so that the data can only pick among these.
_STATE_CLASSES: tuple[str, ...] = (
    "perftune.search._bandit:_AUCWindow",
    "perftune.search._bandit:_CostMeter",
)

_BIT_GENERATORS: dict[str, type[np.random.BitGenerator]] = {
    "PCG64": np.random.PCG64,
    "PCG64DXSM": np.random.PCG64DXSM,
    "Philox": np.random.Philox,
    "SFC64": np.random.SFC64,
    "MT19937": np.random.MT19937,
}
_ARRAY_KINDS = frozenset("biuf")  # bool, signed, unsigned, floating: never objects or records
_MAX_DEPTH = 200


class CheckpointError(StoreError):
    """A checkpoint cannot be written (unsupported state) or read (corrupt, foreign or old format)."""


def _state_classes() -> dict[str, type]:
    out: dict[str, type] = {}
    for key in _STATE_CLASSES:
        module, _, attr = key.partition(":")
        out[key] = getattr(importlib.import_module(module), attr)
    return out


def _class_key(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class _Encoder:
    def __init__(self, space: Any, *, plain: bool = False) -> None:
        from perftune.search._base import BoundedDict
        from perftune.space import Config
        from perftune.trial import Status, Trial

        self._space = space
        self._config_cls = Config
        self._trial_cls = Trial
        self._status_cls = Status
        self._bounded_cls = BoundedDict
        # plain: data only, decoded as itself (no helper objects nor nested states, which decode into
        # what an owner's constructor built; see data_problem).
        self._plain = plain
        self._helpers = {} if plain else {cls: key for key, cls in _state_classes().items()}
        self.configs: list[dict[str, Any]] = []
        self._config_ids: dict[Any, int] = {}

    def config(self, config: Any) -> int:
        index = self._config_ids.get(config)
        if index is None:
            index = len(self.configs)
            self.configs.append(config.to_json_dict())
            self._config_ids[config] = index
        return index

    def value(self, obj: Any, where: str, depth: int = 0) -> Any:  # noqa: PLR0911, PLR0912 - one case per type
        if depth > _MAX_DEPTH:
            raise CheckpointError(f"checkpoint: {where} is nested too deeply")
        t = type(obj)
        if obj is None or t is bool or t is int or t is str:
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"$float": repr(obj)}
        d = depth + 1
        if t is list:
            return [self.value(v, f"{where}[{i}]", d) for i, v in enumerate(obj)]
        if t is tuple:
            return {"$tuple": [self.value(v, f"{where}[{i}]", d) for i, v in enumerate(obj)]}
        if t is set or t is frozenset:
            tag = "$set" if t is set else "$frozenset"
            return {tag: [self.value(v, f"{where}{{}}", d) for v in obj]}
        if t is collections.deque:
            return {"$deque": [self.value(v, f"{where}[{i}]", d) for i, v in enumerate(obj)],
                    "maxlen": obj.maxlen}
        if t is self._bounded_cls:
            return {"$bounded": obj.limit, "items": self._pairs(obj, where, d)}
        if t is dict:
            if all(type(k) is str and not k.startswith("$") for k in obj):
                return {k: self.value(v, f"{where}.{k}", d) for k, v in obj.items()}
            return {"$dict": self._pairs(obj, where, d)}
        if t is self._config_cls:
            return {"$config": self.config(obj)}
        if obj is self._space and not self._plain:
            return {"$space": 0}
        if t is self._status_cls:
            return {"$status": obj.value}
        if t is self._trial_cls:
            fields = {f.name: self.value(getattr(obj, f.name), f"{where}.{f.name}", d)
                      for f in dataclasses.fields(obj)}
            return {"$trial": fields}
        if isinstance(obj, np.ndarray):
            return self._array(obj, where)
        if isinstance(obj, np.generic):
            if obj.dtype.kind not in _ARRAY_KINDS:
                raise CheckpointError(f"checkpoint: {where}: numpy scalar of dtype {obj.dtype} is not data")
            return {"$npscalar": obj.dtype.str, "v": self.value(obj.item(), where, d)}
        if t is np.random.Generator:
            return {"$rng": self.value(obj.bit_generator.state, f"{where}.state", d)}
        key = self._helpers.get(t)
        if key is not None:
            return {"$obj": key, "attrs": self.value(dict(vars(obj)), where, d)}
        state_dict = None if self._plain else getattr(obj, "state_dict", None)
        if callable(state_dict) and callable(getattr(obj, "load_state_dict", None)):
            state = state_dict()
            if not isinstance(state, dict):
                raise CheckpointError(f"checkpoint: {where}: state_dict() of {t.__name__} must return a dict")
            return {"$nested": self.value(state, where, d)}
        raise CheckpointError(
            f"checkpoint: {where} holds a {t.__module__}.{t.__qualname__}, which is not checkpoint data "
            "(override state_dict()/load_state_dict() to store it as plain data)"
        )

    def _pairs(self, obj: Mapping[Any, Any], where: str, depth: int) -> list[list[Any]]:
        # A result cache holds thousands of entries: naming each one (the repr of its key) cost more
        # than encoding it, so the entry is named only when one is not checkpoint data.
        try:
            return [[self.value(k, where, depth), self.value(v, where, depth)] for k, v in obj.items()]
        except CheckpointError:
            pass
        return [[self.value(k, f"{where} key", depth), self.value(v, f"{where}[{k!r}]", depth)]
                for k, v in obj.items()]

    @staticmethod
    def _array(arr: np.ndarray, where: str) -> dict[str, Any]:
        if arr.dtype.kind not in _ARRAY_KINDS:
            raise CheckpointError(f"checkpoint: {where}: numpy array of dtype {arr.dtype} is not data")
        data = np.ascontiguousarray(arr).tobytes()
        return {"$ndarray": arr.dtype.str, "shape": list(arr.shape), "data": base64.b64encode(data).decode()}


class _Decoder:
    def __init__(self, space: Any, configs: Any) -> None:
        from perftune.search._base import NestedState, _rebuild_bounded
        from perftune.space import Config
        from perftune.trial import Status, Trial

        self._config_cls = Config
        if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
            raise ValueError("the configuration table is not a list of objects")
        self._space = space
        self._configs = [Config.from_json(c, space=space) for c in configs]
        self._trial_cls = Trial
        self._status_cls = Status
        self._rebuild_bounded = _rebuild_bounded
        self._nested_cls = NestedState
        self._helpers = _state_classes()
        self._trial_fields = {f.name for f in dataclasses.fields(Trial)}

    def value(self, obj: Any, depth: int = 0) -> Any:  # noqa: PLR0911, PLR0912 - one case per tag
        if depth > _MAX_DEPTH:
            raise ValueError("nested too deeply")
        if obj is None or isinstance(obj, bool | int | float | str):
            return obj
        d = depth + 1
        if isinstance(obj, list):
            return [self.value(v, d) for v in obj]
        if not isinstance(obj, dict):
            raise ValueError(f"unexpected JSON value {type(obj).__name__}")
        tags = [k for k in obj if k.startswith("$")]
        if not tags:
            return {k: self.value(v, d) for k, v in obj.items()}
        if len(tags) != 1:
            raise ValueError(f"an object with several tags {sorted(tags)}")
        tag = tags[0]
        body = obj[tag]
        if tag == "$float":
            if body not in ("nan", "inf", "-inf"):
                raise ValueError(f"bad float {body!r}")
            return float(body)
        if tag == "$tuple":
            return tuple(self._list(body, d))
        if tag == "$set":
            return set(self._list(body, d))
        if tag == "$frozenset":
            return frozenset(self._list(body, d))
        if tag == "$deque":
            maxlen = obj.get("maxlen")
            if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
                raise ValueError("bad deque maxlen")
            return collections.deque(self._list(body, d), maxlen=maxlen)
        if tag == "$bounded":
            if type(body) is not int or body < 1:
                raise ValueError("bad BoundedDict limit")
            return self._rebuild_bounded(body, self._pairs(obj.get("items"), d))
        if tag == "$dict":
            return dict(self._pairs(body, d))
        if tag == "$config":
            if type(body) is not int or not 0 <= body < len(self._configs):
                raise ValueError(f"bad configuration index {body!r}")
            return self._configs[body]
        if tag == "$space":
            return self._space
        if tag == "$status":
            return self._status_cls(body)
        if tag == "$trial":
            if not isinstance(body, dict) or not set(body) <= self._trial_fields or "id" not in body:
                raise ValueError("bad trial")
            trial = self._trial_cls(**{k: self.value(v, d) for k, v in body.items()})
            if (type(trial.id) is not int or not isinstance(trial.config, self._config_cls)
                    or not isinstance(trial.status, self._status_cls)):
                raise ValueError("bad trial")
            return trial
        if tag == "$ndarray":
            return self._array(obj)
        if tag == "$npscalar":
            dtype = self._dtype(body)
            return dtype.type(self.value(obj.get("v"), d))
        if tag == "$rng":
            return self._generator(self.value(body, d))
        if tag == "$obj":
            cls = self._helpers.get(body) if isinstance(body, str) else None
            if cls is None:
                raise ValueError(f"class {body!r} is not one a checkpoint may hold")
            attrs = self.value(obj.get("attrs"), d)
            if not isinstance(attrs, dict):
                raise ValueError(f"bad attributes of {body}")
            instance: Any = object.__new__(cls)
            instance.__dict__.update(attrs)
            return instance
        if tag == "$nested":
            state = self.value(body, d)
            if not isinstance(state, dict):
                raise ValueError("bad nested state")
            return self._nested_cls(state)
        raise ValueError(f"unknown tag {tag!r}")

    def _list(self, body: Any, depth: int) -> list[Any]:
        if not isinstance(body, list):
            raise ValueError("expected a list")
        return [self.value(v, depth) for v in body]

    def _pairs(self, body: Any, depth: int) -> list[tuple[Any, Any]]:
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise ValueError("expected a list of pairs")
        return [(self.value(k, depth), self.value(v, depth)) for k, v in body]

    @staticmethod
    def _dtype(text: Any) -> np.dtype[Any]:
        if not isinstance(text, str) or len(text) > 8:
            raise ValueError(f"bad dtype {text!r}")
        dtype = np.dtype(text)
        if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise ValueError(f"dtype {text!r} is not a plain numeric dtype")
        return dtype

    def _array(self, obj: dict[str, Any]) -> np.ndarray:
        dtype = self._dtype(obj["$ndarray"])
        shape = obj.get("shape")
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            raise ValueError("bad array shape")
        raw = base64.b64decode(obj.get("data", ""), validate=True)
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise ValueError("array data does not match its shape")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()

    @staticmethod
    def _generator(state: Any) -> np.random.Generator:
        name = state.get("bit_generator") if isinstance(state, dict) else None
        cls = _BIT_GENERATORS.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ValueError(f"unknown bit generator {name!r}")
        bit_generator = cls()
        bit_generator.state = state
        return np.random.Generator(bit_generator)


def _perftune_version() -> str:
    from perftune._version import __version__

    return __version__


def encode(payload: Mapping[str, Any], space: Any) -> bytes:
    """Encode ``payload`` (a mapping of checkpoint data) as versioned JSON bytes.

    Raises:
        CheckpointError: the payload holds something that is not checkpoint data.
    """
    encoder = _Encoder(space)
    body = encoder.value(dict(payload), "state")
    document = {"format": FORMAT, "version": FORMAT_VERSION, "perftune": _perftune_version(),
                "configs": encoder.configs, "state": body}
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


def data_problem(value: Any, space: Any, where: str) -> str | None:
    """Why ``value`` cannot go into a checkpoint as plain data (decoded as itself), or None when it can.

    For values the driver keeps for others (what objectives publish through their ``EvalContext``):
    numbers, strings, containers, numpy data, configurations and trials, not objects.

    Example:
        >>> from perftune.space import Int, Space
        >>> space = Space({"x": Int(0, 9)})
        >>> data_problem({"weights": [0.5, 1.0]}, space, "shared['risk']") is None
        True
        >>> data_problem(object(), space, "shared['lock']")
        "checkpoint: shared['lock'] holds a builtins.object, which is not checkpoint data"
    """
    try:
        _Encoder(space, plain=True).value(value, where)
    except CheckpointError as error:
        return str(error).split(" (override", 1)[0]
    return None


def decode(blob: bytes, space: Any, *, what: str = "checkpoint") -> dict[str, Any]:
    """Decode a checkpoint written by :func:`encode`; ``what`` names it in errors.

    Raises:
        CheckpointError: the blob is an old pickle, not a perftune checkpoint, of another format
            version or perftune version, or corrupt. The message is one line.
    """
    if blob[:1] == b"\x80":
        raise CheckpointError(f"{what} is in the old pickle format, which perftune no longer loads "
                              "(it could run code): start a new run")
    try:
        document = json.loads(blob)
    except (ValueError, RecursionError):
        raise CheckpointError(f"{what} is corrupt (not JSON)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointError(f"{what} is not a perftune checkpoint")
    version = document.get("version")
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{what} has format v{version}; this perftune reads v{FORMAT_VERSION}")
    written_by = document.get("perftune")
    if written_by != _perftune_version():
        raise CheckpointError(f"{what} was written by perftune {written_by}; this is perftune "
                              f"{_perftune_version()}: resume it with that version")
    try:
        state = _Decoder(space, document.get("configs")).value(document.get("state"))
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError, AttributeError) as exc:
        raise CheckpointError(f"{what} is corrupt: {exc}") from None
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. SpaceError from a config that does not decode
        raise CheckpointError(f"{what} is corrupt: {type(exc).__name__}: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{what} is corrupt: the state is not an object")
    return state
