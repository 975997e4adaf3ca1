"""The shift detector: silent on a stationary noisy stream, quick on a drastic shift, sure on a modest one."""

from __future__ import annotations

import numpy as np

from perftune.online import ShiftDetector


def _stream(rng: np.random.Generator, median_s: float, n: int, sigma: float = 0.15) -> list[float]:
    return list(median_s * rng.lognormal(0.0, sigma, n))


def test_no_false_alarm_on_a_stationary_noisy_stream() -> None:
    rng = np.random.default_rng(0)
    detector = ShiftDetector()
    assert not any(detector.observe(x) for x in _stream(rng, 0.004, 1500))


def test_a_drastic_shift_is_caught_within_a_few_observations() -> None:
    rng = np.random.default_rng(1)
    detector = ShiftDetector()
    assert not any(detector.observe(x) for x in _stream(rng, 0.004, 100))
    after = [detector.observe(x) for x in _stream(rng, 0.040, 30)]
    assert True in after and after.index(True) < 8


def test_a_modest_shift_is_caught_once_the_window_fills_and_a_smaller_one_is_not() -> None:
    rng = np.random.default_rng(2)
    modest, small = ShiftDetector(), ShiftDetector()
    for d in (modest, small):
        assert not any(d.observe(x) for x in _stream(rng, 0.004, 100))
    assert any(modest.observe(x) for x in _stream(rng, 0.004 * 2.0, 60))  # 2x slower
    assert not any(small.observe(x) for x in _stream(rng, 0.004 * 1.2, 300))  # 20%: below the threshold


def test_a_detection_resets_the_reference() -> None:
    rng = np.random.default_rng(3)
    detector = ShiftDetector(reference_n=20, window_n=10)
    for x in _stream(rng, 0.004, 40):
        detector.observe(x)
    fired = [detector.observe(x) for x in _stream(rng, 0.02, 100)]
    assert fired.count(True) == 1  # the new level becomes the reference: one shift, one alarm
