"""A pool of otherwise unused uids: one per concurrent candidate, when perftune runs as root.

Candidates that share one uid (``nobody``) can signal, ptrace and write into one another. So each
candidate (its scratch directory, its build and run steps) leases a uid of its own from a range that
no account uses, for as long as its scratch directory lives. A lease is an ``flock`` on a file in a
root-only directory: it is shared by every perftune process of the host, and a process that dies
releases its leases with it. Because a leased uid belongs to one candidate only, every process
running under it may be killed when the candidate is done (or when a lease is taken over from a run
that died).

The range is ``PERFTUNE_SANDBOX_UIDS`` (``"first-last"``, inclusive); the default is
``59000-59063``. Uids with an account (``getpwuid``) are skipped. ``PERFTUNE_SANDBOX_UIDS=none``
turns the pool off: candidates then share the ``nobody`` account (weaker).

Example:
    >>> lease = UidPool.from_environment().acquire()  # doctest: +SKIP
    >>> lease.uid, lease.gid  # doctest: +SKIP
    (59000, 59000)
    >>> lease.release()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pwd
import signal
import stat
import tempfile
import time
from dataclasses import dataclass

from perftune.errors import PerftuneError

__all__ = ["DEFAULT_UID_RANGE", "UidLease", "UidPool", "UidRangeError", "held_lease", "kill_uid", "sweep_uid"]

DEFAULT_UID_RANGE = (59000, 59063)
_CLEAN = b"released clean\n"  # a lock file's content when its last holder left nothing running
_HELD = b"held          \n"  # while a holder has it (and after one that died): the next one sweeps
_LOCK_DIRS = ("/run/perftune-uids", os.path.join(tempfile.gettempdir(), "perftune-uids-0"))


class UidRangeError(PerftuneError, ValueError):
    """``PERFTUNE_SANDBOX_UIDS`` is malformed or unusable here (printed as one line by the CLI)."""


@dataclass
class UidLease:
    """One uid (and a gid of the same number, with no members) held for one candidate.

    Attributes:
        uid: The uid.
        gid: The gid (the same number).
        confined: True while every process that ran under the uid was ended by the sandbox that
            started it (a step's PID namespace, or its sweep of the uid): then nothing can run
            under it, and :meth:`release` needs no scan of ``/proc``. Whoever starts processes under
            the uid otherwise sets it to False (:attr:`perftune.measure.Scratch.user` does, for
            its callers).
    """

    uid: int
    gid: int
    _fd: int | None
    confined: bool = True

    def release(self) -> None:
        """Kill whatever still runs under the uid, then let another candidate have it."""
        if self._fd is None:
            return
        empty = self.confined or sweep_uid(self.uid)[1]
        if empty:
            # The next holder may skip its scan (see acquire): nothing runs under the uid.
            with contextlib.suppress(OSError):
                os.pwrite(self._fd, _CLEAN, 0)
        _held.pop(self.uid, None)
        os.close(self._fd)  # closing the file releases the flock
        self._fd = None


_held: dict[int, UidLease] = {}  # this process's leases, by uid


def held_lease(uid: int) -> UidLease | None:
    """The lease this process holds on ``uid``, if any."""
    return _held.get(uid)


class UidPool:
    """The uids candidates may run as (see the module docstring).

    Args:
        first: Lowest uid of the range.
        last: Highest uid of the range (inclusive).
    """

    def __init__(self, first: int, last: int) -> None:
        if not 0 < first <= last:
            raise UidRangeError(
                f"PERFTUNE_SANDBOX_UIDS: expected first-last with 0 < first <= last, got {first}-{last}"
            )
        self.first = first
        self.last = last

    @classmethod
    def from_environment(cls) -> UidPool | None:
        """The pool ``PERFTUNE_SANDBOX_UIDS`` asks for, or None when it says ``none``."""
        text = os.environ.get("PERFTUNE_SANDBOX_UIDS", "").strip()
        if text.lower() in ("none", "off", "no", "0"):
            return None
        if not text:
            return cls(*DEFAULT_UID_RANGE)
        first, sep, last = text.partition("-")
        try:
            return cls(int(first), int(last) if sep else int(first))
        except ValueError:
            raise UidRangeError(
                f"PERFTUNE_SANDBOX_UIDS: expected first-last (e.g. 59000-59063), got {text!r}"
            ) from None

    def __contains__(self, uid: int) -> bool:
        return self.first <= uid <= self.last

    def usable(self) -> list[int]:
        """The uids of the range that no account uses."""
        return list(_without_account(self.first, self.last))

    def acquire(self) -> UidLease:
        """Lease a free uid; waits for one when every uid of the pool is leased.

        Raises:
            UidRangeError: No root-owned directory for the lock files, or no usable uid in the range.
        """
        directory = _lock_dir()
        uids = self.usable()
        if not uids:
            raise UidRangeError(f"every uid of PERFTUNE_SANDBOX_UIDS={self.first}-{self.last} has an account")
        start = os.getpid() % len(uids)
        order = uids[start:] + uids[:start]
        waited = 0.0
        while True:
            for uid in order:
                fd = os.open(os.path.join(directory, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                # A holder that died (or an older perftune) may have left processes under the uid; a
                # holder that released it cleanly said so in the file.
                if os.pread(fd, len(_CLEAN), 0) == _CLEAN:
                    # Overwritten rather than truncated: freeing the block costs ms on some file systems.
                    os.pwrite(fd, _HELD, 0)
                else:
                    sweep_uid(uid)
                lease = _held[uid] = UidLease(uid, uid, fd)
                return lease
            time.sleep(min(0.05 + waited, 0.5))
            waited += 0.05


@functools.lru_cache(maxsize=8)
def _without_account(first: int, last: int) -> tuple[int, ...]:
    # Looked up once per process: with LDAP behind NSS, 64 lookups per candidate would add up.
    out = []
    for uid in range(first, last + 1):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            out.append(uid)
    return tuple(out)


def _lock_dir() -> str:
    for directory in _LOCK_DIRS:
        with contextlib.suppress(FileExistsError, FileNotFoundError, PermissionError):
            os.mkdir(directory, 0o700)
        try:
            st = os.lstat(directory)
        except OSError:
            continue
        # Someone else's directory (in /tmp) could hand a lease to two candidates at once.
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            return directory
    raise UidRangeError(
        f"no private directory for the uid leases ({' or '.join(_LOCK_DIRS)} must be root's own, mode 0700); "
        "fix it, or set PERFTUNE_SANDBOX_UIDS=none"
    )


def _uids_of(pid: str) -> tuple[int, ...]:
    """Real, effective, saved and file-system uid of a live process; () for a zombie or a gone one."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:") and line.split()[1:2] in ([b"Z"], [b"X"]):
                    return ()  # dead already: its parent reaps it
                if line.startswith(b"Uid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except (OSError, ValueError, IndexError):
        pass
    return ()


def kill_uid(uid: int, *, timeout_s: float = 5.0) -> int:
    """SIGKILL every process whose real, effective or saved uid is ``uid``, until none is left.

    Only for a uid that belongs to one candidate (a leased uid): never for a shared account.

    Returns:
        How many processes were killed.
    """
    return sweep_uid(uid, timeout_s=timeout_s)[0]


def sweep_uid(uid: int, *, timeout_s: float = 5.0) -> tuple[int, bool]:
    """:func:`kill_uid`, returning (how many were killed, whether none is left)."""
    killed = 0
    deadline = time.monotonic() + timeout_s
    while True:
        found = []
        with contextlib.suppress(OSError):
            for name in os.listdir("/proc"):
                if name.isdigit() and uid in _uids_of(name)[:3]:
                    found.append(int(name))
        if not found or time.monotonic() > deadline:
            return killed, not found
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.005)
