"""The sandbox against deliberately bad candidates (real processes, real limits)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from perftune.measure import Limits, Sandbox, doctor
from perftune.trial import Status

DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def bad_program(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("bad") / "bad"
    subprocess.run(["gcc", "-O1", str(DATA / "bad.c"), "-o", str(out)], check=True)
    # The sandbox user must be able to reach and run it: pytest's temporary folders are 0700 (and
    # pytest makes them so again), so as root the program is run from the sandbox's staged copy.
    return os.path.join(Sandbox().reachable(str(out.parent)), "bad")


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(Limits(memory_mb=256, n_procs=32, disk_mb=64))


def run(sandbox: Sandbox, argv: list[str], timeout_s: float = 10.0):
    with sandbox.scratch() as scratch:
        return sandbox.run(argv, scratch=scratch, timeout_s=timeout_s)


def test_ok_step_reports_output_and_times(sandbox: Sandbox, bad_program: str) -> None:
    r = run(sandbox, [bad_program, "ok"])
    assert r.status is Status.OK and r.stdout == b"result 42\n" and r.reason is None
    assert r.wall_s > 0 and r.returncode == 0


def test_segfault_is_reported_with_signal(sandbox: Sandbox, bad_program: str) -> None:
    r = run(sandbox, [bad_program, "segv"])
    assert r.status is Status.FAILED and r.signal == "SIGSEGV" and "SIGSEGV" in r.reason


def test_exit_code_and_stderr_tail(sandbox: Sandbox, bad_program: str) -> None:
    r = run(sandbox, [bad_program, "exit7"])
    assert r.status is Status.FAILED and r.returncode == 7 and not r.limit_hit
    assert "exit code 7" in r.reason and "something went wrong" in r.reason


def test_hang_times_out_and_kills_the_group(sandbox: Sandbox) -> None:
    import time

    marker = f"sleep {300 + os.getpid() % 1000}.25"  # unique to this test run
    r = run(sandbox, ["sh", "-c", f"{marker} & {marker}"], timeout_s=1.0)
    assert r.status is Status.TIMEOUT and "timeout" in r.reason
    deadline = time.monotonic() + 5.0
    while True:  # SIGKILL is delivered at once, but a loaded machine may take a moment to reap
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert left == []


def test_allocating_100_gb_hits_the_memory_limit(sandbox: Sandbox, bad_program: str) -> None:
    r = run(sandbox, [bad_program, "alloc"])
    assert r.status is Status.FAILED and r.limit == "memory" and r.limit_hit, r.reason
    assert "memory limit" in r.reason


def test_fork_bomb_hits_the_process_limit(sandbox: Sandbox, bad_program: str) -> None:
    if not sandbox.protections()["processes"]:
        pytest.skip(
            "no process limit can be enforced here (root without cgroup pids or an unprivileged user)"
        )
    r = run(sandbox, [bad_program, "forkbomb"], timeout_s=2.0)
    assert r.status in (Status.FAILED, Status.TIMEOUT) and r.limit == "processes", r.reason
    assert "process limit" in r.reason


def test_disk_filling_hits_the_disk_limit(sandbox: Sandbox, bad_program: str) -> None:
    if not sandbox.protections()["disk"]:
        pytest.skip("no disk limit can be enforced here")
    r = run(sandbox, [bad_program, "disk"])
    assert r.status is Status.FAILED and r.limit in ("disk", "file size") and r.limit_hit, r.reason


def test_writing_outside_scratch_is_denied_or_detected(
    sandbox: Sandbox, bad_program: str, tmp_path: Path
) -> None:
    prot = sandbox.protections()
    if not (prot["files"] or prot["user"]):
        pytest.skip("neither a mount namespace nor an unprivileged user is available")
    target = f"/tmp/perftune-escape-test-{os.getpid()}"
    try:
        r = run(sandbox, [bad_program, "escape", target])
        assert r.status is Status.FAILED, r.reason
        assert not os.path.exists(target)
        assert "Read-only" in r.reason or "outside its scratch" in r.reason or "Permission denied" in r.reason
    finally:
        if os.path.exists(target):
            os.unlink(target)


def test_network_is_unreachable_when_isolated(sandbox: Sandbox) -> None:
    if not sandbox.protections()["network"]:
        pytest.skip("network namespaces unavailable")
    r = run(sandbox, ["cat", "/proc/net/dev"])  # /proc/net shows the reader's network namespace
    interfaces = [line.split(":")[0].strip() for line in r.stdout.decode().splitlines() if ":" in line]
    assert r.ok and interfaces == ["lo"]


def test_missing_executable_is_a_clear_reason(sandbox: Sandbox) -> None:
    r = run(sandbox, ["no-such-program-perftune"])
    assert r.status is Status.FAILED and r.reason == "command not found: no-such-program-perftune"


def test_huge_stdout_is_bounded_and_hashed(sandbox: Sandbox, bad_program: str) -> None:
    r = run(sandbox, [bad_program, "spew"])
    assert r.ok and r.stdout_truncated and len(r.stdout) <= 4 * 1024 * 1024
    assert r.stdout_tail.endswith(b"yyyyyyyyy\n") and len(r.stdout_sha256) == 64


def test_steps_share_the_scratch_directory(sandbox: Sandbox) -> None:
    with sandbox.scratch() as scratch:
        a = sandbox.run(["sh", "-c", "echo built > artefact"], scratch=scratch, timeout_s=5)
        b = sandbox.run(["cat", "artefact"], scratch=scratch, timeout_s=5)
        path = scratch.path
    assert a.ok and b.stdout == b"built\n"
    assert not os.path.exists(path)


def test_memory_of_the_supervisor_stays_flat(sandbox: Sandbox, bad_program: str) -> None:
    def rss_kb() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    for mode in ("spew", "segv", "exit7"):
        run(sandbox, [bad_program, mode])
    before = rss_kb()
    for _ in range(3):
        for mode in ("spew", "segv", "exit7", "ok"):
            run(sandbox, [bad_program, mode])
    assert rss_kb() - before < 20_000


def test_doctor_lists_every_protection() -> None:
    rows = doctor()
    names = [name for name, _, _ in rows]
    for expected in (
        "unprivileged user",
        "memory limit (cgroup)",
        "disk limit",
        "file-system isolation",
        "network isolation",
    ):
        assert expected in names
    assert all(isinstance(active, bool) and detail for _, active, detail in rows)


def test_steps_can_be_pinned_to_cores() -> None:
    sandbox = Sandbox(cpu_affinity=[0])
    r = run(sandbox, ["grep", "Cpus_allowed_list", "/proc/self/status"])
    assert r.ok and r.stdout.split()[-1] == b"0"


def test_all_names_are_exported() -> None:
    import perftune.measure as measure

    public = {n for n in dir(measure) if not n.startswith("_")} - {"annotations"}
    assert public == set(measure.__all__)


def test_relative_program_path_is_relative_to_the_step_directory(sandbox: Sandbox, bad_program: str) -> None:
    import shutil as _shutil

    with sandbox.scratch() as scratch:
        _shutil.copy(bad_program, os.path.join(str(scratch), "prog"))
        r = sandbox.run(["./prog", "ok"], scratch=scratch, timeout_s=10.0)
    assert r.ok and r.stdout == b"result 42\n", r.reason


def test_wall_time_covers_the_whole_step_inside_a_pid_namespace(sandbox: Sandbox) -> None:
    if not sandbox.protections()["pid_namespace"]:
        pytest.skip("PID namespaces unavailable: the step is clocked by the tuner")
    r = run(sandbox, ["sleep", "0.2"])  # sleep cannot return early: a lower bound, not a timing
    assert r.ok and r.wall_s >= 0.2, r.wall_s


def test_a_process_limit_above_the_hard_limit_still_runs() -> None:
    # RLIMIT_NPROC is set between fork and exec, where no process may raise its hard limit: the backstop
    # of a pids cgroup (8 x the limit) or the limit itself is capped by it, instead of failing every step.
    import resource

    from perftune.measure._limits import rlimits

    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on the number of processes here")
    for pids_by_cgroup in (True, False):
        limits = dict((which, (soft, most)) for which, soft, most in
                      rlimits(Limits(n_procs=hard + 1), memory_by_cgroup=True, pids_by_cgroup=pids_by_cgroup))
        assert limits[resource.RLIMIT_NPROC] == (hard, hard)
    r = run(Sandbox(Limits(memory_mb=256, n_procs=hard // 8 + 1, disk_mb=64)), ["sh", "-c", "echo ok"])
    assert r.status is Status.OK and r.stdout == b"ok\n", r.reason
