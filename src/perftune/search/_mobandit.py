"""The multi-objective ensemble: the AUC bandit with hypervolume-improvement credit.

The default search of a run with several objectives. The portfolio (:data:`MO_PORTFOLIO`) mixes
techniques that search for the whole front (``nsga2``, ``parego``) with single-objective ones that see
a scalarisation: each of those is told the augmented Chebyshev value of the normalised loss vector
for a weight vector of its own, drawn once from the seed (a pattern search that walks towards one
point of the front, which NSGA-II's crossovers then spread along it).

Credit: in a single-objective run a proposal earns its technique credit when it becomes a new best;
here when it *enters the Pareto front* of the feasible results so far, that is when it increases the
hypervolume for every reference point beyond the nadir (a strictly positive hypervolume
improvement). It is the same AUC window and score (:class:`~perftune.search.AUCBandit`), fed by a
different test.

Example:
    >>> from perftune.space import Float, Space
    >>> from perftune.search import Objectives
    >>> bandit = MOBandit(Space({"x": Float(0, 1), "y": Float(0, 1)}), seed=0)
    >>> bandit.set_objectives(Objectives(("f1", "f2"), ("min", "min")))
    >>> sorted(bandit.credits()) == sorted(MO_PORTFOLIO)
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._bandit import AUCBandit, BanditSettings
from perftune.search._base import Stateful, loss_of
from perftune.search._objectives import MultiObjectiveAware, Objectives
from perftune.search._parego import chebyshev
from perftune.trial import Status

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["MO_PORTFOLIO", "MOBandit"]

#: The multi-objective portfolio: NSGA-II and ParEGO for the front, pattern search and greedy mutation
#: (each on a Chebyshev scalarisation of its own) for convergence, random as a safety net.
MO_PORTFOLIO: tuple[str, ...] = ("nsga2", "parego", "pattern-search", "greedy-uniform", "random")


class _Scalarised(Stateful):
    """A single-objective technique told the Chebyshev scalarisation of each result, for fixed weights."""

    def __init__(self, inner: Any, weights_seed: int) -> None:
        self.inner = inner
        self.weights_seed = weights_seed
        self.weights: list[float] | None = None
        self.lo: list[float] | None = None
        self.hi: list[float] | None = None
        self._objectives: Objectives | None = None

    state_exclude: ClassVar[frozenset[str]] = frozenset({"_objectives"})

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def work_done(self) -> Any:
        return getattr(self.inner, "work_done", None)

    @property
    def n_errors(self) -> int:
        return int(getattr(self.inner, "n_errors", 0))

    def set_objectives(self, objectives: Objectives) -> None:
        self._objectives = objectives if objectives.is_multi else None
        if self._objectives is not None:
            rng = np.random.default_rng(self.weights_seed)
            self.weights = rng.dirichlet(np.ones(len(objectives.names))).tolist()

    def ask(self, n: int) -> list[Config]:
        proposals: list[Config] = self.inner.ask(n)
        return proposals

    def tell(self, trials: Sequence[Trial]) -> None:
        objectives = self._objectives
        if objectives is None or self.weights is None:
            self.inner.tell(trials)
            return
        out = []
        for trial in trials:
            vector = objectives.losses(trial) if objectives.feasible(trial.metrics) else None
            if vector is None:
                out.append(trial if trial.status is not Status.OK
                           else dataclasses.replace(trial, status=Status.FAILED, loss=None))
                continue
            if self.lo is None or self.hi is None:
                self.lo, self.hi = list(vector), list(vector)
            self.lo = [min(a, b) for a, b in zip(self.lo, vector, strict=True)]
            self.hi = [max(a, b) for a, b in zip(self.hi, vector, strict=True)]
            lo, hi = np.array(self.lo), np.array(self.hi)
            span = np.where(hi > lo, hi - lo, 1.0)
            scalar = chebyshev(((np.array(vector) - lo) / span)[None, :], np.array(self.weights))[0]
            out.append(dataclasses.replace(trial, loss=float(scalar)))
        self.inner.tell(out)

    def _after_load(self) -> None:
        """The objectives come back through the owner's ``set_objectives``, before the state is loaded."""


class MOBandit(AUCBandit):
    """AUC bandit whose credit is entering the Pareto front (the default search with several objectives).

    Args:
        space: The search space.
        seed: Seed (each sub-technique gets its own seed derived from it).
        settings: :class:`~perftune.search.BanditSettings` (default: :data:`MO_PORTFOLIO`).

    Attributes:
        front: Loss vectors of the current Pareto front of the feasible results.
    """

    name: ClassVar[str] = "mo-bandit"

    def __init__(
        self, space: Space, *, seed: int | None = None, settings: BanditSettings | None = None
    ) -> None:
        super().__init__(space, seed=seed, settings=settings or BanditSettings(techniques=MO_PORTFOLIO))
        for i, technique in enumerate(self.techniques):
            if not isinstance(technique, MultiObjectiveAware) and self.names[i] != "random":
                self.techniques[i] = _Scalarised(technique, int(self.rng.integers(2**31 - 1)))
        self.objectives: dict[str, Any] | None = None
        self._objectives: Objectives | None = None
        self.front: list[tuple[float, ...]] = []

    state_exclude: ClassVar[frozenset[str]] = AUCBandit.state_exclude | {"_objectives"}

    def _after_load(self) -> None:
        super()._after_load()
        self._objectives = None if self.objectives is None else Objectives.from_dict(self.objectives)

    def set_objectives(self, objectives: Objectives) -> None:
        """Credit by these objectives; pass them on to the portfolio (see ``MultiObjectiveAware``)."""
        self._objectives = objectives
        self.objectives = objectives.to_dict()
        for technique in self.techniques:
            if isinstance(technique, MultiObjectiveAware):
                technique.set_objectives(objectives)

    def _credit(self, trial: Trial) -> bool:
        objectives = self._objectives
        if objectives is None or not objectives.is_multi:
            return super()._credit(trial)
        loss = loss_of(trial)  # None when failed or infeasible (the driver gives those no loss)
        if loss is not None and (self.best_loss is None or loss < self.best_loss):
            self.best_loss, self.best_config = loss, trial.config  # the primary objective's best
        vector = objectives.losses(trial) if loss is not None else None
        if vector is None:
            return False
        front = self.front
        if any(all(a <= b for a, b in zip(v, vector, strict=True)) for v in front):
            return False  # dominated by or equal to a front member: no hypervolume gained
        front[:] = [v for v in front if not all(a <= b for a, b in zip(vector, v, strict=True))]
        front.append(vector)
        return True
