"""The shape every target has: build a space, evaluate a configuration into an outcome, verify a winner.

A target is a domain integration (a program from a task file, gcc flags, LLVM passes, algorithmic choice,
replayed data). It never runs a loop or a deadline of its own: the driver proposes, times and cancels;
the target measures one configuration when asked.

Example:
    >>> from perftune.space import Int, Space
    >>> from perftune.trial import Status
    >>> class Square(TargetBase):
    ...     kind = "square"
    ...     def space(self):
    ...         return Space({"x": Int(-3, 3)})
    ...     def evaluate(self, config):
    ...         return Outcome(Status.OK, value=float(config["x"] ** 2))
    >>> t = Square()
    >>> t.evaluate(t.space().default()).value, t.verify(t.space().default())
    (9.0, None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from perftune.drive import Outcome, evaluate
from perftune.errors import PerftuneError
from perftune.trial import Status, TrialTimeout

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = [
    "Example",
    "Outcome",
    "Target",
    "TargetBase",
    "TargetFailure",
    "TargetObjective",
    "TaskRunner",
    "outcome_of",
    "verified_winner",
]


@runtime_checkable
class Target(Protocol):
    """What the driver and ``perftune run`` need from a target.

    Attributes:
        kind: The name it is registered under (``[target] kind`` in a task file).
        goal: ``"min"`` or ``"max"``: the direction of :attr:`Outcome.value`.
        deterministic: True when evaluating a configuration twice gives the same value (a count, a
            replayed table), False for timings. The conformance suite holds a target to it.
    """

    kind: ClassVar[str]
    goal: str
    deterministic: bool

    def space(self) -> Space:
        """The configurations that may be tried (built once; the same object on every call)."""
        ...

    def evaluate(self, config: Config) -> Outcome:
        """Measure one configuration; a failure is an Outcome with a status and a reason, never a raise."""
        ...

    def verify(self, config: Config) -> str | None:
        """Check a potential winner more thoroughly: None when it holds, else why not."""
        ...

    def explain(self, config: Config) -> str:
        """One line a user can act on: the command line, flags or table the configuration stands for."""
        ...


@runtime_checkable
class TaskRunner(Protocol):
    """A target whose task-file run has steps after the search (flags: the reduction to a minimal set).

    ``perftune run`` hands such a target the whole run; it returns a result with ``to_json()``. This is
    declared so that nothing probes for it with ``hasattr``.
    """

    kind: ClassVar[str]

    def run_task(self, *, budget: Any, workers: int, store: Any, seed: int | None, name: str,
                 on_trial: Any = None, lag: int | None = None) -> Any:
        """Tune and return the target's result; ``on_trial`` is called after each trial (progress);
        ``lag`` is the search's (``--lag``; None: the default)."""
        ...


@dataclass
class Example:
    """A small instance of a target, with configurations that show its behaviours, for the conformance suite.

    Attributes:
        target: The instance (quick: a few seconds for a handful of evaluations at most).
        failing: A valid configuration whose evaluation fails (FAILED or TIMEOUT), when there is one.
        slow: A valid configuration whose evaluation takes long enough to be cut by a 1 s time budget.
        skip: Why this example cannot run on this machine (a missing tool), or None.
    """

    target: Any
    failing: Config | None = None
    slow: Config | None = None
    skip: str | None = None


class TargetBase:
    """Defaults for the optional parts of :class:`Target`: subclass it and write ``space`` and ``evaluate``.

    Example:
        >>> TargetBase.goal, TargetBase.deterministic
        ('min', False)
    """

    kind: ClassVar[str] = ""
    goal: str = "min"
    deterministic: bool = False

    @classmethod
    def from_task(cls, path: str, table: Mapping[str, Any]) -> Any:
        """The target a task file's ``[target]`` table describes (``path`` locates relative files).

        Raises:
            PerftuneError: this kind cannot be read from a task file, or the table is wrong.
        """
        raise PerftuneError(f"{path}: key target.kind: the {cls.kind!r} target is used from Python, "
                            "not from a task file")

    @classmethod
    def example(cls, workdir: str) -> Example:
        """A small, quick instance for the conformance suite (files go under ``workdir``).

        Raises:
            NotImplementedError: the target has none (the suite then refuses it).
        """
        raise NotImplementedError(f"target {cls.kind!r} has no example()")

    def space(self) -> Space:
        raise NotImplementedError

    def evaluate(self, config: Config) -> Outcome:
        raise NotImplementedError

    def verify(self, config: Config) -> str | None:
        """No further check: the measurement was the check."""
        return None

    def explain(self, config: Config) -> str:
        """The configuration as JSON."""
        return config.to_json()


def outcome_of(objective: Callable[[Any], Any], config: Config, metric: str | None = None) -> Outcome:
    """Call an objective on ``config`` and turn what it returns or raises into an Outcome (timed)."""
    return evaluate(objective, config, metric)


class TargetFailure(Exception):
    """Raised by :class:`TargetObjective` to carry a FAILED outcome's reason through the driver."""


class TargetObjective:
    """A target as the driver's objective: an OK outcome's value and metrics, a failure its reason.

    Picklable when the target is, so that it runs in worker processes.

    Example:
        >>> from perftune.space import Int, Space
        >>> class One(TargetBase):
        ...     kind = "one"
        ...     def evaluate(self, config):
        ...         return Outcome(Status.OK, value=1.0)
        >>> TargetObjective(One())({})
        {'value': 1.0}
    """

    def __init__(self, target: Any) -> None:
        self.target = target

    def __call__(self, config: Config) -> dict[str, Any]:
        outcome = self.target.evaluate(config)
        if not isinstance(outcome, Outcome):
            raise TargetFailure(f"target {self.target.kind!r}: evaluate() returned "
                                f"{type(outcome).__name__}, not an Outcome")
        if outcome.status is Status.OK:
            out: dict[str, Any] = {**outcome.metrics, "value": outcome.value}
            if outcome.samples:
                out["samples"] = list(outcome.samples)
            return out
        reason = outcome.reason or outcome.status.value
        if outcome.status is Status.TIMEOUT:
            raise TrialTimeout(reason)
        raise TargetFailure(reason)

    def __repr__(self) -> str:
        return f"TargetObjective({self.target!r})"


def verified_winner(
    trials: Iterable[Trial],
    verify: Callable[[Config], str | None],
    *,
    max_checks: int = 5,
    warn: Callable[[str], None] | None = None,
) -> Trial | None:
    """The best trial that passes ``verify``; a winner that fails gives way to the next best.

    Args:
        trials: The run's trials (any status; only OK ones compete, best ``loss`` first).
        verify: A target's :meth:`Target.verify`.
        max_checks: How many of the best are checked before giving up.
        warn: Called with one line for each candidate that fails, and when none passes.

    Returns:
        The verified winner, or None when none of the best ``max_checks`` passes (or nothing succeeded).
    """
    ranked = sorted((t for t in trials if t.ok and t.loss is not None), key=lambda t: t.loss or 0.0)
    for trial in ranked[:max_checks]:
        problem = verify(trial.config)
        if problem is None:
            return trial
        if warn is not None:
            warn(f"trial {trial.id} failed verification: {problem}")
    if ranked and warn is not None:
        warn("no verified winner among the best candidates")
    return None
