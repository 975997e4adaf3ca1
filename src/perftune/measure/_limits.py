"""What this machine lets perftune do to contain a candidate, detected at run time.

Protections, strongest first:

* an unprivileged user (when perftune runs as root): RLIMIT_NPROC only works for non-root users, and
  an unprivileged candidate cannot write outside world-writable places;
* cgroup memory and pids limits (cgroup v2 when a writable hierarchy with those controllers exists,
  else cgroup v1 ``memory`` and ``pids`` hierarchies);
* rlimits as a fallback (address space, processes, file size, no core dumps);
* a private mount namespace with a read-only root (only the scratch directory stays writable) and a
  private network namespace without interfaces (directly as root, else through a user namespace), the
  host's Unix sockets that are files covered by ``/dev/null`` in it;
* a private PID namespace per step, with its own ``/proc`` mounted ``hidepid=invisible``, and a private
  IPC namespace (SysV objects and message queues end with the step) and session keyring;
* as root, a uid of its own per candidate (:mod:`perftune.measure._uids`), and a staged read-only
  copy of a task that the candidates' users cannot reach (:mod:`perftune.measure._stage`).

Example:
    >>> from perftune.measure import doctor
    >>> for name, active, detail in doctor():  # doctest: +SKIP
    ...     print(name, active, detail)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import pwd
import resource
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from perftune.measure._spawn import CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, libc
from perftune.measure._spawn import write_id_maps as _write_id_maps

__all__ = ["Capabilities", "Limits", "StepCgroup", "capabilities", "doctor"]

_MiB = 1024 * 1024

_libc = libc()


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every step of a candidate.

    Args:
        memory_mb: Peak memory of the step (all its processes when a cgroup is available).
        n_procs: Processes and threads the step may have at once.
        disk_mb: Total size of the candidate's scratch directory.
        file_size_mb: Largest single file a step may write (RLIMIT_FSIZE); defaults to ``disk_mb``.
        n_open_files: RLIMIT_NOFILE.
        sanitizer: The step runs a sanitizer build (ASan/TSan reserve terabytes of address space):
            no RLIMIT_AS; the memory limit is enforced by the cgroup, else by ``ASAN_OPTIONS``
            (``hard_rss_limit_mb``) and RSS polling.

    Example:
        >>> Limits(memory_mb=512).file_size_mb
        1024
    """

    memory_mb: int = 2048
    n_procs: int = 256
    disk_mb: int = 1024
    file_size_mb: int | None = None
    n_open_files: int = 1024
    sanitizer: bool = False

    def __post_init__(self) -> None:
        if self.file_size_mb is None:
            object.__setattr__(self, "file_size_mb", self.disk_mb)


@dataclass(frozen=True)
class Capabilities:
    """Protections available on this machine (see :func:`capabilities`)."""

    is_root: bool
    sandbox_uid: int | None  # the unprivileged user candidates run as (root only)
    sandbox_gid: int | None
    sandbox_user: str | None
    memory_cgroup: str | None  # directory under which per-step cgroups are created
    memory_cgroup_version: int | None
    pids_cgroup: str | None
    pids_cgroup_version: int | None
    mount_namespace: bool  # read-only root with a writable scratch
    net_namespace: bool
    user_namespace: bool  # namespaces reached through a user namespace (non-root)
    mount_setattr: bool
    bwrap: str | None
    pid_namespace: bool = False  # a PID namespace per step, with a private /proc (hidepid=invisible)
    ipc_namespace: bool = False  # an IPC namespace per step: SysV objects and message queues end with it


def _own_cgroup_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return paths
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            paths["v2"] = path
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4:
                out.append((fields[1], fields[2], fields[3]))
    except OSError:
        pass
    return out


