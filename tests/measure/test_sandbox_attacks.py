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
import tempfile
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


# -- what a network namespace does not end: socket files, SysV objects, keyrings ---------------------


@needs_python
def test_a_unix_socket_file_of_a_host_service_is_unreachable(public_tmp_path: Path) -> None:
    # A PostgreSQL server's socket is a file anyone may connect to (0777); the network namespace does
    # not end that, and connect() ignores read-only mounts.
    sandbox = Sandbox()
    if not (sandbox.protections()["network"] and capabilities().mount_namespace):
        pytest.skip("network and mount namespaces unavailable here")
    folder = public_tmp_path / "run-service"
    folder.mkdir()
    folder.chmod(0o755)
    path = str(folder / ".s.PGSQL.5432")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(4)
    server.settimeout(0.2)
    script = (f"import socket\nc = socket.socket(socket.AF_UNIX)\nc.connect({path!r})\n"
              "c.sendall(b'from candidate')\nprint('connected')\n")
    try:
        with sandbox.scratch() as scratch:
            r = sandbox.run([PYTHON, "-c", script], scratch=scratch, timeout_s=20)
        assert r.status == "failed" and "refused" in r.reason.lower(), (r.status, r.reason, r.stdout)
        with pytest.raises(OSError):  # nothing reached the server
            server.accept()
        # The tuner itself still reaches it (only the step's mount namespace covers it).
        client = socket.socket(socket.AF_UNIX)
        client.connect(path)
        client.close()
    finally:
        server.close()


@needs_root
def test_sysv_shared_memory_of_a_candidate_ends_with_its_step(sandbox: Sandbox) -> None:
    if not getattr(capabilities(), "ipc_namespace", True) or not shutil.which("ipcmk"):
        pytest.skip("IPC namespaces or ipcmk unavailable here")

    def segments() -> set[str]:
        out = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
        return {line.split()[1] for line in out.splitlines() if line.startswith("0x")}

    before = segments()
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", "ipcmk -M 65536 -p 0666 && ipcs -m | grep -c '^0x'"],
                        scratch=scratch, timeout_s=20)
    assert r.ok, r.reason
    assert r.stdout.strip().splitlines()[-1] == b"1"  # the candidate saw its own segment, and only it
    assert segments() - before == set()  # and it did not outlive the step


@needs_root
@needs_python
@pytest.mark.parametrize("keyring", [-4, -5], ids=["user-keyring", "user-session-keyring"])
def test_a_key_a_candidate_leaves_is_gone_for_the_next_candidate_of_its_uid(
    sandbox: Sandbox, keyring: int
) -> None:
    # Both keyrings are the uid's (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING): a key left in
    # either let a candidate's runs (and the next trial on that uid) replay a saved result.
    import platform

    numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
    if numbers is None:
        pytest.skip("add_key's and keyctl's syscall numbers are known for x86_64 and aarch64 only")
    add_key, keyctl = numbers
    plant = ("import ctypes, os\nc = ctypes.CDLL(None, use_errno=True)\n"
             f"k = c.syscall({add_key}, b'user', b'perftune-left', b'secret', 6, {keyring})\n"
             "print(os.getuid(), k)\n")
    find = ("import ctypes, os\nc = ctypes.CDLL(None, use_errno=True)\n"
            f"k = c.syscall({keyctl}, 10, {keyring}, b'user', b'perftune-left', 0)\n"  # KEYCTL_SEARCH
            "print(os.getuid(), k)\n")
    with sandbox.scratch() as scratch:  # one scratch: both steps run under its uid
        first = sandbox.run([PYTHON, "-c", plant], scratch=scratch, timeout_s=20)
        assert first.ok, first.reason
        uid, key = (int(x) for x in first.stdout.split())
        if key < 0:
            pytest.skip("keys cannot be added here")
        second = sandbox.run([PYTHON, "-c", find], scratch=scratch, timeout_s=20)
    assert second.ok, second.reason
    uid2, found = (int(x) for x in second.stdout.split())
    assert uid2 == uid and found < 0  # the key the first one left is not there for the next one


@needs_python
def test_a_candidate_has_a_session_keyring_of_its_own(sandbox: Sandbox) -> None:
    import ctypes
    import platform

    number = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
    if number is None:
        pytest.skip("keyctl's syscall number is known for x86_64 and aarch64 only")
    script = ("import ctypes\nc = ctypes.CDLL(None, use_errno=True)\n"
              f"print(c.syscall({number}, 0, -3, 0))\n")  # KEYCTL_GET_KEYRING_ID of the session keyring
    libc = ctypes.CDLL(None, use_errno=True)
    ours = libc.syscall(number, 0, -3, 0)
    if ours < 0:
        pytest.skip("no keyrings here")
    with sandbox.scratch() as scratch:
        r = sandbox.run([PYTHON, "-c", script], scratch=scratch, timeout_s=20)
    assert r.ok, r.reason
    theirs = int(r.stdout.strip())
    assert theirs > 0 and theirs != ours


