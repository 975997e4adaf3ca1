"""What the driver tells an objective about the run, with each evaluation it submits.

An objective that declares a parameter named ``context`` is called as ``objective(config,
context=...)`` and receives an :class:`EvalContext`: the best trial so far (for a sequential test
against it, or an adaptive timeout), who proposed the configuration, and the run's *shared* values.
An objective publishes a shared value with :meth:`EvalContext.publish`; the driver merges it when the
outcome comes back, and every later evaluation sees it, in whichever process or machine it runs. So
state that worker processes share travels with the submit message and the outcome, not through files.
Objectives that take only ``config`` are called as before.

Example:
    >>> def objective(config, context):
    ...     best = context.incumbent.value if context.incumbent else None
    ...     context.publish("seen", context.shared.get("seen", 0) + 1)
    ...     return config["x"] if best is None else min(config["x"], best)
    >>> ctx = EvalContext(trial_id=3, incumbent=Incumbent(trial_id=1, value=2.0, samples=(2.0,)))
    >>> objective({"x": 5}, ctx), ctx.published
    (2.0, {'seen': 1})
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perftune.drive._fidelity import Fidelity

__all__ = ["EvalContext", "Incumbent", "takes_context"]


@dataclass(frozen=True)
class Incumbent:
    """The best successful trial when the evaluation was submitted.

    Attributes:
        trial_id: Its ticket in the run.
        value: Its value in the objective's units (the median of ``samples``).
        samples: Its measurements (at least its value).
        metrics: Every metric it reported (``wall_time`` for a task file, for example).

    Example:
        >>> Incumbent(trial_id=0, value=1.5, samples=(1.4, 1.5, 1.7)).samples[1]
        1.5
    """

    trial_id: int
    value: float
    samples: tuple[float, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass
class EvalContext:
    """The driver's side of one evaluation; plain and picklable, sent with the submit message.

    Attributes:
        trial_id: The trial's ticket (None when the objective is called outside a run).
        technique: Who proposed the configuration (``"default"``, ``"seed"``, a technique name).
        incumbent: The best trial so far, or None before the first success.
        shared: The run's shared values, as published by earlier evaluations (a snapshot: read it,
            publish to change it).
        published: What this evaluation published; the driver merges it into ``shared``.
        fidelity: For an objective that reports intermediate values (a ``trial`` parameter): the
            pruner and where the rungs are (docs/fidelity.md); None otherwise.

    Example:
        >>> ctx = EvalContext(shared={"n": 1})
        >>> ctx.publish("n", ctx.shared["n"] + 1)
        >>> ctx.published, ctx.shared
        ({'n': 2}, {'n': 1})
    """

    trial_id: int | None = None
    technique: str | None = None
    incumbent: Incumbent | None = None
    shared: Mapping[str, Any] = field(default_factory=dict)
    published: dict[str, Any] = field(default_factory=dict)
    fidelity: Fidelity | None = None

    def publish(self, key: str, value: Any) -> None:
        """Share ``value`` under ``key`` with the evaluations submitted after this one comes back.

        The value must be picklable (it travels back from worker processes). When evaluations in
        flight at the same time publish the same key, the one collected last wins.
        """
        self.published[key] = value


def takes_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` declares a parameter named ``context`` (then it is passed as ``context=``).

    A name, not a position, decides: ``def f(config, scale=2)`` must not receive a context.

    Example:
        >>> takes_context(lambda config, context: 0), takes_context(lambda config: 0)
        (True, False)
    """
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False
    p = parameters.get("context")
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
