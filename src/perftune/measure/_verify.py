"""Budgeted verification: spend an expensive check on the candidates most likely to be wrong.

Cheap checks (comparing the output with the default configuration's) run on every candidate. An
expensive check (a sanitizer build, extra inputs, repeated runs) runs on the candidates that a small
online model ranks riskiest, within a budget given as a fraction of the candidates; the potential
winner is always checked. The model is a logistic regression over four features, updated from the
outcome of every expensive check:

* ``extreme``: how close the configuration lies to the edges of the space (encoded in [0, 1]);
* ``speedup``: how implausibly much better than the best so far it measured (log ratio, clipped);
* ``neighbours``: the failure rate of nearby configurations (failed or caught, distance-weighted);
* ``technique``: the failure rate of the technique that proposed it (when the driver says).

Example:
    >>> import numpy as np
    >>> from perftune.measure import BudgetedVerifier
    >>> verifier = BudgetedVerifier(budget=0.1, seed=0)
    >>> x = verifier.features(np.array([0.99, 0.01]), speedup=1.0)
    >>> isinstance(verifier.should_check(x), bool)
    True
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["FEATURES", "BudgetedVerifier", "RiskModel"]

FEATURES = ("extreme", "speedup", "neighbours", "technique")

_EPS = 1e-9  # slack for credit summed from float budgets


class RiskModel:
    """Online logistic regression: probability that a candidate is wrong, from its risk features.

    Starts from a prior (every feature raises the risk) and learns from each expensive check.

    Example:
        >>> m = RiskModel()
        >>> m.score(np.array([1.0, 0.0, 1.0, 0.0])) > m.score(np.zeros(4))
        True
    """

    def __init__(
        self, prior: Sequence[float] = (1.5, 1.0, 4.0, 2.0), bias: float = -3.0, learning_rate: float = 0.3
    ) -> None:
        self.weights = np.asarray(prior, dtype=float).copy()
        self.bias = float(bias)
        self.learning_rate = learning_rate

    def score(self, x: np.ndarray) -> float:
        z = float(self.bias + self.weights @ x)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def update(self, x: np.ndarray, wrong: bool) -> None:
        p = self.score(x)
        g = (1.0 if wrong else 0.0) - p
        self.weights += self.learning_rate * g * x
        self.bias += self.learning_rate * g * 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.tolist(), "bias": self.bias, "learning_rate": self.learning_rate}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RiskModel:
        m = cls(d["weights"], d["bias"], d["learning_rate"])
        return m


class BudgetedVerifier:
    """Decides, candidate by candidate, which ones get the expensive check.

    Contract: of ``n`` candidates asked about, :meth:`should_check` says yes to a fraction
    ``budget`` of them: the number checked lies in ``(n * budget - max(reserve, 1), n * budget]``,
    so budget 1.0 checks every candidate, 0.9 checks 90% of them and 0 checks none. (A caller may check
    more, such as the potential winner, outside this budget.)

    Each candidate earns ``budget`` checks of credit. A check is spent on a candidate whose risk is
    in the top ``budget`` fraction of the recent candidates; credit that is not spent that way is
    saved, up to ``reserve`` checks, for the riskiest candidates. Once the reserve is full, the next
    candidate is checked whatever its risk, so that credit is never lost: it stays below
    ``max(reserve, 1)``. State is small and bounded (recent windows), and serialisable with
    :meth:`to_dict` so that worker processes can share it through a file.

    Args:
        budget: Fraction of candidates that get the expensive check (0.1 = 10%).
        window: How many recent candidates the quantile and the neighbour rates look at.
        reserve: How many checks of unspent credit are saved up for the riskiest candidates.
        seed: Random tie-breaking.

    Example:
        >>> v = BudgetedVerifier(budget=0.5, seed=1)
        >>> v.should_check(v.features(np.array([0.5]), speedup=1.0)) in (True, False)
        True
    """

    def __init__(
        self, budget: float = 0.1, *, window: int = 200, reserve: float = 4.0, seed: int = 0
    ) -> None:
        if not 0 <= budget <= 1:
            raise ValueError(f"verification budget must be a fraction in [0, 1], got {budget}")
        self.budget = budget
        self.window = window
        self.reserve = reserve
        self.model = RiskModel()
        self.credit = 0.0
        self.n_seen = 0
        self.n_checked = 0
        self.n_caught = 0
        self._scores: deque[float] = deque(maxlen=50)
        self._points: deque[tuple[list[float], float]] = deque(maxlen=window)  # (encoding, 1.0 if bad)
        self._technique: dict[str, list[int]] = {}  # name -> [n_bad, n]
        self._rng = np.random.default_rng(seed)

    # -- features -------------------------------------------------------------------------------
    def features(
        self, encoding: np.ndarray, *, speedup: float | None = None, technique: str | None = None
    ) -> np.ndarray:
        """Risk features of one candidate (see the module docstring).

        Args:
            encoding: The configuration encoded in the unit cube (``space.encode(config)``).
            speedup: How much better it measured than the best so far (incumbent value / its value
                when minimising; > 1 = a jump), when known. Large jumps are implausible.
            technique: Who proposed it, when known.
        """
        enc = np.asarray(encoding, dtype=float)
        extreme = float(np.mean(np.abs(enc - 0.5) * 2.0) ** 2) if enc.size else 0.0
        s = 0.0 if speedup is None or speedup <= 0 else max(0.0, min(2.0, math.log(speedup)))
        neighbours = 0.0
        if self._points:
            pts = np.asarray([p for p, _ in self._points], dtype=float)
            bad = np.asarray([b for _, b in self._points], dtype=float)
            if pts.shape[1] == enc.size:
                dist = np.sqrt(np.mean((pts - enc) ** 2, axis=1))
                w = np.exp(-((dist / 0.15) ** 2))
                if w.sum() > 1e-9:
                    # Shrink towards zero when few neighbours are known.
                    neighbours = float((w * bad).sum() / (w.sum() + 1.0))
        tech = 0.0
        if technique and technique in self._technique:
            n_bad, n = self._technique[technique]
            tech = (n_bad + 0.0) / (n + 5.0)
        return np.array([extreme, s, neighbours, tech])

    # -- decisions ------------------------------------------------------------------------------
    def should_check(self, x: np.ndarray) -> bool:
        """Whether the candidate with features ``x`` gets the expensive check (spends credit if so)."""
        self.n_seen += 1
        self.credit += self.budget
        score = self.model.score(x) + 1e-9 * float(self._rng.random())
        recent = list(self._scores)
        self._scores.append(score)
        if self.credit < 1.0 - _EPS:  # (ten budgets of 0.1 add up to 0.999...)
            return False
        # Credit is saved up (to a reserve) for the riskiest candidates. A full reserve is spent on
        # this candidate whatever its risk: saving more would leave the budget unspent for good.
        if len(recent) < 5 or self.budget >= 1.0 or self.credit >= self.reserve - _EPS:
            threshold = -math.inf
        else:
            threshold = float(np.quantile(recent, 1.0 - self.budget))
        if score >= threshold:
            self.credit -= 1.0
            self.n_checked += 1
            return True
        return False

    def record(
        self,
        encoding: np.ndarray,
        *,
        bad: bool,
        x: np.ndarray | None = None,
        checked: bool = False,
        technique: str | None = None,
    ) -> None:
        """Tell the verifier what became of a candidate.

        Args:
            encoding: Its unit-cube encoding.
            bad: It failed (crash, cheap check) or the expensive check caught it.
            x: Its features, when it was expensively checked (the model learns from those).
            checked: It got the expensive check.
            technique: Who proposed it.
        """
        if checked or bad:  # an unchecked candidate that passed the cheap checks proves nothing
            self._points.append(([float(v) for v in np.asarray(encoding, dtype=float)], 1.0 if bad else 0.0))
        if checked and x is not None:
            self.model.update(np.asarray(x, dtype=float), bad)
            if bad:
                self.n_caught += 1
        if technique:
            stats = self._technique.setdefault(technique, [0, 0])
            stats[0] += int(bad)
            stats[1] += 1

    # -- persistence ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "window": self.window,
            "reserve": self.reserve,
            "model": self.model.to_dict(),
            "credit": self.credit,
            "n_seen": self.n_seen,
            "n_checked": self.n_checked,
            "n_caught": self.n_caught,
            "scores": list(self._scores),
            "points": [[p, b] for p, b in self._points],
            "technique": self._technique,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, seed: int = 0) -> BudgetedVerifier:
        v = cls(d["budget"], window=d["window"], reserve=d["reserve"], seed=seed)
        v.model = RiskModel.from_dict(d["model"])
        v.credit, v.n_seen, v.n_checked, v.n_caught = d["credit"], d["n_seen"], d["n_checked"], d["n_caught"]
        # A state saved before credit was kept under the reserve may hold hundreds of checks of it;
        # spending them all at once would check every candidate for a long while.
        v.credit = min(float(v.credit), max(v.reserve, 1.0))
        v._scores.extend(d["scores"])
        v._points.extend((p, b) for p, b in d["points"])
        v._technique = {k: list(val) for k, val in d["technique"].items()}
        return v
