"""NSGA-II in ask/tell form, with the space's own crossover and mutation operators.

A (mu + lambda) steady state: every finished trial, from any technique, competes for a place in a
population of ``population`` members, kept by NSGA-II's environmental selection (non-dominated fronts,
then crowding distance within the last front that fits). Constraints use Deb's rule: a feasible trial
beats an infeasible one, two infeasible ones compare by total violation. Children are
``space.crossover`` of two parents chosen by binary tournament on (front, crowding), then
``space.mutate`` (per parameter: PMX/OX/CX for permutations, a pick or blend for the others).

Told no objectives (a single-objective run), the loss vector is ``(trial.loss,)`` and the technique is
a steady-state genetic algorithm with NSGA-II's selection.

Example:
    >>> from perftune.space import Float, Space
    >>> from perftune.search import Objectives
    >>> tech = NSGA2(Space({"x": Float(0, 1), "y": Float(0, 1)}), seed=0)
    >>> tech.set_objectives(Objectives(("f1", "f2"), ("min", "min")))
    >>> len(tech.ask(3))
    3
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

from perftune.search._base import BaseTechnique, check_settings
from perftune.search._objectives import Objectives
from perftune.search._pareto import crowding_distance, non_dominated_sort

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["NSGA2", "NSGA2Settings"]


@dataclasses.dataclass(frozen=True)
class NSGA2Settings:
    """Settings of NSGA-II.

    Attributes:
        population: Members kept by the environmental selection.
        crossover_rate: Probability that a child is a crossover of two parents (else a copy of one).
        mutation_rate: Per-parameter mutation probability for ``space.mutate`` (None: one over the
            number of parameters, NSGA-II's usual choice).
        mutation_scale: Mutation step as a fraction of each parameter's range.
    """

    population: int = 32
    crossover_rate: float = 0.9
    mutation_rate: float | None = None
    mutation_scale: float = 0.1

    def __post_init__(self) -> None:
        check_settings("NSGA2Settings.population", self.population >= 4,
                       f"must be >= 4, got {self.population}")
        check_settings("NSGA2Settings.crossover_rate", 0 <= self.crossover_rate <= 1,
                       f"must be in [0, 1], got {self.crossover_rate}")
        check_settings("NSGA2Settings.mutation_rate",
                       self.mutation_rate is None or 0 < self.mutation_rate <= 1,
                       f"must be None or in (0, 1], got {self.mutation_rate}")
        check_settings("NSGA2Settings.mutation_scale", self.mutation_scale > 0,
                       f"must be > 0, got {self.mutation_scale}")


class NSGA2(BaseTechnique):
    """NSGA-II (Deb et al. 2002) as a steady-state ask/tell technique over any space.

    Attributes:
        objectives: What is optimised (None until the driver calls :meth:`set_objectives`).
    """

    name: ClassVar[str] = "nsga2"
    Settings: ClassVar[type] = NSGA2Settings
    settings: NSGA2Settings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self.objectives: dict[str, Any] | None = None  # Objectives.to_dict(): plain data for checkpoints
        self._objectives: Objectives | None = None
        # Members: [config, loss vector, violation]; rank and crowding of each, after the last selection.
        self._pop: list[tuple[Config, tuple[float, ...], float]] = []
        self._rank: list[int] = []
        self._crowd: list[float] = []

    state_exclude: ClassVar[frozenset[str]] = BaseTechnique.state_exclude | {"_objectives"}

    def _after_load(self) -> None:
        self._objectives = None if self.objectives is None else Objectives.from_dict(self.objectives)

    def set_objectives(self, objectives: Objectives) -> None:
        """Rank by these objectives and constraints (see :class:`perftune.search.MultiObjectiveAware`)."""
        self._objectives = objectives
        self.objectives = objectives.to_dict()

    # ------------------------------------------------------------------ learning
    def _point(self, trial: Trial, loss: float | None) -> tuple[tuple[float, ...], float] | None:
        objectives = self._objectives
        if objectives is None:
            return None if loss is None else ((loss,), 0.0)
        vector = objectives.losses(trial)
        if vector is None:
            return None
        return vector, objectives.violation(trial.metrics)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        point = self._point(trial, loss)
        if point is None:
            return
        config = trial.config
        if any(c == config for c, _, _ in self._pop):
            return
        self._pop.append((config, point[0], point[1]))
        if len(self._pop) > self.settings.population:
            self._select()
        else:
            self._rank, self._crowd = [], []

    def _select(self) -> None:
        """Keep ``population`` members by (feasibility, front, crowding), as NSGA-II's survival."""
        pop = self._pop
        keep_n = self.settings.population
        feasible = [i for i, m in enumerate(pop) if m[2] <= 0.0]
        infeasible = sorted((i for i, m in enumerate(pop) if m[2] > 0.0), key=lambda i: pop[i][2])
        kept: list[int] = []
        ranks: dict[int, int] = {}
        crowd: dict[int, float] = {}
        fronts = non_dominated_sort([pop[i][1] for i in feasible])
        for r, front in enumerate(fronts):
            members = [feasible[j] for j in front]
            distance = crowding_distance([pop[i][1] for i in members])
            for i, d in zip(members, distance, strict=True):
                ranks[i], crowd[i] = r, d
            if len(kept) + len(members) <= keep_n:
                kept.extend(members)
                continue
            by_crowd = sorted(range(len(members)), key=lambda j: -distance[j])
            kept.extend(members[j] for j in by_crowd[: keep_n - len(kept)])
            break
        n_fronts = len(fronts)
        for k, i in enumerate(infeasible):
            if len(kept) >= keep_n:
                break
            ranks[i], crowd[i] = n_fronts + k, 0.0
            kept.append(i)
        kept.sort()
        self._pop = [pop[i] for i in kept]
        self._rank = [ranks[i] for i in kept]
        self._crowd = [crowd[i] for i in kept]
        self.work_done += len(pop) * len(pop) / 64.0

    def _ensure_ranked(self) -> None:
        if len(self._rank) == len(self._pop):
            return
        pop = self._pop
        self._rank = [0] * len(pop)
        self._crowd = [0.0] * len(pop)
        feasible = [i for i, m in enumerate(pop) if m[2] <= 0.0]
        fronts = non_dominated_sort([pop[i][1] for i in feasible])
        for r, front in enumerate(fronts):
            members = [feasible[j] for j in front]
            for i, d in zip(members, crowding_distance([pop[i][1] for i in members]), strict=True):
                self._rank[i], self._crowd[i] = r, d
        worst = len(fronts)
        for i, m in enumerate(pop):
            if m[2] > 0.0:
                self._rank[i], self._crowd[i] = worst, -m[2]

    # ------------------------------------------------------------------ proposing
    def _tournament(self) -> Config:
        n = len(self._pop)
        a, b = (int(x) for x in self.rng.choice(n, size=2, replace=False))
        key_a = (self._rank[a], -self._crowd[a] if math.isfinite(self._crowd[a]) else -math.inf)
        key_b = (self._rank[b], -self._crowd[b] if math.isfinite(self._crowd[b]) else -math.inf)
        return self._pop[a if key_a <= key_b else b][0]

    def _propose(self) -> Config | None:
        s = self.settings
        if len(self._pop) < max(4, s.population // 2):
            if self.n_asked == 0:
                return self.start_config()
            return self.space.sample(self.rng, 1)[0]
        self._ensure_ranked()
        a = self._tournament()
        b = self._tournament()
        child = a
        if a != b and self.rng.random() < s.crossover_rate:
            child = self.space.crossover(a, b, self.rng)
        return self.space.mutate(child, self.rng, rate=s.mutation_rate, scale=s.mutation_scale)
