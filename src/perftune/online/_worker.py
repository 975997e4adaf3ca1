"""Worker process groups pinned to one side of the machine, that run requests and can be killed.

Workers are forked (the objective may be a closure) by a *zygote*: a small process forked once from
the caller when the racer starts. Forking the caller itself for every replacement would make it pay
copy-on-write page faults on the next requests (milliseconds for a large Python process); the idle
zygote pays them instead. Each worker runs in its own session, so that killing its process group also
kills whatever the objective started (a compiler, a subprocess). Cancelling a request is a real
``SIGKILL`` of that group: the objective needs no cooperation, and a hung or crashed candidate leaves
nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import struct
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from perftune.online._split import Side

__all__ = ["Reply", "Worker", "Zygote"]

# What a worker sends back: (sequence number, ok, answer or "Type: message", seconds inside the objective).
Reply = tuple[int, bool, Any, float]


def _serve(conn: Connection, run: Callable[[Any, Any], Any], broken: str | None = None) -> None:
    """Answer requests until told to stop; a worker whose side could not be set up (``broken``) answers
    every request, pings too, with that failure instead."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        seq, config, request = message
        if broken is not None:
            conn.send((seq, False, f"its side's setup failed: {broken}", 0.0))
            continue
        if seq < 0:  # a ping: how long a round trip to this worker takes, objective aside
            conn.send((seq, True, None, 0.0))
            continue
        t0 = time.perf_counter()
        try:
            answer = run(config, request)
            reply: Reply = (seq, True, answer, time.perf_counter() - t0)
        except BaseException as exc:  # the objective's failure is a reply, never the worker's death
            why = f"raised {type(exc).__name__}: {exc}".splitlines()[0]
            reply = (seq, False, why, time.perf_counter() - t0)
        try:
            conn.send(reply)
        except Exception as exc:
            conn.send((seq, False, f"its answer cannot be sent back ({type(exc).__name__}: {exc})",
                       reply[3]))


def _worker_main(sock: socket.socket, side: Side, run: Callable[[Any, Any], Any]) -> None:
    os.setsid()  # its own process group: a kill reaches everything it starts
    broken = None
    try:
        os.sched_setaffinity(0, side.cpus)
        os.environ.update(side.env)
        if side.on_start is not None:
            side.on_start()
    except BaseException as exc:  # said to the racer (a ping at its start), not an exit status to guess at
        broken = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    _serve(Connection(sock.detach()), run, broken)


def _send_msg(sock: socket.socket, obj: Any, fds: Sequence[int] = ()) -> None:
    data = pickle.dumps(obj)
    payload = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)


def _recv_msg(sock: socket.socket) -> tuple[Any, list[int]]:
    head, fds, _, _ = socket.recv_fds(sock, 4, 4)
    if len(head) < 4:
        raise EOFError("the zygote is gone")
    (size,) = struct.unpack("!I", head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the zygote is gone")
        data += chunk
    return pickle.loads(data), list(fds)


def _zygote_main(control: socket.socket, sides: Sequence[Side], run: Callable[[Any, Any], Any]) -> None:
    statuses: dict[int, int] = {}
    forgotten: set[int] = set()  # killed on purpose: nobody will ask why they died
    while True:
        try:
            (command, arg), _ = _recv_msg(control)
        except (EOFError, OSError):
            return
        while True:  # reap what died since the last command, keeping why
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not pid:
                break
            if pid in forgotten:
                forgotten.discard(pid)
            else:
                statuses[pid] = status
        if command == "spawn":
            ours, theirs = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    control.close()
                    ours.close()
                    _worker_main(theirs, sides[arg], run)
                except BaseException:
                    code = 70
                finally:
                    os._exit(code)
            theirs.close()
            _send_msg(control, pid, [ours.fileno()])
            ours.close()
        elif command == "status":
            if arg not in statuses:
                try:
                    _, statuses[arg] = os.waitpid(arg, 0)
                except ChildProcessError:
                    statuses[arg] = -1
            _send_msg(control, statuses.pop(arg))
        elif command == "forget" and statuses.pop(arg, None) is None:
            forgotten.add(arg)


class Zygote:
    """The process that forks workers, so that the caller is not forked again after the start.

    Example:
        >>> import os
        >>> z = Zygote([Side(tuple(sorted(os.sched_getaffinity(0)))[:1])], lambda config, x: x * config)
        >>> w = Worker(z, 0)
        >>> w.send(1, 3, 14)
        >>> w.receive()[:3]
        (1, True, 42)
        >>> w.close(); z.close()
    """

    def __init__(self, sides: Sequence[Side], run: Callable[[Any, Any], Any]) -> None:
        self.sides = tuple(sides)
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ours.close()
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the caller; it closes us
                _zygote_main(theirs, self.sides, run)
            except BaseException:
                code = 70
            finally:
                os._exit(code)  # never run the caller's exit handlers (test runner, store)
        theirs.close()
        self.pid, self._sock = pid, ours
        self._n_requested = 0  # spawn requests whose reply has not been read yet
        self._ready: list[tuple[int, Connection]] = []

    def request_spawn(self, side: int) -> None:
        """Ask for a worker for ``side`` without waiting: the zygote forks while the caller works."""
        _send_msg(self._sock, ("spawn", side))
        self._n_requested += 1

    def collect(self) -> list[tuple[int, Connection]]:
        """The workers asked for by ``request_spawn``, in order: (pid, connection)."""
        self._drain()
        out, self._ready = self._ready, []
        return out

    def _drain(self) -> None:
        while self._n_requested:
            pid, fds = _recv_msg(self._sock)
            self._n_requested -= 1
            self._ready.append((int(pid), Connection(fds[0])))

    def spawn(self, side: int) -> tuple[int, Connection]:
        """Fork a worker for ``side`` and wait for it: its pid and a connection to it."""
        self.request_spawn(side)
        self._drain()
        return self._ready.pop()

    def status(self, pid: int) -> int:
        """The wait status of a worker that died (waits for it)."""
        # Replies come in the order of the commands: read those of the spawns asked for first.
        self._drain()
        _send_msg(self._sock, ("status", pid))
        status, _ = _recv_msg(self._sock)
        return int(status)

    def forget(self, pid: int) -> None:
        """A killed worker's status is not needed (the zygote reaps it)."""
        with contextlib.suppress(OSError):
            _send_msg(self._sock, ("forget", pid))

    def close(self) -> None:
        """End the zygote (its workers end when their connections close)."""
        if self.pid:
            self._sock.close()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.002)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self.pid = 0


