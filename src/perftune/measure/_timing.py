"""Noise-aware timing: sequential comparison of a candidate with the incumbent, and speedup intervals.

Timings are compared on a log scale (noise on run times is multiplicative), with Welch's t interval
for the difference of mean log values. After each new run of a candidate, the interval decides:

* ``BETTER``: the candidate is faster than the incumbent (the whole interval is below zero);
* ``WORSE`` / ``SAME``: the candidate cannot be faster by more than the tie threshold (the interval
  lies above ``-log(1 + tie)``); ``SAME`` when it is also within the tie threshold on the other side;
* ``UNDECIDED``: run it again, up to ``max_runs``; then the point estimate decides.

Each look uses the confidence ``confidence`` adjusted for the number of looks (Bonferroni over the
looks after ``min_runs``), so the stated confidence holds for the whole sequential test.

Deterministic metrics (a count, an accuracy, a size) need no statistics: identical samples (two or
more, and an incumbent whose samples are identical too) end the test at once, and a metric declared
deterministic is measured once per configuration (:func:`measure_adaptively`, ``deterministic``).

Example:
    >>> from perftune.measure import Decision, compare
    >>> compare([1.0, 1.01, 0.99, 1.0], [2.0, 2.02, 1.98, 2.01]) is Decision.BETTER
    True
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Decision",
    "MeasureResult",
    "SpeedupCI",
    "TimingSettings",
    "compare",
    "is_constant",
    "measure_adaptively",
    "speedup_ci",
]


class Decision(enum.Enum):
    """Outcome of comparing a candidate with the incumbent."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class TimingSettings:
    """How a candidate is measured.

    Args:
        min_runs: Runs before the first decision.
        max_runs: Most runs of one candidate.
        warmup_runs: Runs discarded before measuring (caches, page faults, CPU frequency).
        tie: Relative difference below which two candidates count as the same (0.01 = 1%).
        confidence: Confidence of the whole sequential test.
        first_runs: Runs of a candidate when there is no incumbent yet (the baseline).

    Example:
        >>> TimingSettings(max_runs=30).tie
        0.01
    """

    min_runs: int = 3
    max_runs: int = 30
    warmup_runs: int = 1
    tie: float = 0.01
    confidence: float = 0.95
    first_runs: int = 30
    futility_confidence: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.max_runs:
            raise ValueError(f"need 1 <= min_runs ({self.min_runs}) <= max_runs ({self.max_runs})")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.tie < 0:
            raise ValueError(f"tie must be >= 0, got {self.tie}")

    @property
    def per_look_confidence(self) -> float:
        return self.per_look(self.confidence)

    def per_look(self, confidence: float) -> float:
        """Bonferroni: the confidence of each look so that all looks together keep ``confidence``."""
        n_looks = max(1, self.max_runs - self.min_runs + 1)
        return 1.0 - (1.0 - confidence) / n_looks


def _t_quantile(p: float, df: float) -> float:
    # scipy.special's inverse Student t CDF is the same function as scipy.stats.t.ppf, and importing
    # scipy.stats costs about a second on a small machine: a noticeable share of a short run.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def _diff_interval(
    candidate: Sequence[float], incumbent: Sequence[float], confidence: float, goal: str
) -> tuple[float, float, float, bool]:
    """Interval for the candidate's advantage on the log (or relative) scale; negative = better."""
    c = np.asarray(candidate, dtype=float)
    i = np.asarray(incumbent, dtype=float)
    log_scale = bool(np.all(c > 0) and np.all(i > 0))
    if log_scale:
        c, i = np.log(c), np.log(i)
    else:
        scale = abs(float(np.mean(i))) or 1.0
        c, i = c / scale, i / scale
    if goal == "max":
        c, i = -c, -i
    d = float(np.mean(c) - np.mean(i))
    var_c = float(np.var(c, ddof=1)) / len(c) if len(c) > 1 else 0.0
    var_i = float(np.var(i, ddof=1)) / len(i) if len(i) > 1 else 0.0
    se2 = var_c + var_i
    if se2 <= 0.0:
        return d, d, d, log_scale
    # Welch-Satterthwaite degrees of freedom; a single sample contributes no variance estimate.
    terms = []
    if len(c) > 1:
        terms.append(var_c**2 / (len(c) - 1))
    if len(i) > 1:
        terms.append(var_i**2 / (len(i) - 1))
    df = se2**2 / sum(terms) if terms and sum(terms) > 0 else 1.0
    half = _t_quantile(0.5 + confidence / 2, max(df, 1.0)) * math.sqrt(se2)
    return d, d - half, d + half, log_scale


