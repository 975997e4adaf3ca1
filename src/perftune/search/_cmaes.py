"""CMA-ES (covariance matrix adaptation) on the unit-cube encoding, with IPOP restarts.

The (mu/mu_w, lambda) evolution strategy with cumulative step-size adaptation and rank-one plus
rank-mu covariance updates (Hansen's tutorial, "The CMA Evolution Strategy", 2016). It learns the
shape of curved valleys, which compass and simplex searches cross only slowly. Samples outside the
unit cube are reflected inside; failures rank last. It restarts around the best or at random with a
doubled population when the step size collapses, the covariance degenerates, or a generation has not
improved for a while.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = CMAES(Space({"x": Float(-5, 5), "y": Float(-5, 5)}), seed=0)
    >>> len(tech.ask(1))
    1
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import check_settings
from perftune.search._de import reflect
from perftune.search._sequential import SequentialTechnique

if TYPE_CHECKING:
    from perftune.space import Config, Space

__all__ = ["CMAES", "CMAESSettings"]


@dataclasses.dataclass(frozen=True)
class CMAESSettings:
    """Settings of CMA-ES.

    Attributes:
        sigma0: Initial step size (fraction of the range).
        popsize: Offspring per generation (0: ``4 + floor(3 ln n)``).
        ipop_factor: Population multiplier at each restart (IPOP); 1 keeps it.
        max_popsize: Upper bound of the population after restarts.
        tol_sigma: Restart when ``sigma * sqrt(max eigenvalue)`` falls below this.
        patience: Generations without a better generation best before a restart
            (0: ``10 + ceil(30 n / lambda)``).
    """

    sigma0: float = 0.3
    popsize: int = 0
    ipop_factor: float = 2.0
    max_popsize: int = 64
    tol_sigma: float = 1e-10
    patience: int = 0

    def __post_init__(self) -> None:
        check_settings("CMAESSettings.sigma0", 0 < self.sigma0 <= 1, f"must be in (0, 1], got {self.sigma0}")
        check_settings(
            "CMAESSettings.popsize",
            self.popsize == 0 or self.popsize >= 2,
            f"must be 0 or >= 2, got {self.popsize}",
        )
        check_settings(
            "CMAESSettings.ipop_factor", self.ipop_factor >= 1, f"must be >= 1, got {self.ipop_factor}"
        )
        check_settings(
            "CMAESSettings.max_popsize", self.max_popsize >= 2, f"must be >= 2, got {self.max_popsize}"
        )
        check_settings("CMAESSettings.tol_sigma", self.tol_sigma > 0, f"must be > 0, got {self.tol_sigma}")
        check_settings("CMAESSettings.patience", self.patience >= 0, f"must be >= 0, got {self.patience}")


class CMAES(SequentialTechnique):
    """CMA-ES over the encoding, one generation per batch."""

    name: ClassVar[str] = "cma-es"
    Settings: ClassVar[type] = CMAESSettings
    settings: CMAESSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        n = max(1, space.n_dims)
        self._n = n
        self._lambda = self.settings.popsize or 4 + int(3 * math.log(n))
        self._offspring = np.zeros((0, n))

    # ------------------------------------------------------------------ state
    def _init_state(self, mean: np.ndarray, sigma: float) -> None:
        n, lam = self._n, self._lambda
        mu = lam // 2
        w = math.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
        self._w = w / w.sum()
        mueff = 1.0 / float(np.sum(self._w**2))
        self._mu, self._mueff = mu, mueff
        self._cc = (4 + mueff / n) / (n + 4 + 2 * mueff / n)
        self._cs = (mueff + 2) / (n + mueff + 5)
        self._c1 = 2 / ((n + 1.3) ** 2 + mueff)
        self._cmu = min(1 - self._c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
        self._damps = 1 + 2 * max(0.0, math.sqrt((mueff - 1) / (n + 1)) - 1) + self._cs
        self._chin = math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n))
        self._mean = mean.copy()
        self._sigma = sigma
        self._C = np.eye(n)
        self._B = np.eye(n)
        self._D = np.ones(n)
        self._pc = np.zeros(n)
        self._ps = np.zeros(n)
        self._gen = 0
        self._gen_best = math.inf
        self._stale = 0

    def _sample(self) -> list[Config]:
        z = self.rng.standard_normal((self._lambda, self._n))
        y = z @ (self._B * self._D).T
        self._offspring = np.array([reflect(self._mean + self._sigma * yi) for yi in y])
        return [self.from_vector(x[: self.space.n_dims]) for x in self._offspring]

    def _restart(self) -> list[Config]:
        s = self.settings
        if self.n_restarts > 0:
            self._lambda = min(s.max_popsize, max(self._lambda, int(round(self._lambda * s.ipop_factor))))
        center, sigma = self._restart_center(s.sigma0)
        if self.n_restarts == 1 and self.best_config is None:
            # Nothing known yet: the middle of the box, where a sigma of 0.3 covers it (the default
            # configuration often sits on a bound, where reflected samples would bias the first steps).
            center = np.full(center.size, 0.5)
        mean = np.zeros(self._n)
        mean[: center.size] = center
        self._init_state(mean, sigma)
        return self._sample()

    # ------------------------------------------------------------------ the procedure
    def _advance(self, losses: list[float] | None) -> list[Config]:
        if self.space.n_dims == 0:
            return [self.start_config()]
        if losses is None:
            return self._restart()
        self._update(np.asarray(losses, dtype=float))
        if self._should_restart():
            return self._restart()
        return self._sample()

    def _update(self, f: np.ndarray) -> None:
        n, mu = self._n, self._mu
        f = np.where(np.isfinite(f), f, np.inf)
        order = np.argsort(f, kind="stable")
        best = float(f[order[0]])
        if not math.isfinite(self._gen_best) or best < self._gen_best - 1e-12 * max(1.0, abs(self._gen_best)):
            self._gen_best, self._stale = best, 0
        else:
            self._stale += 1
        xs = self._offspring[order[:mu]]
        old = self._mean
        self._mean = self._w @ xs
        step = (self._mean - old) / self._sigma
        # C^(-1/2) step = B D^-1 B^T step
        inv_sqrt = (self._B / self._D) @ self._B.T
        self._ps = (1 - self._cs) * self._ps + math.sqrt(self._cs * (2 - self._cs) * self._mueff) * (
            inv_sqrt @ step
        )
        self._gen += 1
        norm_ps = float(np.linalg.norm(self._ps))
        hsig = norm_ps / math.sqrt(1 - (1 - self._cs) ** (2 * self._gen)) / self._chin < 1.4 + 2 / (n + 1)
        self._pc = (1 - self._cc) * self._pc + (
            hsig * math.sqrt(self._cc * (2 - self._cc) * self._mueff)
        ) * step
        ys = (xs - old) / self._sigma
        rank_mu = (ys.T * self._w) @ ys
        c1, cmu = self._c1, self._cmu
        delta = (1 - hsig) * self._cc * (2 - self._cc)
        self._C = (
            (1 - c1 - cmu) * self._C + c1 * (np.outer(self._pc, self._pc) + delta * self._C) + cmu * rank_mu
        )
        self._sigma *= math.exp(min(1.0, (self._cs / self._damps) * (norm_ps / self._chin - 1)))
        self._C = np.triu(self._C) + np.triu(self._C, 1).T
        eig, self._B = np.linalg.eigh(self._C)
        self._D = np.sqrt(np.maximum(eig, 1e-30))

    def _should_restart(self) -> bool:
        s = self.settings
        patience = s.patience or 10 + math.ceil(30 * self._n / self._lambda)
        spread = self._sigma * float(np.max(self._D))
        cond = float(np.max(self._D) / max(np.min(self._D), 1e-300)) ** 2
        return (
            spread < s.tol_sigma
            or self._stale > patience
            or cond > 1e14
            or not np.all(np.isfinite(self._C))
            or self._sigma > 1e3
        )
