"""Noise benchmark: adaptive sequential timing vs a fixed 7-repeat mean, under 10% multiplicative noise.

A synthetic tuning problem (block size x unroll x loop order, 84 configurations; the optimum and the
size of every penalty drawn per seed) is measured in a random visiting order, starting with the
default configuration as the baseline. Every "run" returns the true time times lognormal noise
(sigma = 0.10). Two policies choose the winner:

* fixed: 7 runs of every candidate, winner = lowest mean (the Kernel Tuner habit);
* adaptive: perftune.measure.measure_adaptively against the incumbent (sequential Welch test on log
  times, tie threshold 1%, confidence 95% over all looks, 3..max_runs runs).

A run of the benchmark succeeds when the reported winner is the true best or within the 1% tie
threshold of it. ``--noise 0`` is a deterministic metric: identical samples end the sequential test
at once, so the adaptive policy takes two runs per configuration. Usage:

    .venv/bin/python benchmarks/noise.py [--seeds 100] [--noise 0.10]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from perftune.measure import Decision, TimingSettings, measure_adaptively

BLOCKS = [8, 16, 32, 64, 128, 256, 512]
UNROLLS = [1, 2, 4, 8]
ORDERS = ["ijk", "ikj", "jik"]


def landscape(rng: np.random.Generator) -> dict[tuple[int, int, str], float]:
    """True run times of every configuration; the optimum and the penalties are random per seed."""
    best_block = rng.integers(1, len(BLOCKS) - 1)
    curvature = rng.uniform(0.04, 0.25)
    best_unroll = rng.integers(0, len(UNROLLS))
    unroll_penalty = {
        u: 0.0 if i == best_unroll else rng.uniform(0.03, 0.15) * abs(i - best_unroll)
        for i, u in enumerate(UNROLLS)
    }
    order_penalty = dict(zip(ORDERS, [0.0, *sorted(rng.uniform(0.1, 1.0, size=2))], strict=True))
    rng.shuffle(ORDERS_SHUFFLED := list(ORDERS))
    order_penalty = {o: order_penalty[ORDERS[i]] for i, o in enumerate(ORDERS_SHUFFLED)}
    times = {}
    for (bi, b), u, o in itertools.product(enumerate(BLOCKS), UNROLLS, ORDERS):
        t = 1.0 * (1 + curvature * (bi - best_block) ** 2) * (1 + unroll_penalty[u]) * (1 + order_penalty[o])
        times[(b, u, o)] = t
    return times


def run_policy(
    times: dict, order: list, rng: np.random.Generator, policy: str, noise: float, settings: TimingSettings
) -> tuple[tuple, int]:
    n_runs = 0

    def sampler(config: tuple):
        def once() -> float:
            nonlocal n_runs
            n_runs += 1
            return times[config] * float(np.exp(rng.normal(0.0, noise)))

        return once

    if policy == "fixed":
        means = {c: float(np.mean([sampler(c)() for _ in range(7)])) for c in order}
        return min(means, key=means.__getitem__), n_runs
    incumbent: tuple | None = None
    incumbent_samples: list[float] | None = None
    for config in order:
        result = measure_adaptively(sampler(config), incumbent_samples, settings)
        if result.decision is Decision.BETTER:
            incumbent, incumbent_samples = config, result.samples
    assert incumbent is not None
    return incumbent, n_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--noise", type=float, default=0.10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=TimingSettings().confidence)
    parser.add_argument("--min-runs", type=int, default=TimingSettings().min_runs)
    parser.add_argument("--futility-confidence", type=float, default=TimingSettings().futility_confidence)
    parser.add_argument("--max-runs", type=int, default=TimingSettings().max_runs)
    parser.add_argument("--first-runs", type=int, default=TimingSettings().first_runs)
    args = parser.parse_args()
    settings = TimingSettings(
        max_runs=args.max_runs,
        first_runs=args.first_runs,
        warmup_runs=0,
        confidence=args.confidence,
        min_runs=args.min_runs,
        futility_confidence=args.futility_confidence,
    )
    rows = {"fixed": [0, 0, []], "adaptive": [0, 0, []]}
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        times = landscape(np.random.default_rng(seed))
        true_best = min(times.values())
        order = list(times)
        default = (BLOCKS[0], UNROLLS[0], ORDERS[0])
        perm = np.random.default_rng(seed + 10_000).permutation(len(order))
        order = [default] + [order[i] for i in perm if order[i] != default]
        for policy in ("fixed", "adaptive"):
            winner, n_runs = run_policy(
                times, order, np.random.default_rng(seed + 20_000), policy, args.noise, settings
            )
            ok = times[winner] <= true_best * 1.01
            rows[policy][0] += ok
            rows[policy][1] += n_runs
            rows[policy][2].append(times[winner] / true_best - 1)
    elapsed = time.perf_counter() - t0
    print(
        f"noise benchmark: {args.seeds} seeds, 84 configurations each, lognormal noise sigma={args.noise}, "
        f"tie threshold 1%, adaptive: min_runs={settings.min_runs} max_runs={settings.max_runs} "
        f"confidence={settings.confidence}"
    )
    print(
        f"{'policy':<24}{'winner within 1% of best':>26}{'runs per tuning run':>22}"
        f"{'mean excess of winner':>24}"
    )
    for policy, label in (("fixed", "fixed 7-repeat mean"), ("adaptive", "adaptive sequential")):
        ok, n_runs, excess = rows[policy]
        print(
            f"{label:<24}{ok:>20}/{args.seeds:<5}{n_runs / args.seeds:>22.1f}{100 * np.mean(excess):>23.2f}%"
        )
    print(f"({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
