"""Every run of a candidate starts from the same files: its scratch directory as the build step left it.

A candidate's build and run steps share one scratch directory (also its ``HOME`` and ``TMPDIR``), and
its runs are repeated in it. Without care, a run sees what the runs before it left: a hostile candidate
does the work once, leaves a marker (or replaces the program the build made with a script that prints
a saved output), and every later run is a fast replay. So the directory is recorded right after the
build (empty, without a build step) and put back before each run after the first:

* an entry that was not there (a file, a link, a directory with all below it) is removed, whatever its
  mode: a directory the candidate made unwritable or unreadable is opened up first (the tuner may run
  as root or as the candidate's own user);
* a recorded entry that was removed, replaced (another inode or type) or changed (size, modification
  or change time: ``st_ctime`` cannot be set back by a user, unlike ``st_mtime``) is not put back: it is
  reported, and the trial fails. A recorded directory may gain entries and lose them again, so only
  its inode and type are compared; its permissions, times and extended attributes (ACLs among them)
  are set back (a run could keep a saved output in them, as ``touch -d``, ``chmod`` and ``setfattr``
  write them; a file's extended attributes move its change time, which is compared). After the
  recording, the tuner waits until the file system's clock (a coarse tick) has moved past the newest
  change time recorded, so that no change a run makes can carry a recorded change time. Access times
  are not compared: the scratch directory is mounted without them inside the sandbox, and where the
  sandbox cannot change that (a user namespace: perftune not run by root) the build's files get access
  times a week ahead when they are recorded, which a read does not move under ``relatime``, the usual
  mount option (only ``strictatime`` would); setting one back (``touch -a``) moves the change time.

Nothing is followed out of the directory: every step is relative to an open directory (``openat``,
``unlinkat`` with ``O_NOFOLLOW``), a symbolic link is removed as a link, and a directory is entered only
when it is the one that was listed. The candidate's processes are all ended by the time this runs.

The walk is bounded: a scratch directory holding more than :data:`MAX_ENTRIES` entries after the build,
or after a run (new entries included), is not walked to the end; :meth:`ScratchState.record` raises and
:meth:`ScratchState.restore` reports it, so the trial fails rather than be measured from an unknown
start (a cheap walk per run is the point; a real program rarely leaves that many files).

Example:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> open(os.path.join(root, "prog"), "w").close()
    >>> state = ScratchState.record(root)
    >>> os.mkdir(os.path.join(root, "cache"))
    >>> state.restore() is None, sorted(os.listdir(root))
    (True, ['prog'])
    >>> with open(os.path.join(root, "prog"), "w") as f:
    ...     _ = f.write("echo result 42")
    >>> print(state.restore())  # doctest: +ELLIPSIS
    a run changed 'prog', which the build step made (its size, inode or change time differ): ...
    >>> os.remove(os.path.join(root, "prog")); os.rmdir(root)
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time

__all__ = ["MAX_ENTRIES", "ScratchError", "ScratchState"]

#: Entries walked at most, after the build and before each run (see the module's docstring).
MAX_ENTRIES = 100_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# What is recorded of an entry: (st_ino, st_size, st_mtime_ns, st_ctime_ns, the file type of st_mode).
_Key = tuple[int, int, int, int, int]
# And of a directory, set back before each run: (permission bits, st_atime_ns, st_mtime_ns, its extended
# attributes as sorted (name, value) pairs).
_DirKey = tuple[int, int, int, tuple[tuple[str, bytes], ...]]


#: How far ahead of now the access times of the build's files are set when they are recorded.
_ATIME_AHEAD_NS = 7 * 24 * 3600 * 10**9


class ScratchError(Exception):
    """The scratch directory cannot be recorded (too many entries, unreadable); ``str()`` is one line."""


def _key(st: os.stat_result) -> _Key:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, stat.S_IFMT(st.st_mode))


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _open_up(fd: int) -> None:
    """Give the directory open as ``fd`` to its owner (read, write, search) before working in it."""
    with contextlib.suppress(OSError):
        mode = os.fstat(fd).st_mode
        if mode & 0o700 != 0o700:
            os.fchmod(fd, stat.S_IMODE(mode) | 0o700)


def _open_dir(parent: int | None, name: str, expected: os.stat_result | None = None) -> int:
    """Open the directory ``name`` of the open directory ``parent`` (None: ``name`` is a path), never
    through a link.

    One that cannot be read (mode 000: the candidate made it so) is opened without reading rights first,
    its mode opened up through that handle, and then opened again. With ``expected``, a directory that
    is not the one listed (swapped since) is refused.
    """
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        path_fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            mode = os.fstat(path_fd).st_mode
            # fchmod refuses an O_PATH handle; its /proc link names that very directory.
            os.chmod(f"/proc/self/fd/{path_fd}", stat.S_IMODE(mode) | 0o700)
        finally:
            os.close(path_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    if expected is not None:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
            os.close(fd)
            raise OSError(errno.ESTALE, "it changed while the scratch directory was walked")
    return fd


def _xattrs(fd: int) -> tuple[tuple[str, bytes], ...]:
    """The extended attributes of the open file ``fd`` (none where the file system has none)."""
    try:
        names = os.listxattr(fd)
    except OSError as error:
        if error.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return ()
        raise
    out = []
    for name in names:
        try:
            out.append((name, os.getxattr(fd, name)))
        except OSError as error:
            if error.errno != errno.ENODATA:  # removed meanwhile
                raise
    return tuple(sorted(out))


def _set_back(fd: int, want: _DirKey) -> None:
    """Give the directory open as ``fd`` the permissions, extended attributes and times ``want`` (its
    change time is now)."""
    mode, atime_ns, mtime_ns, xattrs = want
    have = dict(_xattrs(fd))
    if have != dict(xattrs):
        for name in have:
            if name not in dict(xattrs):
                os.removexattr(fd, name)
        for name, value in xattrs:
            if have.get(name) != value:
                os.setxattr(fd, name, value)
    if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
        os.fchmod(fd, mode)
    os.utime(fd, ns=(atime_ns, mtime_ns))


def _pin_access_time(parent: int, name: str, st: os.stat_result) -> os.stat_result:
    """Set the access time of the regular file ``name`` ahead of now and of its change time, so that
    reading it under ``relatime`` leaves it alone; returns its status afterwards (the change time moved).
    A file whose time cannot be set (another owner, without root) keeps its own."""
    try:
        os.utime(name, ns=(time.time_ns() + _ATIME_AHEAD_NS, st.st_mtime_ns), dir_fd=parent,
                 follow_symlinks=False)
        return _lstat(parent, name)
    except OSError:
        return st


def _list(fd: int) -> list[str]:
    """The names in the open directory ``fd``, opening up its mode when the candidate closed it."""
    try:
        return os.listdir(fd)
    except PermissionError:
        _open_up(fd)
        return os.listdir(fd)


def _lstat(parent: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=parent, follow_symlinks=False)


class _Budget:
    """Entries walked so far, against :data:`MAX_ENTRIES`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.n = 0

    def take(self, count: int) -> bool:
        """Count ``count`` more entries; False once the limit is passed."""
        self.n += count
        return self.n <= self.limit


