"""A hostile candidate tries each known escape; every test asserts that it failed, with a reason.

Most protections need root (own uids, PID namespaces, a private /proc); where one is unavailable the
test says so and is skipped.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from perftune.measure import Limits, Sandbox, capabilities
from perftune.measure._candidate_files import CandidateFileError, read_for_candidate, size_for_candidate
from perftune.measure._uids import _uids_of
from perftune.targets.command import CandidateError, load_task

PYTHON = shutil.which("python3", path="/usr/bin:/bin") or ""
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="candidates get their own uid only when perftune is root"
)
needs_root_file = pytest.mark.skipif(
    os.geteuid() != 0, reason="a file only root may read (the secret to steal) needs the tests to run as root"
)
needs_python = pytest.mark.skipif(
    not PYTHON, reason="the attacks are written in Python: needs /usr/bin/python3"
)


def _pid_namespaces() -> bool:
    return Sandbox()._pid_namespace()


needs_pid_ns = pytest.mark.skipif(
    not _pid_namespaces(), reason="mount + PID namespaces (private /proc with hidepid) unavailable here"
)


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(Limits(memory_mb=256, n_procs=64, disk_mb=64))


@pytest.fixture
def root_only_file(tmp_path: Path) -> Iterator[Path]:
    """A file only root may read, as a user's key or the store's password file would be."""
    secret = tmp_path / "root-only"
    secret.write_text("TOP-SECRET-" + "x" * 12345 + "\n")
    secret.chmod(0o600)
    yield secret


def attack_task(tmp_path: Path, build: str, run: str, *, extra: str = "") -> Path:
    """A task whose default configuration is honest and whose ``attack`` configuration is not."""
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    (task / "task.toml").write_text(
        f"""
[space]
mode = {{ type = "choice", options = ["honest", "attack"], default = "honest" }}

[build]
command = ["sh", "-c", '''{build}''', "{{mode}}", "{{scratch}}"]

