"""Starting sandbox steps from a small helper process (a fork server) instead of from the tuner.

A step is set up between fork and exec, and with a PID namespace it is three forks deep (the relay,
the namespace's init, the candidate). Forked from the tuner, each of them copies the tuner's page
tables: with scikit-learn, NumPy and SQLAlchemy loaded (about 190 MB) a fork costs 10-14 ms on a
small VM, and the copies of the relay and the init live as long as the step, so every page the tuner
writes meanwhile is copied once more. So the steps are started by a helper: a fresh interpreter
(``python -I -S`` running this file, standard library only, about 10 MB) that the tuner starts once
(per process, and one per concurrent step) and asks, over a Unix socket, to start each step. The
helper forks the step's relay, which does exactly what the in-process path does
(:func:`enter_step`: cgroups, namespaces, read-only mounts, rlimits, the candidate's uid), and
execs the candidate; the helper passes back a pidfd of the relay, and its wait status and resource
use when it exits. The tuner still times, reads, kills and classifies the step itself.

The helper is the tuner's own code with the tuner's rights: it is no part of the candidate's side.
It ignores SIGINT (Ctrl-C is the tuner's), and when the tuner goes away (its end of the socket
closes) it kills the step it started and exits; the relay dies with the helper (``PDEATHSIG``).
Without a helper (it cannot start), the sandbox falls back to forking from the tuner.

Example:
    >>> spawner = Spawner.get()  # doctest: +SKIP
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

__all__ = ["SpawnError", "Spawner", "enter_step"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
CLONE_NEWIPC = 0x08000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY = 0x1
_MOUNT_ATTR_NOSUID = 0x2
_MOUNT_ATTR_NODEV = 0x4
_MOUNT_ATTR_NOATIME = 0x10
_MOUNT_ATTR__ATIME = 0x70  # the access-time mode's bits, cleared to set one
_SYS_MOUNT_SETATTR = 442
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
# keyctl(2): its syscall number per architecture, and the operations used on a step's keyrings.
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219}.get(os.uname().machine)
_KEYCTL_JOIN_SESSION_KEYRING = 1
_KEYCTL_CLEAR = 7
_KEY_SPEC_USER_KEYRING = -4
_KEY_SPEC_USER_SESSION_KEYRING = -5
_MAX_FDS = 8
_MAX_MESSAGE = 128 * 1024  # below the default socket buffer: argv and env of a step fit many times over

_libc: Any = None


def libc(name: str | None = None) -> Any:
    """The C library, loaded on first use (before any fork: the child of a fork imports nothing).

    The helper is told its ``name`` by the tuner, which found it once.
    """
    global _libc
    if _libc is None:
        if name is None:
            from ctypes import util

            name = util.find_library("c")
        _libc = ctypes.CDLL(name or None, use_errno=True)
    return _libc


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class SpawnError(Exception):
    """The step could not be started.

    Attributes:
        where: ``"exec"`` (the program could not be executed: ``errno`` says why), ``"setup"``
            (the sandbox's setup before exec failed), ``"helper"`` (the helper itself failed) or
            ``"too large"`` (argv and environment do not fit in one message to the helper).
        errno: The error number, 0 when there is none.
    """

    def __init__(self, where: str, errno: int, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.errno = errno


# -- the step's side (runs in the forked child, before exec: no locks, no imports) -----------------


def write_id_maps(uid: int, gid: int) -> None:
    """Map ``uid``/``gid`` to themselves in a new user namespace (steps of a non-root tuner)."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def enter_step(spec: dict[str, Any], timing_fd: int | None) -> None:
    """Put the calling (freshly forked) process into the step's sandbox; returns in the candidate.

    ``spec`` holds plain data (see :meth:`perftune.measure.Sandbox.run`): ``cgroup_files``,
    ``mount_ns``, ``net_ns``, ``pid_ns``, ``ipc_ns``, ``hide_sockets`` (paths of Unix sockets to cover
    in the mount namespace), ``hide_dirs`` (directories to cover with an empty file system),
    ``via_user`` with ``outer_uid``/``outer_gid``, ``scratch``,
    ``rlimits`` (``[resource, soft, hard]``), ``user`` (``[uid, gid]`` or None), ``affinity``, ``cwd``.
    """
    c = libc()
    pid = str(os.getpid())
    for name in spec["cgroup_files"]:
        with open(name, "w") as f:
            f.write(pid)
    c.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    mount_ns, pid_ns = spec["mount_ns"], spec["pid_ns"]
    flags = (CLONE_NEWNS if mount_ns else 0) | (CLONE_NEWNET if spec["net_ns"] else 0)
    flags |= CLONE_NEWPID if pid_ns else 0
    flags |= CLONE_NEWIPC if spec.get("ipc_ns") else 0  # SysV objects and message queues die with the step
    if flags:
        if spec["via_user"]:
            if c.unshare(CLONE_NEWUSER | flags) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            write_id_maps(spec["outer_uid"], spec["outer_gid"])
        elif c.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
    if mount_ns:
        scratch = os.fsencode(spec["scratch"])
        _mount(c, None, b"/", _MS_REC | _MS_PRIVATE)
        # Read-only, and no set-user-ID program gains its owner's rights in here.
        _setattr(c, b"/", _AT_RECURSIVE, _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0)
        _mount(c, scratch, scratch, _MS_BIND | _MS_REC)
        # Writable, without access times: reading a file the build made (or not) would move its access
        # time and carry a bit from one run to the next, which the scratch's check cannot set back. In a
        # user namespace (perftune not run by root) the access-time mode of a mount inherited from the
        # parent namespace is locked and changing it fails (EPERM): there the scratch keeps its mode, and
        # the build's files have their access times set ahead when the scratch is recorded, which a read
        # under relatime (the usual mount option) does not move.
        keep_atime = bool(spec["via_user"])
        _setattr(c, scratch, _AT_RECURSIVE,
                 _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NODEV | (0 if keep_atime else _MOUNT_ATTR_NOATIME),
                 _MOUNT_ATTR_RDONLY | (0 if keep_atime else _MOUNT_ATTR__ATIME))
        for path in spec.get("hide_dirs", ()):  # the tuner's own: an empty file system over each
            empty = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
            if c.mount(b"tmpfs", os.fsencode(path), b"tmpfs", empty, b"size=4k") != 0 \
                    and ctypes.get_errno() != 2:
                raise OSError(ctypes.get_errno(), f"mount over {path!r}")
        # A network namespace leaves Unix sockets that are files (a PostgreSQL server's, D-Bus's)
        # reachable, and connect() ignores read-only mounts: each one the tuner found is covered by
        # /dev/null here, so connecting to it is refused.
        for path in spec.get("hide_sockets", ()):
            covered = c.mount(b"/dev/null", os.fsencode(path), None, _MS_BIND, None) == 0
            if not covered and ctypes.get_errno() not in (2, 20):  # ENOENT, ENOTDIR: it went away
                raise OSError(ctypes.get_errno(), f"mount over socket {path!r}")
    if pid_ns:
        _enter_pid_namespace(c, timing_fd)
    # Only now: the relay and the init are copies of their parent, and an address-space limit
    # smaller than its image would break them.
    for which, soft, hard in spec["rlimits"]:
        resource.setrlimit(which, (soft, hard))
    user = spec["user"]
    if user is not None:
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        if _SYS_KEYCTL is not None:
            # The uid's keyrings outlive the step (what an earlier candidate of this uid added: its user
            # keyring and its user-session keyring), and the inherited session keyring is the tuner's
            # (its keys are possessed across setuid).
            c.syscall(_SYS_KEYCTL, _KEYCTL_CLEAR, _KEY_SPEC_USER_KEYRING)
            c.syscall(_SYS_KEYCTL, _KEYCTL_CLEAR, _KEY_SPEC_USER_SESSION_KEYRING)
    if _SYS_KEYCTL is not None:
        c.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None)  # a new, empty session keyring
    if spec["affinity"]:
        os.sched_setaffinity(0, spec["affinity"])
    # No program the step runs gains rights (set-user-ID, file capabilities) it was not started with.
    c.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(spec["cwd"])  # after the bind mount, so that relative paths reach the writable scratch
    if timing_fd is not None:
        # This process's CPU time so far is the sandbox's setup, not the program's: said on the timing
        # pipe, which the exec that follows closes, so that the tuner counts the step without it.
        used = resource.getrusage(resource.RUSAGE_SELF)
        with contextlib.suppress(OSError):
            os.write(timing_fd, f"setup {used.ru_utime + used.ru_stime:.6f}\n".encode())


