"""The shift detector on synthetic streams with a known shift point: controlled false alarms, bounded delay.

The latencies mimic a shared machine: log-normal noise plus a fraction of requests slowed 3-20x by
other jobs (heavy tails). A stationary stream must raise no alarm over many seeds; a 3x shift must be
caught within a bounded number of requests after it, also right after a reset and when the safe
configuration's times are only known as lower bounds (it was killed because a candidate answered first).
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import pytest

from perftune.online import PromotionRule, Racer, ShiftDetector
from perftune.online._shift import _u_tail
from perftune.space import Choice, Space


def _stream(rng: np.random.Generator, n: int, level: float = 0.004, p_slow: float = 0.3) -> list[float]:
    x = level * rng.lognormal(0.0, 0.1, n)
    slow = rng.random(n) < p_slow
    x[slow] *= rng.uniform(3.0, 20.0, int(slow.sum()))
    return [float(v) for v in x]


def test_the_rank_statistic_has_its_exact_null_distribution() -> None:
    m, n = 6, 4
    counts: dict[int, int] = {}
    for pos in itertools.combinations(range(m + n), n):  # where the recent values fall among all, sorted
        u = sum(sum(1 for q in range(p) if q not in pos) for p in pos)
        counts[u] = counts.get(u, 0) + 1
    total = math.comb(m + n, n)
    tail = _u_tail(m, n)
    for u in range(m * n + 1):
        assert tail[u] == pytest.approx(sum(c for k, c in counts.items() if k >= u) / total, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_no_false_alarm_on_a_heavy_tailed_stationary_stream(seed: int) -> None:
    rng = np.random.default_rng(seed)
    detector = ShiftDetector()
    assert not any(detector.observe(x) for x in _stream(rng, 2000))


@pytest.mark.parametrize("seed", range(20))
def test_a_3x_shift_is_caught_within_a_bounded_delay(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    detector = ShiftDetector()
    stream = _stream(rng, 300, p_slow=0.1) + _stream(rng, 100, level=0.012, p_slow=0.1)
    fired = [detector.observe(x) for x in stream]
    assert True in fired
    assert 300 <= fired.index(True) < 300 + 30


@pytest.mark.parametrize("seed", range(10))
def test_a_shift_soon_after_a_reset_is_not_missed(seed: int) -> None:
    # After a promotion (a reset) the reference fills again; a shift right after it must still be seen.
    rng = np.random.default_rng(200 + seed)
    detector = ShiftDetector()
    for x in _stream(rng, 100):
        detector.observe(x)
    detector.reset()
    stream = _stream(rng, 40, p_slow=0.1) + _stream(rng, 200, level=0.012, p_slow=0.1)
    fired = [detector.observe(x) for x in stream]
    assert True in fired
    assert 40 <= fired.index(True) < 40 + 30


def test_lower_bounds_show_a_slowdown_but_never_a_speedup() -> None:
    rng = np.random.default_rng(7)
    detector = ShiftDetector()
    for x in _stream(rng, 100, p_slow=0.1):
        assert not detector.observe(x)
    # Killed after 5x the usual time (candidates that answered first took that long): slower, surely.
    fired = [detector.observe(x, censored=True) for x in _stream(rng, 20, level=0.02, p_slow=0.1)]
    assert True in fired and fired.index(True) < 12
    # Killed early (fast candidates): says nothing about the safe configuration being faster.
    for x in _stream(rng, 100, p_slow=0.1):
        detector.observe(x)
    assert not any(detector.observe(x, censored=True) for x in _stream(rng, 500, level=0.0004))


def test_the_stated_false_alarm_rate() -> None:
    assert ShiftDetector().false_alarm_rate == pytest.approx(1e-4)
    assert ShiftDetector(confidence=0.99).false_alarm_rate == pytest.approx(0.01)


def test_the_racer_sees_a_shift_while_the_safe_configuration_keeps_being_killed() -> None:
    # Phase 1: "a" (safe) is fast, the candidate "b" slow; phase 2: "a" becomes very slow and "b" wins
    # every race, so "a" never finishes: only lower bounds on its time (b's) tell the detector anything.
    def phased(config: Any, request: tuple[int, int]) -> int:
        phase, x = request
        if phase == 1:
            time.sleep(0.004 if config["kind"] == "a" else 0.03)
        else:
            time.sleep(0.25 if config["kind"] == "a" else 0.02)
        return 2 * x

    space = Space({"kind": Choice(["a", "b"], default="a")})
    detector = ShiftDetector(reference_n=10, window_n=6, confidence=0.99)
    rule = PromotionRule(min_races=30, max_races=40)  # b stays undecided: no promotion in this test
    with Racer(phased, space, check=lambda r, y: y == 2 * r[1], rule=rule, seed=0,
               detector=detector) as racer:
        for x in range(14):
            racer((1, x))
        assert not racer.shifts
        for x in range(14, 26):
            racer((2, x))
    assert racer.shifts and 14 <= racer.shifts[0] < 14 + 8, racer.shifts
