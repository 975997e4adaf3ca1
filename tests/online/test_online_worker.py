"""Workers forked by the zygote: replies stay in order, deaths are explained, kills reach the group."""

from __future__ import annotations

import os
import signal
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
        worker.send(1, 2, -11)
        zygote.request_spawn(0)  # its reply is on the way when the death is asked about
        assert worker.receive() is None
        assert worker.death() == "crashed (killed by signal 11, SIGSEGV)"
        ((pid, conn),) = zygote.collect()
        spare = Worker(zygote, 0, (pid, conn))
        spare.send(2, 3, 14)
        reply = spare.receive()
        assert reply is not None and reply[:3] == (2, True, 42) and isinstance(reply[3], float)
    finally:
        zygote.close()


def test_an_exception_is_a_reply_and_the_worker_lives_on() -> None:
    zygote = Zygote([Side((sorted(os.sched_getaffinity(0))[0],))], lambda config, x: 1 // x)
    try:
        worker = Worker(zygote, 0)
        worker.send(1, None, 0)
        seq, ok, why, _ = worker.receive()  # type: ignore[misc]
        assert (seq, ok, why) == (1, False, "raised ZeroDivisionError: integer division or modulo by zero")
        worker.send(2, None, 1)
        assert worker.receive()[:3] == (2, True, 1)  # type: ignore[index]
        assert worker.round_trip_s() > 0
        worker.close()
    finally:
        zygote.close()