def _mount(c: Any, source: bytes | None, target: bytes, flags: int) -> None:
    if c.mount(source, target, None, flags, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target!r}")


def _setattr(c: Any, path: bytes, flags: int, attr_set: int, attr_clr: int) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    if c.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path, flags, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        raise OSError(ctypes.get_errno(), f"mount_setattr {path!r}")


def _keep_only(*fds: int) -> None:
    """Close every descriptor above stderr except ``fds``."""
    low = 3
    for fd in sorted(fds):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def _exit_as(status: int) -> None:
    """Leave this process the way a child with wait status ``status`` left."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dump of the parent's image
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _enter_pid_namespace(c: Any, timing_fd: int | None) -> None:
    """Called after ``unshare(CLONE_NEWPID)``; returns in the candidate's process.

    The caller stays outside (as the process the tuner waits for) and relays the candidate's exit
    status; its first fork is the namespace's init, which mounts the private ``/proc``, reaps orphans
    and leaves when the candidate does, whereupon the kernel kills everything left in the namespace.
    The candidate is not the init itself: an init ignores the signals it sends itself (``abort()``).
    The init also clocks the candidate, from its fork to its exit, and writes the nanoseconds and the
    CPU time of the candidate and what it left running (``clock NS cpu SECONDS``) to ``timing_fd``:
    the namespace's setup, the relay's and the init's own work are no part of the step's time.
    """
    read_end, write_end = os.pipe()
    init = os.fork()
    if init:
        _keep_only(read_end)
        _, init_status = os.waitpid(init, 0)
        data = os.read(read_end, 32)
        _exit_as(int(data) if data else init_status)
    os.close(read_end)
    c.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if c.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"hidepid=invisible") != 0:
        raise OSError(ctypes.get_errno(), "mount /proc")
    started_ns = time.perf_counter_ns()
    candidate = os.fork()
    if candidate:
        _keep_only(write_end, *(() if timing_fd is None else (timing_fd,)))
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                os._exit(1)
            if pid == candidate:
                elapsed_ns = time.perf_counter_ns() - started_ns
                # What the candidate left running is ended and reaped here, so that its CPU time is in
                # the step's (a child that did the work and was never waited for took it out of the
                # count when the kernel ended it after the init).
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    while True:
                        os.wait()
                if timing_fd is not None:
                    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = reaped.ru_utime + reaped.ru_stime
                    os.write(timing_fd, f"clock {elapsed_ns} cpu {cpu:.6f}\n".encode())
                os.write(write_end, str(status).encode())
                os._exit(0)
    os.close(write_end)
    c.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# -- messages ----------------------------------------------------------------------------------


def _send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode()
    if len(data) > _MAX_MESSAGE:
        raise SpawnError("too large", 0, f"a step of {len(data)} bytes is too large for the sandbox helper")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def _recv(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (a datagram of the SEQPACKET socket) and its descriptors; ``(None, [])`` at the end."""
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_MAX_FDS * fds.itemsize))
    for level, kind, cmsg in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cmsg[: len(cmsg) - (len(cmsg) % fds.itemsize)])
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), list(fds)