def _probe_cgroup_dir(parent: str, limit_file: str, value: str) -> bool:
    """Can we create a child cgroup under ``parent`` and write a limit into it?"""
    probe = os.path.join(parent, f"perftune-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        with open(os.path.join(probe, limit_file), "w") as f:
            f.write(value)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def _detect_cgroups() -> tuple[str | None, int | None, str | None, int | None]:
    own = _own_cgroup_paths()
    mounts = _mounts()
    memory: tuple[str | None, int | None] = (None, None)
    pids: tuple[str | None, int | None] = (None, None)
    # cgroup v2 first: a writable directory whose subtree can enable memory/pids.
    for mountpoint, fstype, _ in mounts:
        if fstype != "cgroup2" or "v2" not in own:
            continue
        base = os.path.join(mountpoint, own["v2"].lstrip("/"))
        try:
            available = Path(base, "cgroup.controllers").read_text().split()
        except OSError:
            continue
        # A process may only sit in leaf cgroups: create ours under a dedicated child of our own.
        if "memory" in available or "pids" in available:
            try:
                enabled = Path(base, "cgroup.subtree_control").read_text().split()
                want = [c for c in ("memory", "pids") if c in available and c not in enabled]
                if want:
                    with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                        f.write(" ".join("+" + c for c in want))
                enabled = Path(base, "cgroup.subtree_control").read_text().split()
            except OSError:
                enabled = []
            if "memory" in enabled and _probe_cgroup_dir(base, "memory.max", str(64 * _MiB)):
                memory = (base, 2)
            if "pids" in enabled and _probe_cgroup_dir(base, "pids.max", "64"):
                pids = (base, 2)
    # cgroup v1 hierarchies for whatever v2 did not give us.
    for mountpoint, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        opts = options.split(",")
        if memory[0] is None and "memory" in opts and "memory" in own:
            base = os.path.join(mountpoint, own["memory"].lstrip("/"))
            if _probe_cgroup_dir(base, "memory.limit_in_bytes", str(64 * _MiB)):
                memory = (base, 1)
        if pids[0] is None and "pids" in opts and "pids" in own:
            base = os.path.join(mountpoint, own["pids"].lstrip("/"))
            if _probe_cgroup_dir(base, "pids.max", "64"):
                pids = (base, 1)
    return memory[0], memory[1], pids[0], pids[1]


def _probe_namespaces(flags: int, *, via_user: bool) -> bool:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            if via_user:
                uid, gid = os.geteuid(), os.getegid()
                if _libc.unshare(CLONE_NEWUSER | flags) == 0:
                    _write_id_maps(uid, gid)
                    code = 0
            elif _libc.unshare(flags) == 0:
                code = 0
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _probe_pid_namespace(*, via_user: bool) -> bool:
    """Can a step get its own PID namespace and mount a private ``/proc`` (hidepid=invisible) in it?"""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            flags = CLONE_NEWNS | CLONE_NEWPID
            uid, gid = os.geteuid(), os.getegid()
            ok = _libc.unshare((CLONE_NEWUSER | flags) if via_user else flags) == 0
            if ok:
                if via_user:
                    _write_id_maps(uid, gid)
                if _libc.mount(None, b"/", None, 16384 | (1 << 18), None) == 0:  # MS_REC | MS_PRIVATE
                    inner = os.fork()
                    if inner == 0:
                        ok = _libc.mount(b"proc", b"/proc", b"proc", 14, b"hidepid=invisible") == 0
                        os._exit(0 if ok else 1)  # 14: MS_NOSUID | MS_NODEV | MS_NOEXEC
                    _, status = os.waitpid(inner, 0)
                    code = os.waitstatus_to_exitcode(status)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _has_mount_setattr() -> bool:
    # mount_setattr(2) (Linux 5.12) makes a whole mount tree read-only in one call.
    import platform

    if platform.machine() not in ("x86_64", "aarch64", "arm64"):
        return False
    import errno

    res = _libc.syscall(442, -1, b"", 0, None, 0)
    return res == -1 and ctypes.get_errno() != errno.ENOSYS


def _sandbox_account() -> tuple[int | None, int | None, str | None]:
    for name in ("perftune-sandbox", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid != 0:
            return entry.pw_uid, entry.pw_gid, name
    return None, None, None


@functools.lru_cache(maxsize=1)
def capabilities() -> Capabilities:
    """Detect (once per process) which protections this machine offers."""
    is_root = os.geteuid() == 0
    uid, gid, user = _sandbox_account() if is_root else (None, None, None)
    mem: str | None = None
    pid_dir: str | None = None
    mem_v: int | None = None
    pid_v: int | None = None
    if not os.environ.get("PERFTUNE_SANDBOX_NO_CGROUPS"):
        mem, mem_v, pid_dir, pid_v = _detect_cgroups()
    via_user = not is_root
    mount_ns = net_ns = pid_ns = ipc_ns = False
    if not os.environ.get("PERFTUNE_SANDBOX_NO_NAMESPACES"):
        setattr_ok = _has_mount_setattr()
        mount_ns = setattr_ok and _probe_namespaces(CLONE_NEWNS, via_user=via_user)
        net_ns = _probe_namespaces(CLONE_NEWNET, via_user=via_user)
        pid_ns = mount_ns and _probe_pid_namespace(via_user=via_user)
        ipc_ns = _probe_namespaces(CLONE_NEWIPC, via_user=via_user)
    else:
        setattr_ok = _has_mount_setattr()
    return Capabilities(
        is_root=is_root,
        sandbox_uid=uid,
        sandbox_gid=gid,
        sandbox_user=user,
        memory_cgroup=mem,
        memory_cgroup_version=mem_v,
        pids_cgroup=pid_dir,
        pids_cgroup_version=pid_v,
        mount_namespace=mount_ns,
        net_namespace=net_ns,
        user_namespace=via_user and (mount_ns or net_ns),
        mount_setattr=setattr_ok,
        bwrap=shutil.which("bwrap"),
        pid_namespace=pid_ns,
        ipc_namespace=ipc_ns,
    )


def doctor() -> list[tuple[str, bool, str]]:
    """Which protections are active for candidates on this machine.

    Returns:
        ``(protection, active, detail)`` rows, in the order ``perftune doctor`` prints them.

    Example:
        >>> rows = doctor()  # doctest: +SKIP
        >>> rows[0][0]  # doctest: +SKIP
        'process group + wall-clock timeout'
    """
    caps = capabilities()
    rows: list[tuple[str, bool, str]] = [
        (
            "process group + wall-clock timeout",
            True,
            "each step in its own session; a timeout kills the group",
        ),
    ]
    from perftune.measure._uids import UidPool

    pool: UidPool | None = None
    pool_problem = ""
    try:
        pool = UidPool.from_environment() if caps.is_root else None
    except ValueError as error:
        pool_problem = str(error)
    if caps.is_root:
        rows.append(
            (
                "unprivileged user",
                caps.sandbox_uid is not None or pool is not None,
                f"candidates run as uids {pool.first}-{pool.last}"
                if pool is not None
                else f"candidates run as {caps.sandbox_user} (uid {caps.sandbox_uid})"
                if caps.sandbox_uid is not None
                else "running as root and no unprivileged account (nobody) found",
            )
        )
        rows.append(
            (
                "own uid per candidate",
                pool is not None,
                f"uids {pool.first}-{pool.last} (PERFTUNE_SANDBOX_UIDS=first-last), one per concurrent "
                "candidate, leased with flock in /run/perftune-uids; uids with an account are skipped; "
                "every process of the uid is killed when the candidate ends"
                if pool is not None
                else pool_problem
                or "PERFTUNE_SANDBOX_UIDS=none: candidates share one account and can reach one another",
            )
        )
        rows.append(
            (
                "staging of private task directories",
                True,
                "a task directory or input the candidates' users cannot reach (under /root, in a mktemp -d "
                "folder) is copied once per run under the scratch root: root-owned, directories 0755, file "
                "modes kept (0600 stays unreadable), at most PERFTUNE_STAGE_MAX_MB (256) MB; "
                "{task_dir} and {input} name the copy",
            )
        )
    else:
        rows.append(("unprivileged user", True, f"perftune itself runs as uid {os.geteuid()}"))
        rows.append(
            (
                "own uid per candidate",
                False,
                f"perftune is not root: candidates run as your uid {os.geteuid()} and can read every file "
                "you can (~/.ssh, ~/.pgpass, the store); only the reference outputs are covered"
                + (" in their mount namespace" if caps.mount_namespace else " (not even those: no mount "
                   "namespace)")
                + ". Run perftune as root for a uid of its own per candidate",
            )
        )
    rows.append(
        (
            "memory limit (cgroup)",
            caps.memory_cgroup is not None,
            f"cgroup v{caps.memory_cgroup_version} under {caps.memory_cgroup}"
            if caps.memory_cgroup
            else "no writable cgroup with the memory controller; falling back to RLIMIT_AS",
        )
    )
    if caps.memory_cgroup is None:
        rows.append(
            (
                "memory limit (RLIMIT_AS)",
                True,
                "address-space limit (lifted for sanitizer builds, which use ASAN_OPTIONS instead)",
            )
        )
    nproc_effective = (not caps.is_root) or caps.sandbox_uid is not None
    rows.append(
        (
            "process limit (cgroup pids)",
            caps.pids_cgroup is not None,
            f"cgroup v{caps.pids_cgroup_version} under {caps.pids_cgroup}"
            if caps.pids_cgroup
            else "no writable cgroup with the pids controller",
        )
    )
    rows.append(
        (
            "process limit (RLIMIT_NPROC)",
            nproc_effective,
            "effective: candidates do not run as root"
            if nproc_effective
            else "ignored for root and no unprivileged account to drop to",
        )
    )
    rows.append(
        ("disk limit", True,
         "RLIMIT_FSIZE per file + the scratch directory's size, walked less often as a step runs and at "
         "once when its file system's free space (read every 50 ms) drops by more than what is left of the "
         "limit; over the limit kills, and so does a step that fills the file system to its reserve (5%, "
         "at most 1 GiB). Not a quota: a burst between two reads can pass the limit")
    )
    rows.append(("no core dumps", True, "RLIMIT_CORE = 0"))
    rows.append(
        (
            "file-system isolation",
            caps.mount_namespace,
            (
                "private mount namespace: read-only root, writable scratch"
                + (" (via a user namespace)" if caps.user_namespace else "")
            )
            if caps.mount_namespace
            else "mount namespaces unavailable; writes outside scratch are only "
            "detected in world-writable directories",
        )
    )
    rows.append(
        (
            "process isolation",
            caps.pid_namespace,
            "a PID namespace per step with a private /proc (hidepid=invisible): no other candidate, no "
            "tuner and no driver command line in sight, nothing to signal; daemons die with the step"
            if caps.pid_namespace
            else "PID namespaces unavailable: candidates see the host's /proc"
            + ("; processes of a candidate's uid are killed after each step" if pool is not None else ""),
        )
    )
    rows.append(
        (
            "clean environment",
            True,
            "candidates get PATH, LANG, the LC_ locale categories, TZ, TERM (and the task's env), "
            "HOME = TMPDIR = scratch; "
            "nothing else of perftune's environment",
        )
    )
    rows.append(
        (
            "files read for candidates",
            True,
            "stdin, [check] files and file_size outputs: regular files only, no link out of scratch, "
            "only what the candidate could read itself, size-capped",
        )
    )
    rows.append(
        (
            "network isolation",
            caps.net_namespace,
            "private network namespace without interfaces"
            + ("; the host's Unix sockets that are files (a PostgreSQL server's, D-Bus's) are covered "
               "by /dev/null in the mount namespace" if caps.mount_namespace
               else "; the host's Unix sockets that are files stay reachable (no mount namespace)")
            if caps.net_namespace
            else "network namespaces unavailable",
        )
    )
    rows.append(
        (
            "IPC isolation",
            caps.ipc_namespace,
            "an IPC namespace per step: shared memory, semaphores and message queues end with the step"
            + ("; a candidate's uid starts with an empty keyring" if caps.is_root else "")
            if caps.ipc_namespace
            else "IPC namespaces unavailable: SysV objects a candidate makes outlive it",
        )
    )
    if caps.bwrap:
        rows.append(
            ("bubblewrap", True, f"found at {caps.bwrap} (not needed: namespaces are set up directly)")
        )
    return rows


class StepCgroup:
    """A cgroup (memory and/or pids) holding every process of one step.

    Created before the step starts, joined by the child before it execs, emptied and removed after.
    """

    _counter = 0

    def __init__(self, caps: Capabilities, limits: Limits) -> None:
        StepCgroup._counter += 1
        name = f"perftune-{os.getpid()}-{StepCgroup._counter}"
        self.memory_dir: str | None = None
        self.pids_dir: str | None = None
        self._caps = caps
        self._limits = limits
        if caps.memory_cgroup:
            path = os.path.join(caps.memory_cgroup, name)
            try:
                os.mkdir(path)
                limit = str(limits.memory_mb * _MiB)
                if caps.memory_cgroup_version == 2:
                    _write(path, "memory.max", limit)
                    _write(path, "memory.swap.max", "0", missing_ok=True)
                else:
                    _write(path, "memory.limit_in_bytes", limit)
                    _write(path, "memory.memsw.limit_in_bytes", limit, missing_ok=True)
                self.memory_dir = path
            except OSError:
                _rmdir(path)
        if caps.pids_cgroup:
            if caps.pids_cgroup_version == 2 and caps.pids_cgroup == caps.memory_cgroup and self.memory_dir:
                try:
                    _write(self.memory_dir, "pids.max", str(limits.n_procs))
                    self.pids_dir = self.memory_dir
                except OSError:
                    pass
            else:
                path = os.path.join(caps.pids_cgroup, name)
                try:
                    os.mkdir(path)
                    _write(path, "pids.max", str(limits.n_procs))
                    self.pids_dir = path
                except OSError:
                    _rmdir(path)

    def join_files(self) -> list[str]:
        """The ``cgroup.procs`` files the child writes its pid into (before exec)."""
        dirs = {d for d in (self.memory_dir, self.pids_dir) if d}
        return [os.path.join(d, "cgroup.procs") for d in sorted(dirs)]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in {self.memory_dir, self.pids_dir}:
            if not d:
                continue
            with contextlib.suppress(OSError, ValueError):
                out.update(int(x) for x in Path(d, "cgroup.procs").read_text().split())
        return out

    def kill_all(self) -> None:
        """SIGKILL every process of the step, until none is left (fork bombs race with us)."""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def memory_limit_hit(self) -> bool:
        if not self.memory_dir:
            return False
        try:
            if self._caps.memory_cgroup_version == 2:
                events = Path(self.memory_dir, "memory.events").read_text()
                counts = dict(line.split() for line in events.splitlines() if line.strip())
                return int(counts.get("oom_kill", 0)) > 0 or int(counts.get("oom", 0)) > 0
            control = Path(self.memory_dir, "memory.oom_control").read_text()
            values = dict(line.split() for line in control.splitlines() if line.strip())
            if int(values.get("oom_kill", 0)) > 0:
                return True
            return (
                int(Path(self.memory_dir, "memory.failcnt").read_text().strip() or 0) > 0
                and int(values.get("under_oom", 0)) > 0
            )
        except (OSError, ValueError):
            return False

    def memory_limit_reached(self) -> bool:
        """The step ran into its memory limit at least once (it may have survived by reclaiming)."""
        if not self.memory_dir:
            return False
        try:
            if self._caps.memory_cgroup_version == 2:
                events = Path(self.memory_dir, "memory.events").read_text()
                counts = dict(line.split() for line in events.splitlines() if line.strip())
                return int(counts.get("max", 0)) > 0
            return int(Path(self.memory_dir, "memory.failcnt").read_text().strip() or 0) > 0
        except (OSError, ValueError):
            return False

    def peak_memory_bytes(self) -> int | None:
        if not self.memory_dir:
            return None
        name = "memory.peak" if self._caps.memory_cgroup_version == 2 else "memory.max_usage_in_bytes"
        try:
            return int(Path(self.memory_dir, name).read_text().strip())
        except (OSError, ValueError):
            return None

    def pids_limit_hit(self) -> bool:
        if not self.pids_dir:
            return False
        try:
            events = Path(self.pids_dir, "pids.events").read_text()
            counts = dict(line.split() for line in events.splitlines() if line.strip())
            return int(counts.get("max", 0)) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        self.kill_all()
        for d in {self.memory_dir, self.pids_dir}:
            if d:
                _rmdir(d)


def _write(directory: str, name: str, value: str, *, missing_ok: bool = False) -> None:
    try:
        with open(os.path.join(directory, name), "w") as f:
            f.write(value)
    except FileNotFoundError:
        if not missing_ok:
            raise
    except OSError:
        if not missing_ok:
            raise


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def rlimits(
    limits: Limits, *, memory_by_cgroup: bool, pids_by_cgroup: bool = False
) -> list[tuple[int, int, int]]:
    """The rlimits a step gets, as ``(resource, soft, hard)``; applied between fork and exec.

    RLIMIT_NPROC counts every process of the user, parallel candidates included: when a pids cgroup
    bounds the step, it is only a loose backstop. It never exceeds this process's own hard limit, which a
    step could not raise (its start would fail, naming no limit): the hard limit bounds the step then.
    """
    fsize = int(limits.file_size_mb or limits.disk_mb) * _MiB
    n_procs = limits.n_procs * 8 + 64 if pids_by_cgroup else limits.n_procs
    _, hard_procs = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard_procs != resource.RLIM_INFINITY:
        n_procs = min(n_procs, hard_procs)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n_files = limits.n_open_files if hard == resource.RLIM_INFINITY else min(limits.n_open_files, hard)
    out = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, fsize, fsize),
        (resource.RLIMIT_NPROC, n_procs, n_procs),
        (resource.RLIMIT_NOFILE, n_files, n_files),
    ]
    if not memory_by_cgroup and not limits.sanitizer:
        address_space = limits.memory_mb * _MiB
        out.append((resource.RLIMIT_AS, address_space, address_space))
    return out
