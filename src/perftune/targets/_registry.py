"""The target registry: built-ins by name, plus plug-ins from the ``perftune.targets`` entry points.

Like the technique registry (:mod:`perftune.search`): built-in targets are imported on first use, so
that ``import perftune.targets`` stays cheap and a target's heavy dependencies load only when it runs;
registration is explicit, nothing registers itself on import.

Example:
    >>> from perftune.targets import names
    >>> {"command", "flags", "llvm", "choice", "replay"} <= set(names())
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from perftune._plugins import check_registration, find_entry_points, lookup
from perftune.errors import PerftuneError

__all__ = ["DEFAULT_KIND", "ENTRY_POINT_GROUP", "from_task_file", "get", "names", "register", "task_kind"]

ENTRY_POINT_GROUP = "perftune.targets"

#: The kind of a task file without a ``[target]`` table.
DEFAULT_KIND = "command"

_BUILTIN: dict[str, str] = {
    "command": "perftune.targets.command._target:CommandTarget",
    "flags": "perftune.targets.flags._target:FlagsTarget",
    "llvm": "perftune.targets.llvm._target:LlvmTarget",
    "choice": "perftune.targets.choice._target:ChoiceTarget",
    "replay": "perftune.targets.replay._target:ReplayTarget",
}

_registered: dict[str, type] = {}
_entry_points: dict[str, Any] | None = None


def _plugins() -> dict[str, Any]:
    global _entry_points
    if _entry_points is None:
        _entry_points = find_entry_points(ENTRY_POINT_GROUP)
    return _entry_points


def register(cls: type) -> type:
    """Register a target class under its ``kind`` (usable as a decorator).

    Args:
        cls: A class with a non-empty ``kind`` class attribute and the methods of
            :class:`perftune.targets.Target` (subclass :class:`perftune.targets.TargetBase` for the
            optional ones).

    Returns:
        ``cls`` unchanged.

    Raises:
        PerftuneError: if the class has no kind, lacks a method, or the kind is taken by another class.
    """
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        what = getattr(cls, "__name__", cls)
        raise PerftuneError(f"register({what!r}): the class needs a non-empty `kind`")
    for method in ("space", "evaluate", "verify", "explain"):
        if not callable(getattr(cls, method, None)):
            raise PerftuneError(f"register({cls.__name__}): target {kind!r} has no {method}() method "
                                "(subclass perftune.targets.TargetBase for the optional ones)")
    check_registration(cls, kind, "target", _registered, _BUILTIN)
    _registered[kind] = cls
    return cls


def names() -> list[str]:
    """Kinds of every available target: built-ins, registered classes and entry-point plug-ins."""
    return sorted({*_BUILTIN, *_registered, *_plugins()})


def get(kind: str) -> type:
    """The target class registered as ``kind``.

    Raises:
        PerftuneError: for an unknown kind; the message lists the known ones.
    """
    cls = lookup(kind, "target", _registered, _BUILTIN, _plugins)
    if cls is not None:
        return cls
    raise PerftuneError(f"unknown target {kind!r}; known targets: {', '.join(names())}")


def target_table(path: str) -> dict[str, Any] | None:
    """The ``[target]`` table of a task file; None when it has none (or cannot be read: the loader says)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    table = data.get("target")
    return table if isinstance(table, dict) else None


def kind_of(path: str, table: Mapping[str, Any] | None) -> str:
    """The target kind a task file names (``[target] kind``), or :data:`DEFAULT_KIND` without a table."""
    if table is None:
        return DEFAULT_KIND
    kind = table.get("kind")
    if not isinstance(kind, str) or not kind:
        raise PerftuneError(f"{path}: key target.kind: expected the name of a target "
                            f"(known: {', '.join(names())})")
    return kind


def task_kind(path: str | os.PathLike[str]) -> str:
    """The kind of target a task file names: ``[target] kind``, or :data:`DEFAULT_KIND` without a table.

    A file that cannot be read or parsed is the command target's: its loader reports the problem with the
    file, key and line.

    Raises:
        PerftuneError: a ``[target]`` table whose ``kind`` is missing or not a string.
    """
    path = os.fspath(path)
    return kind_of(path, target_table(path))


def from_task_file(path: str | os.PathLike[str]) -> Any:
    """The target a task file describes: ``[target] kind`` looked up here, the command target without one.

    Raises:
        PerftuneError: an unknown kind (naming the file and key), or the target's own complaint.
    """
    path = os.fspath(path)
    table = target_table(path)
    kind = kind_of(path, table)
    try:
        cls = get(kind)
    except PerftuneError as error:
        raise PerftuneError(f"{path}: key target.kind: {error}") from None
    return cls.from_task(path, table or {})  # type: ignore[attr-defined]
