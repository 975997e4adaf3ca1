"""What a run optimises: one or several objectives (a metric and a goal each) and constraints on metrics.

A multi-objective run names its objectives (``goal={"time": "min", "size": "min"}``); the first one is
the *primary*: a trial's ``value`` and ``loss`` are its, so single-objective techniques, ``result.best``
and the reports keep working. Techniques that are told the objectives (the
:class:`MultiObjectiveAware` hook) read the whole loss vector with :meth:`Objectives.losses`.

A constraint (``"accuracy >= 0.99"``) bounds a metric that is measured, not declared in the space: a
trial that breaks one is still OK (it was measured), but it is *infeasible*: the driver gives it no
``loss`` (techniques learn it as a failure), it is never the best nor on the Pareto front, and NSGA-II
ranks it by how far it is from feasible.

Example:
    >>> from perftune.space import Config
    >>> from perftune.trial import Status, Trial
    >>> objectives = Objectives(("time", "accuracy"), ("min", "max"), constraints=("accuracy >= 0.9",))
    >>> trial = Trial(0, Config({}), Status.OK, value=2.0, metrics={"time": 2.0, "accuracy": 0.95})
    >>> objectives.losses(trial), objectives.feasible(trial.metrics)
    ((2.0, -0.95), True)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from perftune.errors import PerftuneError
from perftune.trial import Status, Trial

__all__ = ["Constraint", "MultiObjectiveAware", "Objectives"]

_CONSTRAINT = re.compile(
    r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=|>|<)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_GOALS = ("min", "max")


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A bound on one metric: ``metric op bound`` with ``op`` one of ``>=``, ``<=``, ``>``, ``<``.

    Example:
        >>> c = Constraint.parse("accuracy >= 0.99")
        >>> c.satisfied({"accuracy": 0.995}), c.violation({"accuracy": 0.98}) > 0
        (True, True)
    """

    metric: str
    op: str
    bound: float

    @classmethod
    def parse(cls, text: str | Constraint, where: str = "constraints") -> Constraint:
        """Read ``"metric >= number"`` (one-line PerftuneError naming ``where`` when it does not parse)."""
        if isinstance(text, Constraint):
            return text
        if not isinstance(text, str):
            raise PerftuneError(f"{where}: expected a string like 'accuracy >= 0.99', got {text!r}")
        match = _CONSTRAINT.match(text)
        bound = float(match.group(3)) if match is not None else math.nan
        if match is None or not math.isfinite(bound):  # 1e999 reads as inf: no bound
            raise PerftuneError(f"{where}: cannot read constraint {text!r}; expected 'metric >= number' "
                                "(or <=, >, <)")
        return cls(match.group(1), match.group(2), bound)

    def satisfied(self, metrics: Mapping[str, float]) -> bool:
        """Whether the metrics meet the bound (a missing or NaN metric does not)."""
        value = metrics.get(self.metric)
        if value is None or math.isnan(value):
            return False
        return {">=": value >= self.bound, "<=": value <= self.bound,
                ">": value > self.bound, "<": value < self.bound}[self.op]

    def violation(self, metrics: Mapping[str, float]) -> float:
        """How far the metrics are from meeting the bound (0 when they meet it, infinity when missing)."""
        if self.satisfied(metrics):
            return 0.0
        value = metrics.get(self.metric)
        if value is None or math.isnan(value):
            return math.inf
        gap = self.bound - value if self.op in (">=", ">") else value - self.bound
        return max(gap, 1e-12)  # a strict bound met with equality is broken by a hair

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


