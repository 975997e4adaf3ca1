"""When a candidate has won enough races to become the safe configuration: a sequential sign test.

A race has one winner, and the loser is killed, so the loser's time is never known: the evidence is
the count of wins. Under the null hypothesis "the candidate is not faster" it wins each race with
probability at most 1/2 (the two configurations swap sides every request, so a faster half of the
machine favours neither), and ``w`` wins in ``n`` races have a one-sided p-value of
``P(Binomial(n, 1/2) >= w)``. The test looks after every race from ``min_races`` on, at most until
``max_races``; each look uses the Bonferroni-adjusted confidence of
:meth:`perftune.measure.TimingSettings.per_look`, so the stated confidence holds for the whole
sequence. It stops early, without promoting, when the candidate is clearly not faster
(``P(Binomial(n, 1/2) <= w)`` below the looser futility level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perftune.errors import PerftuneError
from perftune.measure import Decision, TimingSettings

__all__ = ["PromotionRule"]


def _upper_tail(n: int, w: int) -> float:
    """P(Binomial(n, 1/2) >= w)."""
    return sum(math.comb(n, k) for k in range(w, n + 1)) / 2.0**n


@dataclass(frozen=True)
class PromotionRule:
    """How many races a candidate runs, and how many it must win to become the safe configuration.

    Args:
        confidence: Confidence of the whole sequential sign test that a promoted candidate is faster.
        min_races: Races before the first look.
        max_races: Most races of one candidate; a candidate undecided then is not promoted.
        futility_confidence: Confidence with which a candidate is dropped early as not faster.

    Example:
        >>> rule = PromotionRule()
        >>> rule.min_wins
        9
        >>> rule.decide(wins=9, races=9), rule.decide(wins=8, races=9)
        (<Decision.BETTER: 'better'>, <Decision.UNDECIDED: 'undecided'>)
    """

    confidence: float = 0.95
    min_races: int = 5
    max_races: int = 20
    futility_confidence: float = 0.5

    def __post_init__(self) -> None:
        for name in ("min_races", "max_races"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PerftuneError(f"PromotionRule: {name} must be a positive integer, got {value!r}")
        if self.min_races > self.max_races:
            raise PerftuneError(
                f"PromotionRule: min_races ({self.min_races}) must not exceed max_races ({self.max_races})")
        for name in ("confidence", "futility_confidence"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 < value < 1:
                raise PerftuneError(f"PromotionRule: {name} must be in (0, 1), got {value!r}")
        if self.min_wins > self.max_races:
            raise PerftuneError(
                f"PromotionRule: no candidate could ever be promoted: {self.max_races} straight wins do "
                f"not reach confidence {self.confidence}; raise max_races or lower confidence")

    @property
    def _timing(self) -> TimingSettings:
        return TimingSettings(min_runs=self.min_races, max_runs=self.max_races, confidence=self.confidence,
                              futility_confidence=self.futility_confidence)

    @property
    def alpha_per_look(self) -> float:
        """The p-value a look needs to promote (Bonferroni over the looks)."""
        return 1.0 - self._timing.per_look(self.confidence)

    @property
    def min_wins(self) -> int:
        """The fewest wins that can promote: that many straight wins (and at least ``min_races``)."""
        alpha = self.alpha_per_look
        n = max(self.min_races, math.ceil(math.log2(1.0 / alpha) - 1e-12))
        while _upper_tail(n, n) > alpha:
            n += 1
        return n

    def decide(self, wins: int, races: int) -> Decision:
        """BETTER: promote; WORSE: drop the candidate; SAME: undecided at ``max_races``; else UNDECIDED."""
        if races < self.min_races:
            return Decision.UNDECIDED
        if _upper_tail(races, wins) <= self.alpha_per_look:
            return Decision.BETTER
        futility = 1.0 - self._timing.per_look(self.futility_confidence)
        if 1.0 - _upper_tail(races, wins + 1) <= futility:
            return Decision.WORSE
        if races >= self.max_races:
            return Decision.SAME
        return Decision.UNDECIDED
