"""Trials: one configuration, its status and its measurements.

A trial is one configuration. It may hold several samples (repeats, re-measurements); its value is
their median. Failure is a status with a reason, never a sentinel number.

Example:
    >>> from perftune.space import Config
    >>> t = Trial(id=0, config=Config({"x": 1}))
    >>> t.status is Status.PENDING
    True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perftune.space import Config

__all__ = [
    "FAILURE_KEY_CHARS", "INFEASIBLE", "Pruned", "Status", "Trial", "TrialTimeout", "failure_key",
    "infeasible",
]


class Status(str, enum.Enum):  # noqa: UP042 (StrEnum would change str() and f-strings)
    """How a trial ended (or that it has not ended yet).

    The values are stored (store, checkpoints, replay files) and never change. A ``str`` enum, so that
    code written when outcomes were strings (``step.status == "timeout"``) keeps working; ``str()``
    and formatting stay those of a plain enum (``Status.OK``).

    Example:
        >>> Status.TIMEOUT == "timeout", Status("failed") is Status.FAILED
        (True, True)
    """

    PENDING = "pending"
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    #: Stopped early by the pruner after reporting intermediate values (docs/fidelity.md): not a full
    #: evaluation, so it does not count against a budget of evaluations.
    PRUNED = "pruned"


@dataclass
class Trial:
    """One configuration proposed in a run, with its outcome.

    Attributes:
        id: Ticket number in the run, 0-based, in issue order.
        config: The configuration measured.
        status: How the trial ended.
        value: Objective in the user's units (median of ``samples``); None unless OK.
        loss: ``value`` when minimising, ``-value`` when maximising; None unless OK.
            Search techniques read ``loss`` only.
        metrics: Every metric reported by the objective.
        samples: Repeated measurements of the objective.
        reason: Why the trial failed, timed out, was cancelled or pruned.
        technique: Who proposed it (``"default"``, ``"seed"``, a technique name).
        worker: Which worker measured it.
        started_at: Start of the measurement (``time.time()``).
        finished_at: End of the measurement (``time.time()``).
        intermediate: What the objective reported on its way, ``{step: value}`` in the user's units
            (``trial.report(step, value)``; docs/fidelity.md); empty for an objective that reports none.
    """

    id: int
    config: Config
    status: Status = Status.PENDING
    value: float | None = None
    loss: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    samples: list[float] = field(default_factory=list)
    reason: str | None = None
    technique: str | None = None
    worker: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    intermediate: dict[int, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the trial was measured successfully."""
        return self.status is Status.OK

    @property
    def duration_s(self) -> float | None:
        """Wall time of the measurement in seconds, when known."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class TrialTimeout(Exception):
    """Raised by an objective to record its trial as TIMEOUT rather than FAILED.

    Example:
        >>> def objective(config):
        ...     raise TrialTimeout("ran past 2.0 s")
    """


class Pruned(Exception):
    """Raised by an objective to stop its trial early: the trial is recorded as PRUNED with the message
    as its reason (what ``trial.should_prune()`` answering True asks for; docs/fidelity.md).

    Example:
        >>> def objective(config, trial):
        ...     trial.report(1, 0.9)
        ...     if trial.should_prune():
        ...         raise Pruned("not promising at step 1")
        ...     return 0.5
    """


#: How many characters of a failure's reason group failures (every view, and tune()'s warning).
FAILURE_KEY_CHARS = 160


def failure_key(reason: str | None) -> str:
    """What groups failures by reason in every view (``show``, ``--json``, the report, the dashboard): the
    reason's first line, cut at :data:`FAILURE_KEY_CHARS` characters ("" for no reason).

    Example:
        >>> failure_key("RuntimeError: boom\\n  at line 3"), failure_key(None)
        ('RuntimeError: boom', '')
    """
    text = (reason or "").strip()
    return text.splitlines()[0][:FAILURE_KEY_CHARS].rstrip() if text else ""


#: How the reason of a measured trial that breaks a constraint begins (docs/multiobjective.md).
INFEASIBLE = "infeasible"


def infeasible(trial: Trial) -> bool:
    """Whether ``trial`` was measured but breaks a constraint (docs/multiobjective.md): it has no loss, so it
    is never the best, and as the default configuration it is no baseline of an improvement.

    Example:
        >>> from perftune.space import Config
        >>> infeasible(Trial(0, Config({"x": 0}), Status.OK, value=2.0, reason="infeasible: a >= 1 (a=0)"))
        True
    """
    return bool(trial.ok and str(trial.reason or "").startswith(INFEASIBLE))
