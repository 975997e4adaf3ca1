"""Files the tuner opens on a candidate's behalf: its stdin, and its output files (checks, ``file_size``).

The tuner may run as root while the candidate is untrusted, and the candidate chooses what sits at
the paths the tuner opens: a symlink to a root-only file, a FIFO that never delivers, ``/dev/zero``.
So such a file is opened

* beneath the scratch directory when its path is there: a link that leads out of scratch is refused
  (``openat2`` with ``RESOLVE_BENEATH``, or a resolved-path check where ``openat2`` is missing; the
  candidate's processes are all dead by the time the tuner reads its outputs, so nothing races it);
* non-blocking, and only when it is a regular file (no FIFO hang, no endless device);
* only when the candidate's user could have read it itself, so that neither its content nor its size
  leaks (the owner, group and other bits, as the kernel would check them for that user);
* within a size cap and a wall-clock budget.

Example:
    >>> data = read_for_candidate("/tmp/s/out.txt", scratch="/tmp/s", user=None,
    ...                           max_bytes=1 << 20)  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import time

from perftune.measure._limits import _libc

__all__ = ["CandidateFileError", "open_for_candidate", "read_for_candidate", "size_for_candidate"]

_SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_CHUNK = 1 << 20


class CandidateFileError(Exception):
    """A file the tuner was to open for a candidate is refused; ``str()`` is the one-line reason."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_openat2_missing = False


def _open_beneath(root: str, rel: str, flags: int) -> int:
    """Open ``rel`` below the directory ``root`` without any step of the lookup leaving ``root``."""
    global _openat2_missing
    if not _openat2_missing:
        dirfd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
            fd = _libc.syscall(
                _SYS_OPENAT2, dirfd, os.fsencode(rel), ctypes.byref(how), ctypes.sizeof(how)
            )
            if fd >= 0:
                return int(fd)
            err = ctypes.get_errno()
            if err != errno.ENOSYS:
                raise OSError(err, os.strerror(err))
            _openat2_missing = True
        finally:
            os.close(dirfd)
    # Without openat2: resolve, check, then refuse a link at the last step.
    real = os.path.realpath(os.path.join(root, rel))
    if not _inside(real, os.path.realpath(root)):
        raise OSError(errno.EXDEV, "leads out of the scratch directory")
    return os.open(real, flags | os.O_NOFOLLOW)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _may(st: os.stat_result, uid: int, gid: int, user_bit: int, group_bit: int, other_bit: int) -> bool:
    if st.st_uid == uid:
        return bool(st.st_mode & user_bit)
    if st.st_gid == gid:
        return bool(st.st_mode & group_bit)
    return bool(st.st_mode & other_bit)


def _reachable_by(path: str, uid: int, gid: int) -> bool:
    """Can ``uid`` traverse every directory above ``path`` (a resolved path)?"""
    parts = path.split(os.sep)
    for i in range(1, len(parts)):
        directory = os.sep.join(parts[:i]) or os.sep
        try:
            st = os.stat(directory)
        except OSError:
            return False
        if not _may(st, uid, gid, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH):
            return False
    return True


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_for_candidate(path: str, *, scratch: str | None, user: tuple[int, int] | None) -> int:
    """Open ``path`` for reading as described in the module docstring; returns a blocking fd.

    Args:
        path: The file (absolute, or relative to the current directory).
        scratch: The candidate's scratch directory; a path below it is opened beneath it.
        user: ``(uid, gid)`` the candidate runs as, or None when it runs as perftune's own user
            (then the kernel's own check on ``open`` is the candidate's).

    Raises:
        CandidateFileError: With a one-line reason naming ``path``.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    absolute = os.path.abspath(path)
    below = scratch is not None and _inside(absolute, os.path.abspath(scratch))
    try:
        if below:
            assert scratch is not None
            root = os.path.abspath(scratch)
            fd = _open_beneath(root, os.path.relpath(absolute, root) if absolute != root else ".", flags)
        else:
            real = os.path.realpath(absolute)
            if user is not None and not _reachable_by(real, *user):
                raise CandidateFileError(f"{path}: the candidate's user may not read it")
            fd = os.open(real, flags)
    except CandidateFileError:
        raise
    except OSError as error:
        if error.errno in (errno.EXDEV, errno.ELOOP):
            raise CandidateFileError(f"{path}: a link that leads out of the scratch directory") from None
        if error.errno == errno.ENOENT:
            raise CandidateFileError(f"{path}: no such file") from None
        raise CandidateFileError(f"{path}: {error.strerror or error}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CandidateFileError(f"{path}: {_kind(st.st_mode)}, not a regular file")
        # A hard link in scratch to a file the candidate may not read, or a private file named by a
        # path outside scratch: refused without telling its size. Its own files it could chmod.
        if (
            user is not None
            and st.st_uid != user[0]
            and not _may(st, *user, stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
        ):
            raise CandidateFileError(f"{path}: the candidate's user may not read it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_for_candidate(
    path: str,
    *,
    scratch: str | None,
    user: tuple[int, int] | None,
    max_bytes: int,
    timeout_s: float = 30.0,
) -> bytes:
    """The content of ``path`` (see :func:`open_for_candidate`), at most ``max_bytes``.

    Raises:
        CandidateFileError: Refused, larger than ``max_bytes``, or slower to read than ``timeout_s``.
    """
    fd = open_for_candidate(path, scratch=scratch, user=user)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise CandidateFileError(f"{path}: larger than the {max_bytes // (1 << 20)} MB perftune reads")
        deadline = time.monotonic() + timeout_s
        chunks: list[bytes] = []
        n = 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return b"".join(chunks)
            n += len(chunk)
            if n > max_bytes:  # it grew while being read
                raise CandidateFileError(f"{path}: larger than the {max_bytes >> 20} MB perftune reads")
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise CandidateFileError(f"{path}: reading it took longer than {timeout_s:g} s")
    finally:
        os.close(fd)


def size_for_candidate(path: str, *, scratch: str | None, user: tuple[int, int] | None) -> int:
    """The size in bytes of ``path``, only when the candidate could read it itself.

    Raises:
        CandidateFileError: As :func:`open_for_candidate`.
    """
    fd = open_for_candidate(path, scratch=scratch, user=user)
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)
