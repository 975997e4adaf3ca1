"""Differential evolution on the unit-cube encoding, asynchronous (steady state).

Each proposal is a trial vector for one target member of the population (round robin); when its
result comes back it replaces the target if it is at least as good. Results of other techniques'
proposals fill the population while it is not full and later replace its worst member when better,
so the population learns from the whole ensemble. Nothing waits for a generation to finish.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = DifferentialEvolution(Space({"x": Float(0, 1), "y": Float(0, 1)}), seed=0)
    >>> len(tech.ask(3))
    3
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, BoundedDict, check_settings

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["DESettings", "DifferentialEvolution"]


@dataclasses.dataclass(frozen=True)
class DESettings:
    """Settings of differential evolution.

    Attributes:
        population: Population size (0: ``clip(4 * n_dims, 10, 40)``).
        f_min: Smallest differential weight F (F is drawn uniformly per proposal: dither).
        f_max: Largest differential weight F.
        crossover_rate: Probability of taking each coordinate from the mutant (CR).
        p_best: Probability of the current-to-best/1 scheme instead of rand/1.
    """

    population: int = 0
    f_min: float = 0.5
    f_max: float = 1.0
    crossover_rate: float = 0.9
    p_best: float = 0.3

    def __post_init__(self) -> None:
        check_settings(
            "DESettings.population",
            self.population == 0 or self.population >= 4,
            f"must be 0 (automatic) or >= 4, got {self.population}",
        )
        check_settings(
            "DESettings.f_min",
            0 < self.f_min <= self.f_max <= 2,
            f"need 0 < f_min <= f_max <= 2, got {self.f_min}, {self.f_max}",
        )
        check_settings(
            "DESettings.crossover_rate",
            0 <= self.crossover_rate <= 1,
            f"must be in [0, 1], got {self.crossover_rate}",
        )
        check_settings("DESettings.p_best", 0 <= self.p_best <= 1, f"must be in [0, 1], got {self.p_best}")


def reflect(vec: np.ndarray) -> np.ndarray:
    """Fold a vector back into [0, 1] by reflection at the bounds."""
    vec = np.mod(vec, 2.0)
    return np.where(vec > 1.0, 2.0 - vec, vec)


class DifferentialEvolution(BaseTechnique):
    """Asynchronous differential evolution (rand/1/bin and current-to-best/1/bin, dithered F)."""

    name: ClassVar[str] = "de"
    Settings: ClassVar[type] = DESettings
    settings: DESettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        d = max(1, space.n_dims)
        p = self.settings.population or int(min(40, max(10, 4 * d)))
        self.population = p
        self._x = np.zeros((p, d))
        self._f = np.full(p, math.inf)  # loss; inf = failed or empty
        self._c: list[Config | None] = [None] * p
        self._n_filled = 0
        self._target_i = 0
        self._trial_of: BoundedDict = BoundedDict(8 * p)  # config -> (target index, trial vector)
        self._last: tuple[Config, int, np.ndarray] | None = None

    def _encode(self, config: Config) -> np.ndarray:
        if self.space.n_dims == 0:
            return np.zeros(1)
        return np.asarray(self.space.encode(config), dtype=float)

    def _propose(self) -> Config | None:
        if self._n_filled < self.population:
            if self.n_asked == 0:
                return self.start_config()
            return self.space.sample(self.rng, 1)[0]
        s = self.settings
        rng = self.rng
        p = self.population
        i = self._target_i
        self._target_i = (i + 1) % p
        a, b, c = rng.choice([j for j in range(p) if j != i], size=3, replace=False)
        f = rng.uniform(s.f_min, s.f_max)
        x = self._x
        if rng.random() < s.p_best:
            best = int(np.argmin(self._f))
            mutant = x[i] + f * (x[best] - x[i]) + f * (x[a] - x[b])
        else:
            mutant = x[a] + f * (x[b] - x[c])
        d = x.shape[1]
        cross = rng.random(d) < s.crossover_rate
        cross[int(rng.integers(d))] = True
        trial = reflect(np.where(cross, mutant, x[i]))
        config = self.from_vector(trial) if self.space.n_dims else self.start_config()
        self._trial_of[config] = (i, trial)
        self._last = (config, i, trial)
        return config

    def _select(self, config: Config, loss: float | None, i: int, vec: np.ndarray) -> None:
        value = math.inf if loss is None else loss
        if value <= self._f[i]:
            self._x[i] = vec
            self._f[i] = value
            self._c[i] = config

    def _on_known(self, config: Config, loss: float | None) -> None:
        entry = self._trial_of.pop(config, None)
        if entry is not None:
            self._select(config, loss, entry[0], entry[1])

    def _learn(self, trial: Trial, loss: float | None) -> None:
        config = trial.config
        entry = self._trial_of.pop(config, None)
        if entry is not None and self._n_filled >= self.population:
            self._select(config, loss, entry[0], entry[1])
            return
        if config in self._c:
            return
        if self._n_filled < self.population:
            k = self._n_filled
            self._n_filled += 1
        else:
            if loss is None:
                return
            k = int(np.argmax(self._f))
            if loss >= self._f[k]:
                return
        self._x[k] = self._encode(config)
        self._f[k] = math.inf if loss is None else loss
        self._c[k] = config
