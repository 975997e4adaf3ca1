"""Sequential comparison, adaptive measuring and speedup intervals."""

from __future__ import annotations

import numpy as np
import pytest

from perftune.measure import Decision, TimingSettings, compare, measure_adaptively, speedup_ci


def noisy(rng: np.random.Generator, true: float, sigma: float = 0.1):
    return lambda: true * float(np.exp(rng.normal(0, sigma)))


def test_clearly_faster_is_better_and_clearly_slower_is_worse() -> None:
    rng = np.random.default_rng(0)
    inc = [noisy(rng, 1.0, 0.02)() for _ in range(10)]
    assert compare([noisy(rng, 0.5, 0.02)() for _ in range(5)], inc) is Decision.BETTER
    assert compare([noisy(rng, 2.0, 0.02)() for _ in range(5)], inc) is Decision.WORSE


def test_identical_deterministic_values_are_the_same() -> None:
    assert compare([5.0, 5.0, 5.0], [5.0, 5.0]) is Decision.SAME
    assert compare([4.0], [5.0]) is Decision.BETTER
    assert compare([4.0], [5.0], goal="max") is Decision.WORSE


def test_within_tie_threshold_is_same_with_low_noise() -> None:
    rng = np.random.default_rng(1)
    inc = [noisy(rng, 1.0, 0.001)() for _ in range(30)]
    cand = [noisy(rng, 1.002, 0.001)() for _ in range(30)]
    assert compare(cand, inc, tie=0.01) is Decision.SAME


def test_hopeless_candidate_stops_after_few_runs() -> None:
    rng = np.random.default_rng(2)
    inc = [noisy(rng, 1.0)() for _ in range(30)]
    result = measure_adaptively(noisy(rng, 3.0), inc, TimingSettings(warmup_runs=0))
    assert result.decision is Decision.WORSE and len(result.samples) <= 4


def test_close_candidate_gets_more_runs_and_new_incumbent_gets_first_runs() -> None:
    rng = np.random.default_rng(3)
    settings = TimingSettings(warmup_runs=1, max_runs=30, first_runs=30)
    inc = [noisy(rng, 1.0)() for _ in range(30)]
    close = measure_adaptively(noisy(rng, 0.97), inc, settings)
    assert len(close.samples) > settings.min_runs
    better = measure_adaptively(noisy(rng, 0.5), inc, settings)
    assert better.decision is Decision.BETTER and len(better.samples) == 30 and better.n_runs == 31


def test_first_candidate_takes_first_runs() -> None:
    rng = np.random.default_rng(5)
    result = measure_adaptively(noisy(rng, 1.0), None, TimingSettings(first_runs=7, warmup_runs=2))
    assert len(result.samples) == 7 and result.n_runs == 9
    # Declared noisy: identical samples do not end the test early.
    steady = measure_adaptively(lambda: 1.0, None, TimingSettings(first_runs=7, warmup_runs=2),
                                deterministic=False)
    assert len(steady.samples) == 7 and steady.n_runs == 9


def counting(values: list[float]):
    """A sampler that returns ``values`` in turn and counts its calls in ``.calls``."""

    def once() -> float:
        once.calls += 1  # type: ignore[attr-defined]
        return values[(once.calls - 1) % len(values)]  # type: ignore[attr-defined]

    once.calls = 0  # type: ignore[attr-defined]
    return once


def test_identical_samples_end_the_sequential_test_at_once() -> None:
    settings = TimingSettings(first_runs=30, max_runs=30, min_runs=3, warmup_runs=1)
    first = counting([7.0])
    baseline = measure_adaptively(first, None, settings)
    assert baseline.samples == [7.0, 7.0] and first.calls == 3  # warm-up + two identical samples
    # A new best against a constant incumbent: no top-up to first_runs.
    better = counting([5.0])
    result = measure_adaptively(better, baseline.samples, settings)
    assert result.decision is Decision.BETTER and result.samples == [5.0, 5.0] and better.calls == 3
    worse = counting([9.0])
    result = measure_adaptively(worse, baseline.samples, settings)
    assert result.decision is Decision.WORSE and result.samples == [9.0, 9.0]
    same = counting([7.0])
    assert measure_adaptively(same, baseline.samples, settings).decision is Decision.SAME
    # Samples that differ are noise: the test goes on as before.
    wobbly = counting([5.0, 5.1, 4.9])
    assert len(measure_adaptively(wobbly, baseline.samples, settings).samples) >= 3


def test_declared_deterministic_metric_is_measured_once() -> None:
    settings = TimingSettings(first_runs=30, max_runs=30, warmup_runs=1)
    once = counting([3.0])
    first = measure_adaptively(once, None, settings, deterministic=True)
    assert first.samples == [3.0] and first.n_runs == 1 and first.decision is Decision.BETTER
    for value, decision in ((2.0, Decision.BETTER), (3.0, Decision.SAME), (4.0, Decision.WORSE)):
        result = measure_adaptively(counting([value]), [3.0], settings, deterministic=True)
        assert result.decision is decision and result.n_runs == 1
    result = measure_adaptively(counting([4.0]), [3.0], settings, goal="max", deterministic=True)
    assert result.decision is Decision.BETTER


def test_speedup_interval_contains_the_truth() -> None:
    rng = np.random.default_rng(4)
    base = [noisy(rng, 2.0, 0.05)() for _ in range(20)]
    win = [noisy(rng, 1.0, 0.05)() for _ in range(20)]
    ci = speedup_ci(base, win)
    assert ci.lo < 2.0 < ci.hi and ci.lo > 1.8
    assert "x [" in str(ci)
    up = speedup_ci([10.0, 10.5, 9.5], [20.0, 21.0, 19.0], goal="max")
    assert up.estimate == pytest.approx(2.0, rel=0.01)


def test_bad_settings_raise() -> None:
    with pytest.raises(ValueError):
        TimingSettings(min_runs=5, max_runs=3)
    with pytest.raises(ValueError):
        speedup_ci([], [1.0])
