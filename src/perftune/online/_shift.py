"""Noticing that the workload shifted: windowed statistics of the safe configuration's latency.

The detector keeps a reference window (the first ``reference_n`` latencies after the last reset) and
a sliding recent window (the last ``window_n``). Every ``window_n // 2`` observations it compares the
two with :func:`perftune.measure.speedup_ci` (Welch on log times); a shift is declared when the whole
interval says the recent latencies are slower, or faster, by more than ``threshold``. A changed input
distribution and a changed machine load both show up this way; the detector cannot tell them apart,
and need not: either way the best configuration may have changed, so exploration re-opens.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from perftune.errors import PerftuneError
from perftune.measure import speedup_ci

__all__ = ["ShiftDetector"]


@dataclass
class ShiftDetector:
    """Change detector on a stream of latencies (seconds).

    Args:
        reference_n: Latencies in the reference window.
        window_n: Latencies in the recent window.
        threshold: Relative change that counts as a shift (0.25: 25% slower or faster).
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
    threshold: float = 0.25
    confidence: float = 0.999
    _reference: list[float] = field(default_factory=list, init=False, repr=False)
    _recent: deque[float] = field(default_factory=deque, init=False, repr=False)
    _since_look: int = field(default=0, init=False, repr=False)

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

    def reset(self) -> None:
        """Start a new reference (after a promotion or a detected shift)."""
        self._reference.clear()
        self._recent.clear()
        self._since_look = 0

    def observe(self, latency_s: float) -> bool:
        """Add one latency; True when the workload shifted (the detector then resets itself)."""
        if latency_s <= 0:
            return False
        if len(self._reference) < self.reference_n:
            self._reference.append(latency_s)
            return False
        self._recent.append(latency_s)
        self._since_look += 1
        if len(self._recent) < self.window_n or self._since_look < max(1, self.window_n // 2):
            return False
        self._since_look = 0
        ci = speedup_ci(self._reference, list(self._recent), confidence=self.confidence)
        band = 1.0 + self.threshold
        if ci.hi < 1.0 / band or ci.lo > band:
            self.reset()
            return True
        return False
