"""A steady-state genetic algorithm using the space's crossover and mutation operators.

Parents are chosen by tournament; the child is ``space.crossover`` of two parents (per parameter:
PMX/OX/CX for permutations, a pick or blend for the others) followed by ``space.mutate``. Every
finished trial (from any technique) competes for a place: it replaces the worst member when better.

Example:
    >>> from perftune.space import Permutation, Space
    >>> tech = GeneticAlgorithm(Space({"order": Permutation(list("abcde"))}), seed=0)
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from perftune.search._base import BaseTechnique, check_settings

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["GASettings", "GeneticAlgorithm"]


@dataclasses.dataclass(frozen=True)
class GASettings:
    """Settings of the genetic algorithm.

    Attributes:
        population: Number of members kept.
        tournament: Tournament size for parent selection.
        crossover_rate: Probability of crossing two parents (else the child copies one).
        mutation_rate: Per-parameter mutation probability passed to ``space.mutate``.
        mutation_scale: Mutation scale (fraction of the range) passed to ``space.mutate``.
    """

    population: int = 20
    tournament: int = 3
    crossover_rate: float = 0.8
    mutation_rate: float = 0.15
    mutation_scale: float = 0.2

    def __post_init__(self) -> None:
        check_settings("GASettings.population", self.population >= 2, f"must be >= 2, got {self.population}")
        check_settings("GASettings.tournament", self.tournament >= 1, f"must be >= 1, got {self.tournament}")
        for field in ("crossover_rate", "mutation_rate"):
            v = getattr(self, field)
            check_settings(f"GASettings.{field}", 0 <= v <= 1, f"must be in [0, 1], got {v}")
        check_settings(
            "GASettings.mutation_scale", self.mutation_scale > 0, f"must be > 0, got {self.mutation_scale}"
        )


class GeneticAlgorithm(BaseTechnique):
    """Steady-state GA: tournament selection, ``space.crossover``, ``space.mutate``, replace-worst."""

    name: ClassVar[str] = "ga"
    Settings: ClassVar[type] = GASettings
    settings: GASettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._pop: list[tuple[float, Config]] = []

    def _pick(self) -> Config:
        pop = self._pop
        k = min(self.settings.tournament, len(pop))
        idx = self.rng.choice(len(pop), size=k, replace=False)
        return min((pop[int(j)] for j in idx), key=lambda m: m[0])[1]

    def _propose(self) -> Config | None:
        s = self.settings
        if len(self._pop) < max(2, s.population // 2):
            if self.n_asked == 0:
                return self.start_config()
            return self.space.sample(self.rng, 1)[0]
        a = self._pick()
        b = self._pick()
        child = self.space.crossover(a, b, self.rng) if self.rng.random() < s.crossover_rate and a != b else a
        if child in (a, b) or self.rng.random() < 0.5:
            child = self.space.mutate(child, self.rng, rate=s.mutation_rate, scale=s.mutation_scale)
        return child

    def _learn(self, trial: Trial, loss: float | None) -> None:
        if loss is None:
            return
        pop = self._pop
        config = trial.config
        full = len(pop) >= self.settings.population
        if full:
            # Told for every trial of the run: a result no better than the worst member (most of them,
            # once the population is good) leaves it unchanged, whether or not it is a member.
            worst = max(range(len(pop)), key=lambda j: pop[j][0])
            if not loss < pop[worst][0]:
                return
        if any(c == config for _, c in pop):
            return
        if not full:
            pop.append((loss, config))
            return
        pop[worst] = (loss, config)
