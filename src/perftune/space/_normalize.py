"""The one normalization of parameter values: plain, hashable Python.

Config and every parameter type use it, so a value a parameter produces compares equal to (and hashes
like) the value a Config built from it holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["normalize_value"]

_PLAIN = (int, float, str, bool, type(None))


def normalize_value(value: Any) -> Any:
    """Return ``value`` as plain, hashable Python: numpy scalars to Python, lists/arrays to tuples.

    Example:
        >>> normalize_value([np.int64(1), (2.0, "a")])
        (1, (2.0, 'a'))
    """
    t = type(value)
    if t in _PLAIN:
        return value
    if t is tuple:
        # Configs are built often from tuples that are already plain; skip rebuilding them.
        if all(type(v) in _PLAIN for v in value):
            return value
        return tuple(normalize_value(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(normalize_value(v) for v in value)
    return value
