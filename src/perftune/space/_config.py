"""Config: a frozen, hashable mapping from parameter names to values.

Example:
    >>> c = Config({"x": 3, "order": ["a", "b"]})
    >>> c["order"]
    ('a', 'b')
    >>> c.replace(x=4)["x"]
    4
    >>> Config.from_json(c.to_json()) == c
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from perftune.errors import SpaceError
from perftune.space._normalize import normalize_value
from perftune.space._selector import Levels

if TYPE_CHECKING:
    from perftune.space._space import Space

__all__ = ["Config", "normalize_value"]


# json.dumps(..., sort_keys=True) builds an encoder on every call; the driver writes one per trial.
_encode_sorted = json.JSONEncoder(sort_keys=True).encode
_JSON_SCALARS = frozenset({int, float, str, bool, type(None)})


def _to_json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, Levels):
        return value.to_json()
    return value


def _from_json(key: str, value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(key, v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"cutoffs", "choices"}:
            return Levels.from_json(value)
        raise SpaceError(f"config value of {key!r}: a JSON object is not a parameter value")
    return value


class Config(Mapping[str, Any]):
    """A frozen, hashable configuration: parameter name -> value; inactive parameters are absent.

    Values are normalized on construction (numpy scalars become Python scalars, lists become tuples)
    so that equal configurations hash equally. The hash is computed once and cached.

    Args:
        data: A mapping (or iterable of pairs) of names to values.
        **values: More names and values.

    Example:
        >>> a = Config(x=1, y="fast")
        >>> a == Config({"y": "fast", "x": 1}) and hash(a) == hash(Config({"y": "fast", "x": 1}))
        True
        >>> dict(a)
        {'x': 1, 'y': 'fast'}
    """

    __slots__ = ("_data", "_hash")

    _data: dict[str, Any]
    _hash: int | None

    def __init__(self, data: Mapping[str, Any] | Any = None, /, **values: Any) -> None:
        raw: dict[str, Any] = {} if data is None else dict(data)
        if values:
            raw.update(values)
        self._data = {str(k): normalize_value(v) for k, v in raw.items()}
        self._hash = None

    @classmethod
    def _trusted(cls, data: dict[str, Any]) -> Config:
        """Wrap an already-normalized dict without copying (internal fast path)."""
        self = object.__new__(cls)
        self._data = data
        self._hash = None
        return self

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(frozenset(self._data.items()))
        return h

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            if self is other:
                return True
            if self._hash is not None and other._hash is not None and self._hash != other._hash:
                return False
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __repr__(self) -> str:
        return f"Config({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Config._trusted, (self._data,))

    def replace(self, **values: Any) -> Config:
        """Return a copy with some values changed (or added).

        Example:
            >>> Config(x=1, y=2).replace(y=3)
            Config({'x': 1, 'y': 3})
        """
        data = dict(self._data)
        for k, v in values.items():
            data[k] = normalize_value(v)
        return Config._trusted(data)

    def without(self, *names: str) -> Config:
        """Return a copy without the given names."""
        return Config._trusted({k: v for k, v in self._data.items() if k not in names})

    def to_dict(self) -> dict[str, Any]:
        """A plain ``dict`` copy."""
        return dict(self._data)

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-compatible dict (tuples become lists, Levels become objects), sorted by name."""
        return {k: _to_json(self._data[k]) for k in sorted(self._data)}

    def to_json(self) -> str:
        """JSON text with sorted keys.

        Example:
            >>> Config(b=(1, 2), a=0.5).to_json()
            '{"a": 0.5, "b": [1, 2]}'
        """
        data = self._data
        for v in data.values():
            if type(v) not in _JSON_SCALARS:
                return _encode_sorted(self.to_json_dict())
        return _encode_sorted(data)  # only scalars: the same text as through to_json_dict

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any], space: Space | None = None) -> Config:
        """Read a configuration from JSON text or an already-parsed dict.

        With ``space``, each value is decoded by its parameter (lists back to permutation tuples,
        objects back to :class:`Levels`); names the space does not know are kept as they are (so
        ``space.is_valid`` can reject them).

        Raises:
            SpaceError: The text is not a JSON object, or a value cannot be decoded.
        """
        if isinstance(text, str | bytes):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise SpaceError(f"config JSON: {e}") from None
        else:
            data = dict(text)
        if not isinstance(data, dict):
            raise SpaceError(f"config JSON: expected an object, got {type(data).__name__}")
        out: dict[str, Any] = {}
        params = space.params if space is not None else {}
        for k, v in data.items():
            p = params.get(k)
            out[k] = normalize_value(p.from_json_value(v)) if p is not None else _from_json(k, v)
        return cls._trusted(out)
