"""Running an objective on one configuration and turning what it returns into an outcome."""

from __future__ import annotations

import math
import numbers
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from perftune.trial import Status, TrialTimeout

__all__ = ["Outcome", "evaluate", "interpret"]

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


def interpret(raw: Any, metric: str | None) -> tuple[float, dict[str, float], list[float]]:
    """Split an objective's return value into (value, metrics, samples).

    An objective returns a number, or a mapping of metrics; ``metric`` names the one to optimise
    (a mapping with a single number, or with a ``"value"`` key, needs no name). A ``"samples"`` list
    in the mapping holds repeated measurements of the optimised metric.

    Raises:
        ValueError: the return value cannot be read as an objective value.
    """
    number = _number(raw)
    if number is not None:
        if math.isnan(number):
            raise ValueError("objective returned NaN")
        return number, {}, []
    if not isinstance(raw, Mapping):
        raise ValueError(f"objective returned {type(raw).__name__}; "
                         "expected a number or a mapping of metrics")
    metrics: dict[str, float] = {}
    samples: list[float] = []
    for key, val in raw.items():
        if key == "samples":
            samples = [float(s) for s in val]
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
    if math.isnan(value):
        raise ValueError("objective returned NaN")
    return value, metrics, samples


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