def _unlink(parent: int, name: str, *, directory: bool) -> None:
    remove = os.rmdir if directory else os.unlink
    try:
        remove(name, dir_fd=parent)
    except PermissionError:
        _open_up(parent)  # the candidate took the write right off a directory of its own
        remove(name, dir_fd=parent)


def _remove_tree(parent: int, name: str, st: os.stat_result, budget: _Budget) -> bool:
    """Remove the entry ``name`` of ``parent`` and, for a directory, all below it (links not followed).

    Returns:
        False when the walk passed the budget (what was walked is removed, the rest is left).

    Raises:
        OSError: An entry cannot be removed.
    """
    if not stat.S_ISDIR(st.st_mode):
        _unlink(parent, name, directory=False)
        return True
    # Depth first without recursion (a candidate may nest directories thousands deep): one open
    # directory per level, with the names in it still to remove (None: not listed yet). A directory
    # the candidate made is opened up (read, write, search) before it is listed and emptied.
    stack: list[tuple[int, int, str, list[str] | None]] = [(parent, _open_dir(parent, name, st), name, None)]
    try:
        while stack:
            up, here, own, pending = stack[-1]
            if pending is None:
                _open_up(here)
                pending = _list(here)
                stack[-1] = (up, here, own, pending)
                if not budget.take(len(pending)):
                    return False
            if not pending:
                stack.pop()
                os.close(here)
                _unlink(up, own, directory=True)
                continue
            child = pending.pop()
            cst = _lstat(here, child)
            if stat.S_ISDIR(cst.st_mode):
                stack.append((here, _open_dir(here, child, cst), child, None))
            else:
                _unlink(here, child, directory=False)
        return True
    finally:
        for _, here, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(here)


