"""Particle swarm optimisation on the unit-cube encoding, asynchronous.

Particles move in turn (round robin); each proposal is the next position of one particle. A particle's
personal best is updated when the result of its proposal comes back; the global best is the best
configuration told by anyone.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = ParticleSwarm(Space({"x": Float(0, 1)}), seed=0)
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, BoundedDict, check_settings
from perftune.search._de import reflect

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["PSOSettings", "ParticleSwarm"]


@dataclasses.dataclass(frozen=True)
class PSOSettings:
    """Settings of particle swarm optimisation.

    Attributes:
        particles: Swarm size.
        inertia: Inertia weight w.
        cognitive: Attraction to the particle's own best (c1).
        social: Attraction to the global best (c2).
        max_velocity: Velocity clamp per coordinate (fraction of the range).
    """

    particles: int = 16
    inertia: float = 0.7298
    cognitive: float = 1.49618
    social: float = 1.49618
    max_velocity: float = 0.3

    def __post_init__(self) -> None:
        check_settings("PSOSettings.particles", self.particles >= 1, f"must be >= 1, got {self.particles}")
        check_settings(
            "PSOSettings.inertia", 0 <= self.inertia < 1.5, f"must be in [0, 1.5), got {self.inertia}"
        )
        check_settings(
            "PSOSettings.max_velocity",
            0 < self.max_velocity <= 1,
            f"must be in (0, 1], got {self.max_velocity}",
        )


class ParticleSwarm(BaseTechnique):
    """Asynchronous global-best particle swarm with velocity clamping and reflecting bounds."""

    name: ClassVar[str] = "pso"
    Settings: ClassVar[type] = PSOSettings
    settings: PSOSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        s = self.settings
        d = max(1, space.n_dims)
        self._x = self.rng.random((s.particles, d))
        self._v = self.rng.uniform(-0.1, 0.1, (s.particles, d))
        self._pbest_x = self._x.copy()
        self._pbest_f = np.full(s.particles, math.inf)
        self._started = np.zeros(s.particles, dtype=bool)
        self._i = 0
        self._gbest_x: np.ndarray | None = None
        self._gbest_for: Config | None = None
        self._owner: BoundedDict = BoundedDict(8 * s.particles)  # config -> (particle, position)

    def _gbest(self) -> np.ndarray | None:
        if self.best_config is None or self.space.n_dims == 0:
            return None
        if self._gbest_for is not self.best_config:
            self._gbest_x = np.asarray(self.space.encode(self.best_config), dtype=float)
            self._gbest_for = self.best_config
        return self._gbest_x

    def _propose(self) -> Config | None:
        if self.space.n_dims == 0:
            return self.start_config()
        s = self.settings
        i = self._i
        self._i = (i + 1) % s.particles
        if self._started[i]:
            rng = self.rng
            d = self._x.shape[1]
            g = self._gbest()
            pull = s.cognitive * rng.random(d) * (self._pbest_x[i] - self._x[i])
            if g is not None:
                pull += s.social * rng.random(d) * (g - self._x[i])
            v = np.clip(s.inertia * self._v[i] + pull, -s.max_velocity, s.max_velocity)
            self._v[i] = v
            self._x[i] = reflect(self._x[i] + v)
        self._started[i] = True
        config = self.from_vector(self._x[i])
        self._owner[config] = (i, self._x[i].copy())
        return config

    def _credit(self, config: Config, loss: float | None) -> None:
        entry = self._owner.pop(config, None)
        if entry is None or loss is None:
            return
        i, x = entry
        if loss < self._pbest_f[i]:
            self._pbest_f[i] = loss
            self._pbest_x[i] = x

    def _on_known(self, config: Config, loss: float | None) -> None:
        self._credit(config, loss)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        self._credit(trial.config, loss)