[run]
command = ["sh", "-c", '''{run}''', "{{mode}}", "{{scratch}}"]
timeout_s = 10
{extra}
[timing]
repeats = 1
warmup_runs = 0
"""
    )
    for p in (task, task / "task.toml"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    tmp_path.chmod(0o755)
    return task / "task.toml"


# -- files the tuner reads on a candidate's behalf -------------------------------------------------

STDIN_EXTRA = """stdin = "{scratch}/in"
[objective]
metric = "stdout_regex"
pattern = 'n=(\\d+)'
goal = "max"
"""


@needs_root_file
def test_stdin_symlinked_to_a_root_only_file_is_refused(
    public_tmp_path: Path, root_only_file: Path
) -> None:
    path = attack_task(
        public_tmp_path,
        f'if [ "$0" = attack ]; then ln -s {root_only_file} $1/in; else echo hello > $1/in; fi',
        "wc -c; echo n=1",
        extra=STDIN_EXTRA,
    )
    task = load_task(path)
    assert task.objective({"mode": "honest"})["stdout_regex"] == 1.0
    with pytest.raises(CandidateError, match="stdin refused: .*link that leads out of the scratch") as info:
        task.objective({"mode": "attack"})
    assert "TOP-SECRET" not in str(info.value) and "12357" not in str(info.value)


def test_stdin_fifo_does_not_hang_the_tuner(public_tmp_path: Path) -> None:
    path = attack_task(
        public_tmp_path,
        'if [ "$0" = attack ]; then mkfifo $1/in; else echo hello > $1/in; fi',
        "cat; echo n=1",
        extra=STDIN_EXTRA,
    )
    task = load_task(path)
    started = time.monotonic()
    with pytest.raises(CandidateError, match="stdin refused: .*a FIFO, not a regular file"):
        task.objective({"mode": "attack"})
    assert time.monotonic() - started < 9  # refused, not waited on until the run's timeout


def test_stdin_from_dev_zero_is_refused(public_tmp_path: Path) -> None:
    path = attack_task(
        public_tmp_path,
        'if [ "$0" = attack ]; then ln -s /dev/zero $1/in; else echo hello > $1/in; fi',
        "cat; echo n=1",
        extra=STDIN_EXTRA,
    )
    task = load_task(path)
    with pytest.raises(CandidateError, match="stdin refused: .*link that leads out of the scratch"):
        task.objective({"mode": "attack"})


def test_output_files_that_are_devices_fifos_or_links_out_are_refused(
    public_tmp_path: Path, root_only_file: Path
) -> None:
    path = attack_task(
        public_tmp_path,
        "true",
        'echo same; if [ "$0" = attack ]; then ln -s /dev/zero $1/out; else echo data > $1/out; fi',
        extra='[check]\nstdout = "exact"\nfiles = ["{scratch}/out"]\n',
    )
    task = load_task(path)
    task.objective({"mode": "honest"})
    with pytest.raises(CandidateError, match="wrong output: output file .* link that leads out of"):
        task.objective({"mode": "attack"})
    # The same holds for the reader itself, whatever the candidate leaves in place of its output.
    scratch = public_tmp_path / "scratch"
    scratch.mkdir()
    os.mkfifo(scratch / "fifo")
    with pytest.raises(CandidateFileError, match="a FIFO, not a regular file"):
        read_for_candidate(str(scratch / "fifo"), scratch=str(scratch), user=None, max_bytes=1 << 20)
    with pytest.raises(CandidateFileError, match="a device, not a regular file"):
        read_for_candidate("/dev/zero", scratch=str(scratch), user=None, max_bytes=1 << 20)
    (scratch / "big").write_bytes(b"y" * (2 << 20))
    with pytest.raises(CandidateFileError, match="larger than the 1 MB"):
        read_for_candidate(str(scratch / "big"), scratch=str(scratch), user=None, max_bytes=1 << 20)


@needs_root_file
def test_file_size_of_a_root_only_file_through_a_symlink_is_refused(
    public_tmp_path: Path, root_only_file: Path
) -> None:
    path = attack_task(
        public_tmp_path,
        "true",
        f'if [ "$0" = attack ]; then ln -s {root_only_file} $1/out.bin; else echo 1234 > $1/out.bin; fi',
        extra='[objective]\nmetric = "file_size"\nfile = "{scratch}/out.bin"\n',
    )
    task = load_task(path)
    assert task.objective({"mode": "honest"})["file_size"] == 5.0
    with pytest.raises(CandidateError, match="link that leads out of the scratch") as info:
        task.objective({"mode": "attack"})
    assert str(root_only_file.stat().st_size) not in str(info.value)
    # Named directly (outside scratch), a file the candidate's user may not read tells no size either.
    with pytest.raises(CandidateFileError, match="may not read it"):
        size_for_candidate(str(root_only_file), scratch=None, user=(59999, 59999))
    # Nor does a hard link to it inside scratch (made here by root: fs.protected_hardlinks stops a
    # candidate from making it, but the reader does not count on that).
    scratch = public_tmp_path / "scratch-with-link"
    scratch.mkdir()
    try:
        os.link(root_only_file, scratch / "out.bin")
    except OSError as error:
        pytest.skip(f"cannot make the hard link here: {error}")
    with pytest.raises(CandidateFileError, match="may not read it"):
        size_for_candidate(str(scratch / "out.bin"), scratch=str(scratch), user=(59999, 59999))


# -- candidates against one another and against the tuner ------------------------------------------


def _host_pids_of(uid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and uid in _uids_of(p)[:1]]


ATTACK_SIBLING = """
import os, sys, signal
victim_pid, victim_scratch, tuner_pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
mine = {os.getpid(), os.getppid()}
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
step = sys.argv[4]
if step == "list":
    # Only this step's own processes may be in sight (ls, the shell...), never the victim or the tuner.
    for pid in others:
        try:
            print(pid, open(f"/proc/{pid}/cmdline").read().replace("\\0", " "))
        except OSError:
            pass
    sys.exit(f"saw {len(others)} other processes")
if step == "cwd":
    open(f"/proc/{victim_pid}/cwd/pwned", "w").write("pwned")
if step == "path":
    open(os.path.join(victim_scratch, "pwned"), "w").write("pwned")
if step == "kill":
    os.kill(victim_pid, signal.SIGKILL)
if step == "tuner":
    os.kill(tuner_pid, 0)  # only asks whether a signal could be delivered