def compare(
    candidate: Sequence[float],
    incumbent: Sequence[float],
    *,
    tie: float = 0.01,
    confidence: float = 0.95,
    goal: str = "min",
) -> Decision:
    """Decide whether ``candidate`` beats ``incumbent`` (samples of each), at ``confidence``.

    Example:
        >>> compare([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) is Decision.SAME
        True
    """
    if len(candidate) == 0 or len(incumbent) == 0:
        return Decision.UNDECIDED
    _, lo, hi, log_scale = _diff_interval(candidate, incumbent, confidence, goal)
    band = math.log1p(tie) if log_scale else tie
    if hi < 0:
        return Decision.BETTER
    if lo > -band:  # it cannot be better by more than the tie threshold
        return Decision.SAME if hi < band else Decision.WORSE
    return Decision.UNDECIDED


def is_constant(samples: Sequence[float]) -> bool:
    """True when there are at least two samples and they are all the same value.

    Example:
        >>> is_constant([3.0, 3.0]), is_constant([3.0]), is_constant([3.0, 3.1])
        (True, False, False)
    """
    return len(samples) >= 2 and all(x == samples[0] for x in samples)


@dataclass
class MeasureResult:
    """Samples of one candidate and how the sequential test ended."""

    samples: list[float] = field(default_factory=list)
    decision: Decision = Decision.UNDECIDED
    n_runs: int = 0  # warm-up runs included


def measure_adaptively(
    run_once: Callable[[], float],
    incumbent: Sequence[float] | None,
    settings: TimingSettings | None = None,
    *,
    goal: str = "min",
    deterministic: bool | None = None,
) -> MeasureResult:
    """Run a candidate until the sequential test separates it from the incumbent.

    Args:
        run_once: Measures the candidate once and returns the sample (raises on failure).
        incumbent: Samples of the best configuration so far (None: this is the first one).
        settings: Repeats, tie threshold and confidence.
        goal: ``"min"`` or ``"max"``.
        deterministic: ``True``: the metric has no noise, so one run (no warm-up) says it all and the
            value decides against the incumbent's. ``None`` (auto): the sequential test, which ends
            at once when the candidate's samples are identical (two or more) and so are the
            incumbent's (or there is none yet). ``False``: the sequential test, always.

    Returns:
        The samples; ``decision`` says why measuring stopped (``BETTER`` when it should replace
        the incumbent, also when ``max_runs`` was reached and its estimate is better).

    Example:
        >>> import itertools
        >>> times = itertools.cycle([1.0, 1.02, 0.98])
        >>> measure_adaptively(lambda: next(times), [2.0, 2.1, 1.9]).decision is Decision.BETTER
        True
        >>> counts = itertools.count()
        >>> r = measure_adaptively(lambda: 7.0 + 0 * next(counts), None)
        >>> r.samples, r.n_runs   # one warm-up, then two identical samples end it
        ([7.0, 7.0], 3)
    """
    s = settings or TimingSettings()
    result = MeasureResult()

    def sample() -> None:
        result.samples.append(float(run_once()))
        result.n_runs += 1

    if deterministic is True:
        sample()
        if not incumbent:
            result.decision = Decision.BETTER
            return result
        decision = compare(result.samples, incumbent, tie=s.tie, confidence=s.confidence, goal=goal)
        if decision is Decision.UNDECIDED:  # an incumbent measured with noise: no more runs, estimate
            d, _, _, _ = _diff_interval(result.samples, incumbent, 0.5, goal)
            decision = Decision.BETTER if d < 0 else Decision.SAME
        result.decision = decision
        return result
    # Identical samples on both sides leave nothing to estimate: the values decide.
    stop_when_constant = deterministic is None and (not incumbent or is_constant(incumbent))

    def settled() -> bool:
        return stop_when_constant and is_constant(result.samples)

    for _ in range(s.warmup_runs):
        run_once()
        result.n_runs += 1
    target = s.first_runs if not incumbent else s.min_runs
    while len(result.samples) < min(target, s.max_runs) and not settled():
        sample()
    if not incumbent:
        result.decision = Decision.BETTER
        return result
    confidence = s.per_look_confidence
    futility = s.per_look(s.futility_confidence) if s.futility_confidence is not None else confidence
    while True:
        decision = compare(result.samples, incumbent, tie=s.tie, confidence=confidence, goal=goal)
        if decision is Decision.UNDECIDED and futility != confidence:
            # Stopping a hopeless candidate early needs less certainty than crowning a new best.
            loose = compare(result.samples, incumbent, tie=s.tie, confidence=futility, goal=goal)
            if loose in (Decision.WORSE, Decision.SAME):
                decision = loose
        if decision is Decision.UNDECIDED and len(result.samples) >= s.max_runs:
            d, _, _, _ = _diff_interval(result.samples, incumbent, 0.5, goal)
            decision = Decision.BETTER if d < 0 else Decision.SAME
        if decision is not Decision.UNDECIDED:
            result.decision = decision
            # A new incumbent is the reference for every later candidate: give it as many
            # samples as a baseline, so that its own noise does not decide later comparisons
            # (a constant metric has no noise to average away).
            while (
                decision is Decision.BETTER
                and len(result.samples) < min(s.first_runs, s.max_runs)
                and not settled()
            ):
                sample()
            return result
        sample()