@needs_root
def test_files_left_outside_the_scratch_are_found_whatever_their_time(sandbox: Sandbox) -> None:
    # Without a mount namespace, writes outside the scratch can only be found afterwards: a file set
    # back in time (touch -d) or left inside someone else's world-writable folder is found all the same.
    if sandbox.uid_pool() is None:
        pytest.skip("needs the uid pool (root)")
    sandbox.isolate_files = False
    shared = Path(tempfile.mkdtemp(prefix="perftune-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    tag = f"perftune-left-{os.getpid()}"
    script = (f"echo x > /tmp/.{tag}; touch -d 2001-01-01 /tmp/.{tag}; mkdir /var/tmp/.{tag}; "
              f"touch -d 2001-01-01 /var/tmp/.{tag}; echo y > {shared}/{tag}; "
              f"touch -d 2001-01-01 {shared}/{tag}")
    try:
        with sandbox.scratch() as scratch:
            r = sandbox.run(["sh", "-c", script], scratch=scratch, timeout_s=20)
        left = [f"/tmp/.{tag}", f"/var/tmp/.{tag}", f"{shared}/{tag}"]
        assert sorted(r.outside_writes) == sorted(left), (r.outside_writes, r.reason)
        assert not any(os.path.exists(p) for p in left)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_only_the_locale_categories_of_lc_pass_to_candidates(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LC_SECRET", "topsecret-in-lc")  # ssh's AcceptEnv LC_* lets a client set one
    monkeypatch.setenv("LC_TIME", "C")
    with sandbox.scratch() as scratch:
        r = sandbox.run(["env"], scratch=scratch, timeout_s=20)
    assert r.ok, r.reason
    names = {line.split(b"=", 1)[0] for line in r.stdout.splitlines()}
    assert b"LC_TIME" in names and b"LC_SECRET" not in names


def test_a_failure_reason_keeps_no_terminal_escape_of_the_candidate(sandbox: Sandbox) -> None:
    # The reason is stored and exported (CSV, JSON): a title-setting or screen-clearing sequence is
    # kept spelled out, not raw.
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", r"printf 'boom \033]0;PWNED\007 \033[2J end\n' >&2; exit 3"],
                        scratch=scratch, timeout_s=20)
    assert r.status == "failed"
    assert "\x1b" not in r.reason and "\x07" not in r.reason
    assert "boom \\x1b]0;PWNED\\x07 \\x1b[2J end" in r.reason


def test_a_step_that_fills_the_file_system_to_its_reserve_is_ended(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scratch is walked less and less often; fallocate makes gigabytes between two walks. The free
    # space of the file system, read at every poll, ends a step that eats into its last reserve.
    # (Simulated: the file system's free space as the sandbox reads it drops after the step starts.)
    from perftune.measure import _sandbox

    reads = []

    def free_bytes(path: str) -> tuple[int | None, int]:
        reads.append(path)
        return (10 << 30, 1 << 30) if len(reads) == 1 else (512 << 20, 1 << 30)

    monkeypatch.setattr(_sandbox, "_free_bytes", free_bytes)
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", "sleep 30; echo finished"], scratch=scratch, timeout_s=60)
    assert r.status == "failed" and r.limit == "disk", (r.status, r.reason)
    assert "filled up to its last reserve" in r.reason and b"finished" not in r.stdout


def test_directories_of_the_tuner_are_hidden_from_steps(public_tmp_path: Path) -> None:
    # The reference outputs a candidate is compared with: as root out of a candidate uid's reach
    # anyway; for a tuner that is not root (candidates share its uid) the cover is all there is.
    if not capabilities().mount_namespace:
        pytest.skip("mount namespaces unavailable here")
    state = public_tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    (state / "ref0.stdout").write_text("the expected answer\n")
    (state / "ref0.stdout").chmod(0o644)
    sandbox = Sandbox(hide_dirs=[str(state)])
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", f"ls -A {state}; cat {state}/ref0.stdout"], scratch=scratch,
                        timeout_s=20)
    assert r.status == "failed" and b"expected answer" not in r.stdout, (r.status, r.stdout)
    with Sandbox().scratch() as scratch:  # the same step, nothing hidden: the file is there to read
        r = Sandbox().run(["cat", f"{state}/ref0.stdout"], scratch=scratch, timeout_s=20)
    assert r.ok and r.stdout == b"the expected answer\n", r.reason


@needs_root
def test_a_scratch_left_by_a_killed_tuner_is_removed_when_its_uid_is_leased_again(tmp_path: Path) -> None:
    sandbox = Sandbox(scratch_root=str(tmp_path / "scratch"))
    pool = sandbox.uid_pool()
    if pool is None:
        pytest.skip("needs the uid pool (root)")
    root = Path(sandbox.root_dir())
    left = {}
    for uid in range(pool.first, pool.last + 1):  # one left-behind directory per uid of the pool
        d = root / f"cand-left-{uid}"
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "data").write_text("x")
        for p in (d, d / "sub", d / "sub" / "data"):
            os.chown(p, uid, uid)
        d.chmod(0o700)
        left[uid] = d
    kept = root / "kept-by-the-tuner"
    kept.mkdir()
    with sandbox.scratch() as scratch:
        uid = scratch._leased_user()[0]  # type: ignore[index]
        assert not left[uid].exists()  # the leased uid's leftover is gone
        assert all(d.exists() for u, d in left.items() if u != uid)  # nobody else's
        assert kept.exists()


@needs_pid_ns
@needs_python
def test_cpu_time_counts_a_child_that_did_the_work_and_was_never_waited_for(sandbox: Sandbox) -> None:
    # The child burns the CPU, hands the result over and stays; the parent exits without wait(). The
    # kernel ended the child after the namespace's init, and its CPU time never reached the step's.
    script = ("import os, sys, time\nr, w = os.pipe()\n"
              "if os.fork() == 0:\n"
              "    t = time.process_time()\n"
              "    while time.process_time() - t < 0.6: pass\n"
              "    os.write(w, b'done\\n')\n"
              "    time.sleep(60)\n"
              "sys.stdout.write(os.read(r, 5).decode())\n")
    with sandbox.scratch() as scratch:
        r = sandbox.run([PYTHON, "-c", script], scratch=scratch, timeout_s=30)
    assert r.ok, r.reason
    assert r.stdout == b"done\n"
    assert r.cpu_s >= 0.5, r.cpu_s
    assert r.wall_s < 20  # the sleeping child did not hold the step


@needs_pid_ns
def test_a_step_gains_no_privileges_and_its_scratch_keeps_no_access_times(sandbox: Sandbox) -> None:
    script = ("grep NoNewPrivs /proc/self/status; echo data > f; sync; a=$(stat -c %X f); sleep 1.1; "
              "cat f > /dev/null; b=$(stat -c %X f); [ $a = $b ] && echo same || echo moved; "
              "grep -E ' / / ' /proc/self/mountinfo | grep -o nosuid | head -1")
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", script], scratch=scratch, timeout_s=20)
    assert r.ok, r.reason
    lines = r.stdout.decode().split()
    assert lines[:2] == ["NoNewPrivs:", "1"]
    assert "same" in lines  # reading a file does not move its access time: no bit carried to a later run
    assert "nosuid" in lines


def test_extended_attributes_a_run_sets_on_a_scratch_directory_are_removed(tmp_path: Path) -> None:
    from perftune.targets.command._scratch_state import ScratchState

    root = tmp_path / "scratch"
    (root / "out").mkdir(parents=True)
    try:
        os.setxattr(root, "user.probe", b"1")
        os.removexattr(root, "user.probe")
    except OSError:
        pytest.skip("no user extended attributes on this file system")
    os.setxattr(root / "out", "user.kept", b"the build's")
    state = ScratchState.record(str(root))
    # A run saves its output in an attribute of a directory (whose entries and times come and go).
    os.setxattr(root, "user.memo", b"result 42")
    os.setxattr(root / "out", "user.kept", b"changed")
    os.setxattr(root / "out", "user.more", b"x")
    assert state.restore() is None
    assert os.listxattr(root) == []
    assert sorted(os.listxattr(root / "out")) == ["user.kept"]
    assert os.getxattr(root / "out", "user.kept") == b"the build's"


def test_reading_a_file_the_build_made_does_not_move_its_access_time(tmp_path: Path) -> None:
    """Where the sandbox cannot mount the scratch without access times (a user namespace: perftune not
    run by root), a run that reads a build file or not must leave no trace: its access time is set ahead
    when the scratch is recorded, and a read under relatime leaves it there."""
    from perftune.targets.command._scratch_state import ScratchState

    options = next((line.split()[5] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                    if line.split()[4] == _mount_point(tmp_path)), "")
    if "noatime" in options.split(",") or "strictatime" in options.split(","):
        pytest.skip(f"the file system of {tmp_path} is mounted {options}, not relatime")
    root = tmp_path / "scratch"
    root.mkdir()
    (root / "prog").write_text("built\n")
    state = ScratchState.record(str(root))
    before = os.stat(root / "prog")
    assert before.st_atime_ns > max(before.st_mtime_ns, before.st_ctime_ns)
    assert (root / "prog").read_text() == "built\n"  # a run reads it
    assert os.stat(root / "prog").st_atime_ns == before.st_atime_ns
    assert state.restore() is None


def _mount_point(path: Path) -> str:
    path = path.resolve()
    while not os.path.ismount(path):
        path = path.parent
    return str(path)


@needs_root
def test_a_scratch_root_another_user_owns_is_refused(tmp_path: Path) -> None:
    from perftune.errors import PerftuneError

    root = tmp_path / "scratch-root"
    root.mkdir(mode=0o711)
    os.chown(root, 65534, 65534)  # made by another local user, who could swap entries for links
    box = Sandbox(Limits(memory_mb=256), scratch_root=str(root))
    with pytest.raises(PerftuneError, match="is owned by uid 65534"):
        box.scratch()
    os.chown(root, 0, 0)
    root.chmod(0o777)
    with pytest.raises(PerftuneError, match="is writable by other users"):
        box.scratch()
    root.chmod(0o711)
    with box.scratch() as scratch:
        assert Path(scratch.path).parent == root