print("escaped")
"""


@needs_root
@needs_python
@pytest.mark.parametrize("pid_ns", [True, False], ids=["pid-namespace", "own-uid-only"])
@pytest.mark.parametrize("step", ["list", "cwd", "path", "kill", "tuner"])
def test_a_candidate_cannot_see_write_into_or_signal_a_sibling_or_the_tuner(
    sandbox: Sandbox, step: str, pid_ns: bool
) -> None:
    if pid_ns and not _pid_namespaces():
        pytest.skip("mount + PID namespaces (private /proc with hidepid) unavailable here")
    if not pid_ns and step == "list":
        pytest.skip("without a PID namespace, the host's /proc lists all: only a namespace hides them")
    sandbox.isolate_processes = pid_ns
    with sandbox.scratch() as victim, sandbox.scratch() as attacker:
        assert victim.user and attacker.user and victim.user != attacker.user  # one uid per candidate
        script = os.path.join(attacker.path, "attack.py")
        with open(script, "w") as f:
            f.write(ATTACK_SIBLING)
        os.chmod(script, 0o644)
        results = {}

        def victim_step() -> None:
            results["victim"] = sandbox.run(
                ["sh", "-c", "echo mine > own; sleep 2; cat own; ls"], scratch=victim, timeout_s=20
            )

        thread = threading.Thread(target=victim_step)
        thread.start()
        deadline = time.monotonic() + 10
        while not (pids := _host_pids_of(victim.user[0])) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pids, "the victim did not start"
        r = sandbox.run(
            [PYTHON, script, str(pids[0]), victim.path, str(os.getpid()), step],
            scratch=attacker,
            timeout_s=20,
        )
        thread.join()
    assert r.status == "failed" and "escaped" not in r.text(), r.text()
    expected = {
        "list": "saw [0-2] other processes",  # sh and ls of its own at most, nothing of the host
        # No /proc entry for the sibling in its namespace; without one, another uid's cwd is closed.
        "cwd": "No such file or directory" if pid_ns else "Permission denied",
        "path": "Permission denied|Read-only file system",
        "kill": "No such process" if pid_ns else "Operation not permitted",
        "tuner": "No such process" if pid_ns else "Operation not permitted",
    }[step]
    assert r.reason is not None
    import re

    assert re.search(expected, r.reason), r.reason
    if step == "list":
        assert "sleep" not in r.text() and "pytest" not in r.text()
    v = results["victim"]
    assert v.ok and v.stdout == b"mine\nown\n", (v.reason, v.stdout)  # untouched, not killed


READ_SECRETS = """
import os, sys
secret = sys.argv[1][::-1]  # reversed, so that this process's own command line does not hold it
found = [k for k, v in os.environ.items() if secret in v]
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for name in ("cmdline", "environ"):
        try:
            if secret.encode() in open(f"/proc/{pid}/{name}", "rb").read():
                found.append(f"/proc/{pid}/{name}")
        except OSError:
            pass
if found:
    print("found", found)
else:
    sys.exit("no secret in sight: environment and /proc searched")
