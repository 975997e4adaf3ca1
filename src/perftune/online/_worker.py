"""Worker process groups pinned to one side of the machine, that run requests and can be killed.

Workers are forked (the objective may be a closure) by a *zygote*: a small process forked once from
the caller when the racer starts. Forking the caller itself for every replacement would make it pay
copy-on-write page faults on the next requests (milliseconds for a large Python process); the idle
zygote pays them instead. The zygote keeps none of the caller's file descriptors but standard input,
output and error (the others are pointed at ``/dev/null``): a pipe, a listening socket or a database file
the caller closes is closed for good. Each worker runs in its own session, so that killing its process
group also kills whatever the objective started (a compiler, a subprocess); the zygote is a *child
subreaper*, so that what a worker started in a session of its own (``setsid``, a daemon) comes back to it
when the worker dies, and is killed once a worker has been killed, and when the racer closes. Cancelling
a request is a real ``SIGKILL``: the objective needs no cooperation, and a hung or crashed candidate
leaves nothing behind.

Requests and answers travel pickled, each as one message: a fixed header (request number, ok, seconds
in the objective, size) and the pickle. The caller reads an answer as it arrives, without waiting for
the rest of it, so that a large answer does not hold up the other side's; an answer larger than the
caller's limit is refused from its header, unread.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import select
import signal
import socket
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from perftune.online._split import Side

__all__ = ["Reply", "Worker", "Zygote", "ZygoteGone", "travel_failure"]

# What a worker sends back: (sequence number, ok, answer or "Type: message", seconds inside the objective).
Reply = tuple[int, bool, Any, float]

# A message's header: request number, ok, seconds inside the objective, size of the pickle that follows.
_HEAD = struct.Struct("!q?dQ")

# Failures of a request's or an answer's way between the processes, not of a configuration: the objective's
# request or answer type cannot travel (or the answer is over the size limit) for every configuration.
_TRAVEL = ("its request cannot be", "its answer cannot be", "its answer is ")

_PR_SET_CHILD_SUBREAPER = 36


def travel_failure(why: str) -> bool:
    """Whether a failure is the request's or the answer's way between processes (see ``_TRAVEL``)."""
    return why.startswith(_TRAVEL)


def _size_text(n: int) -> str:
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n} bytes"


# Why an answer could not come back, as every side says it (the first line, at most 1000 characters).
def cannot_send(exc: BaseException) -> str:
    return f"its answer cannot be sent back ({type(exc).__name__}: {exc})".splitlines()[0][:1000]


def cannot_read(exc: BaseException) -> str:
    return f"its answer cannot be read by the caller ({type(exc).__name__}: {exc})".splitlines()[0][:1000]


def too_large(size: int, limit: int) -> str:
    return f"its answer is {_size_text(size)} pickled, more than max_answer_bytes={limit}"


class ZygoteGone(Exception):
    """The zygote died (killed by the OOM killer, say): no worker can be forked any more."""


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes from a blocking socket, or None at its end."""
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _send(sock: socket.socket, seq: int, ok: bool, seconds: float, data: bytes) -> None:
    head = _HEAD.pack(seq, ok, seconds, len(data))
    if len(data) < 1 << 16:
        sock.sendall(head + data)
    else:  # not copied once more to join them
        sock.sendall(head)
        sock.sendall(data)


