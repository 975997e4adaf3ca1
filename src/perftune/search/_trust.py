"""Trust-region search with a quadratic model around the best configuration.

Derivative-free trust-region methods (Powell's NEWUOA and BOBYQA, Conn, Scheinberg and Vicente's
book) fit a quadratic to the results near the incumbent and step to the model's minimum inside a
box of radius ``r``; the radius grows after a step that improved the best and shrinks after one that
did not. Here the model is a least-squares fit on the unit-cube encoding to the results nearest the
best configuration (a full quadratic up to ``max_full_dims`` dimensions, a separable one above), and
its minimum is found among random points of the box and the model's stationary point. On smooth
problems most of its steps improve the best, which is what an ensemble's credit rewards; curved
valleys are followed because the model carries the cross terms.

Example:
    >>> from perftune.space import Float, Space
    >>> tech = TrustRegion(Space({"x": Float(-5, 5), "y": Float(-5, 5)}), seed=0)
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, check_settings

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["TrustRegion", "TrustRegionSettings"]


@dataclasses.dataclass(frozen=True)
class TrustRegionSettings:
    """Settings of the trust-region search.

    Attributes:
        radius0: First radius (max-norm, fraction of the range), and the radius after a restart.
        min_radius: Restart (radius back to ``radius0``) when the radius falls below this.
        max_radius: Largest radius.
        grow: Radius factor after an own proposal improved the best.
        shrink: Radius factor after one did not.
        candidates: Random points of the box on which the model is minimised.
        max_full_dims: Up to this many dimensions the model has all cross terms.
        memory: Results kept for fitting (the most recent successes).
    """

    radius0: float = 0.1
    min_radius: float = 1e-9
    max_radius: float = 0.5
    grow: float = 2.0
    shrink: float = 0.5
    candidates: int = 256
    max_full_dims: int = 8
    memory: int = 1024

    def __post_init__(self) -> None:
        check_settings(
            "TrustRegionSettings.radius0", 0 < self.radius0 <= 1, f"must be in (0, 1], got {self.radius0}"
        )
        check_settings(
            "TrustRegionSettings.min_radius",
            0 < self.min_radius < self.radius0,
            f"must be in (0, radius0), got {self.min_radius}",
        )
        check_settings(
            "TrustRegionSettings.max_radius",
            self.radius0 <= self.max_radius <= 1,
            f"must be in [radius0, 1], got {self.max_radius}",
        )
        check_settings("TrustRegionSettings.grow", self.grow >= 1, f"must be >= 1, got {self.grow}")
        check_settings(
            "TrustRegionSettings.shrink", 0 < self.shrink < 1, f"must be in (0, 1), got {self.shrink}"
        )
        check_settings(
            "TrustRegionSettings.candidates", self.candidates >= 1, f"must be >= 1, got {self.candidates}"
        )
        check_settings("TrustRegionSettings.memory", self.memory >= 8, f"must be >= 8, got {self.memory}")


def _features(x: np.ndarray, full: bool) -> np.ndarray:
    """Quadratic features of the rows of ``x``: 1, x, x^2 and (when ``full``) the cross products."""
    cols = [np.ones((x.shape[0], 1)), x, x * x]
    if full and x.shape[1] > 1:
        i, j = np.triu_indices(x.shape[1], k=1)
        cols.append(x[:, i] * x[:, j])
    return np.hstack(cols)


class TrustRegion(BaseTechnique):
    """Quadratic-model trust-region steps from the best configuration (see the module docstring)."""

    name: ClassVar[str] = "trust-region"
    Settings: ClassVar[type] = TrustRegionSettings
    settings: TrustRegionSettings

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self.radius = self.settings.radius0
        self._x: list[np.ndarray] = []
        self._y: list[float] = []
        self.n_restarts = 0

    def _learn(self, trial: Trial, loss: float | None) -> None:
        s = self.settings
        if self.is_mine(trial.config):
            self.radius *= s.grow if self.improved else s.shrink
            self.radius = min(self.radius, s.max_radius)
            if self.radius < s.min_radius:
                self.radius = s.radius0
                self.n_restarts += 1
        if loss is None or not math.isfinite(loss) or self.space.n_dims == 0:
            return
        self._x.append(np.asarray(self.space.encode(trial.config), dtype=float))
        self._y.append(float(loss))
        if len(self._x) > s.memory:
            del self._x[0], self._y[0]

    def _propose(self) -> Config | None:
        if self.best_config is None or self.space.n_dims == 0:
            return self.space.sample(self.rng, 1)[0]
        s = self.settings
        d = self.space.n_dims
        center = np.asarray(self.space.encode(self.best_config), dtype=float)
        lo = np.clip(center - self.radius, 0.0, 1.0)
        hi = np.clip(center + self.radius, 0.0, 1.0)
        box = lo + (hi - lo) * self.rng.random((s.candidates, d))
        full = d <= s.max_full_dims
        n_coef = 1 + 2 * d + (d * (d - 1) // 2 if full else 0)
        if len(self._x) < n_coef + 1:
            return self.from_vector(box[0])
        x = np.asarray(self._x)
        y = np.asarray(self._y)
        # The results nearest the centre, scaled by the radius so the fit is well conditioned.
        dist = np.max(np.abs(x - center), axis=1)
        near = np.argsort(dist, kind="stable")[: max(2 * n_coef, n_coef + 4)]
        scale = max(float(dist[near].max()), 1e-12)
        xs = (x[near] - center) / scale
        ys = y[near]
        ys = (ys - ys.min()) / max(float(np.ptp(ys)), 1e-300)
        coef, *_ = np.linalg.lstsq(_features(xs, full), ys, rcond=None)
        cand = (box - center) / scale
        stationary = self._stationary(coef, d, full)
        if stationary is not None:
            cand = np.vstack([cand, np.clip(stationary, (lo - center) / scale, (hi - center) / scale)])
        pred = _features(cand, full) @ coef
        best = cand[int(np.argmin(pred))]
        return self.from_vector(center + best * scale)

    @staticmethod
    def _stationary(coef: np.ndarray, d: int, full: bool) -> np.ndarray | None:
        """The quadratic's stationary point when its Hessian is positive definite, else None."""
        g = coef[1 : 1 + d]
        h = np.diag(2.0 * coef[1 + d : 1 + 2 * d])
        if full and d > 1:
            i, j = np.triu_indices(d, k=1)
            h[i, j] = h[j, i] = coef[1 + 2 * d :]
        try:
            if np.min(np.linalg.eigvalsh(h)) <= 0:
                return None
            return np.asarray(-np.linalg.solve(h, g), dtype=float)
        except np.linalg.LinAlgError:
            return None
