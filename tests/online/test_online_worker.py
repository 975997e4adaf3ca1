"""Workers forked by the zygote: replies stay in order, deaths are explained, kills reach the group."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from perftune.online._split import Side
from perftune.online._worker import Worker, Zygote


def _run(config: Any, x: int) -> int:
    if x == -11:
        os.kill(os.getpid(), signal.SIGSEGV)
    return x * config


def test_a_death_is_explained_while_a_spare_is_being_forked() -> None:
    zygote = Zygote([Side((sorted(os.sched_getaffinity(0))[0],))], _run)
    try:
        worker = Worker(zygote, 0)
        worker.send(1, 2, pickle.dumps(-11))
        zygote.request_spawn(0)  # its reply is on the way when the death is asked about
        assert worker.receive() is None
        assert worker.death() == "crashed (killed by signal 11, SIGSEGV)"
        ((pid, conn),) = zygote.collect()
        spare = Worker(zygote, 0, (pid, conn))
        spare.send(2, 3, pickle.dumps(14))
        reply = spare.receive()
        assert reply is not None and reply[:3] == (2, True, 42) and isinstance(reply[3], float)
        spare.close()
    finally:
        zygote.close()


def test_an_exception_is_a_reply_and_the_worker_lives_on() -> None:
    zygote = Zygote([Side((sorted(os.sched_getaffinity(0))[0],))], lambda config, x: 1 // x)
    try:
        worker = Worker(zygote, 0)
        worker.send(1, None, pickle.dumps(0))
        seq, ok, why, _ = worker.receive()  # type: ignore[misc]
        assert (seq, ok, why) == (1, False, "raised ZeroDivisionError: integer division or modulo by zero")
        worker.send(2, None, pickle.dumps(1))
        assert worker.receive()[:3] == (2, True, 1)  # type: ignore[index]
        assert worker.round_trip_s() > 0
        worker.close()
    finally:
        zygote.close()


def _targets(pid: int) -> set[str]:
    """What the descriptors of process ``pid`` point at (``pipe:[123]``, ``socket:[456]``, a path)."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def test_the_zygote_and_the_workers_keep_none_of_the_callers_descriptors() -> None:
    from perftune.online import Racer
    from perftune.space import Int, Space

    rd, wr = os.pipe()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    theirs = {os.readlink(f"/proc/self/fd/{fd}") for fd in (rd, wr, listener.fileno())}
    try:
        with Racer(lambda c, x: x, Space({"k": Int(0, 1)}), check=lambda x, y: True, seed=0) as racer:
            racer(1)
            pids = [racer._zygote.pid, *(w.pid for w in racer._workers)]
            assert all(pids) and not any(theirs & _targets(pid) for pid in pids)
            os.close(wr)
            os.set_blocking(rd, False)
            assert os.read(rd, 1) == b""  # no writer left anywhere: the end of the pipe
    finally:
        os.close(rd)
        listener.close()


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def _all_dead(pids: list[int], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not all(_dead(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return all(_dead(p) for p in pids)


def test_what_a_crashed_or_killed_candidate_started_does_not_outlive_it(tmp_path: Path) -> None:
    from perftune.online import Racer
    from perftune.space import Choice, Space

    pids = tmp_path / "pids"

    def leaves_helpers(config: Any, x: int) -> int:
        if config["k"] == "safe":
            time.sleep(0.05)
            return x
        # A helper in its own process group (killed with the worker's group it is not), or in the worker's.
        helper = subprocess.Popen(["sleep", "600"], start_new_session=config["k"] != "crashes")
        with pids.open("a") as f:
            f.write(f"{config['k']} {helper.pid}\n")
        if config["k"] == "crashes":
            os._exit(1)
        time.sleep(600)  # hangs: killed when the safe configuration answers
        return x

    space = Space({"k": Choice(["safe", "crashes", "hangs"], default="safe")})
    with Racer(leaves_helpers, space, check=lambda x, y: y == x, seed=0) as racer:
        assert [racer(x) for x in range(4)] == [0, 1, 2, 3]
        assert set(racer.failed.values()) == {"crashed (the worker exited with status 1)"}
        helpers = dict(line.split() for line in pids.read_text().splitlines())
        assert set(helpers) == {"crashes", "hangs"}
        # The crashed worker's group is killed after the race, the killed one's new session once it is gone.
        assert _all_dead([int(helpers["crashes"]), int(helpers["hangs"])])
    assert _all_dead([int(line.split()[1]) for line in pids.read_text().splitlines()])


def test_when_the_zygote_dies_the_safe_configuration_serves_in_process_said_once() -> None:
    import pytest

    from perftune.online import Racer
    from perftune.space import Int, Space

    with Racer(lambda c, x: 2 * x, Space({"k": Int(0, 3)}), check=lambda x, y: y == 2 * x, seed=0) as racer:
        assert [racer(x) for x in range(3)] == [0, 2, 4]
        zygote = racer._zygote.pid
        os.kill(zygote, signal.SIGKILL)
        assert _all_dead([zygote])
        with pytest.warns(RuntimeWarning) as said:
            assert [racer(x) for x in range(3, 8)] == [6, 8, 10, 12, 14]
        assert len(said) == 1 and "the zygote (the process that forks workers) died" in str(said[0].message)
        assert not racer.exploring and racer.records[-1].answered_by == "alone"


def _kills_its_zygote(config: Any, x: int) -> int:
    if x == 3 and config["k"] == 1:
        os.kill(os.getppid(), signal.SIGKILL)  # a worker's parent is the zygote
    elif x == 3:
        time.sleep(0.3)  # the safe configuration: the candidate is not killed before it has done it
    return 2 * x


def test_a_zygote_that_dies_during_a_request_is_said_once_and_the_request_answered() -> None:
    import pytest

    from perftune.online import Racer
    from perftune.space import Int, Space

    said_it = pytest.warns(RuntimeWarning, match="the zygote .* is gone|died")
    with Racer(_kills_its_zygote, Space({"k": Int(0, 1)}), check=lambda x, y: y == 2 * x, seed=0,
               budget=1000) as racer, said_it as said:
        assert [racer(x) for x in range(8)] == [2 * x for x in range(8)]
    assert len(said) == 1


def test_an_answer_is_read_as_it_arrives_never_waited_for_whole() -> None:
    from perftune.online._worker import _HEAD

    ours, theirs = socket.socketpair()
    worker = Worker(None, 0, (0, ours))  # type: ignore[arg-type]  # a connection only: no process to kill
    try:
        data = pickle.dumps(list(range(3000)))
        theirs.sendall(_HEAD.pack(7, True, 0.25, len(data)) + data[:1000])
        assert worker.take() == (False, None)  # half an answer: the caller goes on waiting on both sides
        theirs.sendall(data[1000:])
        assert worker.take() == (True, (7, True, list(range(3000)), 0.25))
        theirs.sendall(_HEAD.pack(8, True, 0.5, 10 << 20))  # the header of a 10 MiB answer, nothing more
        done, reply = worker.take(max_bytes=1 << 20)
        why = "its answer is 10 MiB pickled, more than max_answer_bytes=1048576"
        assert done and reply == (8, False, why, 0.5)
        assert worker.refused  # the rest is never read: the worker is killed
    finally:
        ours.close()
        theirs.close()