def _serve(sock: socket.socket, run: Callable[[Any, Any], Any], broken: str | None = None) -> None:
    """Answer requests until the caller closes the connection; a worker whose side could not be set up
    (``broken``) answers every request, pings too, with that failure instead."""
    while True:
        try:
            head = _read_exactly(sock, _HEAD.size)
            body = None if head is None else _read_exactly(sock, _HEAD.unpack(head)[3])
        except OSError:
            return
        if head is None or body is None:
            return
        seq = _HEAD.unpack(head)[0]
        seconds = 0.0
        if broken is not None:
            ok, answer = False, f"its side's setup failed: {broken}"
        else:
            try:
                config, pickled = pickle.loads(body)
                request = pickle.loads(pickled)
            except Exception as exc:  # a class the zygote never imported, say
                ok, answer = False, f"its request cannot be read in the worker ({type(exc).__name__}: {exc})"
            else:
                if seq < 0:  # a ping: how long a round trip to this worker takes, objective aside
                    ok, answer = True, None
                else:
                    t0 = time.perf_counter()
                    try:
                        ok, answer = True, run(config, request)
                    except BaseException as exc:  # the objective's failure is a reply, not the worker's death
                        ok, answer = False, f"raised {type(exc).__name__}: {exc}"
                    seconds = time.perf_counter() - t0
        try:
            data = pickle.dumps(answer if ok else str(answer).splitlines()[0][:1000], pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            ok, data = False, pickle.dumps(cannot_send(exc))
        try:
            _send(sock, seq, ok, seconds, data)
        except OSError:
            return


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
    _serve(sock, run, broken)


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
    data = _read_exactly(sock, size)
    if data is None:
        raise EOFError("the zygote is gone")
    return pickle.loads(data), list(fds)


def _forget_the_callers_files(keep: int) -> None:
    """Point every descriptor but standard input, output, error and ``keep`` at /dev/null: the caller's
    pipes, sockets and files are then closed for good when it closes them, and a stale object of the
    caller that still writes to its old descriptor number writes nowhere (never into a new socket)."""
    fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        if fd > 2 and fd not in (keep, null):
            with contextlib.suppress(OSError):
                os.dup2(null, fd)
    os.close(null)


def _children() -> set[int]:
    """The zygote's child processes (its workers, and orphans that came back to it as a subreaper)."""
    pid = os.getpid()
    try:
        return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:  # a kernel without the file: every process's parent
        out = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                        out.add(int(entry))
        return out


def _kill(pid: int) -> None:
    """SIGKILL a process and, when it leads one, its process group."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


def _zygote_main(control: socket.socket, sides: Sequence[Side], run: Callable[[Any, Any], Any]) -> None:
    workers: set[int] = set()  # alive, as far as the zygote knows
    statuses: dict[int, int] = {}
    forgotten: set[int] = set()  # killed on purpose: nobody will ask why they died

    def reap() -> None:  # what died since the last look, keeping why (of workers only)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if not pid:
                return
            if pid in workers:
                workers.discard(pid)
                if pid in forgotten:
                    forgotten.discard(pid)
                else:
                    statuses[pid] = status

    def sweep(also_workers: bool = False) -> bool:
        """Kill the orphans (what a dead worker left running, come back to the subreaper); whether there
        is more to do (orphans, or killed workers not gone yet: theirs come back once they are)."""
        reap()
        left = _children() if also_workers else _children() - workers
        for pid in left:
            _kill(pid)
        return bool(left or forgotten & workers)

    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sweep_until = 0.0  # after a kill, orphans are looked for between commands (never holding one up)
    while True:
        if time.monotonic() < sweep_until and not select.select([control], [], [], 0.002)[0]:
            if not sweep():
                sweep_until = 0.0
            continue
        try:
            (command, arg), _ = _recv_msg(control)
        except (EOFError, OSError):  # closed: nothing a worker started outlives the racer
            deadline = time.monotonic() + 0.5
            while sweep(also_workers=True) and time.monotonic() < deadline:
                time.sleep(0.001)
            return
        reap()
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
            workers.add(pid)
            theirs.close()
            _send_msg(control, pid, [ours.fileno()])
            ours.close()
        elif command == "status":
            if arg not in statuses:
                try:
                    _, statuses[arg] = os.waitpid(arg, 0)
                except ChildProcessError:
                    statuses[arg] = -1
                workers.discard(arg)
            _send_msg(control, statuses.pop(arg))
        elif command == "forget":
            if statuses.pop(arg, None) is None and arg in workers:
                forgotten.add(arg)
            # Killed by the caller between requests (a loser, once the request is answered): what it, or a
            # worker that died before it, left running is in use no more.
            sweep_until = time.monotonic() + 1.0


class Zygote:
    """The process that forks workers, so that the caller is not forked again after the start.

    Example:
        >>> import os, pickle
        >>> z = Zygote([Side(tuple(sorted(os.sched_getaffinity(0)))[:1])], lambda config, x: x * config)
        >>> w = Worker(z, 0)
        >>> w.send(1, 3, pickle.dumps(14))
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
                _forget_the_callers_files(theirs.fileno())
                gc.freeze()  # the caller's objects are never collected here (nor their files closed)
                _zygote_main(theirs, self.sides, run)
            except BaseException:
                code = 70
            finally:
                os._exit(code)  # never run the caller's exit handlers (test runner, store)
        theirs.close()
        self.pid, self._sock = pid, ours
        self._n_requested = 0  # spawn requests whose reply has not been read yet
        self._ready: list[tuple[int, socket.socket]] = []

    def gone(self) -> bool:
        """Whether the zygote has died (it is not waited for: a dead one has exited already)."""
        if not self.pid:
            return True
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else (the caller's own os.wait())
            done = self.pid
        if done:
            self.pid = 0
            self._sock.close()
        return bool(done)

    def _lost(self, exc: BaseException) -> ZygoteGone:
        why = f"{type(exc).__name__}: {exc}"
        return ZygoteGone(f"the zygote (the process that forks workers) is gone ({why})")

    def request_spawn(self, side: int) -> None:
        """Ask for a worker for ``side`` without waiting: the zygote forks while the caller works."""
        try:
            _send_msg(self._sock, ("spawn", side))
        except OSError as exc:
            raise self._lost(exc) from None
        self._n_requested += 1

    def collect(self) -> list[tuple[int, socket.socket]]:
        """The workers asked for by ``request_spawn``, in order: (pid, connection)."""
        self._drain()
        out, self._ready = self._ready, []
        return out

    def _drain(self) -> None:
        while self._n_requested:
            try:
                pid, fds = _recv_msg(self._sock)
            except (EOFError, OSError) as exc:
                raise self._lost(exc) from None
            self._n_requested -= 1
            self._ready.append((int(pid), socket.socket(fileno=fds[0])))

    def spawn(self, side: int) -> tuple[int, socket.socket]:
        """Fork a worker for ``side`` and wait for it: its pid and a connection to it."""
        self.request_spawn(side)
        self._drain()
        return self._ready.pop()

    def status(self, pid: int) -> int:
        """The wait status of a worker that died (waits for it)."""
        # Replies come in the order of the commands: read those of the spawns asked for first.
        self._drain()
        try:
            _send_msg(self._sock, ("status", pid))
            status, _ = _recv_msg(self._sock)
        except (EOFError, OSError) as exc:
            raise self._lost(exc) from None
        return int(status)

    def forget(self, pid: int) -> None:
        """A killed worker's status is not needed (the zygote reaps it, and kills what it left running)."""
        with contextlib.suppress(OSError):
            _send_msg(self._sock, ("forget", pid))

    def close(self) -> None:
        """End the zygote (it kills its workers and what they started, then exits)."""
        for _, sock in self._ready:  # forked, never handed out
            sock.close()
        self._ready = []
        self._sock.close()
        if self.pid:
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
    """One worker on one side; ``send`` a request, ``sock`` to wait on, ``take`` its answer, ``kill`` to
    cancel."""

    def __init__(self, zygote: Zygote, side: int, made: tuple[int, socket.socket] | None = None) -> None:
        self.zygote = zygote
        self.side = side
        self.pid, self.sock = made if made is not None else zygote.spawn(side)
        self._head = b""
        self._body: bytearray | None = None
        self._got = 0
        #: The answer was refused unread (over the size limit): the connection is out of step, the worker
        #: must be killed.
        self.refused = False

    def send(self, seq: int, config: Any, request: bytes) -> None:
        """Hand the worker a request (pickled already); a worker that died answers with its end."""
        data = pickle.dumps((config, request), pickle.HIGHEST_PROTOCOL)
        with contextlib.suppress(OSError):
            _send(self.sock, seq, True, 0.0, data)

    def take(self, max_bytes: int | None = None) -> tuple[bool, Reply | None]:
        """Read what has come of the answer, without waiting: (False, None) while it is incomplete, else
        (True, the reply), or (True, None) when the worker died (crashed or was killed).

        An answer of more than ``max_bytes`` is refused from its header, unread: a failure reply, and the
        worker must then be killed (``refused``).
        """
        try:
            while True:
                if self._body is None:
                    chunk = self.sock.recv(_HEAD.size - len(self._head), socket.MSG_DONTWAIT)
                    if not chunk:
                        return True, None
                    self._head += chunk
                    if len(self._head) < _HEAD.size:
                        continue
                    seq, ok, seconds, size = _HEAD.unpack(self._head)
                    if max_bytes is not None and size > max_bytes:
                        self.refused = True
                        return True, (seq, False, too_large(size, max_bytes), seconds)
                    self._body = bytearray(size)
                    self._got = 0
                if self._got < len(self._body):
                    n = self.sock.recv_into(memoryview(self._body)[self._got:], 0, socket.MSG_DONTWAIT)
                    if not n:
                        return True, None
                    self._got += n
                if self._got == len(self._body):
                    return True, self._reply()
        except BlockingIOError:
            return False, None
        except OSError:
            return True, None

    def _reply(self) -> Reply:
        seq, ok, seconds, _ = _HEAD.unpack(self._head)
        body, self._head, self._body = self._body, b"", None
        try:
            value = pickle.loads(body)  # type: ignore[arg-type]
        except Exception as exc:  # an exception class whose __init__ takes other arguments, say
            return seq, False, cannot_read(exc), seconds
        return seq, ok, value, seconds

    def receive(self, max_bytes: int | None = None) -> Reply | None:
        """The worker's reply (waits for it), or None when it died (crashed or was killed)."""
        while True:
            done, reply = self.take(max_bytes)
            if done:
                return reply
            with contextlib.suppress(OSError):
                socket_wait([self.sock])

    def round_trip_s(self) -> float:
        """Seconds for a request to reach the worker and its reply to come back (a ping)."""
        t0 = time.perf_counter()
        self.send(-1, None, pickle.dumps(None))
        self.receive()
        return time.perf_counter() - t0

    def setup_failure(self, timeout_s: float = 120.0) -> str | None:
        """Why the worker's side could not be set up (its ``on_start`` raised, say), or None (a ping)."""
        self.send(-1, None, pickle.dumps(None))
        if not socket_wait([self.sock], timeout_s):
            self.kill()
            return f"did not start within {timeout_s:g} s (its on_start hangs?)"
        reply = self.receive()
        if reply is None:
            return self.death()
        return None if reply[1] else str(reply[2])

    def _running(self) -> bool:
        """Whether the worker process still runs (not gone, not a zombie waiting to be reaped)."""
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def death(self, grace_s: float = 0.05) -> str:
        """Why a worker that closed its connection is gone.

        A worker can close its connection and go on running (a candidate that closes every file
        descriptor, or replaces itself with ``exec``): it is killed after a short grace (``grace_s``),
        rather than waited for, so that the request is not held up by it. What a crashed worker started in
        its process group is killed too.
        """
        deadline = time.monotonic() + grace_s
        while self._running() and time.monotonic() < deadline:
            time.sleep(0.002)
        if self._running():
            self.kill()
            return "closed its connection to perftune and went on running (killed)"
        with contextlib.suppress(OSError):  # the group outlives its leader while a member runs
            os.killpg(self.pid, signal.SIGKILL)
        try:
            status = self.zygote.status(self.pid)
        except ZygoteGone:
            status = -1
        self.pid = 0
        self.sock.close()
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
        self.sock.close()

    def close(self) -> None:
        """Stop the worker (killed: it may be busy)."""
        self.kill()
        self.sock.close()


def socket_wait(socks: Sequence[socket.socket], timeout_s: float | None = None) -> list[socket.socket]:
    """The sockets among ``socks`` with something to read (or at their end), waiting up to ``timeout_s``."""
    from multiprocessing.connection import wait

    return list(wait(socks, timeout_s))  # type: ignore[arg-type]
