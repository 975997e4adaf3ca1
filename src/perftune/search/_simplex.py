"""Nelder-Mead on the unit-cube encoding, with restarts.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = NelderMead(Space({"x": Float(-5, 5), "y": Float(-5, 5)}), seed=0)
    >>> len(tech.ask(1))
    1
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import check_settings
from perftune.search._sequential import SequentialTechnique

if TYPE_CHECKING:
    from perftune.space import Config, Space

__all__ = ["NelderMead", "NelderMeadSettings"]


@dataclasses.dataclass(frozen=True)
class NelderMeadSettings:
    """Settings of Nelder-Mead.

    Attributes:
        initial_step: Edge length of the first simplex (fraction of the range).
        alpha: Reflection coefficient.
        gamma: Expansion coefficient.
        rho: Contraction coefficient.
        sigma: Shrink coefficient.
        tolerance: Restart when the simplex is smaller than this (in the unit cube).
        patience: Restart after this many iterations without improving the simplex's best vertex
            (0: ``10 + 5 * n_dims``).
    """

    initial_step: float = 0.25
    alpha: float = 1.0
    gamma: float = 2.0
    rho: float = 0.5
    sigma: float = 0.5
    tolerance: float = 1e-9
    patience: int = 0

    def __post_init__(self) -> None:
        check_settings(
            "NelderMeadSettings.initial_step",
            0 < self.initial_step <= 1,
            f"must be in (0, 1], got {self.initial_step}",
        )
        check_settings("NelderMeadSettings.rho", 0 < self.rho < 1, f"must be in (0, 1), got {self.rho}")
        check_settings("NelderMeadSettings.sigma", 0 < self.sigma < 1, f"must be in (0, 1), got {self.sigma}")
        check_settings(
            "NelderMeadSettings.patience", self.patience >= 0, f"must be >= 0, got {self.patience}"
        )


class NelderMead(SequentialTechnique):
    """Nelder-Mead simplex search on the encoding; restarts around the best or at random."""

    name: ClassVar[str] = "nelder-mead"
    Settings: ClassVar[type] = NelderMeadSettings
    settings: NelderMeadSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        d = space.n_dims
        self._x = np.zeros((d + 1, d))
        self._f = np.zeros(d + 1)
        self._phase = "restart"
        self._probe = np.zeros(d)  # reflected point
        self._probe_f = 0.0
        self._try = np.zeros(d)  # expansion / contraction point
        self._stale = 0
        self._best_seen = np.inf

    def _cfg(self, vec: np.ndarray) -> Config:
        return self.from_vector(vec)

    def _advance(self, losses: list[float] | None) -> list[Config]:
        s = self.settings
        d = self.space.n_dims
        if d == 0:
            return [self.start_config()]
        if losses is None or self._phase == "restart":
            center, step = self._restart_center(s.initial_step)
            x = np.tile(center, (d + 1, 1))
            for i in range(d):
                up = center[i] + step
                x[i + 1, i] = up if up <= 1.0 else center[i] - step
            self._x = np.clip(x, 0.0, 1.0)
            self._stale = 0
            self._best_seen = np.inf
            self._phase = "init"
            return [self._cfg(v) for v in self._x]
        x, f = self._x, self._f
        if self._phase == "init":
            f[:] = losses
        elif self._phase == "reflect":
            fr = losses[0]
            self._probe_f = fr
            if fr < f[0]:
                self._try = np.clip(self._centroid() + s.gamma * (self._probe - self._centroid()), 0.0, 1.0)
                self._phase = "expand"
                return [self._cfg(self._try)]
            if fr < f[-2]:
                x[-1], f[-1] = self._probe, fr
            else:
                c = self._centroid()
                if fr < f[-1]:
                    self._try = np.clip(c + s.rho * (self._probe - c), 0.0, 1.0)
                else:
                    self._try = np.clip(c + s.rho * (x[-1] - c), 0.0, 1.0)
                self._phase = "contract"
                return [self._cfg(self._try)]
        elif self._phase == "expand":
            fe = losses[0]
            if fe < self._probe_f:
                x[-1], f[-1] = self._try, fe
            else:
                x[-1], f[-1] = self._probe, self._probe_f
        elif self._phase == "contract":
            fc = losses[0]
            if fc < min(self._probe_f, f[-1]):
                x[-1], f[-1] = self._try, fc
            else:
                x[1:] = x[0] + s.sigma * (x[1:] - x[0])
                self._phase = "shrink"
                return [self._cfg(v) for v in x[1:]]
        elif self._phase == "shrink":
            f[1:] = losses
        return self._iterate()

    def _centroid(self) -> np.ndarray:
        return np.asarray(self._x[:-1].mean(axis=0), dtype=float)

    def _iterate(self) -> list[Config]:
        s = self.settings
        order = np.argsort(self._f, kind="stable")
        self._x = self._x[order]
        self._f = self._f[order]
        d = self.space.n_dims
        if self._f[0] < self._best_seen:
            self._best_seen = float(self._f[0])
            self._stale = 0
        else:
            self._stale += 1
        patience = s.patience or 10 + 5 * d
        size = float(np.max(np.abs(self._x[1:] - self._x[0]))) if d else 0.0
        if size < s.tolerance or self._stale > patience or not np.isfinite(self._f[0]):
            self._phase = "restart"
            return self._advance(None)
        c = self._centroid()
        self._probe = np.clip(c + s.alpha * (c - self._x[-1]), 0.0, 1.0)
        self._phase = "reflect"
        return [self._cfg(self._probe)]