@dataclass(frozen=True)
class SpeedupCI:
    """Speedup of the winner over the baseline (ratio of geometric means) with its interval.

    ``estimate > 1`` means the winner is better (faster when minimising, higher when maximising).
    ``ratio`` is False when a sample is 0 or negative: there is no ratio then, and the numbers are 1 plus
    the relative improvement (the difference of the means over the baseline's mean). When the baseline's
    mean is 0 there is no relative improvement either: the numbers are NaN, and ``difference`` holds the
    winner's mean minus the baseline's.
    """

    estimate: float
    lo: float
    hi: float
    confidence: float
    ratio: bool = True
    difference: float | None = None

    def __str__(self) -> str:
        if self.difference is not None:
            return (f"n/a: the baseline's value is 0, so there is no relative improvement (the winner's "
                    f"differs by {self.difference:+.6g})")
        if not self.ratio:
            return (f"{(self.estimate - 1) * 100:+.1f}% [{(self.lo - 1) * 100:+.1f}%, "
                    f"{(self.hi - 1) * 100:+.1f}%] at {self.confidence:.0%} (relative, not a ratio)")
        return f"{self.estimate:.3f}x [{self.lo:.3f}, {self.hi:.3f}] at {self.confidence:.0%}"


def speedup_ci(
    baseline: Sequence[float], winner: Sequence[float], *, confidence: float = 0.95, goal: str = "min"
) -> SpeedupCI:
    """Speedup of ``winner`` over ``baseline`` with a confidence interval (Welch, log scale).

    Example:
        >>> ci = speedup_ci([2.0, 2.1, 1.9, 2.0], [1.0, 1.05, 0.95, 1.0])
        >>> round(ci.estimate, 1), ci.lo < 2.0 < ci.hi
        (2.0, True)
    """
    if len(baseline) == 0 or len(winner) == 0:
        raise ValueError("speedup_ci needs samples of both the baseline and the winner")
    d, lo, hi, log_scale = _diff_interval(winner, baseline, confidence, goal)
    if log_scale:
        return SpeedupCI(math.exp(-d), math.exp(-hi), math.exp(-lo), confidence)
    base_mean = float(np.mean(np.asarray(baseline, dtype=float)))
    if base_mean == 0.0:
        # Nothing to be relative to: _diff_interval's scale of 1 would print the difference as a
        # percentage (a default of 0 and a best of 3 as "+300%").
        difference = float(np.mean(np.asarray(winner, dtype=float))) - base_mean
        return SpeedupCI(math.nan, math.nan, math.nan, confidence, ratio=False, difference=difference)
    # Non-positive metrics: report the relative improvement + 1 instead of a ratio.
    return SpeedupCI(1 - d, 1 - hi, 1 - lo, confidence, ratio=False)