class ScratchState:
    """The entries of a scratch directory as the build step left them, to put it back before each run.

    Example:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> state = ScratchState.record(root)  # nothing built: every entry a run makes is removed
        >>> open(os.path.join(root, ".did"), "w").close()
        >>> state.restore(), os.listdir(root)
        (None, [])
        >>> os.rmdir(root)
    """

    def __init__(self, root: str, entries: dict[str, _Key], dirs: dict[str, _DirKey]) -> None:
        self.root = root
        self.entries = entries  # path relative to root -> _key(lstat)
        self.dirs = dirs  # path of each directory, "" for root -> (permissions, atime, mtime)

    @classmethod
    def record(cls, root: str, *, max_entries: int = MAX_ENTRIES) -> ScratchState:
        """The entries below ``root`` now (links not followed).

        The times of the directories are set back after they are listed, so that the first run finds
        them as every later run does.

        Raises:
            ScratchError: More than ``max_entries`` entries, or the directory cannot be read.
        """
        state = cls(root, {}, {})
        problem = state._walk(max_entries, recording=True)
        if problem is not None:
            raise ScratchError(problem)
        state._wait_for_a_later_change_time()
        return state

    def _wait_for_a_later_change_time(self, limit_s: float = 2.0) -> None:
        """Return once a file changed now would get a later change time than every recorded file.

        The kernel stamps a change with a coarse clock (a tick of a few milliseconds; a whole second
        on some file systems): a run that rewrote a file the build had written in the same tick would
        leave its size, times and inode as recorded. So the directory's own times are set to now, read
        back, and set back, until now is past the newest change time recorded (at most ``limit_s``).
        """
        newest = max((k[3] for k in self.entries.values() if k[4] != stat.S_IFDIR), default=None)
        if newest is None:
            return
        try:
            fd = _open_dir(None, self.root)
        except OSError:
            return
        try:
            deadline = time.monotonic() + limit_s
            delay = 0.001
            while True:
                os.utime(fd)
                now = os.fstat(fd).st_mtime_ns
                if now > newest or time.monotonic() > deadline:
                    break
                time.sleep(delay)
                delay = min(2 * delay, 0.1)
            _set_back(fd, self.dirs[""])
        except OSError:
            pass
        finally:
            os.close(fd)

    def restore(self, *, max_entries: int = MAX_ENTRIES) -> str | None:
        """Remove every entry made since :meth:`record`, check the recorded ones, and set the
        permissions and times of the recorded directories back (a run may change them, and adding or
        removing an entry changes them).

        Returns:
            None, or one line: the first recorded entry that a run changed or removed (its path
            relative to the directory, quoted), or why the directory could not be put back (too many
            entries, one that cannot be removed). Nothing recorded is ever put back: the caller fails
            the trial.
        """
        return self._walk(max_entries, recording=False)

    def _walk(self, max_entries: int, *, recording: bool) -> str | None:
        budget = _Budget(max_entries)
        seen: set[str] = set()
        changed: str | None = None
        try:
            top = _open_dir(None, self.root)
        except OSError as error:
            return f"cannot read the scratch directory: {error.strerror}"
        # Depth first: one open directory per level, with the names in it still to visit (None: not
        # listed yet), so that the open handles are as many as the tree is deep.
        stack: list[tuple[int, str, list[str] | None]] = [(top, "", None)]
        try:
            while stack:
                fd, rel, pending = stack[-1]
                if pending is None:
                    if recording:
                        st = os.fstat(fd)
                        self.dirs[rel] = (stat.S_IMODE(st.st_mode), st.st_atime_ns, st.st_mtime_ns,
                                          _xattrs(fd))
                    pending = _list(fd)
                    stack[-1] = (fd, rel, pending)
                    if not budget.take(len(pending)):
                        return self._too_many(max_entries, recording=recording)
                if not pending:  # done with it: its permissions and times as the build left them
                    stack.pop()
                    try:
                        _set_back(fd, self.dirs[rel])
                    finally:
                        os.close(fd)
                    continue
                name = pending.pop()
                path = _join(rel, name)
                st = _lstat(fd, name)
                if recording:
                    if stat.S_ISREG(st.st_mode):
                        st = _pin_access_time(fd, name, st)
                    self.entries[path] = _key(st)
                else:
                    want = self.entries.get(path)
                    if want is None:
                        try:
                            if not _remove_tree(fd, name, st, budget):
                                return self._too_many(max_entries, recording=recording)
                        except OSError as error:
                            return f"cannot remove {path!r}, which a run left: {error.strerror}"
                        continue
                    seen.add(path)
                    problem = _difference(path, want, st)
                    if problem is not None:
                        changed = changed or problem
                        continue  # not entered: what is below it is not the build's
                if stat.S_ISDIR(st.st_mode):
                    stack.append((_open_dir(fd, name, st), path, None))
        except OSError as error:
            where = stack[-1][1] if stack else ""
            return f"cannot read {where or '.'!r} in the scratch directory: {error.strerror}"
        finally:
            for fd, _, _ in stack:
                with contextlib.suppress(OSError):
                    os.close(fd)
        missing = sorted(p for p in self.entries if p not in seen)
        if changed is None and missing and not recording:  # a directory sorts before what was below it
            changed = f"a run removed {missing[0]!r}, which the build step made"
        if changed is not None:
            return f"{changed}: the runs would not all start from the same files"
        return None

    @staticmethod
    def _too_many(max_entries: int, *, recording: bool) -> str:
        if recording:
            return (
                f"the build left more than {max_entries} entries in the scratch directory: too many to "
                "check that every run starts from the same files"
            )
        return (
            f"the scratch directory holds more than {max_entries} entries after a run: too many to "
            "put back between runs"
        )

    def __repr__(self) -> str:
        return f"ScratchState({self.root!r}, {len(self.entries)} entries)"


def _difference(path: str, want: _Key, st: os.stat_result) -> str | None:
    got = _key(st)
    if got[4] != want[4]:
        return f"a run replaced {path!r}, which the build step made, with another kind of file"
    if stat.S_ISDIR(st.st_mode):
        # Its entries come and go (and its times with them); what is below it is checked on its own.
        if got[0] != want[0]:
            return f"a run replaced the directory {path!r}, which the build step made"
        return None
    if got != want:
        return f"a run changed {path!r}, which the build step made (its size, inode or change time differ)"
    return None
