"""A Dask executor: evaluations run on the workers of a Dask cluster.

``--executor dask --scheduler tcp://host:8786`` connects to a running scheduler (for example one
started by dask-jobqueue on SLURM or PBS); ``--scheduler local:N`` starts a local cluster of N worker
processes. ``workers`` stays the number of evaluations in flight. When a Dask worker dies, Dask
reschedules its task elsewhere; a task that keeps killing workers fails with the reason, and the
driver records it as FAILED. dask.distributed is imported lazily (extra ``perftune[dask]``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from perftune.drive._context import EvalContext
from perftune.drive._evaluate import Outcome, evaluate
from perftune.errors import PerftuneError
from perftune.trial import Status

__all__ = ["DaskExecutor"]


def evaluate_in_child(objective: Callable[..., Any], config: Any, metric: str | None,
                      context: EvalContext | None, timeout_s: float | None) -> Outcome:
    """:func:`evaluate` on a Dask worker, in a process forked for it, killed (with everything it
    started) once ``timeout_s`` has passed since the task *started on the worker*.

    Dask cannot stop a running task; without this, a hanging configuration would occupy its worker to the
    end and a clock started at submission would count the time the task waited in Dask's queue.
    """
    if timeout_s is None:
        return evaluate(objective, config, metric, context)
    started = time.time()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: evaluate, send the outcome back, leave without running the worker's exit code
        code = 0
        try:
            os.close(read_fd)
            os.setpgid(0, 0)  # its own group: a kill reaches what the objective started
            outcome = evaluate(objective, config, metric, context)
            try:
                data = pickle.dumps(outcome)
            except Exception as exc:  # noqa: BLE001 - a metric or published value that cannot travel
                data = pickle.dumps(Outcome(Status.FAILED, reason=f"its result cannot be sent back: {exc}",
                                            started_at=outcome.started_at, finished_at=outcome.finished_at))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
        except BaseException:  # noqa: BLE001 - nothing may escape into the forked Dask worker's code
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    timed_out = False
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            left = started + timeout_s - time.time()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                timed_out = True
                break
            chunk = pipe.read(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    if timed_out:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    now = time.time()
    if timed_out:
        return Outcome(Status.TIMEOUT, reason=f"ran past the {timeout_s:g} s timeout (killed)",
                       started_at=started, finished_at=now)
    if not chunks:
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return Outcome(Status.FAILED, reason=f"the evaluation's process died ({how})",
                       started_at=started, finished_at=now)
    out: Outcome = pickle.loads(b"".join(chunks))
    return out


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:  # pragma: no cover - depends on the installation
        raise PerftuneError(
            "the Dask executor needs dask.distributed: pip install 'perftune[dask]'") from None
    return distributed


class DaskExecutor:
    """Runs evaluations as Dask tasks.

    Args:
        objective: Called as ``objective(config)`` on a Dask worker (shipped with cloudpickle), or
            ``objective(config, context=...)`` when it declares ``context``.
        metric: Metric to optimise when the objective returns a mapping.
        workers: Evaluations in flight.
        scheduler: ``"tcp://host:port"`` of a running scheduler, or ``"local:N"`` for a local cluster.
        timeout_s: Give up on an evaluation after this long (TIMEOUT), counted from when it starts on its
            worker: it runs there in a forked process, killed (with what it started) at the limit.
        connect_timeout_s: How long to wait for the scheduler.

    Example:
        >>> ex = DaskExecutor(lambda c: c["x"], None, workers=2, scheduler="local:2")  # doctest: +SKIP
    """

    def __init__(self, objective: Callable[[Any], Any], metric: str | None, workers: int, scheduler: str,
                 timeout_s: float | None = None, connect_timeout_s: float = 10.0) -> None:
        distributed = _import_distributed()
        try:
            # The objective travels to the workers by cloudpickle: one that cannot is said now, in one line.
            distributed.protocol.pickle.dumps(objective)
        except Exception as error:  # noqa: BLE001 - any serialisation failure is the same user mistake
            raise PerftuneError(f"the objective cannot be sent to Dask workers ({type(error).__name__}: "
                                f"{str(error).splitlines()[0][:200] if str(error) else ''}); define it at "
                                "module level and keep locks, files and connections out of it") from None
        self._distributed = distributed
        self._objective = objective
        self._metric = metric
        self._timeout_s = timeout_s
        self.capacity = workers
        self._cluster: Any = None
        if scheduler.startswith("local:") or scheduler == "local":
            n = scheduler.partition(":")[2] or "2"
            if not n.isdigit() or int(n) < 1:
                raise PerftuneError(f"--scheduler {scheduler!r}: expected local:N with N >= 1 workers")
            self._cluster = distributed.LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True,
                                                     dashboard_address=None, silence_logs=50)
            address = self._cluster.scheduler_address
        elif "://" in scheduler:
            address = scheduler
        else:
            raise PerftuneError(f"--scheduler {scheduler!r}: expected tcp://host:port or local:N")
        self._client = self._connect(distributed, address, connect_timeout_s)
        self._futures: dict[Any, tuple[int, float]] = {}

    def _connect(self, distributed: Any, address: str, timeout_s: float) -> Any:
        """A client of the scheduler at ``address``, or one PerftuneError within about ``timeout_s``: a
        port that accepts the connection but never answers as a scheduler (the dashboard's 8787 for
        8786) would otherwise hang forever."""
        try:  # a malformed address is said before a Client exists (a failed one hangs 20 s at exit)
            distributed.comm.get_address_host_port(address)
        except (ValueError, TypeError) as error:
            self._close_cluster()
            raise PerftuneError(f"--scheduler {address!r}: {str(error).splitlines()[0][:200]} "
                                "(expected tcp://host:port or local:N)") from None
        box: dict[str, Any] = {}

        def connect() -> None:
            try:
                box["client"] = distributed.Client(address, timeout=timeout_s, set_as_default=False)
            except BaseException as error:  # noqa: BLE001 - reported below, in the caller's thread
                box["error"] = error

        thread = threading.Thread(target=connect, name="perftune-dask-connect", daemon=True)
        thread.start()
        thread.join(timeout_s + 5.0)
        if thread.is_alive():
            self._close_cluster()
            raise PerftuneError(f"no Dask scheduler answered at {address} within {timeout_s + 5.0:g} s "
                                "(is it the scheduler's port, usually 8786, and not the dashboard's?)")
        if "error" in box:
            self._close_cluster()
            failure = box["error"]
            why = str(failure).splitlines()[0][:200] if str(failure) else type(failure).__name__
            raise PerftuneError(f"cannot reach the Dask scheduler at {address}: {why}") from None
        return box["client"]

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    @property
    def n_busy(self) -> int:
        return len(self._futures)

    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None:
        # The context goes with the task (pickled), so a Dask worker sees the run's incumbent too.
        # The worker enforces timeout_s (evaluate_in_child), from when the task starts there.
        future = self._client.submit(evaluate_in_child, self._objective, config, self._metric, context,
                                     self._timeout_s, pure=False,
                                     key=f"perftune-eval-{ticket}-{time.monotonic_ns()}")
        self._futures[future] = (ticket, time.time())

    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
        if not self._futures:
            return []
        wait_s = timeout_s
        try:
            with self._client.as_current():  # wait() looks for the current client, not ours
                done, _ = self._distributed.wait(list(self._futures), timeout=wait_s,
                                                 return_when="FIRST_COMPLETED")
        except (TimeoutError, self._distributed.TimeoutError):
            done = set()
        except Exception as lost:  # noqa: BLE001 - the scheduler went away (FuturesCancelledError, ...)
            raise PerftuneError(f"lost the Dask scheduler while {len(self._futures)} evaluation(s) ran "
                                f"({type(lost).__name__}); the measured trials are kept: resume the run "
                                "once it is back") from None
        results: list[tuple[int, Outcome]] = []
        for future in done:
            ticket, started = self._futures.pop(future)
            if future.status == "finished":
                results.append((ticket, future.result()))
            else:
                try:
                    error = future.exception()
                except Exception as exc:  # cancelled futures raise on exception()
                    error = exc
                reason = f"dask task failed: {type(error).__name__}: {error}"
                results.append((ticket, Outcome(Status.FAILED, reason=reason,
                                                started_at=started, finished_at=time.time())))
        return results

    def cancel_all(self, reason: str) -> list[tuple[int, Outcome]]:
        now = time.time()
        out = []
        for future, (ticket, started) in self._futures.items():
            future.cancel()
            out.append((ticket, Outcome(Status.CANCELLED, reason=reason,
                                        started_at=started, finished_at=now)))
        self._futures.clear()
        return out

    def close(self) -> None:
        for future in self._futures:
            future.cancel()
        self._futures.clear()
        try:
            self._client.close()
        finally:
            self._close_cluster()