class Worker:
    """One worker on one side; ``send`` a request, ``conn`` to wait on, ``kill`` to cancel."""

    def __init__(self, zygote: Zygote, side: int, made: tuple[int, Connection] | None = None) -> None:
        self.zygote = zygote
        self.side = side
        self.pid, self.conn = made if made is not None else zygote.spawn(side)

    def replace(self) -> None:
        """Kill this worker (if alive) and fork a fresh one on the same side."""
        self.kill()
        self.pid, self.conn = self.zygote.spawn(self.side)

    def send(self, seq: int, config: Any, request: Any) -> None:
        """Hand the worker a request; a worker that died already answers with EOF on ``conn``."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
            self.conn.send((seq, config, request))

    def round_trip_s(self) -> float:
        """Seconds for a request to reach the worker and its reply to come back (a ping)."""
        t0 = time.perf_counter()
        self.send(-1, None, None)
        self.receive()
        return time.perf_counter() - t0

    def setup_failure(self, timeout_s: float = 120.0) -> str | None:
        """Why the worker's side could not be set up (its ``on_start`` raised, say), or None (a ping)."""
        self.send(-1, None, None)
        try:
            ready = self.conn.poll(timeout_s)
        except (EOFError, OSError):
            ready = True
        if not ready:
            self.kill()
            return f"did not start within {timeout_s:g} s (its on_start hangs?)"
        reply = self.receive()
        if reply is None:
            return self.death()
        return None if reply[1] else str(reply[2])

    def receive(self) -> Reply | None:
        """The worker's reply, or None when it died (crashed or was killed)."""
        try:
            reply: Reply = self.conn.recv()
        except (EOFError, OSError):
            return None
        return reply

    def _running(self) -> bool:
        """Whether the worker process still runs (not gone, not a zombie waiting to be reaped)."""
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def death(self) -> str:
        """Why a worker that closed its connection is gone.

        A worker can close its connection and go on running (a candidate that closes every file
        descriptor, or replaces itself with ``exec``): it is killed after a short grace, rather than waited
        for, so that the request is not held up by it.
        """
        deadline = time.monotonic() + 0.05
        while self._running() and time.monotonic() < deadline:
            time.sleep(0.002)
        if self._running():
            self.kill()
            return "closed its connection to perftune and went on running (killed)"
        status = self.zygote.status(self.pid)
        self.pid = 0
        self.conn.close()
        if status < 0:
            return "crashed (the worker is gone)"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            return f"crashed (killed by signal {sig}, {signal.Signals(sig).name})"
        return f"crashed (the worker exited with status {os.WEXITSTATUS(status)})"

    def kill(self) -> None:
        """SIGKILL the worker's process group (the zygote reaps it)."""
        if not self.pid:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            # Not yet in its own session (killed right after the fork), or gone already.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.zygote.forget(self.pid)
        self.pid = 0
        self.conn.close()

    def close(self) -> None:
        """Ask the worker to exit; kill it if it is busy."""
        if self.pid:
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.kill()
        self.conn.close()
