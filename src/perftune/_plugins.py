"""What the technique and target registries share: lazy built-ins and plug-ins from entry points.

Each registry (:mod:`perftune.search._registry`, :mod:`perftune.targets._registry`) keeps its own state in
module globals (its built-in table, the classes registered in this process, the entry points found once);
the lookup and the checks of a new registration are the same for both and live here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["check_registration", "find_entry_points", "lookup"]


def find_entry_points(group: str) -> dict[str, Any]:
    """Installed entry points of ``group`` by name (the first of a name wins); {} if they cannot be read."""
    found: dict[str, Any] = {}
    try:
        for ep in metadata.entry_points(group=group):
            found.setdefault(ep.name, ep)
    except Exception:  # a broken installation must not break the built-ins
        return {}
    return found


def lookup(
    key: str,
    what: str,
    registered: dict[str, type],
    builtin: Mapping[str, str],
    plugins: Callable[[], Mapping[str, Any]],
) -> type | None:
    """The class named ``key``: registered in this process, else built in (``"module:attr"``, imported now),
    else a plug-in of ``plugins()`` (called only then; loaded now and remembered in ``registered``); None
    when there is none.

    Raises:
        PerftuneError: a plug-in that fails to load (``what`` names the kind of thing: "technique").
    """
    if key in registered:
        return registered[key]
    path = builtin.get(key)
    if path is not None:
        module, _, attr = path.partition(":")
        cls: type = getattr(importlib.import_module(module), attr)
        return cls
    ep = plugins().get(key)
    if ep is None:
        return None
    try:
        cls = ep.load()
    except Exception as exc:
        raise PerftuneError(f"{what} {key!r}: plug-in {ep.value!r} failed to load: {exc}") from exc
    registered[key] = cls
    return cls


def check_registration(
    cls: type, key: str, what: str, registered: Mapping[str, type], builtin: Mapping[str, str]
) -> None:
    """Refuse to register ``cls`` as ``key`` when another class has that name or it is a built-in's.

    Raises:
        PerftuneError: naming the class and the taken name.
    """
    known = registered.get(key)
    if known is not None and known is not cls:
        raise PerftuneError(f"register({cls.__name__}): a {what} named {key!r} is already registered")
    if key in builtin and known is None:
        raise PerftuneError(f"register({cls.__name__}): {key!r} is a built-in {what}")
