"""Noticing that the workload shifted: a two-window rank test on the safe configuration's latency.

The detector compares a *reference* window (the ``reference_n`` latencies before the recent ones) with
the *recent* latencies: the last 5, the last 10 and the last ``window_n``. Each look is a one-sided
Mann-Whitney test with a relevance margin, on log times: "the recent latencies are slower than the
reference by more than a factor ``1 + threshold``" (and the same for faster). Shifting the recent log
times back by ``log(1 + threshold)`` makes them exchangeable with the reference's at the boundary of
that null hypothesis, so the test's level is exact whatever the latencies' distribution (heavy tails
from a loaded machine included) and conservative inside it. The critical values come from the exact
null distribution of the rank statistic. The looks (3 window lengths x 2 directions) share
``1 - confidence`` by Bonferroni, so on a stream whose latency does not move by more than the
threshold, **each observation raises a false alarm with probability at most** ``1 - confidence``: at
most ``(1 - confidence) * N`` false alarms are expected in ``N`` requests (a union bound over the
looks, which needs no independence between them; the latencies themselves are assumed exchangeable,
which a machine whose load changes breaks: a load change beyond the threshold is detected as a shift).

A latency may be only a lower bound (``observe(..., censored=True)``: the safe configuration was
killed because a candidate answered first, so it took at least as long as the candidate). In the recent
window it counts as that bound when the test asks "slower" (which can only lower the statistic) and is
left out when it asks "faster"; it is left out of the reference. Without it, a safe configuration that
became much slower, and is therefore killed in every race, would tell the detector nothing at all.
Caveat: when candidates often beat the safe configuration, the reference holds its requests that it
finished, its faster ones; the censored recent latencies are biased low in the same way, and the
threshold's margin absorbs the rest, but the stated rate is exact only for fully measured latencies.

The reference slides: it is the ``reference_n`` latencies just before the last ``window_n``, so a slow
drift (a machine's load changing gradually) moves it along. After a detection (or a
:meth:`~ShiftDetector.reset`) nothing is flagged until ``reference_n + 5`` latencies have come in: a
minimum spacing between alarms. A shift within those first latencies mixes both levels into the
reference and may go undetected (the race still adapts through promotions).

A changed input distribution and a changed machine load both show up this way; the detector cannot
tell them apart, and need not: either way the best configuration may have changed, so exploration
re-opens. A shift that moves the safe configuration's latency by less than the threshold is not
detected at all (while exploring, the race itself adapts through promotions).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from perftune.errors import PerftuneError

__all__ = ["ShiftDetector"]

_MIN_RECENT = 5  # the shortest recent window looked at
_SUFFIXES = (_MIN_RECENT, 2 * _MIN_RECENT)  # and window_n


@lru_cache(maxsize=256)
def _u_tail(m: int, n: int) -> tuple[float, ...]:
    """``tail[u] = P(U >= u)`` for the Mann-Whitney count of pairs (recent > reference), sizes m, n.

    Under exchangeability every interleaving of the m + n values is equally likely. The largest value
    is a reference one with probability m/(m+n) (it adds no pair) or a recent one (it adds m pairs):
    p(m, n, u) = m/(m+n) p(m-1, n, u) + n/(m+n) p(m, n-1, u-m).
    """
    # prev[j] is the distribution for (i - 1, j), cur[j] for (i, j); U counts recent-over-reference pairs.
    prev = [np.ones(1) for _ in range(n + 1)]  # i = 0: U = 0 for any j
    for i in range(1, m + 1):
        cur = [np.ones(1)]  # j = 0: U = 0
        for j in range(1, n + 1):
            p = np.zeros(i * j + 1)
            a = prev[j]  # the largest value is a reference one: it beats no recent value
            p[: a.size] += (i / (i + j)) * a
            b = cur[j - 1]  # the largest value is a recent one: it beats all i reference values
            p[i: i + b.size] += (j / (i + j)) * b
            cur.append(p)
        prev = cur
    dist = prev[n]
    tail = np.cumsum(dist[::-1])[::-1]
    return tuple(float(t) for t in np.minimum(tail, 1.0))


@lru_cache(maxsize=256)
def _critical_u(m: int, n: int, alpha: float) -> int:
    """The smallest u with P(U >= u) <= alpha (m * n + 1: never, when even all pairs are not rare enough)."""
    tail = _u_tail(m, n)
    for u, p in enumerate(tail):
        if p <= alpha:
            return u
    return m * n + 1


@dataclass
class ShiftDetector:
    """Change detector on a stream of latencies (seconds), with a stated false alarm rate.

    Args:
        reference_n: Latencies in the reference window (the ones before the recent window).
        window_n: The longest recent window (the last 5 and the last 10 are looked at too).
        threshold: Relative change that counts as a shift (0.5: a factor 1.5, slower or faster).
        confidence: ``1 - confidence`` bounds the probability that one observation raises a false
            alarm while the latency does not shift by more than the threshold (all looks together).

    Example:
        >>> d = ShiftDetector(reference_n=20, window_n=10)
        >>> any(d.observe(0.010 + 0.0001 * (i % 3)) for i in range(40))
        False
        >>> any(d.observe(0.020 + 0.0001 * (i % 3)) for i in range(10))
        True
        >>> d.false_alarm_rate
        0.0001
    """

    reference_n: int = 40
    window_n: int = 30
    threshold: float = 0.5
    confidence: float = 0.9999
    _obs: deque[tuple[float, bool]] = field(default_factory=deque, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("reference_n", "window_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise PerftuneError(f"ShiftDetector: {name} must be an integer >= 2, got {value!r}")
        if (isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float)
                or not 0 < self.threshold < math.inf):
            raise PerftuneError(f"ShiftDetector: threshold must be a positive number, got {self.threshold!r}")
        if (isinstance(self.confidence, bool) or not isinstance(self.confidence, int | float)
                or not 0 < self.confidence < 1):
            raise PerftuneError(f"ShiftDetector: confidence must be in (0, 1), got {self.confidence!r}")
        self._obs = deque(maxlen=self.reference_n + self.window_n)
        self._windows = sorted({min(n, self.window_n) for n in (*_SUFFIXES, self.window_n)})
        self._band = math.log1p(self.threshold)
        self._alpha = self.false_alarm_rate / (2 * len(self._windows))  # Bonferroni: windows x directions
        for n in self._windows:  # the usual critical values now (milliseconds), not while serving
            _critical_u(self.reference_n, n, self._alpha)

    @property
    def false_alarm_rate(self) -> float:
        """Probability bound of a false alarm per observation (``1 - confidence``)."""
        return round(1.0 - self.confidence, 12)

    def reset(self) -> None:
        """Start a new reference (after a promotion or a detected shift)."""
        self._obs.clear()

    def observe(self, latency_s: float, *, censored: bool = False) -> bool:
        """Add one latency; True when the workload shifted (the detector then resets itself).

        ``censored=True``: the latency is only a lower bound (the run was stopped after that long).
        """
        if not latency_s > 0 or not math.isfinite(latency_s):
            return False
        self._obs.append((math.log(latency_s), bool(censored)))  # noise on times is multiplicative
        n_recent = len(self._obs) - self.reference_n
        if n_recent < self._windows[0]:
            return False
        obs = list(self._obs)
        recent = obs[self.reference_n:]
        # The reference: the latencies measured in full (see the module's docstring for censored ones).
        reference = [x for x, c in obs[:self.reference_n] if not c]
        if len(reference) < 2:
            return False
        ref_up = sorted(reference)
        ref_down = sorted(-x for x in reference)
        for n in self._windows:
            if n > len(recent):
                break
            window = recent[-n:]
            crit = _critical_u(len(reference), n, self._alpha)
            up = sum(bisect.bisect_left(ref_up, x - self._band) for x, _ in window)
            if up >= crit:
                self.reset()
                return True
            # Faster by more than the band: -(x + band) beats -r; a censored recent latency never does.
            down = sum(bisect.bisect_left(ref_down, -x - self._band) for x, c in window if not c)
            if down >= crit:
                self.reset()
                return True
        return False
