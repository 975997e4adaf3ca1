"""A read-only copy of what candidates must read, for a task the sandbox user cannot reach.

When perftune runs as root from a private directory (``/root``, a ``mktemp -d`` folder: mode 0700),
the unprivileged user that candidates run as cannot reach the task directory or its inputs. Rather
than asking anyone to open up their home, the tree is staged once per run: copied under the scratch
root, root-owned, every directory 0755, every file with its own permission bits (so a 0600 file stays
unreadable to candidates, exactly as if the parent directories had been traversable), set-uid and
set-gid bits dropped, symlinks copied as symlinks, anything else (FIFOs, devices, sockets) left out.
A copy larger than the cap (``PERFTUNE_STAGE_MAX_MB``, default 256) is refused with a one-line
reason. The copy is removed when the process that made it exits.

Example:
    >>> stage = Stage.create("/tmp/perftune-0")  # doctest: +SKIP
    >>> stage.add_tree("/root/pt/examples/c_matmul")  # doctest: +SKIP
    '/tmp/perftune-0/stage-123-abcd/tree0'
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Sequence

__all__ = ["Stage", "StageError", "stage_limit_bytes"]

_MiB = 1024 * 1024
_MAX_FILES = 100_000


class StageError(Exception):
    """The staged copy cannot be made (too large, unreadable); ``str()`` is the one-line reason."""


def stage_limit_bytes() -> int:
    """The cap on a run's staged copy: ``PERFTUNE_STAGE_MAX_MB`` (default 256) MiB."""
    text = os.environ.get("PERFTUNE_STAGE_MAX_MB", "256")
    try:
        return int(float(text) * _MiB)
    except ValueError:
        raise StageError(f"PERFTUNE_STAGE_MAX_MB: expected a number of MB, got {text!r}") from None


class Stage:
    """One run's staged copies (see the module docstring).

    Args:
        path: The stage's own directory (made by :meth:`create`).
        max_bytes: Cap on the bytes of all files copied into it.
    """

    def __init__(self, path: str, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.n_bytes = 0
        self.n_files = 0
        self._n = 0

    @classmethod
    def create(cls, root: str, *, max_bytes: int | None = None) -> Stage:
        """A fresh stage under ``root``, removed when this process exits."""
        _remove_orphans(root)
        path = tempfile.mkdtemp(prefix=f"stage-{os.getpid()}-", dir=root)
        os.chmod(path, 0o755)
        owner = os.getpid()

        def cleanup() -> None:
            if os.getpid() == owner:
                shutil.rmtree(path, ignore_errors=True)

        atexit.register(cleanup)
        return cls(path, stage_limit_bytes() if max_bytes is None else max_bytes)

    def _target(self, source: str) -> str:
        self._n += 1
        holder = os.path.join(self.path, str(self._n))
        os.mkdir(holder, 0o755)
        os.chmod(holder, 0o755)
        return os.path.join(holder, os.path.basename(source.rstrip(os.sep)) or "root")

    def add_tree(self, source: str) -> str:
        """Copy the directory ``source``; returns the path of the copy."""
        target = self._target(source)
        self._copy_dir(source, target)
        return target

    def add_selection(self, base: str, names: Sequence[str]) -> str:
        """Copy the directory ``base`` with only the regular files ``names`` (paths relative to it;
        others are skipped); returns the path of the copy."""
        target = self._target(base)
        os.mkdir(target, 0o755)
        os.chmod(target, 0o755)
        base_real = os.path.realpath(base)
        for name in names:
            source = os.path.realpath(os.path.join(base, name))
            if not source.startswith(base_real + os.sep):
                continue  # outside base: an absolute path the candidate reaches (or not) as it is
            try:
                st = os.stat(source)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            dst = os.path.join(target, os.path.relpath(source, base_real))
            for parent in reversed(_parents(dst, target)):
                if not os.path.isdir(parent):
                    os.mkdir(parent, 0o755)
                    os.chmod(parent, 0o755)
            self._copy_file(source, dst, st)
        return target

    def add_file(self, source: str) -> str:
        """Copy the regular file ``source``; returns the path of the copy."""
        target = self._target(source)
        st = os.stat(source)
        self._copy_file(source, target, st)
        return target

    def _count(self, source: str, size: int) -> None:
        self.n_bytes += size
        self.n_files += 1
        if self.n_bytes > self.max_bytes or self.n_files > _MAX_FILES:
            raise StageError(
                f"{source}: staging the task for the sandbox user would copy more than "
                f"{self.max_bytes // _MiB} MB or {_MAX_FILES} files; put the task file in a smaller "
                "directory, raise PERFTUNE_STAGE_MAX_MB, or make the directory reachable (o+x)"
            )

    def _copy_file(self, source: str, target: str, st: os.stat_result) -> None:
        self._count(source, st.st_size)
        try:
            shutil.copyfile(source, target, follow_symlinks=False)
        except OSError as error:
            raise StageError(f"{source}: cannot be staged for the sandbox user: {error.strerror}") from None
        # A root-owned copy of a set-uid file would be a root set-uid program.
        os.chmod(target, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))

    def _copy_dir(self, source: str, target: str) -> None:
        stage_real = os.path.realpath(self.path)
        os.mkdir(target, 0o755)
        os.chmod(target, 0o755)
        try:
            entries = list(os.scandir(source))
        except OSError as error:
            raise StageError(f"{source}: cannot be staged for the sandbox user: {error.strerror}") from None
        for entry in entries:
            dst = os.path.join(target, entry.name)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                self._count(entry.path, 0)
                os.symlink(os.readlink(entry.path), dst)
            elif stat.S_ISDIR(st.st_mode):
                if os.path.realpath(entry.path) in (stage_real, os.path.dirname(stage_real)):
                    continue  # the scratch root inside the task directory: do not copy it into itself
                self._copy_dir(entry.path, dst)
            elif stat.S_ISREG(st.st_mode):
                self._copy_file(entry.path, dst, st)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _parents(path: str, top: str) -> list[str]:
    """The directories between ``top`` (excluded) and ``path`` (excluded), innermost first."""
    out = []
    parent = os.path.dirname(path)
    while parent != top and parent.startswith(top + os.sep):
        out.append(parent)
        parent = os.path.dirname(parent)
    return out


def _remove_orphans(root: str) -> None:
    """Stages of runs whose process died without cleaning up (killed, os._exit)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            parts = name.split("-")
            if name.startswith("stage-") and len(parts) >= 3 and parts[1].isdigit():
                try:
                    os.kill(int(parts[1]), 0)
                except ProcessLookupError:
                    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                except OSError:
                    pass
