"""Noticing that the workload shifted: windowed statistics of the safe configuration's latency.

The detector keeps a reference window (the first ``reference_n`` latencies after the last reset) and
a sliding recent window (the last ``window_n``). From the fifth recent latency on, every observation
compares the reference with the last 5, the last 10 and the whole recent window by
Welch's interval on log times (as :func:`perftune.measure.speedup_ci`, with the reference's statistics
computed once, since this runs on every request; Bonferroni over the three); a shift is declared when
a whole interval says the recent latencies are slower, or faster, by more than ``threshold``. A
drastic shift (a configuration that became 10x slower) is caught within a handful of requests, before
it dominates the window; a modest one once the window holds enough of it. A changed input
distribution and a changed machine load both show up this way; the detector cannot tell them apart,
and need not: either way the best configuration may have changed, so exploration re-opens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from perftune.errors import PerftuneError

__all__ = ["ShiftDetector"]

_MIN_RECENT = 5  # fewer recent latencies than this say too little about their spread


def _mean_var(xs: list[float]) -> tuple[float, float]:
    # statistics.variance is exact (fractions) and costs ~50x more: this runs on every request.
    n = len(xs)
    mean = math.fsum(xs) / n
    return mean, math.fsum((x - mean) ** 2 for x in xs) / (n - 1)


def _t_quantile(p: float, df: float) -> float:
    from scipy.special import stdtrit  # the inverse Student t CDF, without scipy.stats' import cost

    return float(stdtrit(df, p))


@dataclass
class ShiftDetector:
    """Change detector on a stream of latencies (seconds).

    Args:
        reference_n: Latencies in the reference window.
        window_n: Latencies in the recent window.
        threshold: Relative change that counts as a shift (0.5: a factor 1.5, slower or faster).
        confidence: Confidence of each look (high: a false alarm re-opens exploration for nothing).

    Example:
        >>> d = ShiftDetector(reference_n=20, window_n=10)
        >>> any(d.observe(0.010 + 0.0001 * (i % 3)) for i in range(40))
        False
        >>> any(d.observe(0.020 + 0.0001 * (i % 3)) for i in range(10))
        True
    """

    reference_n: int = 60
    window_n: int = 30
    threshold: float = 0.5
    confidence: float = 0.999
    _reference: list[float] = field(default_factory=list, init=False, repr=False)
    _recent: deque[float] = field(default_factory=deque, init=False, repr=False)
    _ref_stats: tuple[float, float] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("reference_n", "window_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise PerftuneError(f"ShiftDetector: {name} must be an integer >= 2, got {value!r}")
        if not isinstance(self.threshold, int | float) or self.threshold <= 0:
            raise PerftuneError(f"ShiftDetector: threshold must be a positive number, got {self.threshold!r}")
        if not isinstance(self.confidence, int | float) or not 0 < self.confidence < 1:
            raise PerftuneError(f"ShiftDetector: confidence must be in (0, 1), got {self.confidence!r}")
        self._recent = deque(maxlen=self.window_n)
        _t_quantile(0.975, 10.0)  # import scipy now, not in the middle of serving a request

    def reset(self) -> None:
        """Start a new reference (after a promotion or a detected shift)."""
        self._reference.clear()
        self._recent.clear()
        self._ref_stats = None

    def observe(self, latency_s: float) -> bool:
        """Add one latency; True when the workload shifted (the detector then resets itself)."""
        if not latency_s > 0:
            return False
        x = math.log(latency_s)  # noise on times is multiplicative: compare on a log scale
        if len(self._reference) < self.reference_n:
            self._reference.append(x)
            return False
        if self._ref_stats is None:
            self._ref_stats = _mean_var(self._reference)
        self._recent.append(x)
        if len(self._recent) < min(_MIN_RECENT, self.window_n):
            return False
        recent = list(self._recent)
        # The last few, the last ten and the whole window: a drastic shift shows in the last few
        # before it dominates the window, a modest one needs the whole window to be sure.
        suffixes = sorted({min(n, len(recent)) for n in (_MIN_RECENT, 2 * _MIN_RECENT, self.window_n)})
        confidence = 1.0 - (1.0 - self.confidence) / len(suffixes)  # Bonferroni over the suffixes
        if any(self._shifted(recent[-n:], confidence) for n in suffixes):
            self.reset()
            return True
        return False

    def _shifted(self, recent: list[float], confidence: float) -> bool:
        """Welch's interval for mean log(recent) - mean log(reference) lies beyond +-log(1 + threshold)."""
        assert self._ref_stats is not None
        mean_r, var_r = self._ref_stats
        n_r, n_c = len(self._reference), len(recent)
        mean_c, var_c = _mean_var(recent)
        d = mean_c - mean_r
        se_r, se_c = var_r / n_r, var_c / n_c
        se2 = se_r + se_c
        band = math.log1p(self.threshold)
        if se2 <= 0.0:
            return abs(d) > band
        terms = se_r**2 / (n_r - 1) + se_c**2 / (n_c - 1)
        df = se2**2 / terms if terms > 0 else 1.0
        half = _t_quantile(0.5 + confidence / 2, max(df, 1.0)) * math.sqrt(se2)
        return d - half > band or d + half < -band