@dataclasses.dataclass(frozen=True)
class Objectives:
    """The objectives of a run (metric names and goals, the first is the primary) and its constraints.

    Attributes:
        names: Metric names, primary first.
        goals: ``"min"`` or ``"max"`` for each name.
        constraints: :class:`Constraint` objects (strings are parsed).

    Example:
        >>> o = Objectives.coerce({"time": "min", "size": "min"}, where="tune()")
        >>> o.names, o.is_multi, o.to_dict()["goals"]
        (('time', 'size'), True, ['min', 'min'])
    """

    names: tuple[str, ...]
    goals: tuple[str, ...]
    constraints: tuple[Constraint, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "goals", tuple(self.goals))
        object.__setattr__(self, "constraints",
                           tuple(Constraint.parse(c) for c in self.constraints))
        if not self.names:
            raise PerftuneError("objectives: name at least one metric")
        for name in self.names:
            if not isinstance(name, str) or not name:
                raise PerftuneError(f"objectives: a metric name must be a non-empty string, "
                                    f"got {repr(name)[:60]}")
        if len(self.goals) != len(self.names):
            raise PerftuneError(f"objectives: {len(self.names)} metrics but {len(self.goals)} goals")
        if len(set(self.names)) != len(self.names):
            raise PerftuneError(f"objectives: a metric is named twice in {list(self.names)}")
        for name, goal in zip(self.names, self.goals, strict=True):
            if not isinstance(goal, str) or goal not in _GOALS:
                raise PerftuneError(f"objectives: the goal of {name!r} must be 'min' or 'max', got {goal!r}")

    @classmethod
    def coerce(
        cls,
        goal: str | Mapping[str, str] | Sequence[str],
        metric: str | None = None,
        metrics: Sequence[str] | None = None,
        constraints: Sequence[str | Constraint] | None = None,
        *,
        where: str = "tune()",
    ) -> Objectives:
        """The objectives of ``goal=``, ``metric=``, ``metrics=`` and ``constraints=`` as a user gives them.

        ``goal`` is ``"min"``/``"max"`` (for ``metric``, or for every name of ``metrics``), a list of
        goals (one per name of ``metrics``), or a mapping ``{metric: goal}`` (primary first).

        Raises:
            PerftuneError: one line naming ``where`` and what is wrong.
        """
        try:
            if isinstance(constraints, str):
                raise PerftuneError("constraints must be a list of strings like ['accuracy >= 0.99']")
            cons = tuple(Constraint.parse(c, f"{where}: constraints") for c in (constraints or ()))
            if isinstance(goal, Mapping):
                if metrics is not None:
                    raise PerftuneError("give the objectives either as goal={metric: goal} or as metrics=, "
                                        "not both")
                names = tuple(str(k) for k in goal)
                if metric is not None and names and metric != names[0]:
                    raise PerftuneError(f"metric={metric!r} must be the first objective of goal= "
                                        f"({names[0]!r})")
                return cls(names, tuple(goal.values()), cons)
            if metrics is not None:
                if isinstance(metrics, str) or not all(isinstance(m, str) for m in metrics):
                    raise PerftuneError(f"metrics must be a list of metric names, got {metrics!r}")
                names = tuple(metrics)
                if metric is not None and names and metric != names[0]:
                    raise PerftuneError(f"metric={metric!r} must be the first of metrics= ({names[0]!r})")
                goals = (goal,) * len(names) if isinstance(goal, str) else tuple(goal)
                return cls(names, goals, cons)
            if not isinstance(goal, str):
                raise PerftuneError(f"goal must be 'min', 'max' or a mapping {{metric: goal}}, got {goal!r}")
            return cls((metric or "value",), (goal,), cons)
        except PerftuneError as exc:
            text = str(exc)
            raise PerftuneError(text if text.startswith(where) else f"{where}: {text}") from None

    @property
    def primary(self) -> str:
        """The first objective's metric name (``"value"`` when a single one was not named)."""
        return self.names[0]

    @property
    def goal(self) -> str:
        """The primary objective's goal."""
        return self.goals[0]

    @property
    def is_multi(self) -> bool:
        """True with more than one objective."""
        return len(self.names) > 1

    def missing(self, metrics: Mapping[str, float]) -> list[str]:
        """Objective and constraint metrics (the primary excepted) absent from ``metrics``."""
        wanted = [*self.names[1:], *(c.metric for c in self.constraints)]
        return sorted({m for m in wanted if m not in metrics and m != self.primary})

    def losses(self, trial: Trial) -> tuple[float, ...] | None:
        """The trial's loss vector (maximised metrics negated), or None unless it is OK with every metric
        finite.

        The primary objective is read from ``trial.value``; the others from ``trial.metrics``.
        """
        if trial.status is not Status.OK or trial.value is None:
            return None
        out: list[float] = []
        for i, (name, goal) in enumerate(zip(self.names, self.goals, strict=True)):
            raw = trial.value if i == 0 else trial.metrics.get(name)
            if raw is None:
                return None
            x = float(raw)
            if not math.isfinite(x):  # the driver fails such a trial; a store written before may hold one
                return None
            out.append(x if goal == "min" else -x)
        return tuple(out)

    def violation(self, metrics: Mapping[str, float]) -> float:
        """Total violation of the constraints (0 when feasible)."""
        return sum(c.violation(metrics) for c in self.constraints)

    def feasible(self, metrics: Mapping[str, float]) -> bool:
        """Whether every constraint holds."""
        return all(c.satisfied(metrics) for c in self.constraints)

    def broken(self, metrics: Mapping[str, float]) -> list[Constraint]:
        """The constraints that do not hold."""
        return [c for c in self.constraints if not c.satisfied(metrics)]

    def pareto(self, trials: Iterable[Trial]) -> list[Trial]:
        """The non-dominated trials among the successful, feasible ones (one per configuration), by ticket.

        A trial counts when it has a ``loss`` (the driver gives one that breaks a constraint none) and
        every objective's metric.

        Example:
            >>> from perftune.space import Config
            >>> ok = [Trial(i, Config({"i": i}), Status.OK, value=t, loss=t, metrics={"t": t, "s": s})
            ...       for i, (t, s) in enumerate([(1.0, 3.0), (2.0, 2.0), (2.0, 3.0)])]
            >>> [t.id for t in Objectives(("t", "s"), ("min", "min")).pareto(ok)]
            [0, 1]
        """
        from perftune.search._pareto import pareto_front

        seen: set[Any] = set()
        candidates: list[Trial] = []
        vectors: list[tuple[float, ...]] = []
        for trial in sorted(trials, key=lambda t: t.id):
            if trial.loss is None or trial.config in seen:
                continue
            vector = self.losses(trial)
            if vector is None or not self.feasible(trial.metrics):
                continue
            seen.add(trial.config)
            candidates.append(trial)
            vectors.append(vector)
        return [candidates[i] for i in pareto_front(vectors)]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for run settings and checkpoints (the counterpart of :meth:`from_dict`)."""
        return {"names": list(self.names), "goals": list(self.goals),
                "constraints": [str(c) for c in self.constraints]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Objectives:
        """Rebuild from :meth:`to_dict`.

        Raises:
            PerftuneError: ``d`` is not what :meth:`to_dict` writes (names, goals or constraints of another
                type: a store or a checkpoint that was edited), in one line.
        """
        if not isinstance(d, Mapping):
            raise PerftuneError(f"objectives: expected a mapping of names and goals, got {type(d).__name__}")
        lists: list[tuple[Any, ...]] = []
        for key, value in (("names", d.get("names")), ("goals", d.get("goals")),
                           ("constraints", d.get("constraints", ()))):
            if not isinstance(value, list | tuple):
                raise PerftuneError(f"objectives: {key} must be a list, got {type(value).__name__}")
            lists.append(tuple(value))
        names, goals, constraints = lists
        return cls(names, goals, constraints)


@runtime_checkable
class MultiObjectiveAware(Protocol):
    """A technique that searches for a Pareto front and wants to know the run's objectives.

    The driver calls ``set_objectives`` once, right after creating the technique (before a checkpoint
    is loaded into it), in every run; a single-objective run tells it one objective.

    Example:
        >>> from perftune.space import Float, Space
        >>> from perftune.search import create
        >>> tech = create("nsga2", Space({"x": Float(0, 1)}), seed=0)
        >>> isinstance(tech, MultiObjectiveAware)
        True
        >>> tech.set_objectives(Objectives(("a", "b"), ("min", "min")))
    """

    def set_objectives(self, objectives: Objectives) -> None:
        """Search for the front of these objectives under these constraints."""
        ...
