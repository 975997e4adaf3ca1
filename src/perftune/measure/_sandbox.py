"""Running one step of an untrusted candidate (a build or a run) so that it cannot hurt the host.

Every step runs in its own session and process group, in the candidate's scratch directory, under
the protections of :mod:`perftune.measure._limits` (unprivileged user, cgroups, rlimits, namespaces)
and a wall-clock timeout that kills the whole group. Whatever happens is returned as a
:class:`StepResult` with a one-line ``reason``; nothing is raised for a misbehaving candidate.

Candidates are untrusted code and are kept apart from the tuner and from one another:

* as root, each candidate (its scratch directory and all its steps) runs under a uid of its own,
  leased from a pool (:mod:`perftune.measure._uids`); its scratch directory is 0700 and its own;
* each step runs in its own PID namespace under a small init, with a private ``/proc`` mounted with
  ``hidepid=invisible``: it sees no other process (siblings, the tuner and its command line) and
  cannot signal one; when the step's main process exits, the init exits and the kernel kills every
  process left in the namespace, daemons included (without PID namespaces, every process of the
  leased uid is killed after the step instead);
* the environment is an allow-list (``PATH``, ``LANG``, the ``LC_`` locale categories, ``TZ``,
  ``TERM`` ...; ``HOME`` and ``TMPDIR`` are the scratch directory) plus what the caller passes: none
  of the tuner's tokens;
* a Unix socket that is a file (a PostgreSQL server's, D-Bus's) is covered by ``/dev/null`` in the
  step's mount namespace, SysV objects and message queues end with the step's IPC namespace, and a
  candidate starts with an empty session keyring (and, on a leased uid, an empty user keyring);
* ``stdin`` is opened as :mod:`perftune.measure._candidate_files` describes (regular files the
  candidate could read itself, no link out of scratch, no FIFO).

Example:
    >>> from perftune.measure import Sandbox
    >>> sandbox = Sandbox()
    >>> with sandbox.scratch() as scratch:  # doctest: +SKIP
    ...     result = sandbox.run(["sh", "-c", "echo hi"], scratch=scratch, timeout_s=5)
    >>> result.ok, result.stdout  # doctest: +SKIP
    (True, b'hi\\n')
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import errno
import hashlib
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from perftune.errors import PerftuneError
from perftune.measure._candidate_files import CandidateFileError, open_for_candidate
from perftune.measure._limits import Capabilities, Limits, StepCgroup, capabilities, rlimits
from perftune.measure._spawn import Spawner, SpawnError, enter_step, libc
from perftune.measure._stage import Stage, StageError
from perftune.measure._uids import UidLease, UidPool, held_lease, sweep_uid
from perftune.trial import Status

__all__ = ["Sandbox", "Scratch", "StepResult", "executable_by"]

_MiB = 1024 * 1024
_WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
#: What candidates get of the tuner's environment: nothing that could be a secret. The locale
#: categories are named one by one: ``LC_*`` as a prefix would pass any ``LC_SOMETHING`` (a name ssh's
#: ``AcceptEnv LC_*`` lets a remote client set).
CANDIDATE_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "TERMINFO", "COLORTERM", "NO_COLOR",
                 "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
                 "LC_MESSAGES", "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT",
                 "LC_IDENTIFICATION")


@dataclass
class StepResult:
    """What one step did.

    Attributes:
        status: :attr:`Status.OK <perftune.trial.Status.OK>` (exit code 0), ``Status.FAILED``
            (non-zero exit, signal, could not start, or a resource limit: then ``limit`` says which) or
            ``Status.TIMEOUT`` (wall-clock limit). The driver records it as the trial's status as is.
        reason: One line for humans; None when ok.
        returncode: Exit code, or None when killed by a signal or never started.
        signal: Name of the fatal signal (``"SIGSEGV"``), if any.
        limit: Which limit was hit: ``"memory"``, ``"processes"``, ``"disk"``, ``"file size"``
            (with ``Status.FAILED``; with ``Status.TIMEOUT``, the limit the step was stuck at).
        wall_s: Wall-clock time from start to exit of the step's main process.
        cpu_s: User + system CPU time of the step's program and the children it waited for (the
            sandbox's setup before exec, and the relay and init of a PID namespace, not counted).
        max_rss_kb: Peak memory in KiB: the step's cgroup peak when a memory cgroup is available,
            else ``ru_maxrss`` (which includes the supervisor's image at fork time).
        stdout: Standard output (the first ``stdout_max_bytes``; see ``stdout_truncated``).
        stdout_tail: The last 64 KiB of standard output.
        stdout_sha256: Hash of the whole standard output, for exact comparisons.
        stderr_tail: The last 4 KiB of standard error, decoded.
        outside_writes: Files written outside the scratch directory (detected, then removed).
    """

    argv: list[str]
    status: Status
    reason: str | None = None
    returncode: int | None = None
    signal: str | None = None
    limit: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    stdout: bytes = b""
    stdout_tail: bytes = b""
    stdout_truncated: bool = False
    stdout_sha256: str = ""
    stderr_tail: str = ""
    outside_writes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def limit_hit(self) -> bool:
        """True when the step failed because it hit a resource limit (memory, processes, disk, file size)."""
        return self.status is Status.FAILED and self.limit is not None

    def text(self) -> str:
        """Standard output as text (head and tail joined when it was truncated)."""
        if not self.stdout_truncated:
            return self.stdout.decode(errors="replace")
        return (self.stdout + b"\n...\n" + self.stdout_tail).decode(errors="replace")


class Scratch:
    """A candidate's private directory, shared by its build and run steps; removed on exit.

    Example:
        >>> with Sandbox().scratch() as scratch:  # doctest: +SKIP
        ...     print(scratch.path)
    """

    def __init__(self, path: str, *, keep: bool = False, lease: UidLease | None = None) -> None:
        self.path = path
        self.keep = keep
        self.lease = lease

    @property
    def user(self) -> tuple[int, int] | None:
        """``(uid, gid)`` leased for this candidate's steps (as root), else None.

        Whoever asks may start processes under it: the lease's release then sweeps the uid.
        """
        if self.lease is None:
            return None
        self.lease.confined = False
        return self.lease.uid, self.lease.gid

    def _leased_user(self) -> tuple[int, int] | None:
        """:attr:`user`, for the sandbox itself (which ends whatever its steps start)."""
        return (self.lease.uid, self.lease.gid) if self.lease is not None else None

    def size_bytes(self, *, max_entries: int = 200_000) -> tuple[int, int]:
        """(bytes used, number of entries), counting at most ``max_entries`` entries."""
        total = 0
        n = 0
        stack = [self.path]
        while stack and n < max_entries:
            top = stack.pop()
            try:
                with os.scandir(top) as it:
                    for entry in it:
                        n += 1
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        total += st.st_blocks * 512
                        if stat.S_ISDIR(st.st_mode):
                            stack.append(entry.path)
            except OSError:
                continue
        return total, n

    def remove(self) -> None:
        self._release()
        shutil.rmtree(self.path, ignore_errors=True)

    def _release(self) -> None:
        if self.lease is None:
            return
        # The next candidate with this uid must not reach a kept directory (nor anything left running).
        self.lease.release()
        self.lease = None
        with contextlib.suppress(OSError):  # never through a link put in its place
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchown(fd, os.geteuid(), os.getegid())
                os.fchmod(fd, 0o700)
            finally:
                os.close(fd)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.keep:
            self.remove()
        else:
            self._release()

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Captured:
    """What a step printed: the head of stdout (up to a limit), its last 64 KiB, its hash and size,
    and the last 4 KiB of stderr; bounded memory whatever the step prints."""

    def __init__(self, stdout_max_bytes: int) -> None:
        self.stdout_max_bytes = stdout_max_bytes
        self.out_head = bytearray()
        self.out_tail: collections.deque[bytes] = collections.deque()
        self.out_tail_len = 0
        self.n_out = 0
        self.sha = hashlib.sha256()
        self.err_tail: collections.deque[bytes] = collections.deque()
        self.err_len = 0

    def take(self, stream: str, chunk: bytes) -> None:
        """Record a chunk read from ``"out"`` (stdout) or any other stream (stderr)."""
        if stream == "out":
            self.n_out += len(chunk)
            self.sha.update(chunk)
            room = self.stdout_max_bytes - len(self.out_head)
            if room > 0:
                self.out_head += chunk[:room]
            self.out_tail.append(chunk)
            self.out_tail_len += len(chunk)
            while self.out_tail_len - len(self.out_tail[0]) >= 65536:
                self.out_tail_len -= len(self.out_tail.popleft())
        else:
            self.err_tail.append(chunk)
            self.err_len += len(chunk)
            while self.err_len - len(self.err_tail[0]) >= 4096:
                self.err_len -= len(self.err_tail.popleft())


class Sandbox:
    """Runs candidate steps with limits, isolation and a timeout.

    Args:
        limits: Resource limits per step.
        isolate_network: Run steps in a network namespace without interfaces (when available).
        isolate_files: Run steps with a read-only view of the file system except their scratch
            directory (when mount namespaces are available); otherwise writes to world-writable
            directories are detected after the step.
        drop_user: When perftune runs as root, run steps as an unprivileged user: a uid of its own
            per candidate from the pool ``PERFTUNE_SANDBOX_UIDS`` (default 59000-59063), or, with
            ``PERFTUNE_SANDBOX_UIDS=none``, the shared ``nobody`` (or ``perftune-sandbox``) account.
        isolate_processes: Run each step in its own PID namespace with a private ``/proc``
            (``hidepid=invisible``), when mount and PID namespaces are available.
        pass_env: Names of the tuner's environment variables candidates get besides
            :data:`CANDIDATE_ENV` (e.g. ``CUDA_VISIBLE_DEVICES``).
        scratch_root: Where scratch directories are created (default: ``$PERFTUNE_SCRATCH`` or the
            system temporary directory).
        poll_interval_s: How often the disk use of a running step is checked.
        cpu_affinity: Pin steps to these CPU cores (for steadier timings).
        use_spawner: Start steps from a small helper process (:mod:`perftune.measure._spawn`) rather
            than by forking the tuner, whose copies cost more the more it has loaded; the isolation
            is the same. False forks the tuner (as does a machine where the helper cannot start).
        hide_dirs: Directories of the tuner's that steps must not see (the reference outputs a
            candidate's output is compared with): an empty read-only file system covers each in the
            step's mount namespace. As root they are also out of a candidate's uid's reach; a tuner
            that is not root has only this (and nothing without mount namespaces).

    Example:
        >>> sandbox = Sandbox(Limits(memory_mb=256, n_procs=32, disk_mb=64))
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        isolate_network: bool = True,
        isolate_files: bool = True,
        drop_user: bool = True,
        scratch_root: str | None = None,
        poll_interval_s: float = 0.05,
        cpu_affinity: Sequence[int] | None = None,
        isolate_processes: bool = True,
        pass_env: Sequence[str] = (),
        use_spawner: bool = True,
        hide_dirs: Sequence[str] = (),
    ) -> None:
        self.limits = limits or Limits()
        self.isolate_network = isolate_network
        self.isolate_files = isolate_files
        self.drop_user = drop_user
        self.scratch_root = scratch_root
        self.poll_interval_s = poll_interval_s
        self.cpu_affinity = tuple(cpu_affinity) if cpu_affinity else None
        self._staged: dict[str, str] = {}  # directory -> its read-only copy for candidates
        self._stage: Stage | None = None
        self._stage_lock = threading.Lock()  # flags runs stage from several worker threads
        self.isolate_processes = isolate_processes
        self.pass_env = tuple(pass_env)
        self.use_spawner = use_spawner
        self.hide_dirs = tuple(os.path.realpath(d) for d in hide_dirs)

    @property
    def caps(self) -> Capabilities:
        return capabilities()

    def _user(self) -> tuple[int, int] | None:
        """The user steps run as when no uid is leased: the shared account (as root), else None."""
        caps = self.caps
        if self.drop_user and caps.is_root and caps.sandbox_uid is not None and caps.sandbox_gid is not None:
            return caps.sandbox_uid, caps.sandbox_gid
        return None

    def uid_pool(self) -> UidPool | None:
        """The pool candidates lease their uids from (as root, unless turned off), else None."""
        if not (self.drop_user and self.caps.is_root):
            return None
        return UidPool.from_environment()

    def step_user(self, scratch: Scratch | str) -> tuple[int, int] | None:
        """Who runs a step in ``scratch``: the uid leased with it, else the shared account."""
        user = self._step_user(scratch)
        lease = held_lease(user[0]) if user is not None else None
        if lease is not None:
            lease.confined = False  # the caller may start processes under it (see Scratch.user)
        return user

    def _step_user(self, scratch: Scratch | str) -> tuple[int, int] | None:
        if not self.drop_user:
            return None
        if isinstance(scratch, Scratch) and scratch._leased_user() is not None:
            return scratch._leased_user()
        pool = self.uid_pool()
        if pool is not None:
            with contextlib.suppress(OSError):
                st = os.stat(os.fspath(scratch))
                if st.st_uid in pool:  # a scratch directory made by another Sandbox object
                    return st.st_uid, st.st_gid
        return self._user()

    def _pid_namespace(self) -> bool:
        caps = self.caps
        return self.isolate_processes and self.isolate_files and caps.mount_namespace and caps.pid_namespace

    def protections(self) -> dict[str, bool]:
        """Which protections this sandbox applies on this machine."""
        caps = self.caps
        user = self._user()
        return {
            "user": user is not None or self.uid_pool() is not None or not caps.is_root,
            "own_uid": self.uid_pool() is not None,
            "pid_namespace": self._pid_namespace(),
            "memory_cgroup": caps.memory_cgroup is not None,
            "processes": caps.pids_cgroup is not None or user is not None or not caps.is_root,
            "disk": True,
            "files": self.isolate_files and caps.mount_namespace,
            "network": self.isolate_network and caps.net_namespace,
        }

    def candidate_user(self) -> tuple[int, int] | None:
        """A user with exactly the rights of the candidates (a pool uid owns no file); None when
        candidates run as perftune's own user (then they reach what it reaches)."""
        pool = self.uid_pool()
        usable = pool.usable() if pool is not None else []
        if usable:
            return usable[0], usable[0]
        return self._user()

    def reachable(self, directory: str, needed: Sequence[str] | None = None) -> str:
        """Where candidates find ``directory``: the directory itself, or a read-only staged copy of it
        (:mod:`perftune.measure._stage`) when the user candidates run as cannot reach it, as when
        perftune runs as root from a private (0700) folder. Made once per directory and sandbox.

        With ``needed`` (paths relative to ``directory``, e.g. the arguments of a run), a directory too
        large to copy whole (over 32 MB) is staged with just those files.

        Raises:
            StageError: The copy cannot be made (too large, unreadable); ``str()`` is one line.
        """
        directory = os.path.abspath(directory)
        with self._stage_lock:
            return self._reachable(directory, needed)

    def _reachable(self, directory: str, needed: Sequence[str] | None) -> str:
        if directory in self._staged:
            return self._staged[directory]
        user = self.candidate_user()
        if user is None or executable_by(directory, *user):
            return directory
        root = self.root_dir()
        mode = os.stat(root).st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(root, mode | stat.S_IXOTH)
        if self._stage is None:
            self._stage = Stage.create(root)
        try:
            if needed is None:
                copy = self._stage.add_tree(directory)
            else:
                try:
                    copy = Stage.create(root, max_bytes=32 * 1024 * 1024).add_tree(directory)
                except StageError:
                    copy = self._stage.add_selection(directory, needed)
        except OSError as error:
            raise StageError(f"{directory}: cannot be staged for the sandbox user: {error}") from None
        self._staged[directory] = copy
        return copy

    def root_dir(self) -> str:
        """The directory scratch directories (and staged copies) go in; made on first use."""
        root = (
            self.scratch_root
            or os.environ.get("PERFTUNE_SCRATCH")
            or os.path.join(tempfile.gettempdir(), f"perftune-{os.geteuid()}")
        )
        os.makedirs(root, mode=0o711, exist_ok=True)
        _check_root(root)
        return root

    def scratch(self, *, keep: bool = False, prefix: str = "cand-") -> Scratch:
        """Create a fresh scratch directory, owned by the user the steps run as."""
        if self.use_spawner:
            Spawner.prestart()  # the first step's helper starts while the machine is probed (caps)
        root = self.root_dir()
        pool = self.uid_pool()
        lease = pool.acquire() if pool is not None else None
        try:
            if lease is not None:
                _remove_left_behind(root, lease.uid)
            path = tempfile.mkdtemp(prefix=prefix, dir=root)
            user = (lease.uid, lease.gid) if lease is not None else self._user()
            if user is not None:
                os.chown(path, user[0], user[1])
                os.chmod(path, 0o700)
                # The sandbox user must be able to reach the scratch directory.
                mode = os.stat(root).st_mode
                if not mode & stat.S_IXOTH:
                    os.chmod(root, mode | stat.S_IXOTH)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        return Scratch(path, keep=keep, lease=lease)

    def resolve(
        self,
        program: str,
        path: str | None = None,
        cwd: str | None = None,
        *,
        user: tuple[int, int] | None = None,
    ) -> tuple[str | None, str]:
        """Find ``program`` the way the step will exec it, as the user it runs as.

        A relative path with a slash (``./prog``) is relative to the step's working directory ``cwd``.
        ``user`` is who runs the step (default: the shared unprivileged account, as root).

        Returns:
            ``(absolute path, "")``, or ``(None, one-line reason)`` when it is missing or the
            sandbox user may not execute it.
        """
        path = os.environ.get("PATH", os.defpath) if path is None else path
        user = user or self._user()
        if os.sep in program:
            candidates = [os.path.abspath(os.path.join(cwd or os.getcwd(), program))]
        else:
            candidates = [os.path.join(d or ".", program) for d in path.split(os.pathsep)]
        blocked: str | None = None
        for candidate in candidates:
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
                continue
            if user is None or executable_by(candidate, *user):
                return candidate, ""
            blocked = blocked or candidate
        if blocked:
            who = self.caps.sandbox_user if user == self._user() else f"uid {user[0]}" if user else ""
            return None, (
                f"{program}: found at {blocked}, but the sandbox user {who} "
                "may not execute it (install it system-wide, or give the full path of a copy it can run)"
            )
        return None, f"command not found: {program}"

    # -- running a step -------------------------------------------------------------------------

    def _spec(
        self,
        args: list[str],
        env: dict[str, str],
        scratch: str,
        cwd: str,
        cgroup_files: list[str],
        memory_by_cgroup: bool,
        pids_by_cgroup: bool,
        user: tuple[int, int] | None,
    ) -> dict[str, Any]:
        """What the step's process does between fork and exec (see ``_spawn.enter_step``)."""
        caps = self.caps
        return {
            "argv": args,
            "env": env,
            "scratch": scratch,
            "cwd": cwd,
            "cgroup_files": cgroup_files,
            "mount_ns": self.isolate_files and caps.mount_namespace,
            "net_ns": self.isolate_network and caps.net_namespace,
            "pid_ns": self._pid_namespace(),
            "ipc_ns": caps.ipc_namespace,
            "hide_sockets": host_sockets(exclude=scratch) if self.isolate_files and caps.mount_namespace
            else [],
            "hide_dirs": list(self.hide_dirs) if self.isolate_files and caps.mount_namespace else [],
            "via_user": not caps.is_root,
            "outer_uid": os.geteuid(),
            "outer_gid": os.getegid(),
            "rlimits": rlimits(self.limits, memory_by_cgroup=memory_by_cgroup, pids_by_cgroup=pids_by_cgroup),
            "user": list(user) if user is not None else None,
            "affinity": list(self.cpu_affinity) if self.cpu_affinity else None,
        }

    def _start(
        self, spec: dict[str, Any], stdin: int, stdout: int, stderr: int, timing_w: int | None
    ) -> _Started | StepResult:
        """Start the step from the helper (:mod:`perftune.measure._spawn`), else from this process."""
        args = spec["argv"]
        fds = (stdin, stdout, stderr, *(() if timing_w is None else (timing_w,)))
        spawner = Spawner.get() if self.use_spawner else None
        if spawner is not None:
            try:
                pid, pidfd = spawner.start(spec, fds)
                return _Started(pid, pidfd, spawner)
            except SpawnError as error:
                if error.where != "helper":
                    spawner.put_back()
                if error.where in ("exec", "setup"):
                    return StepResult(args, Status.FAILED, reason=_not_started(args[0], error))
                if error.where == "helper" and not spawner.n_served:
                    Spawner.give_up()  # a fresh one failed: steps are started from this process from now on
        libc()  # loaded now: the child between fork and exec imports nothing

        def preexec() -> None:  # runs in the child between fork and exec: no locks, no imports
            enter_step(spec, timing_w)

        try:
            proc = subprocess.Popen(
                args,
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env=spec["env"],
                start_new_session=True,
                preexec_fn=preexec,
                close_fds=True,
            )
        except subprocess.SubprocessError as error:
            failure = SpawnError("setup", 0, str(error))
            return StepResult(args, Status.FAILED, reason=_not_started(args[0], failure))
        except OSError as error:  # FileNotFoundError and PermissionError included
            failure = SpawnError("exec", error.errno or 0, error.strerror or str(error))
            return StepResult(args, Status.FAILED, reason=_not_started(args[0], failure))
        proc.returncode = 0  # never waited for by Popen: _Started.wait reaps it and reads its resource use
        return _Started(proc.pid, os.pidfd_open(proc.pid), None)

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        scratch: Scratch | str,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        stdin_path: str | None = None,
        shell: bool = False,
        stdout_max_bytes: int = 4 * _MiB,
    ) -> StepResult:
        """Run one step and report what happened; never raises for a misbehaving candidate.

        Args:
            argv: The command as an argument vector (or a string with ``shell=True``).
            scratch: The candidate's scratch directory.
            cwd: Working directory (default: the scratch directory).
            env: The step's environment variables, on top of the allowed part of the tuner's
                (:data:`CANDIDATE_ENV`, ``pass_env``); ``HOME`` and ``TMPDIR`` point at
                the scratch directory.
            timeout_s: Wall-clock limit; the whole process group is killed when it passes.
            stdin_path: File fed to standard input (default: nothing): a regular file the candidate
                could read itself, and no link out of its scratch directory.
            shell: Run ``argv`` through ``/bin/sh -c`` (only when the task file says ``shell = true``).
            stdout_max_bytes: Keep at most this much of standard output (the rest is hashed).
        """
        if self.use_spawner:
            Spawner.prestart()  # the first step's helper starts while the machine is probed (caps)
        scratch_path = os.fspath(scratch)
        if shell:
            command = argv if isinstance(argv, str) else " ".join(argv)
            args = ["/bin/sh", "-c", command]
        else:
            args = [argv] if isinstance(argv, str) else list(argv)
        full_env = {
            k: v
            for k, v in os.environ.items()
            if k in CANDIDATE_ENV or k in self.pass_env
        }
        full_env.setdefault("PATH", os.defpath)
        full_env.update({"HOME": scratch_path, "TMPDIR": scratch_path})
        if env:
            full_env.update(env)
        caps = self.caps
        # The relay and the init of a PID namespace are two processes of the step's cgroup too.
        cgroup_limits = (
            dataclasses.replace(self.limits, n_procs=self.limits.n_procs + 2)
            if self._pid_namespace()
            else self.limits
        )
        cgroup = StepCgroup(caps, cgroup_limits) if (caps.memory_cgroup or caps.pids_cgroup) else None
        memory_by_cgroup = bool(cgroup and cgroup.memory_dir)
        if self.limits.sanitizer and not memory_by_cgroup:
            extra = f"hard_rss_limit_mb={self.limits.memory_mb}:allocator_may_return_null=1"
            for var in ("ASAN_OPTIONS", "TSAN_OPTIONS", "MSAN_OPTIONS"):
                full_env[var] = (full_env[var] + ":" + extra) if full_env.get(var) else extra
        try:
            return self._run(
                args,
                self._step_user(scratch),
                scratch_path,
                cwd or scratch_path,
                full_env,
                timeout_s,
                stdin_path,
                stdout_max_bytes,
                cgroup,
                memory_by_cgroup,
            )
        finally:
            if cgroup is not None:
                cgroup.remove()

    def _run(
        self,
        args: list[str],
        user: tuple[int, int] | None,
        scratch: str,
        cwd: str,
        env: dict[str, str],
        timeout_s: float | None,
        stdin_path: str | None,
        stdout_max_bytes: int,
        cgroup: StepCgroup | None,
        memory_by_cgroup: bool,
    ) -> StepResult:
        detect_outside = user is not None and not (self.isolate_files and self.caps.mount_namespace)
        # Every process of a leased uid is this candidate's: what a PID namespace does not end, a sweep does.
        pool = self.uid_pool()
        own_uid = user[0] if (user and pool and user[0] in pool) else None
        pid_ns = self._pid_namespace()
        found, problem = self.resolve(args[0], env.get("PATH", os.defpath), cwd, user=user)
        if found is None:
            return StepResult(args, Status.FAILED, reason=problem)
        if not os.path.isdir(cwd):
            what = "is not a directory" if os.path.exists(cwd) else "does not exist"
            return StepResult(args, Status.FAILED, reason=f"working directory {cwd} {what}")
        args = [found, *args[1:]]
        if stdin_path:
            try:
                stdin = open_for_candidate(stdin_path, scratch=scratch, user=user)
            except CandidateFileError as error:
                return StepResult(args, Status.FAILED, reason=f"stdin refused: {error}")
        else:
            stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        # The candidate's own time, clocked inside its PID namespace (see _spawn._enter_pid_namespace),
        # and the CPU time of the sandbox's setup before exec, which the step's does not count.
        timing_r, timing_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        spec = self._spec(
            args,
            env,
            scratch,
            cwd,
            cgroup.join_files() if cgroup else [],
            memory_by_cgroup,
            bool(cgroup and cgroup.pids_dir),
            user,
        )
        started_wall = time.time()
        t0 = time.perf_counter()
        try:
            started = self._start(spec, stdin, out_w, err_w, timing_w)
        finally:
            for fd in (stdin, out_w, err_w, timing_w):
                if fd is not None:
                    os.close(fd)
        if isinstance(started, StepResult):
            for fd in (out_r, err_r, timing_r):
                if fd is not None:
                    os.close(fd)
            return started
        captured = _Captured(stdout_max_bytes)
        timed_out = False
        group_full = False
        disk_hit = False
        exit_t: float | None = None
        status: int | None = None
        killed: bool | None = None
        cpu_s = 0.0
        max_rss_kb = 0
        pid, pidfd = started.pid, started.pidfd
        sel = selectors.DefaultSelector()
        sel.register(out_r, selectors.EVENT_READ, "out")
        sel.register(err_r, selectors.EVENT_READ, "err")
        sel.register(pidfd, selectors.EVENT_READ, "exit")
        deadline = t0 + timeout_s if timeout_s else None
        interval = self.poll_interval_s
        next_poll = t0 + interval
        disk_limit = self.limits.disk_mb * _MiB
        # The scratch's size is a walk of it, done less often as a step runs on; between walks, the free
        # space of its file system (one statvfs per poll) says when something grew fast: then it is
        # walked at once, and a file system that a step has filled to its last reserve ends the step
        # whatever the walk says (fallocate makes gigabytes between two walks).
        fs_free0, reserve = _free_bytes(scratch)
        if fs_free0 is not None:
            reserve = min(reserve, fs_free0 // 2)  # a disk already short of it keeps half of what is left
        walked_used = 0
        next_walk = next_poll
        fs_full = False
        try:
            while True:
                now = time.perf_counter()
                wake = next_poll if deadline is None else min(next_poll, deadline)
                for key, _ in sel.select(max(0.0, wake - now)):
                    if key.data == "exit":
                        if exit_t is None:
                            exit_t = time.perf_counter()
                        sel.unregister(pidfd)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    captured.take(key.data, chunk)
                if exit_t is not None:
                    break
                now = time.perf_counter()
                if deadline is not None and now >= deadline:
                    timed_out = True
                    break
                if now >= next_poll:
                    next_poll = now + min(self.poll_interval_s, 0.2)
                    fs_free, _ = _free_bytes(scratch)
                    grown = 0 if fs_free is None or fs_free0 is None else fs_free0 - fs_free
                    if grown > 0 and fs_free is not None and fs_free < reserve:
                        fs_full = True
                        break
                    if now >= next_walk or grown > disk_limit - walked_used:
                        walked_used, n_entries = Scratch(scratch).size_bytes()
                        if walked_used > disk_limit or n_entries >= 200_000:
                            disk_hit = True
                            break
                        interval = min(interval * 1.5, 1.0)  # long steps are walked less often
                        next_walk = now + interval
                        fs_free0 = fs_free  # the next growth counts from this walk
            killed = exit_t is None
            if killed:
                if cgroup is None or cgroup.pids_dir is None:
                    # Without a pids cgroup, a full process group is how a fork bomb shows.
                    group_full = _group_size(pid) >= max(2, int(self.limits.n_procs * 0.9))
                self._kill(pid, cgroup)
            status, cpu_s, max_rss_kb = started.wait()
            if exit_t is None:
                exit_t = time.perf_counter()
            # Daemons the step left behind must not outlive it. A step that ended on its own in its PID
            # namespace left none (the kernel ended the namespace before its init was reaped); after a
            # kill, the init may still be on its way out: the uid is swept then.
            self._kill(pid, cgroup)
            if own_uid is not None and not (pid_ns and killed is False):
                _end_uid(own_uid)
            # Drain what is left in the pipes (bounded: the writers are dead).
            drain_until = time.perf_counter() + 1.0
            while sel.get_map() and time.perf_counter() < drain_until:
                for key, _ in sel.select(0.1):
                    if key.data == "exit":
                        sel.unregister(key.fileobj)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    else:
                        captured.take(key.data, chunk)
        finally:
            sel.close()
            os.close(pidfd)
            os.close(out_r)
            os.close(err_r)
            if status is None:
                self._kill(pid, cgroup)
                started.wait()
                if own_uid is not None:
                    _end_uid(own_uid)
            started.done()
        assert exit_t is not None and status is not None
        wall = exit_t - t0
        clocked, clocked_cpu, setup_cpu = _read_timing(timing_r)
        if clocked is not None and not timed_out:
            wall = clocked
        if clocked_cpu is not None:
            cpu_s = clocked_cpu  # what the init reaped: the candidate and what it left running
        cpu_s = max(0.0, cpu_s - setup_cpu)
        stderr_text = b"".join(captured.err_tail)[-4096:].decode(errors="replace")
        result = StepResult(
            args,
            Status.OK,
            wall_s=wall,
            cpu_s=cpu_s,
            max_rss_kb=max_rss_kb,
            stdout=bytes(captured.out_head),
            stdout_tail=b"".join(captured.out_tail)[-65536:],
            stdout_truncated=captured.n_out > len(captured.out_head),
            stdout_sha256=captured.sha.hexdigest(),
            stderr_tail=stderr_text,
        )
        peak = cgroup.peak_memory_bytes() if (cgroup is not None and memory_by_cgroup) else None
        if peak is not None:
            # ru_maxrss keeps the high-water mark of the forked supervisor's image from before exec;
            # the step's cgroup only counts what the step itself allocated.
            result.max_rss_kb = peak // 1024
        if os.WIFSIGNALED(status):
            result.signal = _signal_name(os.WTERMSIG(status))
        else:
            result.returncode = os.WEXITSTATUS(status)
        if not disk_hit and not fs_full:
            used, n_entries = Scratch(scratch).size_bytes()
            disk_hit = used > disk_limit or n_entries >= 200_000
        if detect_outside and user is not None:
            result.outside_writes = _outside_writes(user[0], started_wall, pooled=own_uid is not None)
        self._classify(
            result,
            timed_out=timed_out,
            timeout_s=timeout_s,
            disk_hit=disk_hit,
            cgroup=cgroup,
            memory_by_cgroup=memory_by_cgroup,
            group_full=group_full,
            fs_full=fs_full,
        )
        return result

    def _kill(self, pid: int, cgroup: StepCgroup | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill_all()

    def _classify(
        self,
        r: StepResult,
        *,
        timed_out: bool,
        timeout_s: float | None,
        disk_hit: bool,
        cgroup: StepCgroup | None,
        memory_by_cgroup: bool,
        group_full: bool = False,
        fs_full: bool = False,
    ) -> None:
        limits = self.limits
        last = _last_line(r.stderr_tail)
        tail = f"; stderr: {last}" if last else ""
        pids_hit = (
            group_full
            or bool(cgroup and cgroup.pids_limit_hit())
            or (
                not (cgroup and cgroup.pids_dir)
                and "resource temporarily unavailable" in r.stderr_tail.lower()
            )
        )
        if fs_full:
            r.status, r.limit = Status.FAILED, "disk"
            r.reason = ("disk limit hit: the file system holding the scratch directory filled up to its "
                        "last reserve during the step")
        elif disk_hit:
            r.status, r.limit = Status.FAILED, "disk"
            r.reason = f"disk limit hit: scratch directory grew past {limits.disk_mb} MB"
        elif r.signal == "SIGXFSZ" or "file size limit exceeded" in r.stderr_tail.lower():
            r.status, r.limit = Status.FAILED, "file size"
            r.reason = f"file size limit hit: a file grew past {limits.file_size_mb} MB (SIGXFSZ)"
        elif memory_by_cgroup and cgroup is not None and cgroup.memory_limit_hit():
            r.status, r.limit = Status.FAILED, "memory"
            r.reason = f"memory limit hit: {limits.memory_mb} MB (killed by the cgroup's OOM killer){tail}"
        elif timed_out:
            r.status = Status.TIMEOUT
            r.reason = f"timeout: still running after {timeout_s:g} s; process group killed"
            if pids_hit:
                r.limit = "processes"
                r.reason += f" (process limit of {limits.n_procs} was hit)"
            elif memory_by_cgroup and cgroup is not None and cgroup.memory_limit_reached():
                r.limit = "memory"
                r.reason += f" (memory limit of {limits.memory_mb} MB was reached)"
        elif r.outside_writes:
            r.status = Status.FAILED
            r.reason = "wrote outside its scratch directory: " + ", ".join(r.outside_writes[:3])
        elif r.signal is not None:
            r.status = Status.FAILED
            r.reason = f"killed by {r.signal}{tail}"
            if pids_hit:
                r.status, r.limit = Status.FAILED, "processes"
                r.reason = f"process limit hit: {limits.n_procs} processes; killed by {r.signal}"
            elif not memory_by_cgroup and _looks_out_of_memory(r.stderr_tail):
                r.status, r.limit = Status.FAILED, "memory"
                r.reason = (
                    f"memory limit hit: {limits.memory_mb} MB (address space); killed by {r.signal}{tail}"
                )
        elif r.returncode != 0:
            r.status = Status.FAILED
            r.reason = f"exit code {r.returncode}{tail}"
            if pids_hit:
                r.status, r.limit = Status.FAILED, "processes"
                r.reason = f"process limit hit: {limits.n_procs} processes; exit code {r.returncode}{tail}"
            elif _looks_out_of_memory(r.stderr_tail):
                r.status, r.limit = Status.FAILED, "memory"
                r.reason = f"memory limit hit: {limits.memory_mb} MB; exit code {r.returncode}{tail}"


# What the step's side writes on the timing pipe (_spawn.enter_step, _spawn._enter_pid_namespace).
_TIMING_LINES = re.compile(rb"setup (\d+\.\d{6})\n(?:clock (\d+) cpu (\d+\.\d{6})\n)?")


def _read_timing(fd: int) -> tuple[float | None, float | None, float]:
    """What the step's side said on the timing pipe: ``(seconds the init clocked for the candidate, CPU
    seconds of the candidate and what it left running, CPU seconds of the setup before exec)``.

    The setup's CPU time is said by the candidate's process just before exec, the rest by the init of a
    PID namespace once the candidate ended (None when it was killed before it could say, or without a
    PID namespace). Anything but exactly that (a step that failed before exec, or that forged a line)
    counts as nothing said.
    """
    try:
        os.set_blocking(fd, False)
        data = os.read(fd, 256)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    m = _TIMING_LINES.fullmatch(data)
    if m is None:
        return None, None, 0.0
    setup, clock, cpu = m.groups()
    return (None if clock is None else int(clock) / 1e9), (None if cpu is None else float(cpu)), float(setup)


class _Started:
    """A step's main process, started from the helper (``spawner``) or from this process."""

    def __init__(self, pid: int, pidfd: int, spawner: Spawner | None) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.spawner = spawner
        self._waited = False

    def wait(self) -> tuple[int, float, int]:
        """Wait for the process to exit: ``(wait status, CPU seconds, ru_maxrss KiB)``, its reaped
        children included."""
        self._waited = True
        if self.spawner is not None:
            return self.spawner.wait()
        _, status, usage = os.wait4(self.pid, 0)
        return status, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss)

    def done(self) -> None:
        """Give the helper back for the next step."""
        if self.spawner is not None:
            if self._waited:
                self.spawner.put_back()
            else:
                self.spawner.close()
            self.spawner = None


def _end_uid(uid: int) -> None:
    """Kill every process of a leased uid; if some survive, its lease's release tries again."""
    if not sweep_uid(uid)[1]:
        lease = held_lease(uid)
        if lease is not None:
            lease.confined = False


def _not_started(program: str, error: SpawnError) -> str:
    """The one-line reason of a step that did not start."""
    if error.where == "setup":
        return (
            f"sandbox setup failed before exec ({error}); "
            "set PERFTUNE_SANDBOX_NO_NAMESPACES=1 or PERFTUNE_SANDBOX_NO_CGROUPS=1 to narrow it"
        )
    if error.errno == errno.ENOENT:
        return f"command not found: {program}"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied executing {program}"
    return f"could not start {program}: {os.strerror(error.errno) if error.errno else error}"


def executable_by(path: str, uid: int, gid: int) -> bool:
    """Can ``uid``/``gid`` (no supplementary groups) reach and execute ``path``? Follows symlinks."""
    real = os.path.realpath(path)

    def allowed(st: os.stat_result, bit_other: int, bit_group: int, bit_user: int) -> bool:
        if st.st_uid == uid:
            return bool(st.st_mode & bit_user)
        if st.st_gid == gid:
            return bool(st.st_mode & bit_group)
        return bool(st.st_mode & bit_other)

    try:
        parts = real.split(os.sep)
        for i in range(1, len(parts)):
            directory = os.sep.join(parts[:i]) or os.sep
            if not allowed(os.stat(directory), stat.S_IXOTH, stat.S_IXGRP, stat.S_IXUSR):
                return False
        st = os.stat(real)
    except OSError:
        return False
    return (
        allowed(st, stat.S_IXOTH, stat.S_IXGRP, stat.S_IXUSR)
        and allowed(st, stat.S_IROTH, stat.S_IRGRP, stat.S_IRUSR)
        or allowed(st, stat.S_IXOTH, stat.S_IXGRP, stat.S_IXUSR)
    )


def _group_size(pgid: int) -> int:
    """Number of live processes in process group ``pgid`` (scans /proc)."""
    n = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            n += 1
    return n


def _check_root(root: str) -> None:
    """Refuse a scratch root that another user could change: one that is a link, is owned by another
    user, or is writable by others. Such a user could swap a candidate's directory for a link to any
    path, and the tuner (root, often) would change that path's owner and mode when it hands the
    directory back."""
    st = os.lstat(root)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory (a link?)"
    elif st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        problem = f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    if problem is not None:
        raise PerftuneError(
            f"the sandbox's scratch directory {root} {problem}: another user could swap a candidate's "
            "directory in it for a link; remove it, or name another with PERFTUNE_SCRATCH"
        )


def _remove_left_behind(root: str, uid: int) -> None:
    """Remove the scratch directories under ``root`` that a leased ``uid`` still owns.

    Called with the uid's lease held: no live candidate has that uid, so what it owns there was left
    by a tuner that was killed before its cleanup (a kept scratch is handed to the tuner's own uid).
    """
    try:
        with os.scandir(root) as it:
            entries = list(it)
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_uid == uid and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


def _free_bytes(path: str) -> tuple[int | None, int]:
    """Bytes free to unprivileged users on ``path``'s file system, and the reserve a step may not touch
    (5% of it, at most 1 GiB); ``(None, 0)`` when it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None, 0
    return st.f_bavail * st.f_frsize, min(1 << 30, st.f_blocks * st.f_frsize // 20)


_MAX_SOCKETS = 4096
_sockets_cache: tuple[frozenset[bytes], list[str]] = (frozenset(), [])


def host_sockets(exclude: str | None = None) -> list[str]:
    """Paths of the Unix sockets bound in the tuner's network namespace that are files (``/proc/net/unix``).

    A step's mount namespace covers each of them (``hide_sockets``): a network namespace does not end a
    connection to a server's socket file. Only paths that are sockets now (resolved, so that a path
    through a link cannot aim the cover at another file) are listed; sockets under ``exclude`` (the
    step's own scratch) are not. Read for every step (a server started a moment ago is covered too);
    the paths are resolved again only when the set of names changed; at most 4096 paths.
    """
    global _sockets_cache
    names: set[bytes] = set()
    try:
        with open("/proc/net/unix", "rb") as f:
            lines = f.read(8 * _MiB).splitlines()[1:]
    except OSError:
        lines = []
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith(b"/"):  # not unnamed or abstract (the netns ends those)
            names.add(fields[7])
    key = frozenset(names)
    if key != _sockets_cache[0]:
        found: set[str] = set()
        for name in sorted(names):
            path = os.path.realpath(os.fsdecode(name))
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    found.add(path)
            if len(found) >= _MAX_SOCKETS:
                break
        _sockets_cache = (key, sorted(found))
    paths = _sockets_cache[1]
    if exclude:
        root = os.path.join(os.path.realpath(exclude), "")
        paths = [p for p in paths if not p.startswith(root)]
    return paths


def _last_line(text: str) -> str:
    """The most telling line of a stderr tail: a sanitizer's summary, else a compiler's first error
    (``file.c:3:5: error: ...``; its last lines are the source and a caret), else the last line.

    It becomes a failure's reason, kept in the store and written by every export: the candidate's
    control characters (a terminal's escape sequences) are spelled ``\\xNN``, whoever prints it later.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for marker in ("SUMMARY: ", "runtime error:", "ERROR: "):
        for line in reversed(lines):
            if marker in line:
                return _visible(line[:300])
    for line in lines:
        if ": error: " in line or ": fatal error: " in line:
            return _visible(line[:300])
    return _visible(lines[-1][:300]) if lines else ""


def _visible(text: str) -> str:
    """``text`` with every character that is not printable (but a tab) spelled as an escape."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == "\t" else
                   f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}" for ch in text)


def _looks_out_of_memory(stderr: str) -> bool:
    low = stderr.lower()
    return any(
        s in low
        for s in (
            "memoryerror",
            "out of memory",
            "cannot allocate memory",
            "std::bad_alloc",
            "hard rss limit",
            "allocator is out of memory",
            "malloc failed",
        )
    )


def _outside_writes(uid: int, since: float, *, pooled: bool = False) -> list[str]:
    """Entries of world-writable directories the sandbox user made during the step; removed.

    With a uid of the pool (``pooled``), the uid owns nothing outside its scratch but what a
    candidate left: every entry it owns is taken, whatever its time says (``touch -d`` sets a file's
    time back), also inside world-writable subdirectories (two levels down). With the one shared
    sandbox account, only entries changed since the step began (``since``) are taken.
    """
    found: list[str] = []

    def visit(top: str, depth: int) -> None:
        try:
            with os.scandir(top) as it:
                entries = list(it)
        except OSError:
            return
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid and (pooled or st.st_mtime >= since - 1.0 or st.st_ctime >= since - 1.0):
                found.append(entry.path)
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
            elif pooled and depth < 2 and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o002:
                visit(entry.path, depth + 1)  # a world-writable directory of someone else's

    for top in _WORLD_WRITABLE:
        visit(top, 0)
    return found
