"""The asymptotic check: how each landmark's time grows with the input size, and what that forbids.

A dispatcher learns from training inputs up to some size, but is asked about larger ones. A landmark
that is the fastest at the largest training size can still grow faster than another one (insertion
sort below a cutoff that no longer fits, a dense solve against a sparse one), and lose to it a few
sizes further on. So, for every landmark ``k`` the model picks, :func:`fit_growth` fits the growth of
every landmark's time on the training inputs where the model picks ``k`` (its *region*):
``log t = a + b log size``, one common slope ``b`` per landmark with one intercept per family, from
the two largest sizes of each family (the local growth near the largest size measured, where the
small sizes' constant costs no longer count). For an input larger than every training input of the
region, :meth:`GrowthCheck.adjust` never runs a landmark whose growth is superlinear relative to the
landmark predicted fastest at that size: when the fitted laws predict that another landmark is more
than ``margin`` faster there, and the chosen one grows faster, that other landmark runs instead.
Slopes below 1 are read as 1 (a program that reads its input grows at least linearly: a smaller
fitted slope is a fixed cost fading out). Inside the sizes measured, nothing changes.

Example:
    >>> check = GrowthCheck(max_size=[1000.0, 1000.0], fits=[[[0.0, 1.5], [1.0, 1.0]], [None, [1.0, 1.0]]])
    >>> check.adjust(0, 500.0), check.adjust(0, 10.0 ** 6), check.adjust(1, 10.0 ** 6)
    (0, 1, 1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perftune.adapt._features import AdaptError

__all__ = ["GrowthCheck", "fit_growth"]

#: A landmark is replaced only when another is predicted more than 1.5x faster. The laws come from two
#: sizes per family, and extrapolating them tenfold is not precise to 10%: at a margin of 0.1, replayed
#: on the 45 recorded tables of benchmarks/adapt.py (benchmarks/results/adapt-replay-growth.md), the
#: check changed three choices, one 6% better and two 2.6x and 17x worse (a radix hybrid replaced by
#: merge sort); at 0.25-1.0 it changed none. The blow-ups it is for (insertion sort below a cutoff that
#: no longer fits, a dense solve against a sparse one) are predicted many times slower, not 10%.
_MARGIN = 0.5


@dataclass
class GrowthCheck:
    """Per landmark the model picks: the largest training size of its region and the fitted growth laws.

    Attributes:
        max_size: ``max_size[k]``: largest training input (by size) on which the model picks ``k``.
        fits: ``fits[k][j]``: ``[a, b]`` with ``log t = a + b log size`` for landmark ``j`` over ``k``'s
            region, or None where ``j`` has no fit there (no answer on some input, or one size only).
        margin: Another landmark replaces ``k`` only when predicted more than this fraction faster.
        min_slope: Slopes are read as at least this: a program that reads its whole input grows at least
            linearly, and a smaller fitted slope is a fixed cost (allocating buckets, a factorisation's
            set-up) fading out between the two sizes, not a growth to extrapolate.
    """

    max_size: list[float]
    fits: list[list[list[float] | None]]
    margin: float = _MARGIN
    min_slope: float = 1.0

    def __post_init__(self) -> None:
        n = len(self.max_size)
        if len(self.fits) != n or any(len(row) != n for row in self.fits):
            raise AdaptError("dispatcher growth: one row of fits per landmark, one fit per landmark in it")
        for row in self.fits:
            for fit in row:
                if fit is not None and (len(fit) != 2 or not all(math.isfinite(v) for v in fit)):
                    raise AdaptError("dispatcher growth: a fit is [intercept, slope], two finite numbers")
        if not self.margin >= 0:
            raise AdaptError("dispatcher growth: margin must be >= 0")

    def adjust(self, k: int, size: float) -> int:
        """The landmark to run for an input of ``size`` that the model sent to ``k``."""
        if not size > self.max_size[k]:
            return k
        row = self.fits[k]
        mine = row[k]
        if mine is None:
            return k
        # Extrapolated from the region's largest size, with each slope read as at least min_slope.
        log_s, log_top = math.log(size), math.log(self.max_size[k])

        def predicted(fit: list[float]) -> tuple[float, float]:
            slope = max(fit[1], self.min_slope)
            return fit[0] + fit[1] * log_top + slope * (log_s - log_top), slope

        mine_log_t, mine_slope = predicted(mine)
        best, best_log_t, best_slope = k, mine_log_t, mine_slope
        for j, fit in enumerate(row):
            if fit is None or j == k:
                continue
            log_t, slope = predicted(fit)
            if log_t < best_log_t:
                best, best_log_t, best_slope = j, log_t, slope
        # Only growth may overturn the choice: beyond the sizes measured, a steeper landmark falls behind.
        if best != k and mine_slope > best_slope and mine_log_t - best_log_t > math.log1p(self.margin):
            return best
        return k

    def to_dict(self) -> dict[str, Any]:
        return {"max_size": self.max_size, "fits": self.fits, "margin": self.margin,
                "min_slope": self.min_slope}

    @classmethod
    def from_dict(cls, doc: Any, n_landmarks: int) -> GrowthCheck:
        """Parse a stored check; raises :class:`AdaptError` when malformed or sized for other landmarks."""
        try:
            check = cls(
                max_size=[float(v) for v in doc["max_size"]],
                fits=[[None if f is None else [float(v) for v in f] for f in row] for row in doc["fits"]],
                margin=float(doc.get("margin", _MARGIN)),
                min_slope=float(doc.get("min_slope", 1.0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise AdaptError(f"dispatcher growth: malformed ({type(e).__name__}: {e})") from None
        # A learned check has slopes of a few units and log-time intercepts of tens; a file with numbers far
        # beyond is hostile or corrupt (its exponentials would overflow at dispatch).
        numbers = [v for row in check.fits for f in row if f is not None for v in f]
        if any(not abs(v) <= _MAX_MAGNITUDE for v in [*numbers, check.min_slope]) or len(numbers) % 2:
            raise AdaptError(f"dispatcher growth: a fit is not [intercept, slope] with both within "
                             f"+-{_MAX_MAGNITUDE:g}")
        if not 0 <= check.margin <= _MAX_MAGNITUDE:
            raise AdaptError(
                f"dispatcher growth: margin {check.margin!r} is not within 0..{_MAX_MAGNITUDE:g}")
        if len(check.max_size) != n_landmarks:
            raise AdaptError(
                f"dispatcher growth: for {len(check.max_size)} landmarks, expected {n_landmarks}"
            )
        return check


_MAX_MAGNITUDE = 1e4


def _slope_fit(log_s: np.ndarray, log_t: np.ndarray, groups: np.ndarray) -> list[float] | None:
    """One slope with one intercept per group (each group centred on its own means); the intercept
    returned is the groups' mean, at their mean size: what an input of an unknown family would get."""
    num = den = 0.0
    for g in np.unique(groups):
        m = groups == g
        ds = log_s[m] - log_s[m].mean()
        num += float(ds @ (log_t[m] - log_t[m].mean()))
        den += float(ds @ ds)
    if den <= 1e-12:
        return None
    slope = num / den
    intercept = float(np.mean(log_t - slope * log_s))
    return [intercept, slope]


