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
import stat
from collections.abc import Mapping
from typing import Any

from perftune._plugins import check_registration, find_entry_points, lookup
from perftune.errors import PerftuneError, TaskError

__all__ = [
    "DEFAULT_KIND",
    "ENTRY_POINT_GROUP",
    "MAX_TASK_FILE_BYTES",
    "from_task_file",
    "get",
    "names",
    "read_task_text",
    "register",
    "task_kind",
]

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


#: The largest task file read (a task file is a short TOML text; this bounds what a mistaken path costs).
MAX_TASK_FILE_BYTES = 1 << 20

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def read_task_text(path: str | os.PathLike[str]) -> str:
    """The text of a task file: a regular file of at most :data:`MAX_TASK_FILE_BYTES`, in UTF-8.

    Nothing but a regular file is opened for reading (``/dev/zero`` would never end, a FIFO would
    block), and no more than the limit is read.

    Raises:
        TaskError: One line naming the file (and the line of a byte that is not UTF-8): missing,
            not a regular file, too large, unreadable, not UTF-8, or starting with a byte-order mark.
    """
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise TaskError(f"{name}: no such task file") from None
    except OSError as error:
        raise TaskError(f"{name}: cannot read the task file: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = next((what for test, what in _FILE_KINDS if test(info.st_mode)), "not a file")
        raise TaskError(f"{name}: the task file is not a regular file ({kind})")
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, opening it does not block.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TaskError(f"{name}: the task file is not a regular file")
            data = f.read(MAX_TASK_FILE_BYTES + 1)
    except OSError as error:
        raise TaskError(f"{name}: cannot read the task file: {error.strerror or error}") from None
    if len(data) > MAX_TASK_FILE_BYTES:
        raise TaskError(
            f"{name}: the task file is larger than {MAX_TASK_FILE_BYTES >> 20} MiB "
            f"({max(info.st_size, len(data))} bytes): is it the right file?"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        raise TaskError(
            f"{name}:1: the file starts with a UTF-8 byte-order mark (BOM), which TOML does not allow: "
            "save it as UTF-8 without BOM"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        byte = data[error.start]
        raise TaskError(f"{name}:{line}: not UTF-8 text (byte 0x{byte:02x})") from None


def target_table(path: str) -> dict[str, Any] | None:
    """The ``[target]`` table of a task file; None when it has none (or cannot be read: the loader says)."""
    import tomllib

    try:
        data = tomllib.loads(read_task_text(path))
    except (TaskError, tomllib.TOMLDecodeError):
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
