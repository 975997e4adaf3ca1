"""A Dask executor: evaluations run on the workers of a Dask cluster.

``--executor dask --scheduler tcp://host:8786`` connects to a running scheduler (for example one
started by dask-jobqueue on SLURM or PBS); ``--scheduler local:N`` starts a local cluster of N worker
processes. ``workers`` stays the number of evaluations in flight. When a Dask worker dies, Dask
reschedules its task elsewhere; a task that keeps killing workers fails with the reason, and the
driver records it as FAILED. dask.distributed is imported lazily (extra ``perftune[dask]``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from perftune.drive._context import EvalContext
from perftune.drive._evaluate import Outcome, evaluate
from perftune.errors import PerftuneError
from perftune.trial import Status

__all__ = ["DaskExecutor"]


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
        timeout_s: Give up on an evaluation after this long (TIMEOUT); the task is cancelled.
        connect_timeout_s: How long to wait for the scheduler.

    Example:
        >>> ex = DaskExecutor(lambda c: c["x"], None, workers=2, scheduler="local:2")  # doctest: +SKIP
    """

    def __init__(self, objective: Callable[[Any], Any], metric: str | None, workers: int, scheduler: str,
                 timeout_s: float | None = None, connect_timeout_s: float = 10.0) -> None:
        distributed = _import_distributed()
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
        try:
            self._client = distributed.Client(address, timeout=connect_timeout_s, set_as_default=False)
        except (OSError, TimeoutError) as error:
            self._close_cluster()
            raise PerftuneError(f"cannot reach the Dask scheduler at {address}: {error}") from None
        self._futures: dict[Any, tuple[int, float]] = {}

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    @property
    def n_busy(self) -> int:
        return len(self._futures)

    def submit(self, ticket: int, config: Any, context: EvalContext | None = None) -> None:
        # The context goes with the task (pickled), so a Dask worker sees the run's incumbent too.
        future = self._client.submit(evaluate, self._objective, config, self._metric, context, pure=False,
                                     key=f"perftune-eval-{ticket}-{time.monotonic_ns()}")
        self._futures[future] = (ticket, time.time())

    def collect(self, timeout_s: float | None) -> list[tuple[int, Outcome]]:
        if not self._futures:
            return []
        wait_s = timeout_s
        if self._timeout_s is not None:
            soonest = min(t for _, t in self._futures.values()) + self._timeout_s - time.time()
            wait_s = max(0.0, soonest) if wait_s is None else max(0.0, min(wait_s, soonest))
        try:
            with self._client.as_current():  # wait() looks for the current client, not ours
                done, _ = self._distributed.wait(list(self._futures), timeout=wait_s,
                                                 return_when="FIRST_COMPLETED")
        except (TimeoutError, self._distributed.TimeoutError):
            done = set()
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
        if self._timeout_s is not None:
            now = time.time()
            for future, (ticket, started) in list(self._futures.items()):
                if now - started >= self._timeout_s:
                    del self._futures[future]
                    future.cancel()
                    reason = f"ran past the {self._timeout_s:g} s timeout"
                    results.append((ticket, Outcome(Status.TIMEOUT, reason=reason,
                                                    started_at=started, finished_at=now)))
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