"""


@needs_python
def test_a_candidate_cannot_read_the_drivers_command_line_or_environment(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"pw-{os.getpid()}-s3cr3t"
    monkeypatch.setenv("PERFTUNE_STORE", f"postgresql://tuner:{secret}@db/perftune")
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    # A driver started with the password on its command line, as `perftune run --store URL` would be.
    driver = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--store", f"postgresql://tuner:{secret}@db/x"]
    )
    try:
        prot = sandbox.protections()
        if not (prot["pid_namespace"] or os.geteuid() != 0):
            pytest.skip("without a PID namespace the host's /proc shows the driver's command line")
        with sandbox.scratch() as scratch:
            script = os.path.join(scratch.path, "read.py")
            with open(script, "w") as f:
                f.write(READ_SECRETS)
            os.chmod(script, 0o644)
            r = sandbox.run([PYTHON, script, secret[::-1]], scratch=scratch, timeout_s=20)
    finally:
        driver.kill()
        driver.wait()
    if os.geteuid() != 0 and not prot["pid_namespace"]:
        pytest.skip("as an ordinary user without PID namespaces, the driver runs as the candidate's user")
    assert r.status == "failed" and "no secret in sight" in (r.reason or ""), r.text()
    assert secret not in r.text()


MARKER_DAEMON = (
    "setsid sh -c 'sleep 1.5; touch {out}; exec sleep {t}' </dev/null >/dev/null 2>&1 & echo started"
)


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "no-cgroups"])
@pytest.mark.parametrize("pid_ns", [True, False], ids=["pid-namespace", "uid-sweep"])
def test_a_setsid_daemon_dies_with_its_step(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, cgroups: bool, pid_ns: bool
) -> None:
    if pid_ns and not sandbox._pid_namespace():
        pytest.skip("PID namespaces unavailable here")
    if not pid_ns and sandbox.uid_pool() is None:
        pytest.skip("the sweep of a candidate's uid needs root (a leased uid of its own)")
    if not cgroups:
        caps = dataclasses.replace(capabilities(), memory_cgroup=None, pids_cgroup=None)
        monkeypatch.setattr(Sandbox, "caps", property(lambda self: caps))
    sandbox.isolate_processes = pid_ns
    lifetime = f"{400 + os.getpid() % 500}.{int(cgroups)}{int(pid_ns)}"  # names this test's daemon
    with sandbox.scratch() as scratch:
        out = os.path.join(scratch.path, "daemon-was-alive")
        r = sandbox.run(
            ["sh", "-c", MARKER_DAEMON.format(out=out, t=lifetime)], scratch=scratch, timeout_s=10
        )
        assert r.ok and r.stdout == b"started\n", r.reason
        time.sleep(2.0)  # longer than the daemon waits before it proves it is alive
        alive = subprocess.run(["pgrep", "-f", f"sleep {lifetime}"], capture_output=True, text=True).stdout
        assert alive.split() == [] and not os.path.exists(out)


@needs_python
def test_network_false_means_no_network(public_tmp_path: Path) -> None:
    if not Sandbox().protections()["network"]:
        pytest.skip("network namespaces unavailable here")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    connect_py = public_tmp_path / "connect.py"
    connect_py.write_text("import socket, sys\nsocket.create_connection(('127.0.0.1', int(sys.argv[1])))\n")
    connect_py.chmod(0o644)
    connect = f"{PYTHON} {connect_py} {port}"
    path = attack_task(
        public_tmp_path,
        "true",
        f'if [ "$0" = attack ]; then {connect} || exit 1; fi; echo n=1',
        extra='[sandbox]\nnetwork = false\n[objective]\nmetric = "stdout_regex"\n'
        'pattern = "n=(\\\\d+)"\ngoal = "max"\n',
    )
    try:
        task = load_task(path)
        assert task.objective({"mode": "honest"})["stdout_regex"] == 1.0
        with pytest.raises(CandidateError, match="run: exit code 1; stderr: .*(refused|unreachable)"):
            task.objective({"mode": "attack"})
        sandbox = task.objective.sandbox()
        assert sandbox.isolate_network
        with sandbox.scratch() as scratch:
            r = sandbox.run(["sh", "-c", connect], scratch=scratch, timeout_s=10)
        assert r.status == "failed" and ("refused" in r.reason or "unreachable" in r.reason), r.reason
        # A string (rejected at load time by the task checks) must not open the network either.
        for value in ("no", "false", "off", 0):
            task.objective.sandbox_options["network"] = value
            assert task.objective.sandbox().isolate_network, value
        task.objective.sandbox_options["network"] = True
        assert not task.objective.sandbox().isolate_network
    finally:
        listener.close()


INJECTIONS = [
    "x; touch pwned",
    "$(touch pwned)",
    "`touch pwned`",
    "x | touch pwned",
    "x && touch pwned",
    "x\ntouch pwned",
    "'; touch pwned; '",
]


def test_shell_true_does_not_run_a_choice_value(public_tmp_path: Path) -> None:
    task_dir = public_tmp_path / "shell"
    task_dir.mkdir()
    options = ", ".join(
        '"' + v.replace("\n", "\\n").replace('"', '\\"') + '"' for v in ["plain", *INJECTIONS]
    )
    (task_dir / "task.toml").write_text(
        f"""
[space]
value = {{ type = "choice", options = [{options}], default = "plain" }}

[run]
command = "printf '%s|' {{value}}; echo; echo n=$(ls | wc -l)"
shell = true
timeout_s = 10

[objective]
metric = "stdout_regex"
pattern = 'n=(\\d+)'
goal = "min"

[timing]
repeats = 1
warmup_runs = 0
"""
    )
    task_dir.chmod(0o755)
    (task_dir / "task.toml").chmod(0o644)
    task = load_task(task_dir / "task.toml")
    sandbox = task.objective.sandbox()
    for value in INJECTIONS:
        out = task.objective({"value": value})
        assert out["stdout_regex"] == 0.0, value  # nothing was created in the scratch directory
        with sandbox.scratch() as scratch:
            ctx = task.objective._context({"value": value}, scratch.path, None)
            command = task.objective._argv("printf '%s|' {value}", ctx, shell=True)
            r = sandbox.run(command, scratch=scratch, timeout_s=5, shell=True)
            assert r.stdout.decode() == value + "|" and os.listdir(scratch.path) == [], (value, r.stdout)
