"""ParEGO: the surrogate model of :class:`~perftune.search.ModelBased` on random Chebyshev scalarisations.

Knowles' ParEGO (2006) with perftune's tree-ensemble model: for each round a weight vector ``w`` is
drawn uniformly from the simplex, every known loss vector is normalised to ``[0, 1]`` by the ideal and
nadir points of the results so far, and scalarised with the augmented Chebyshev function

    s(f) = max_k w_k f_k + rho * sum_k w_k f_k

(every Pareto-optimal point minimises ``s`` for some ``w``, also on non-convex fronts). A fresh
``model`` technique is told those scalar losses and proposes ``per_weight`` configurations by expected
improvement; infeasible and failed trials are told as failures, so the model learns to avoid them.

Told no objectives (a single-objective run), the scalarisation is the loss itself.

Example:
    >>> from perftune.space import Float, Space
    >>> from perftune.search import Objectives
    >>> tech = ParEGO(Space({"x": Float(0, 1)}), seed=0)
    >>> tech.set_objectives(Objectives(("f1", "f2"), ("min", "max")))
    >>> len(tech.ask(2))
    2
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from perftune.search._base import BaseTechnique, check_settings
from perftune.search._objectives import Objectives
from perftune.search._pareto import pareto_front
from perftune.trial import Status

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["ParEGO", "ParEGOSettings", "chebyshev"]


def chebyshev(normalised: np.ndarray, weights: np.ndarray, rho: float = 0.05) -> np.ndarray:
    """Augmented Chebyshev scalarisation of rows of normalised losses (lower is better).

    Example:
        >>> chebyshev(np.array([[0.2, 0.6], [0.5, 0.5]]), np.array([0.5, 0.5])).round(3).tolist()
        [0.32, 0.275]
    """
    weighted = normalised * weights
    return np.asarray(weighted.max(axis=1) + rho * weighted.sum(axis=1), dtype=float)


@dataclasses.dataclass(frozen=True)
class ParEGOSettings:
    """Settings of ParEGO.

    Attributes:
        window: Most recent results the model is fitted on (plus the current Pareto front).
        min_points: Random proposals until this many successful results are known.
        per_weight: Proposals made from one weight vector before the next is drawn.
        rho: Weight of the augmentation term of the Chebyshev function.
        n_trees: Trees of the model.
        n_candidates: Random candidates scored per fit.
    """

    window: int = 128
    min_points: int = 8
    per_weight: int = 2
    rho: float = 0.05
    n_trees: int = 16
    n_candidates: int = 200

    def __post_init__(self) -> None:
        for name in ("window", "per_weight", "n_trees", "n_candidates"):
            v = getattr(self, name)
            check_settings(f"ParEGOSettings.{name}", v >= 1, f"must be >= 1, got {v}")
        check_settings("ParEGOSettings.min_points", self.min_points >= 2,
                       f"must be >= 2, got {self.min_points}")
        check_settings("ParEGOSettings.rho", self.rho >= 0, f"must be >= 0, got {self.rho}")


class ParEGO(BaseTechnique):
    """Random-weight Chebyshev scalarisation of the surrogate model (Knowles' ParEGO).

    Attributes:
        objectives: What is optimised (None until the driver calls :meth:`set_objectives`).
        n_weights: Weight vectors drawn so far.
    """

    name: ClassVar[str] = "parego"
    Settings: ClassVar[type] = ParEGOSettings
    settings: ParEGOSettings
    decide_cost_hint_s: ClassVar[float | None] = 0.03

    def __init__(self, space: Space, *, seed: int | None = None, settings: Any = None) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self.objectives: dict[str, Any] | None = None
        self._objectives: Objectives | None = None
        # (trial, loss vector or None for a failure/infeasible result), most recent last.
        self._recent: deque[tuple[Trial, tuple[float, ...] | None]] = deque(maxlen=self.settings.window)
        self._front: list[tuple[Trial, tuple[float, ...]]] = []
        self._n_ok = 0
        self._pool: list[Config] = []
        self.n_weights = 0

    state_exclude: ClassVar[frozenset[str]] = BaseTechnique.state_exclude | {"_objectives"}

    def _after_load(self) -> None:
        self._objectives = None if self.objectives is None else Objectives.from_dict(self.objectives)

    def set_objectives(self, objectives: Objectives) -> None:
        """Scalarise these objectives (see :class:`perftune.search.MultiObjectiveAware`)."""
        self._objectives = objectives
        self.objectives = objectives.to_dict()

    def _vector(self, trial: Trial, loss: float | None) -> tuple[float, ...] | None:
        objectives = self._objectives
        if objectives is None:
            return None if loss is None else (loss,)
        if not objectives.feasible(trial.metrics):
            return None
        return objectives.losses(trial)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        if trial.status is Status.CANCELLED:
            return
        vector = self._vector(trial, loss)
        self._recent.append((trial, vector))
        if vector is None:
            return
        self._n_ok += 1
        front = self._front
        if any(all(a <= b for a, b in zip(v, vector, strict=True)) for _, v in front):
            return  # dominated by (or equal to) a member
        front[:] = [(t, v) for t, v in front if not all(a <= b for a, b in zip(vector, v, strict=True))]
        front.append((trial, vector))
        if len(front) > 4 * self.settings.window:
            keep = pareto_front([v for _, v in front])
            front[:] = [front[i] for i in keep][-4 * self.settings.window:]

    def _refill(self) -> None:
        """Draw a weight vector, scalarise what is known, and let a fresh model propose from it."""
        from perftune.search._model import ModelBased, ModelSettings

        s = self.settings
        data: dict[Config, tuple[Trial, tuple[float, ...] | None]] = {}
        for trial, vector in self._recent:
            data[trial.config] = (trial, vector)
        for trial, vector in self._front:
            data[trial.config] = (trial, vector)
        ok = np.array([v for _, v in data.values() if v is not None], dtype=float)
        lo, hi = ok.min(axis=0), ok.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        m = ok.shape[1]
        weights = self.rng.dirichlet(np.ones(m)) if m > 1 else np.ones(1)
        self.n_weights += 1
        model = ModelBased(self.space, seed=int(self.rng.integers(2**31 - 1)),
                           settings=ModelSettings(window=len(data) + 1, n_best=32, min_points=2, p_random=0.0,
                                                  pool=s.per_weight, n_trees=s.n_trees,
                                                  n_candidates=s.n_candidates))
        told = []
        for trial, vector in data.values():
            if vector is None:
                told.append(dataclasses.replace(trial, status=Status.FAILED, loss=None))
            else:
                scalar = float(chebyshev(((np.array(vector) - lo) / span)[None, :], weights, s.rho)[0])
                told.append(dataclasses.replace(trial, loss=scalar))
        model.tell(told)
        w0 = model.work_done
        self._pool = model.ask(s.per_weight)
        self.work_done += model.work_done - w0
        self.n_errors += model.n_errors

    def _propose(self) -> Config | None:
        if self._n_ok < self.settings.min_points:
            if self.n_asked == 0:
                return self.start_config()
            return self.space.sample(self.rng, 1)[0]
        while self._pool:
            config = self._pool.pop(0)
            if self.is_new(config):
                return config
        self._refill()
        return self._pool.pop(0) if self._pool else self.space.sample(self.rng, 1)[0]