def fit_growth(
    chosen: Sequence[int],
    sizes: Sequence[float],
    T: np.ndarray,
    ok: np.ndarray,
    groups: Sequence[Any],
    *,
    margin: float = _MARGIN,
    min_slope: float = 1.0,
    bound: np.ndarray | None = None,
) -> GrowthCheck:
    """Fit the growth laws of every landmark over each landmark's region (see the module docstring).

    Args:
        chosen: The landmark the model picks on each training input.
        sizes: The size of each training input (positive).
        T: ``(n_inputs, n_landmarks)`` median seconds.
        ok: ``(n_inputs, n_landmarks)``: the landmark answered there (correct, not stopped).
        groups: Family of each training input; the slope is fitted within families.
        margin: See :class:`GrowthCheck`.
        min_slope: See :class:`GrowthCheck`.
        bound: ``(n_inputs, n_landmarks)``: the time is a lower bound (a run stopped as hopeless). Such a
            time counts for the landmark the region chose (it can only understate that landmark's growth,
            and so keep it), never for a landmark that would replace it.
    """
    chosen_a = np.asarray(chosen, dtype=int)
    size_a = np.asarray(sizes, dtype=float)
    group_a = np.asarray([str(g) for g in groups])
    n_landmarks = T.shape[1]
    max_size = [0.0] * n_landmarks
    fits: list[list[list[float] | None]] = [[None] * n_landmarks for _ in range(n_landmarks)]
    for k in range(n_landmarks):
        region = np.flatnonzero(chosen_a == k)
        if region.size == 0:
            continue
        max_size[k] = float(size_a[region].max())
        # Per family of the region, its inputs at its two largest sizes: the growth near the top.
        rows: list[int] = []
        for g in np.unique(group_a[region]):
            members = region[group_a[region] == g]
            top = np.unique(size_a[members])[-2:]
            if top.size == 2:
                rows.extend(int(i) for i in members if size_a[i] in top)
        if not rows:
            continue
        idx = np.asarray(rows)
        log_s = np.log(np.maximum(size_a[idx], 1e-300))
        for j in range(n_landmarks):
            usable = ok[idx, j] | (bound[idx, j] if bound is not None and j == k else False)
            if not usable.all() or not (T[idx, j] > 0).all():
                continue
            fits[k][j] = _slope_fit(log_s, np.log(T[idx, j]), group_a[idx])
    return GrowthCheck(max_size=max_size, fits=fits, margin=margin, min_slope=min_slope)
