"""Running an objective on one configuration and turning what it returns into an outcome."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import numbers
import os
import socket
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from perftune.trial import Status, TrialTimeout

__all__ = ["Outcome", "RepeatedObjective", "evaluate", "interpret"]

Objective = Callable[[Any], Any]


@dataclass
class Outcome:
    """What one evaluation produced; sent back from workers, so plain and picklable.

    Example:
        >>> from perftune.trial import Status
        >>> Outcome(Status.OK, value=1.5).value
        1.5
        >>> evaluate(lambda c: 1 / 0, {}, None).reason
        'ZeroDivisionError: division by zero'
    """

    status: Status
    value: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    reason: str | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    worker: str | None = None


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    return float(x)


def _finite(value: float, what: str = "objective value") -> float:
    # inf/-inf would win (or lose) every comparison and NaN none: a failure, never a measurement.
    if not math.isfinite(value):
        raise ValueError(f"{what} {value} is not finite")
    return value


def interpret(raw: Any, metric: str | None) -> tuple[float, dict[str, float], list[float]]:
    """Split an objective's return value into (value, metrics, samples).

    An objective returns a number, or a mapping of metrics; ``metric`` names the one to optimise
    (a mapping with a single number, or with a ``"value"`` key, needs no name). A ``"samples"`` list
    in the mapping holds repeated measurements of the optimised metric.

    Raises:
        ValueError: the return value cannot be read as an objective value, or the value (or a
            sample) is not finite (NaN, inf, -inf).
    """
    number = _number(raw)
    if number is not None:
        return _finite(number), {}, []
    if not isinstance(raw, Mapping):
        raise ValueError(f"objective returned {type(raw).__name__}; "
                         "expected a number or a mapping of metrics")
    metrics: dict[str, float] = {}
    samples: list[float] = []
    for key, val in raw.items():
        if key == "samples":
            samples = [_finite(float(s), "sample") for s in val]
            continue
        num = _number(val)
        if num is not None:
            metrics[str(key)] = num
    if metric is not None:
        if metric not in metrics:
            known = ", ".join(sorted(metrics)) or "none"
            raise ValueError(f"objective's result has no numeric metric {metric!r} (has: {known})")
        value = metrics[metric]
    elif "value" in metrics:
        value = metrics["value"]
    elif len(metrics) == 1:
        value = next(iter(metrics.values()))
    else:
        raise ValueError(f"objective returned several metrics ({', '.join(sorted(metrics))}); "
                         "name one with metric=")
    return _finite(value), metrics, samples


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def evaluate(objective: Objective, config: Any, metric: str | None) -> Outcome:
    """Call the objective once; an exception is a failed trial with its message as the reason."""
    started = time.time()
    try:
        raw = objective(config)
        value, metrics, samples = interpret(raw, metric)
    except TrialTimeout as error:
        return Outcome(Status.TIMEOUT, reason=str(error) or "timeout", started_at=started,
                       finished_at=time.time(), worker=_worker_name())
    except Exception as error:  # the objective is user code: any exception is a failed trial
        reason = f"{type(error).__name__}: {error}".strip()
        return Outcome(Status.FAILED, reason=reason[:2000], started_at=started, finished_at=time.time(),
                       worker=_worker_name())
    return Outcome(Status.OK, value=value, metrics=metrics, samples=samples, started_at=started,
                   finished_at=time.time(), worker=_worker_name())


class RepeatedObjective:
    """Measures each configuration as often as its noise needs: what task files do, for the Python API.

    ``perftune.tune(..., repeats=...)`` wraps the objective in one of these. Each call of the wrapper
    is one trial: it calls ``objective`` until the sequential test of
    :func:`perftune.measure.measure_adaptively` separates the configuration from the incumbent (the
    best so far), and returns the median with every sample, so that the trial's value is the median
    and its samples feed the speedup interval (:meth:`perftune.Result.speedup`).

    ``repeats="auto"`` uses the default :class:`~perftune.measure.TimingSettings` and detects a
    deterministic objective: when the first configuration measured gives the same value twice,
    every later configuration is measured once. An int ``n`` measures every configuration exactly
    ``n`` times (no warm-up); a ``TimingSettings`` is used as given.

    The incumbent's samples live in a small file under ``state_dir`` (locked), so that the worker
    processes of one run share them; a worker that cannot reach it (another machine) keeps its own.

    Args:
        objective: ``objective(config)``, returning a number or a mapping of metrics.
        metric: The metric to optimise when it returns a mapping (as for :func:`perftune.tune`).
        goal: ``"min"`` or ``"max"``.
        repeats: ``"auto"``, a number of runs, or a :class:`~perftune.measure.TimingSettings`.
        state_dir: Directory for the shared state (created when missing).

    Example:
        >>> import tempfile
        >>> calls = []
        >>> f = RepeatedObjective(lambda c: calls.append(c) or c["x"] % 3, None, "min", "auto",
        ...                       tempfile.mkdtemp())
        >>> f({"x": 4})["samples"], len(calls)   # a warm-up, then the same value twice
        ([1.0, 1.0], 3)
        >>> f({"x": 3})["samples"], len(calls)   # deterministic: once per configuration
        ([0.0], 4)
    """

    def __init__(self, objective: Objective, metric: str | None, goal: str, repeats: Any,
                 state_dir: str) -> None:
        from perftune.measure import TimingSettings

        if isinstance(repeats, TimingSettings):
            settings, self._auto = repeats, False
        elif repeats == "auto":
            settings, self._auto = TimingSettings(), True
        elif isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1:
            settings = TimingSettings(min_runs=repeats, max_runs=repeats, first_runs=repeats, warmup_runs=0)
            self._auto = False
        else:
            raise ValueError(f"repeats must be 'auto', a positive int or a TimingSettings, got {repeats!r}")
        self.objective = objective
        self.metric = metric
        self.goal = goal
        self.settings = settings
        self.state_dir = state_dir
        self._memory: dict[str, Any] = {}

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The shared state, read and written under an exclusive lock."""
        try:
            os.makedirs(self.state_dir, exist_ok=True)
            lock = open(os.path.join(self.state_dir, "lock"), "a")  # noqa: SIM115 (held across yield)
        except OSError:
            yield self._memory
            return
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = os.path.join(self.state_dir, "state.json")
            try:
                with open(path) as f:
                    state = json.load(f)
            except (OSError, ValueError):
                state = {}
            before = dict(state)
            yield state
            if state != before:
                tmp = f"{path}.{os.getpid()}"
                with open(tmp, "w") as f:
                    json.dump(state, f)
                os.replace(tmp, path)

    def _better(self, a: float, b: float) -> bool:
        return a < b if self.goal == "min" else a > b

    def __call__(self, config: Any) -> dict[str, Any]:
        from perftune.measure import Decision, measure_adaptively

        with self._state() as state:
            incumbent = state.get("incumbent")
            known = state.get("deterministic")
        last: dict[str, float] = {}

        def run_once() -> float:
            value, metrics, _ = interpret(self.objective(config), self.metric)
            last.clear()
            last.update(metrics)
            return value

        if not self._auto:
            mode: bool | None = False
        else:
            mode = True if known is True else None
        result = measure_adaptively(run_once, incumbent["samples"] if incumbent else None, self.settings,
                                    goal=self.goal, deterministic=mode)
        value = statistics.median(result.samples)
        with self._state() as state:
            if self._auto and state.get("deterministic") is None and len(result.samples) >= 2:
                # The first configuration measured more than once says whether there is noise at all.
                state["deterministic"] = all(x == result.samples[0] for x in result.samples)
            current = state.get("incumbent")
            improves = current is None or self._better(value, current["value"])
            if result.decision is Decision.BETTER and improves:
                state["incumbent"] = {"samples": result.samples, "value": value}
        key = self.metric if self.metric is not None else "value"
        return {**last, key: value, "samples": list(result.samples), "n_runs": float(result.n_runs)}

    def __repr__(self) -> str:
        return f"RepeatedObjective({self.objective!r}, repeats={'auto' if self._auto else self.settings})"
