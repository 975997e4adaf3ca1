"""Running an objective on one configuration and turning what it returns into an outcome."""

from __future__ import annotations

import difflib
import math
import numbers
import os
import socket
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perftune.drive._context import EvalContext, takes_context
from perftune.drive._fidelity import RunningTrial, takes_trial
from perftune.trial import INFEASIBLE, Pruned, Status, TrialTimeout

if TYPE_CHECKING:
    from perftune.search import Objectives
    from perftune.trial import Trial

__all__ = ["MISSING_METRIC", "Outcome", "RepeatedObjective", "check_metrics", "evaluate", "interpret"]

#: How a trial's reason starts when the objective's result lacks the metric named by ``metric=``.
MISSING_METRIC = "objective's result has no numeric metric"

Objective = Callable[..., Any]  # objective(config) or objective(config, context=...)


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
    published: dict[str, Any] = field(default_factory=dict)
    intermediate: dict[int, float] = field(default_factory=dict)


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    return float(x)


class NotFinite(ValueError):
    """An objective value or sample is NaN or infinite: the trial failed (it is no measurement)."""


def _finite(value: float, what: str = "objective value") -> float:
    # inf/-inf would win (or lose) every comparison and NaN none: a failure, never a measurement.
    if not math.isfinite(value):
        raise NotFinite(f"{what} {value} is not finite")
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
            close = difflib.get_close_matches(metric, sorted(metrics), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{MISSING_METRIC} {metric!r} (has: {known}){hint}")
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


def evaluate(objective: Objective, config: Any, metric: str | None,
             context: EvalContext | None = None) -> Outcome:
    """Call the objective once; an exception is a failed trial with its message as the reason.

    ``context`` reaches an objective that declares a ``context`` parameter (see
    :class:`~perftune.drive.EvalContext`); what it published comes back in ``Outcome.published``,
    whether it succeeded or not.
    """
    started = time.time()
    published = context.published if context is not None else {}
    handle = None
    kwargs: dict[str, Any] = {}
    if context is not None and takes_context(objective):
        kwargs["context"] = context
    if takes_trial(objective):
        # An objective that reports intermediate values (docs/fidelity.md); without a driver's context
        # it still gets a handle, which records and never prunes.
        trial_id = context.trial_id if context is not None and context.trial_id is not None else 0
        handle = kwargs["trial"] = RunningTrial(trial_id, config, getattr(context, "fidelity", None))
    intermediate = handle.intermediate if handle is not None else {}

    def ended(status: Status, reason: str | None) -> Outcome:
        return Outcome(status, reason=reason, started_at=started, finished_at=time.time(),
                       worker=_worker_name(), published=published, intermediate=intermediate)

    try:
        raw = objective(config, **kwargs)
        if handle is not None and handle.prune_reason is not None:
            # should_prune() said stop and the objective returned: what it returned is not a full
            # evaluation, whatever it is.
            return ended(Status.PRUNED, handle.prune_reason)
        value, metrics, samples = interpret(raw, metric)
    except Pruned as error:
        reason = str(error) or (handle.prune_reason if handle is not None else None) or "pruned"
        return ended(Status.PRUNED, reason[:2000])
    except TrialTimeout as error:
        return ended(Status.TIMEOUT, str(error) or "timeout")
    except Exception as error:  # the objective is user code: any exception is a failed trial
        if handle is not None and handle.prune_reason is not None:
            # should_prune() said stop and the objective stopped its own way (optuna.TrialPruned, a
            # framework's stop exception): pruned, as if it had returned.
            return ended(Status.PRUNED, handle.prune_reason)
        # NotFinite is read as the ValueError it is: the stored reasons keep their words.
        kind = "ValueError" if isinstance(error, NotFinite) else type(error).__name__
        reason = f"{kind}: {error}".strip()
        return ended(Status.FAILED, reason[:2000])
    return Outcome(Status.OK, value=value, metrics=metrics, samples=samples, started_at=started,
                   finished_at=time.time(), worker=_worker_name(), published=published,
                   intermediate=intermediate)


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

    Called by the driver, it reads the incumbent from the :class:`~perftune.drive.EvalContext` and
    publishes what it detected there, so that worker processes (and Dask workers) share both. Called
    directly (no context), it remembers them itself, in this process.

    Args:
        objective: ``objective(config)`` (or ``objective(config, context)``), returning a number or a
            mapping of metrics.
        metric: The metric to optimise when it returns a mapping (as for :func:`perftune.tune`).
        goal: ``"min"`` or ``"max"``.
        repeats: ``"auto"``, a number of runs, or a :class:`~perftune.measure.TimingSettings`.
        state_dir: Ignored; kept so that callers that passed one keep working (the state travels with
            the driver's context now).

    Example:
        >>> calls = []
        >>> f = RepeatedObjective(lambda c: calls.append(c) or c["x"] % 3, None, "min", "auto")
        >>> f({"x": 4})["samples"], len(calls)   # a warm-up, then the same value twice
        ([1.0, 1.0], 3)
        >>> f({"x": 3})["samples"], len(calls)   # deterministic: once per configuration
        ([0.0], 4)
    """

    #: The key under which the detected determinism is shared (``EvalContext.shared``).
    DETERMINISTIC_KEY = "repeats.deterministic"

    def __init__(self, objective: Objective, metric: str | None, goal: str, repeats: Any,
                 state_dir: str | None = None) -> None:
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
        self._passes_context = takes_context(objective)
        # Without a driver's context (called directly): the incumbent and the detection, kept here.
        self._memory: dict[str, Any] = {}

    def _better(self, a: float, b: float) -> bool:
        return a < b if self.goal == "min" else a > b

    def __call__(self, config: Any, context: EvalContext | None = None) -> dict[str, Any]:
        from perftune.measure import Decision, measure_adaptively

        if context is not None:
            incumbent = context.incumbent
            against = list(incumbent.samples or (incumbent.value,)) if incumbent is not None else None
            known = context.shared.get(self.DETERMINISTIC_KEY)
        else:
            remembered = self._memory.get("incumbent")
            against = remembered["samples"] if remembered else None
            known = self._memory.get("deterministic")
        last: dict[str, float] = {}

        def run_once() -> float:
            raw = self.objective(config, context=context) if self._passes_context else self.objective(config)
            value, metrics, _ = interpret(raw, self.metric)
            last.clear()
            last.update(metrics)
            return value

        if not self._auto:
            mode: bool | None = False
        else:
            mode = True if known is True else None
        result = measure_adaptively(run_once, against, self.settings, goal=self.goal, deterministic=mode)
        value = statistics.median(result.samples)
        if self._auto and known is None and len(result.samples) >= 2:
            # The first configuration measured more than once says whether there is noise at all.
            deterministic = all(x == result.samples[0] for x in result.samples)
            if context is not None:
                context.publish(self.DETERMINISTIC_KEY, deterministic)
            else:
                self._memory["deterministic"] = deterministic
        if context is None:
            current = self._memory.get("incumbent")
            improves = current is None or self._better(value, current["value"])
            if result.decision is Decision.BETTER and improves:
                self._memory["incumbent"] = {"samples": result.samples, "value": value}
        key = self.metric if self.metric is not None else "value"
        return {**last, key: value, "samples": list(result.samples), "n_runs": float(result.n_runs)}

    def __repr__(self) -> str:
        return f"RepeatedObjective({self.objective!r}, repeats={'auto' if self._auto else self.settings})"


def check_metrics(objectives: Objectives, trial: Trial) -> None:
    """A result without every objective's metric fails, and so does one whose objective or constraint
    metric is not finite (the primary's rule); one that breaks a constraint loses its loss.

    Used by the driver and by the workers of a shared run, which judge their own results alike. The
    metrics stay with the trial, failed or not.
    """
    missing = objectives.missing(trial.metrics)
    if missing:
        known = ", ".join(sorted(trial.metrics)) or "none"
        trial.status, trial.value, trial.loss = Status.FAILED, None, None
        names = ", ".join(map(repr, missing))
        close = [c for name in missing for c in difflib.get_close_matches(name, sorted(trial.metrics), n=1)]
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        trial.reason = f"{MISSING_METRIC} {names} (has: {known}){hint}"
        return
    if trial.status is Status.OK:
        # -inf would dominate every front (and make the hypervolume infinite), NaN compares with nothing.
        wanted = dict.fromkeys([*objectives.names[1:], *(c.metric for c in objectives.constraints)])
        for name in wanted:
            value = trial.metrics.get(name)
            if name != objectives.primary and value is not None and not math.isfinite(value):
                trial.status, trial.value, trial.loss = Status.FAILED, None, None
                trial.reason = f"ValueError: metric {name!r} {value} is not finite"
                return
    broken = objectives.broken(trial.metrics)
    if broken:
        # Measured, so OK; but infeasible: no loss, so it is never the best and techniques avoid it.
        trial.loss = None
        trial.reason = f"{INFEASIBLE}: " + ", ".join(
            f"{c} ({c.metric}={trial.metrics.get(c.metric, float('nan')):g})" for c in broken)