# -- the helper's side -------------------------------------------------------------------------


def _serve(sock: socket.socket) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle
    while True:
        message, fds = _recv(sock)
        if message is None:
            return
        _start_one(sock, message, fds)


def _start_one(sock: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
    """Start one step (fds: stdin, stdout, stderr[, timing]), report it, wait for it, report that."""
    spec = message["spec"]
    timing_fd = fds[3] if len(fds) > 3 else None
    if timing_fd is not None:
        os.set_inheritable(timing_fd, False)  # the init keeps it across fork; the candidate's exec closes it
    err_r, err_w = os.pipe()  # both close on exec
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the step's relay
        try:
            os.setsid()
            for target, fd in enumerate(fds[:3]):
                os.dup2(fd, target)
            _keep_only(err_w, *(() if timing_fd is None else (timing_fd,)))
            # Python ignores these; ignored signals survive exec (subprocess restores them the same way).
            for number in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(number, signal.SIG_DFL)
            enter_step(spec, timing_fd)
        except BaseException as error:
            code = error.errno if isinstance(error, OSError) and error.errno else 0
            with contextlib.suppress(OSError):
                os.write(err_w, f"setup:{code}:{type(error).__name__}: {error}".encode()[:4000])
            os._exit(255)
        try:
            os.execve(spec["argv"][0], spec["argv"], spec["env"])
        except BaseException as error:
            code = error.errno if isinstance(error, OSError) and error.errno else 0
            with contextlib.suppress(OSError):
                os.write(err_w, f"exec:{code}:{error}".encode()[:4000])
        os._exit(255)
    os.close(err_w)
    for fd in fds:
        os.close(fd)
    failure = b""
    while True:
        chunk = os.read(err_r, 4096)
        if not chunk:
            break
        failure += chunk
    os.close(err_r)
    if failure:
        os.waitpid(pid, 0)
        where, errno_text, text = failure.decode(errors="replace").split(":", 2)
        _send(sock, {"error": text, "where": where, "errno": int(errno_text)})
        return
    pidfd = os.pidfd_open(pid)
    try:
        _send(sock, {"pid": pid}, (pidfd,))
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        poll.register(pidfd, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poll.poll()}
            if pidfd in ready:
                break
            if sock.fileno() in ready:  # the tuner is gone (it sends nothing while a step runs)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                sys.exit(0)
        _, status, usage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    _send(
        sock,
        {"status": status, "utime": usage.ru_utime, "stime": usage.ru_stime, "maxrss": usage.ru_maxrss},
    )


# -- the tuner's side --------------------------------------------------------------------------


class Spawner:
    """One helper process; serves one step at a time. :meth:`get` hands out an idle one."""

    _idle: list[Spawner] = []
    _lock = threading.Lock()
    _owner = 0  # the pid the idle helpers belong to (a forked child must not share them)
    _broken = False
    _exit_hook = False

    def __init__(self) -> None:
        import subprocess

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        name = getattr(libc(), "_name", None) or ""
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(theirs.fileno()), name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                close_fds=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._pid = os.getpid()
        self.n_served = 0  # steps it answered for (a helper that dies before its first is not retried)

    @classmethod
    def get(cls) -> Spawner | None:
        """An idle helper of this process (started when none is idle); None when none can start."""
        with cls._lock:
            if cls._owner != os.getpid():
                cls._idle = []  # a forked child's copies belong to its parent
                cls._owner = os.getpid()
                cls._broken = False
            while cls._idle:
                spawner = cls._idle.pop()
                if spawner._proc.poll() is None:
                    return spawner
                spawner._sock.close()  # it died while idle (killed): reaped by poll()
            if cls._broken or not sys.executable:
                return None
        if not cls._exit_hook:
            import atexit

            atexit.register(cls.close_all)
            cls._exit_hook = True
        try:
            return cls()
        except OSError:
            with cls._lock:
                cls._broken = True
            return None

    @classmethod
    def prestart(cls) -> None:
        """Start a helper now if none is idle, so that its start overlaps with the caller's work."""
        with cls._lock:
            if cls._owner == os.getpid() and cls._idle:
                return
        spawner = cls.get()
        if spawner is not None:
            spawner.put_back()

    @classmethod
    def give_up(cls) -> None:
        """Start no more helpers in this process (one died): steps fork the tuner from now on."""
        with cls._lock:
            cls._broken = True

    def put_back(self) -> None:
        """Return this helper to the idle ones (after :meth:`wait`)."""
        with Spawner._lock:
            if Spawner._owner == os.getpid() == self._pid:
                Spawner._idle.append(self)
                return
        self.close()

    def start(self, spec: dict[str, Any], fds: tuple[int, ...]) -> tuple[int, int]:
        """Start a step; ``fds``: stdin, stdout, stderr and the optional timing pipe.

        Returns:
            ``(pid, pidfd)`` of the step's main process (the caller owns the pidfd).

        Raises:
            SpawnError: The step did not start (``where`` says why). With ``"helper"`` the helper
                is gone; with ``"too large"`` nothing was sent (start the step another way).
        """
        try:
            _send(self._sock, {"spec": spec}, fds)  # "too large" is raised before anything is sent
            reply, got = _recv(self._sock)
        except OSError as error:
            self.close()
            raise SpawnError("helper", error.errno or 0, f"sandbox helper failed: {error}") from None
        if reply is None:
            self.close()
            raise SpawnError("helper", 0, "sandbox helper exited")
        self.n_served += 1
        if "error" in reply:
            raise SpawnError(reply["where"], reply["errno"], reply["error"])
        return int(reply["pid"]), got[0]

    def wait(self) -> tuple[int, float, int]:
        """Block until the started step's main process exits.

        Returns:
            ``(wait status, user + system CPU seconds, ru_maxrss in KiB)``.
        """
        try:
            reply, _ = _recv(self._sock)
        except OSError:
            reply = None
        if reply is None:
            self.close()
            return 9, 0.0, 0  # killed: the helper took its step with it
        return int(reply["status"]), float(reply["utime"]) + float(reply["stime"]), int(reply["maxrss"])

    def close(self) -> None:
        """Stop the helper (it exits when its socket closes)."""
        with contextlib.suppress(OSError):
            self._sock.close()
        if self._pid == os.getpid():
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=5)

    @classmethod
    def close_all(cls) -> None:
        """Stop every idle helper of this process (at exit)."""
        with cls._lock:
            idle, cls._idle = cls._idle, []
            ours = cls._owner == os.getpid()
        for spawner in idle if ours else ():
            spawner.close()


if __name__ == "__main__":  # pragma: no cover - the helper process
    libc(sys.argv[2] or None)
    _serve(socket.socket(fileno=int(sys.argv[1])))
