"""Greedy mutation: perturb the best configuration found so far.

``greedy-uniform`` resets a few coordinates of the unit-cube encoding to uniform random values;
``greedy-normal`` adds Gaussian noise of a random scale (log-uniform between ``sigma_min`` and
``sigma_max``) to them, so it both explores and refines. Both sometimes start from one of the
``n_elite`` best configurations instead of the very best, which helps on plateaus.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = GreedyNormal(Space({"x": Float(0, 1)}), seed=0)
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, check_settings

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["GreedySettings", "GreedyNormal", "GreedyUniform"]


@dataclasses.dataclass(frozen=True)
class GreedySettings:
    """Settings of the greedy mutation techniques.

    Attributes:
        rate: Probability that each coordinate of the encoding is perturbed (at least one always is).
        sigma_start: Initial standard deviation of the normal perturbation (fraction of the range);
            it adapts by the 1/5 success rule (grows after an own proposal improved the best, shrinks
            otherwise) within ``[sigma_min, sigma_max]``, and each proposal jitters it log-normally.
        sigma_min: Smallest standard deviation.
        sigma_max: Largest standard deviation.
        n_elite: How many of the best configurations may serve as the parent.
        p_elite: Probability of mutating a random elite member rather than the best.
    """

    rate: float = 0.3
    sigma_start: float = 0.1
    sigma_min: float = 1e-6
    sigma_max: float = 0.3
    n_elite: int = 5
    p_elite: float = 0.2

    def __post_init__(self) -> None:
        check_settings("GreedySettings.rate", 0 < self.rate <= 1, f"must be in (0, 1], got {self.rate}")
        check_settings(
            "GreedySettings.sigma_min",
            0 < self.sigma_min <= self.sigma_max,
            f"need 0 < sigma_min <= sigma_max, got {self.sigma_min}, {self.sigma_max}",
        )
        check_settings("GreedySettings.n_elite", self.n_elite >= 1, f"must be >= 1, got {self.n_elite}")
        check_settings(
            "GreedySettings.p_elite", 0 <= self.p_elite <= 1, f"must be in [0, 1], got {self.p_elite}"
        )


class _Greedy(BaseTechnique):
    Settings: ClassVar[type] = GreedySettings
    settings: GreedySettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._elite: list[tuple[float, int, Config]] = []  # sorted (loss, id, config)
        self.sigma = min(max(self.settings.sigma_start, self.settings.sigma_min), self.settings.sigma_max)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        if self.is_mine(trial.config):
            # 1/5 success rule: a success grows sigma as much as four failures shrink it.
            s = self.settings
            self.sigma *= 1.5 if self.improved else 1.5**-0.25
            self.sigma = min(max(self.sigma, s.sigma_min), s.sigma_max)
        if loss is None:
            return
        elite = self._elite
        k = self.settings.n_elite
        if len(elite) >= k and loss >= elite[-1][0]:
            return
        if any(c == trial.config for _, _, c in elite):
            return
        bisect.insort(elite, (loss, trial.id, trial.config), key=lambda e: (e[0], e[1]))
        del elite[k:]

    def _parent(self) -> Config:
        if self._elite and len(self._elite) > 1 and self.rng.random() < self.settings.p_elite:
            return self._elite[int(self.rng.integers(len(self._elite)))][2]
        return self.start_config()

    def _mask(self, n_dims: int) -> np.ndarray:
        mask = self.rng.random(n_dims) < self.settings.rate
        if not mask.any():
            mask[int(self.rng.integers(n_dims))] = True
        return mask

    def _propose(self) -> Config | None:
        if self.best_config is None and self.n_asked > 0:
            return self.space.sample(self.rng, 1)[0]
        parent = self._parent()
        if self.space.n_dims == 0:
            return parent
        vec = self.space.encode(parent).astype(float)
        return self.from_vector(self._perturb(vec))

    def _perturb(self, vec: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class GreedyUniform(_Greedy):
    """Mutate the best configuration: some coordinates of its encoding become uniform random."""

    name: ClassVar[str] = "greedy-uniform"

    def _perturb(self, vec: np.ndarray) -> np.ndarray:
        mask = self._mask(vec.size)
        vec[mask] = self.rng.random(int(mask.sum()))
        return vec


class GreedyNormal(_Greedy):
    """Mutate the best configuration with Gaussian noise of a random scale in its encoding."""

    name: ClassVar[str] = "greedy-normal"

    def _perturb(self, vec: np.ndarray) -> np.ndarray:
        sigma = self.sigma * math.exp(self.rng.normal(0.0, 0.7))
        mask = self._mask(vec.size)
        vec[mask] += self.rng.normal(0.0, sigma, int(mask.sum()))
        # Reflect at the bounds instead of clipping, so the edges are not over-sampled.
        vec = np.abs(vec)
        vec = np.where(vec > 1.0, 2.0 - vec, vec)
        return vec
