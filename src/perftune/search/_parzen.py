"""Parzen search: proposals where good results are dense and the others are not (the idea of TPE).

The results told so far are split by rank: the best ``gamma`` fraction are *good*, the rest (failures
among them, as the worst) *other*. For every parameter, independently, two densities over its values
are estimated: the good results' and the others', each a histogram smoothed by a Gaussian kernel along
the parameter's order (unordered choices are not smoothed) plus one pseudo-result spread evenly, so
that no value has density zero. Candidates are drawn from the good densities, and the valid, new one
whose ratio good / other is largest is proposed. This is what Bergstra et al.'s tree-structured Parzen
estimator does, written for the finite, ordered parameters of kernel and compiler spaces.

Parameters with at most ``max_bins`` values are estimated value by value (in their declared order);
larger ranges and real numbers in ``max_bins`` equal bins of their unit-interval encoding (so a
``LogInt`` or ``Pow2`` is binned on its log scale), a proposal drawing uniformly inside its bin.
Parameters without a one-number encoding (permutations, sequences) are copied from a random sample.

The counts are kept incrementally, so a proposal costs ``O(good results + parameters x bins)``
whatever the number of results.

Example:
    >>> from perftune.space import Choice, Int, Space
    >>> tech = Parzen(Space({"x": Int(0, 50), "algo": Choice(["a", "b", "c"])}), seed=0)
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
from perftune.trial import Status

if TYPE_CHECKING:
    from perftune.space import Config, Space
    from perftune.trial import Trial

__all__ = ["Parzen", "ParzenSettings", "counts_any"]


@dataclasses.dataclass(frozen=True)
class ParzenSettings:
    """Settings of the Parzen search.

    Attributes:
        gamma: Fraction of the results counted as good (at least one).
        n_candidates: Candidates drawn from the good densities per proposal.
        min_results: Random proposals until this many results are known.
        max_bins: Parameters with more values (and real numbers) are estimated in this many bins.
    """

    gamma: float = 0.25
    n_candidates: int = 32
    min_results: int = 6
    max_bins: int = 64

    def __post_init__(self) -> None:
        check_settings("ParzenSettings.gamma", 0.0 < self.gamma < 1.0, f"must be in (0, 1), got {self.gamma}")
        check_settings("ParzenSettings.n_candidates", self.n_candidates >= 1,
                       f"must be >= 1, got {self.n_candidates}")
        check_settings("ParzenSettings.min_results", self.min_results >= 1,
                       f"must be >= 1, got {self.min_results}")
        check_settings("ParzenSettings.max_bins", self.max_bins >= 2, f"must be >= 2, got {self.max_bins}")


@dataclasses.dataclass
class _Axis:
    """How one parameter is counted: its bins, and the values of the bins when they are values."""

    name: str
    param: Any
    n_bins: int
    values: list[Any] | None  # bin i is values[i]; None: bins of the unit-interval encoding
    ordered: bool
    index: dict[Any, int] | None  # value -> bin, for ``values``


def counts_any(space: Space) -> bool:
    """Whether the Parzen search has a parameter of ``space`` to estimate (one with a one-number
    encoding: not only permutations or sequences, which it can only sample at random)."""
    return any(p.n_dims == 1 for p in space.params.values())


class Parzen(BaseTechnique):
    """Independent Parzen densities of the good and the other results, per parameter (TPE's idea)."""

    name: ClassVar[str] = "parzen"
    Settings: ClassVar[type] = ParzenSettings
    state_exclude: ClassVar[frozenset[str]] = frozenset({"space", "settings", "_axes", "_kernels"})

    def __init__(
        self, space: Space, *, seed: int | None = None, settings: ParzenSettings | None = None
    ) -> None:
        super().__init__(space, seed=seed, settings=settings)
        self._axes: list[_Axis] = []
        self._kernels: dict[tuple[int, float], np.ndarray] = {}
        self._build_axes()
        #: Bins of every counted result (-1: parameter inactive or not counted), one row per result.
        self._rows = np.zeros((64, len(self._axes)), dtype=np.int32)
        self._n_rows = 0
        #: ``(loss, row)`` of every counted result, sorted (failures as +inf, in the order told).
        self._ranked: list[tuple[float, int]] = []
        self._totals = [np.zeros(a.n_bins) for a in self._axes]

    def _build_axes(self) -> None:
        from perftune.space import Choice, Ordinal

        max_bins = self.settings.max_bins
        for name, param in self.space.params.items():
            if param.n_dims != 1:
                continue
            unordered = isinstance(param, Choice) and not isinstance(param, Ordinal)
            n = param.cardinality()
            if n is not None and n <= max_bins:
                values = list(param.iter_values())
                index = {v: i for i, v in enumerate(values)}
                self._axes.append(_Axis(name, param, len(values), values, not unordered, index))
            else:
                self._axes.append(_Axis(name, param, max_bins, None, not unordered, None))

    def _after_load(self) -> None:
        self._axes, self._kernels = [], {}
        self._build_axes()

    # ------------------------------------------------------------------ counting
    def _bin(self, axis: _Axis, config: Config) -> int:
        if axis.name not in config:
            return -1
        value = config[axis.name]
        if axis.index is not None:
            try:
                return axis.index.get(value, -1)
            except TypeError:
                return -1
        try:
            u = float(axis.param.encode1(value))
        except Exception:
            return -1
        return min(max(int(u * axis.n_bins), 0), axis.n_bins - 1)

    def _learn(self, trial: Trial, loss: float | None) -> None:
        if trial.status is Status.CANCELLED:
            return
        i = self._n_rows
        if i == len(self._rows):
            self._rows = np.concatenate([self._rows, np.zeros_like(self._rows)])
        for j, axis in enumerate(self._axes):
            b = self._bin(axis, trial.config)
            self._rows[i, j] = b
            if b >= 0:
                self._totals[j][b] += 1.0
        self._n_rows = i + 1
        bisect.insort(self._ranked, (math.inf if loss is None else float(loss), i))

    def _kernel(self, n_bins: int, bandwidth: float) -> np.ndarray:
        """Rows: the smoothed mass of one result in each bin (each row sums to 1)."""
        key = (n_bins, round(bandwidth, 2))
        kern = self._kernels.get(key)
        if kern is None:
            grid = np.arange(n_bins, dtype=float)
            kern = np.exp(-0.5 * ((grid[None, :] - grid[:, None]) / key[1]) ** 2)
            kern /= kern.sum(axis=1, keepdims=True)
            if len(self._kernels) > 256:
                self._kernels.clear()
            self._kernels[key] = kern
        return kern

    def _density(self, axis: _Axis, counts: np.ndarray) -> np.ndarray:
        n = float(counts.sum())
        k = axis.n_bins
        if axis.ordered and k > 2 and n > 0:
            bandwidth = max(0.6, (k - 1) / (2.0 * math.sqrt(n) + 2.0))
            counts = counts @ self._kernel(k, bandwidth)
        density: np.ndarray = counts + 1.0 / k
        return density / float(density.sum())

    # ------------------------------------------------------------------ proposing
    def _propose(self) -> Config | None:
        from perftune.space import Config

        n = len(self._ranked)
        if n < self.settings.min_results or not self._axes:
            return self.space.sample(self.rng, 1)[0]
        n_good = max(1, math.ceil(self.settings.gamma * n))
        good_rows = self._rows[[i for _, i in self._ranked[:n_good]]]
        n_cand = self.settings.n_candidates
        self.work_done += n_cand  # counted work: one unit per candidate drawn and scored
        base = dict(self.space.sample(self.rng, 1)[0])
        candidates = [dict(base) for _ in range(n_cand)]
        score = np.zeros(n_cand)
        for j, axis in enumerate(self._axes):
            col = good_rows[:, j]
            good = np.bincount(col[col >= 0], minlength=axis.n_bins).astype(float)
            other = self._totals[j] - good
            p_good, p_other = self._density(axis, good), self._density(axis, other)
            bins = self.rng.choice(axis.n_bins, size=n_cand, p=p_good)
            score += np.log(p_good[bins]) - np.log(p_other[bins])
            if axis.values is not None:
                for cand, b in zip(candidates, bins, strict=True):
                    cand[axis.name] = axis.values[b]
            else:
                u = (bins + self.rng.random(n_cand)) / axis.n_bins
                for cand, x in zip(candidates, u, strict=True):
                    cand[axis.name] = axis.param.decode([float(x)])
        order = np.argsort(-score, kind="stable")
        for i in order:
            config = Config(candidates[int(i)])
            if self.space.is_valid(config) and self.is_new(config):
                return config
        return Config(candidates[int(order[0])])
