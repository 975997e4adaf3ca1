"""Executors: where evaluations run.

An executor takes (ticket, config, context) submissions and yields (ticket, Outcome) as they complete.
The driver owns the loop; executors only run things. The :class:`~perftune.drive.EvalContext` travels
with the submission (pickled in the submit message to a worker process) and what the objective
published in it comes back in the outcome. ``InlineExecutor`` evaluates in the driver's own
process; ``ProcessExecutor`` keeps N forked worker processes, each fed one configuration at a time over
a pipe, so that a worker that crashes or hangs costs only its own trial and is replaced;
``ThreadExecutor`` runs N evaluations on threads of the driver's process, for targets whose evaluation
is itself a sandboxed subprocess (a build, a timed run) and that share state between evaluations.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent import futures
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from perftune.drive._context import EvalContext, takes_context
from perftune.drive._evaluate import Outcome, evaluate
from perftune.drive._fidelity import takes_trial
from perftune.trial import Status

__all__ = ["Executor", "InlineExecutor", "ProcessExecutor", "ThreadExecutor"]


class Executor(Protocol):
    """Runs evaluations; the driver submits tickets and collects outcomes.

    Example:
        >>> ex: Executor = InlineExecutor(lambda c: c["x"] * 2, None)
        >>> ex.submit(0, {"x": 3})
        >>> [(ticket, outcome.value) for ticket, outcome in ex.collect(None)]
        [(0, 6.0)]
    """

    capacity: int

    # ``context`` is optional for executors written before it existed: the driver passes it only to a
    # ``submit`` that declares it.
    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None: ...
    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]: ...
    def cancel_all(self, reason: str) -> list[tuple[int, Outcome]]: ...
    def close(self) -> None: ...


class InlineExecutor:
    """Evaluates in the calling process, one at a time (the cheapest for fast objectives).

    Example:
        >>> ex = InlineExecutor(lambda c: {"time": c["x"], "size": 10}, metric="time")
        >>> ex.submit(7, {"x": 0.5})
        >>> ticket, outcome = ex.collect(None)[0]
        >>> (ticket, outcome.value, outcome.metrics)
        (7, 0.5, {'time': 0.5, 'size': 10.0})
    """

    capacity = 1

    def __init__(self, objective: Callable[[Any], Any], metric: str | None) -> None:
        self._objective = objective
        self._metric = metric
        self._done: list[tuple[int, Outcome]] = []

    @property
    def n_busy(self) -> int:
        return len(self._done)

    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None:
        self._done.append((ticket, evaluate(self._objective, config, self._metric, context)))

    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
        done, self._done = self._done, []
        return done

    def cancel_all(self, reason: str) -> list[tuple[int, Outcome]]:
        return []

    def close(self) -> None:
        pass


class ThreadExecutor:
    """Evaluates on ``workers`` threads of the driver's process.

    For a target whose evaluation runs its own sandboxed subprocesses and keeps state across
    evaluations (a cache of built binaries, a lock that serialises timed runs): forking a worker per
    evaluation would lose that state and buy no isolation. The objective may return an
    :class:`Outcome` (a status and a reason of its own, e.g. CANCELLED for a step the time budget
    cut); anything else is read as by :func:`perftune.drive.evaluate`.

    A thread cannot be killed, so cancellation is cooperative: :meth:`cancel_all` calls ``cancel``
    (the target's way of stopping what it runs; a target whose every step is bounded by the driver's
    :meth:`perftune.Tuner.remaining_s` needs none) and waits up to ``grace_s`` for the evaluations to
    return. They are recorded as cancelled either way; one still running after that is abandoned.

    Args:
        objective: Called as ``objective(config)`` on a worker thread.
        metric: Name of the metric to optimise when the objective returns a mapping.
        workers: Number of evaluations in flight.
        cancel: Called once by :meth:`cancel_all` before it waits.
        grace_s: How long :meth:`cancel_all` waits for the evaluations in flight.

    Example:
        >>> ex = ThreadExecutor(lambda c: c["x"] + 1, None, workers=2)
        >>> ex.submit(0, {"x": 1})
        >>> ex.submit(1, {"x": 2})
        >>> done: list[tuple[int, Outcome]] = []
        >>> while len(done) < 2:
        ...     done += ex.collect(5.0)
        >>> sorted((ticket, outcome.value) for ticket, outcome in done)
        [(0, 2.0), (1, 3.0)]
        >>> ex.close()
    """

    def __init__(self, objective: Callable[[Any], Any], metric: str | None, workers: int = 1, *,
                 cancel: Callable[[], None] | None = None, grace_s: float = 5.0) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        self._objective = objective
        self._metric = metric
        self._cancel = cancel
        self._grace_s = grace_s
        self.capacity = workers
        self._pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="perftune-eval")
        self._running: dict[futures.Future[Outcome], tuple[int, float]] = {}

    @property
    def n_busy(self) -> int:
        return len(self._running)

    def _evaluate(self, config: Any, context: EvalContext | None = None) -> Outcome:
        own: list[Outcome] = []
        wants_context = context is not None and takes_context(self._objective)
        objective: Callable[..., Any] = self._objective

        def plain(c: Any, context: EvalContext | None = None) -> Any:
            return self._own(objective(c, context=context) if wants_context else objective(c), own)

        def reporting(c: Any, context: EvalContext | None = None, trial: Any = None) -> Any:
            # evaluate() makes the handle of a reporting objective (docs/fidelity.md) for this wrapper.
            extra = {"context": context} if wants_context else {}
            return self._own(objective(c, trial=trial, **extra), own)

        call = reporting if takes_trial(objective) else plain
        outcome = evaluate(call, config, self._metric, context)
        if not own:
            return outcome
        mine = own[0]
        mine.started_at = mine.started_at or outcome.started_at
        mine.finished_at = mine.finished_at or outcome.finished_at
        mine.worker = mine.worker or outcome.worker
        return mine

    @staticmethod
    def _own(raw: Any, own: list[Outcome]) -> Any:
        if isinstance(raw, Outcome):
            own.append(raw)
            return 0.0  # a placeholder for evaluate(); the target's own outcome is returned below
        return raw

    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None:
        if len(self._running) >= self.capacity:
            raise RuntimeError("no idle worker")  # the driver never submits beyond capacity
        self._running[self._pool.submit(self._evaluate, config, context)] = (ticket, time.time())

    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
        if not self._running:
            return []
        done, _ = futures.wait(list(self._running), timeout=timeout_s, return_when=futures.FIRST_COMPLETED)
        return [(self._running.pop(future)[0], future.result()) for future in done]

    def cancel_all(self, reason: str) -> list[tuple[int, Outcome]]:
        """Ask the evaluations in flight to stop, wait for them, and report each as CANCELLED."""
        if not self._running:
            return []
        if self._cancel is not None:
            self._cancel()
        running, self._running = self._running, {}
        futures.wait(list(running), timeout=self._grace_s)
        now = time.time()
        return [(ticket, Outcome(Status.CANCELLED, reason=reason, started_at=started, finished_at=now))
                for ticket, started in running.values()]

    def close(self) -> None:
        # Evaluations abandoned by cancel_all may still run: do not wait for them here.
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Cancelled(BaseException):
    """Raised in a worker by SIGTERM, so that the evaluation unwinds and its cleanup runs."""


# True while this process forks (set and cleared by C-level at-fork hooks, see _guard_forks).
_FORK_STATE: dict[str, bool] = {"forking": False}


def _cancel(signum: int, frame: Any) -> None:
    if _FORK_STATE["forking"]:
        # Raised inside an at-fork hook (logging's _releaseLock while the sandbox starts a candidate),
        # the exception would be printed as "Exception ignored in ..." and swallowed, and the
        # cancellation lost. Raise it instead at the first call or return outside the fork's hooks and
        # outside subprocess's own code (so that Popen has its process when the evaluation unwinds).
        sys.setprofile(_raise_when_forked)
        return
    raise _Cancelled


def _raise_when_forked(frame: Any, event: str, arg: Any) -> None:
    if _FORK_STATE["forking"]:
        return
    caller = frame
    while caller is not None:
        if caller.f_code.co_filename == subprocess.__file__:
            return  # still inside Popen (or a helper it called)
        caller = caller.f_back
    sys.setprofile(None)
    raise _Cancelled


def _guard_forks() -> None:
    """Mark the time this process spends in at-fork hooks, so that ``_cancel`` does not raise there.

    The hooks are C callables (no Python code runs in them, so no signal handler either). Registered
    after logging's, they run first before a fork and last after it, around every Python hook. The
    child of a fork never inherits a pending cancellation: it is the parent that was cancelled.
    """
    import functools
    import logging  # noqa: F401  (its fork hooks must be registered before these)

    os.register_at_fork(
        before=functools.partial(_FORK_STATE.__setitem__, "forking", True),
        after_in_parent=functools.partial(_FORK_STATE.__setitem__, "forking", False),
        after_in_child=functools.partial(_FORK_STATE.__setitem__, "forking", False),
    )
    os.register_at_fork(after_in_child=functools.partial(sys.setprofile, None))


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGTERM this worker when the driver dies (a SIGKILLed driver sends nothing)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the worker when idle
        return
    if os.getppid() != parent_pid:  # the driver died before prctl took effect
        raise _Cancelled


def _worker_main(conn: Connection, driver_ends: list[Connection], parent_pid: int,
                 objective: Callable[[Any], Any], metric: str | None) -> None:
    # Forked: the objective is inherited, not pickled, so closures and lambdas work. The fork also
    # copied the driver's ends of this and the other workers' pipes: close them, so that a dead driver
    # means end-of-file here.
    for end in driver_ends:
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    # The driver cancels with SIGTERM: unwinding through the objective lets it clean up (the sandbox
    # kills its candidate's process group), where SIGKILL would orphan a candidate in its own session.
    _guard_forks()
    signal.signal(signal.SIGTERM, _cancel)
    with contextlib.suppress(_Cancelled):
        _die_with_parent(parent_pid)
        _serve(conn, objective, metric)


def _serve(conn: Connection, objective: Callable[[Any], Any], metric: str | None) -> None:
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        ticket, config, context = message
        outcome = evaluate(objective, config, metric, context)
        try:
            conn.send((ticket, outcome))
        except (BrokenPipeError, OSError):
            return


class _Worker:
    def __init__(self, ctx: Any, objective: Callable[[Any], Any], metric: str | None, index: int,
                 others: list[Connection]) -> None:
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main,
                                   args=(child, [parent, *others], os.getpid(), objective, metric),
                                   name=f"perftune-worker-{index}", daemon=True)
        self.process.start()
        child.close()
        self.conn: Connection = parent
        self.ticket: int | None = None
        self.started_at = 0.0
        self.index = index

    def terminate(self) -> None:
        """Ask the worker to stop: SIGTERM unwinds its evaluation, so that the evaluation cleans up."""
        if self.process.is_alive() and self.process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGTERM)

    def kill(self, grace_s: float = 2.0) -> None:
        """Stop the worker: SIGTERM (its evaluation cleans up), then SIGKILL after ``grace_s``."""
        if self.process.is_alive() and self.process.pid is not None:
            self.terminate()
            self.process.join(timeout=grace_s)
            if self.process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(timeout=5)
        self.conn.close()


class ProcessExecutor:
    """A pool of forked worker processes with per-evaluation timeouts and crash recovery.

    Args:
        objective: Called as ``objective(config)`` in a worker (``objective(config, context=...)``
            when it declares ``context``).
        metric: Name of the metric to optimise when the objective returns a mapping.
        workers: Number of evaluations in flight.
        timeout_s: Kill an evaluation (and its worker) after this many seconds; the trial is TIMEOUT.

    Example:
        >>> ex = ProcessExecutor(lambda c: c["x"] + 1, None, workers=2)
        >>> ex.submit(0, {"x": 1})
        >>> ex.submit(1, {"x": 2})
        >>> done: list[tuple[int, Outcome]] = []
        >>> while len(done) < 2:
        ...     done += ex.collect(5.0)
        >>> sorted((ticket, outcome.value) for ticket, outcome in done)
        [(0, 2.0), (1, 3.0)]
        >>> ex.close()
    """

    def __init__(self, objective: Callable[[Any], Any], metric: str | None, workers: int,
                 timeout_s: float | None = None) -> None:
        self._ctx = mp.get_context("fork")
        self._objective = objective
        self._metric = metric
        self._timeout_s = timeout_s
        self.capacity = workers
        self._workers: list[_Worker] = []
        for i in range(workers):
            self._workers.append(_Worker(self._ctx, objective, metric, i, [w.conn for w in self._workers]))

    @property
    def n_busy(self) -> int:
        return sum(w.ticket is not None for w in self._workers)

    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None:
        for worker in self._workers:
            if worker.ticket is None:
                worker.ticket = ticket
                worker.started_at = time.time()
                worker.conn.send((ticket, config, context))
                return
        raise RuntimeError("no idle worker")  # the driver never submits beyond capacity

    def _replace(self, worker: _Worker, grace_s: float = 2.0) -> None:
        worker.kill(grace_s)
        others = [w.conn for w in self._workers if w is not worker]
        self._workers[worker.index] = _Worker(self._ctx, self._objective, self._metric, worker.index, others)

    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
        busy = [w for w in self._workers if w.ticket is not None]
        if not busy:
            return []
        wait_s = timeout_s
        if self._timeout_s is not None:
            soonest = min(w.started_at for w in busy) + self._timeout_s - time.time()
            wait_s = max(0.0, soonest) if wait_s is None else max(0.0, min(wait_s, soonest))
        handles: dict[Any, _Worker] = {}
        for w in busy:
            handles[w.conn] = w
            handles[w.process.sentinel] = w
        ready = wait(list(handles), timeout=wait_s)
        results: list[tuple[int, Outcome]] = []
        seen: set[int] = set()
        for handle in ready:
            worker = handles[handle]
            if id(worker) in seen or worker.ticket is None:
                continue
            seen.add(id(worker))
            ticket = worker.ticket
            try:
                if worker.conn.poll():
                    got_ticket, outcome = worker.conn.recv()
                    worker.ticket = None
                    results.append((got_ticket, outcome))
                    continue
            except (EOFError, OSError):
                pass
            # The worker died while evaluating: that configuration killed it.
            worker.process.join(timeout=1)
            code = worker.process.exitcode
            if code is not None and code < 0:
                try:
                    how = f"signal {signal.Signals(-code).name}"
                except ValueError:
                    how = f"signal {-code}"
            else:
                how = f"exit code {code}"
            results.append((ticket, Outcome(Status.FAILED, reason=f"worker process died ({how})",
                                            started_at=worker.started_at, finished_at=time.time())))
            worker.ticket = None
            self._replace(worker)
        if self._timeout_s is not None:
            now = time.time()
            for worker in self._workers:
                if worker.ticket is not None and now - worker.started_at >= self._timeout_s:
                    results.append((worker.ticket, Outcome(
                        Status.TIMEOUT, reason=f"ran past the {self._timeout_s:g} s timeout",
                        started_at=worker.started_at, finished_at=now)))
                    worker.ticket = None
                    self._replace(worker)
        return results

    def cancel_all(self, reason: str, grace_s: float = 2.0) -> list[tuple[int, Outcome]]:
        """Stop every evaluation in flight; each comes back CANCELLED with ``reason``.

        All busy workers get SIGTERM at once and share one grace period before SIGKILL, so that
        cancelling N evaluations takes at most ``grace_s``, not N times that.
        """
        now = time.time()
        busy = [w for w in self._workers if w.ticket is not None]
        cancelled = []
        for worker in busy:
            assert worker.ticket is not None
            cancelled.append((worker.ticket, Outcome(Status.CANCELLED, reason=reason,
                                                     started_at=worker.started_at, finished_at=now)))
            worker.ticket = None
            worker.terminate()
        until = time.monotonic() + grace_s
        for worker in busy:
            worker.process.join(timeout=max(0.0, until - time.monotonic()))
        for worker in busy:
            self._replace(worker, grace_s=0.0)  # SIGKILLs what outlived the grace period
        return cancelled

    def close(self) -> None:
        for worker in self._workers:
            if worker.ticket is None and worker.process.is_alive():
                with contextlib.suppress(OSError):
                    worker.conn.send(None)
        deadline = time.time() + 2
        for worker in self._workers:
            worker.process.join(timeout=max(0.0, deadline - time.time()))
            worker.kill()
