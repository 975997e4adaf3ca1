"""One way to replace a small state file atomically: every writer of a JSON state file uses it.

A reader (another process, or the same one after a crash) sees the old file or the new one, never a
half-written one: the text goes to a temporary file of a unique name in the same folder, is flushed to
the disk, and is renamed over the target (``os.replace``, atomic on POSIX within one file system). A
failed write leaves no temporary file behind. Two writers of the same file at once do not mix their
texts; the last rename wins. A writer that reads the file, merges into it and writes it back holds
:func:`locked` for the whole of it, so that no other such writer's merge is lost in between.

Imports nothing of perftune, so that every layer may use it (``docs/architecture.md``).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

__all__ = ["locked", "write_bytes_atomic", "write_text_atomic"]


class locked:  # noqa: N801 - used as a function: ``with locked(path):``
    """An exclusive lock on ``NAME.lock`` beside ``path``, held in a ``with`` block, for a whole
    read-merge-write: two writers of one file take turns. Making it makes the folder and the lock file and
    raises ``OSError`` when it cannot (before the ``with``, so that a caller can tell that apart from the
    block's own errors). The lock file stays (removing it would race with the next writer)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(p.with_name(p.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)

    def __enter__(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing releases the lock


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it, racing other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Replace ``path`` by a file holding ``text`` (UTF-8), atomically; return the path written.

    Args:
        path: The file to write; its folder must exist.
        text: The whole new content. The file gets the mode a plain ``open(path, "w")`` would give it
            (0666 less the umask), not the temporary file's 0600.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full; the target is unchanged.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> write_text_atomic(folder / "state.json", '{"n": 1}').read_text()
        '{"n": 1}'
    """
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """:func:`write_text_atomic` for bytes (a gzip file, say).

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> write_bytes_atomic(folder / "blob", b"\x00\x01").read_bytes()
        b'\x00\x01'
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
