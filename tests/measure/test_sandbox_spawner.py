"""Steps started from the sandbox's helper process behave like steps forked from the tuner."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from perftune.measure import Sandbox
from perftune.measure._spawn import Spawner
from perftune.trial import Status


def _run(sandbox: Sandbox, argv: list[str], **kwargs: object) -> tuple[Status, str | None, bytes]:
    with sandbox.scratch() as scratch:
        r = sandbox.run(argv, scratch=scratch, timeout_s=10, **kwargs)  # type: ignore[arg-type]
    return r.status, r.reason, r.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["sh", "-c", "echo out; echo err >&2; exit 3"],
        ["sh", "-c", "kill -SEGV $$"],
        ["sh", "-c", "ulimit -c; cat /proc/self/status | grep -c ^Uid"],
        ["definitely-not-a-command-perftune"],
        ["sh", "-c", "sleep 5"],
    ],
)
def test_the_helper_and_the_tuner_start_steps_alike(argv: list[str]) -> None:
    timeout_s = 0.5 if "sleep" in argv[-1] else 10.0
    results = []
    for sandbox in (Sandbox(use_spawner=True), Sandbox(use_spawner=False)):
        with sandbox.scratch() as scratch:
            r = sandbox.run(argv, scratch=scratch, timeout_s=timeout_s)
        results.append((r.status, r.reason, r.stdout, r.returncode, r.signal))
    assert results[0] == results[1]


def test_steps_are_not_children_of_the_tuner() -> None:
    sandbox = Sandbox(use_spawner=True)
    with sandbox.scratch() as scratch:
        r = sandbox.run(["sh", "-c", "echo $PPID"], scratch=scratch, timeout_s=10)
    assert r.ok
    if sandbox.protections()["pid_namespace"]:
        assert r.stdout.strip() == b"1"  # its parent is the namespace's init, not a copy of the tuner
    helpers = [s for s in Spawner._idle if s._pid == os.getpid()]
    assert helpers, "the helper was not kept for the next step"
    with open(f"/proc/{helpers[0]._proc.pid}/cmdline", "rb") as f:
        cmdline = f.read().split(b"\0")
    assert cmdline[1:3] == [b"-I", b"-S"] and cmdline[3].endswith(b"_spawn.py")


def test_a_step_dies_with_the_tuner_that_started_it() -> None:
    script = textwrap.dedent(
        """
        import sys
        from perftune.measure import Sandbox
        sandbox = Sandbox(use_spawner=True)
        scratch = sandbox.scratch()
        print(scratch.path, flush=True)
        sandbox.run(["sh", "-c", "echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 59.123"],
                    scratch=scratch, timeout_s=60)
        """
    )
    tuner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert tuner.stdout is not None
    marker = os.path.join(tuner.stdout.readline().decode().strip(), "pid")
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(marker):
            assert time.monotonic() < deadline and tuner.poll() is None, "the step never started"
            time.sleep(0.05)
        with open(marker) as f:
            inner = int(f.read())
        while not (sleepers := _processes_named(b"sleep\x0059.123")):
            assert time.monotonic() < deadline, f"the step (pid {inner} in its namespace) is not running"
            time.sleep(0.05)
        tuner.send_signal(signal.SIGKILL)
        tuner.wait()
        tuner.stdout.close()
        deadline = time.monotonic() + 10
        while set(sleepers) & set(_processes_named(b"sleep\x0059.123")):
            assert time.monotonic() < deadline, "the step outlived the tuner that started it"
            time.sleep(0.05)
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.wait()
        tuner.stdout.close()
        shutil.rmtree(os.path.dirname(marker), ignore_errors=True)  # the killed tuner could not


def _processes_named(cmdline: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if f.read().rstrip(b"\0") == cmdline:
                        found.append(int(name))
            except OSError:
                continue
    return found


def test_a_forked_child_starts_its_own_helper() -> None:
    sandbox = Sandbox(use_spawner=True)
    assert _run(sandbox, ["true"])[0] is Status.OK
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child
        code = 1
        try:
            status, _, out = _run(sandbox, ["echo", "child"])
            mine = [s for s in Spawner._idle if s._pid == os.getpid()]
            code = 0 if status is Status.OK and out == b"child\n" and len(mine) == 1 else 2
        finally:
            os.write(write_end, str(code).encode())
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(child, 0)
    assert os.read(read_end, 8) == b"0"
    os.close(read_end)
    assert _run(sandbox, ["echo", "parent"])[2] == b"parent\n"  # the parent's helper still serves


def test_a_step_too_large_for_the_helper_is_forked_from_the_tuner() -> None:
    sandbox = Sandbox(use_spawner=True)
    env = {f"BIG{i}": "x" * (50 * 1024) for i in range(4)}  # 200 KiB: more than one message holds
    status, reason, out = _run(sandbox, ["sh", "-c", 'printf %s "$BIG0$BIG1$BIG2$BIG3" | wc -c'], env=env)
    assert status is Status.OK, reason
    assert out.strip() == str(200 * 1024).encode()


def test_a_helper_that_died_between_steps_is_replaced() -> None:
    sandbox = Sandbox(use_spawner=True)
    assert _run(sandbox, ["true"])[0] is Status.OK
    helpers = [s for s in Spawner._idle if s._pid == os.getpid()]
    assert helpers
    for helper in helpers:
        helper._proc.kill()
        helper._proc.wait()
    status, reason, out = _run(sandbox, ["echo", "still here"])
    assert status is Status.OK and out == b"still here\n", reason
    status, reason, out = _run(sandbox, ["echo", "and again"])
    assert status is Status.OK and out == b"and again\n", reason
    assert not Spawner._broken and [s for s in Spawner._idle if s._pid == os.getpid()]
