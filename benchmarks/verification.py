"""Verification benchmark: risk-ranked expensive checks vs random spot checks, 10% check budget.

A tuner-like stream of 300 candidates over a 4-parameter space (30% random samples, 70% mutations of
the five best so far on a smooth landscape with a random optimum) is checked candidate by candidate.
Exactly 5% of the stream (15 candidates) is silently wrong, planted in one region: the ball around a
random centre holding the 15 nearest candidates. Wrong candidates measure like right ones (no speed
bonus) and pass the cheap check; only the expensive check catches them. Both policies get the same
budget, 10% of the candidates:

* random: each candidate is checked with probability 0.1 while credit lasts (spot checks);
* risk-ranked: perftune.measure.BudgetedVerifier (extremeness, implausible jump over the best so
  far, failure rate of neighbours, technique), learning from every check.

Two placements of the region: ``anywhere`` (centre uniform in the space) and ``edge`` (centre on a
face of the space, where extreme parameter values live). Usage:

    .venv/bin/python benchmarks/verification.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from perftune.measure import BudgetedVerifier

N_DIMS = 4
LEVELS = 16
N_CANDIDATES = 300
N_WRONG = 15  # 5%
BUDGET = 0.10


def stream(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Encodings (n, N_DIMS) in [0, 1] of the candidates, and their measured times."""
    optimum = rng.uniform(0.1, 0.9, size=N_DIMS)

    def time_of(x: np.ndarray) -> float:
        return float(1.0 + 4.0 * np.sum((x - optimum) ** 2) * rng.lognormal(0.0, 0.05))

    xs: list[np.ndarray] = []
    ts: list[float] = []
    for _ in range(N_CANDIDATES):
        if len(xs) < 10 or rng.random() < 0.3:
            x = rng.integers(0, LEVELS, size=N_DIMS) / (LEVELS - 1)
        else:
            best = np.argsort(ts)[:5]
            parent = xs[int(rng.choice(best))]
            step = rng.integers(-2, 3, size=N_DIMS) * (rng.random(N_DIMS) < 0.5)
            x = np.clip(np.round(parent * (LEVELS - 1)) + step, 0, LEVELS - 1) / (LEVELS - 1)
        xs.append(x)
        ts.append(time_of(x))
    return np.asarray(xs), np.asarray(ts)


def plant(xs: np.ndarray, rng: np.random.Generator, placement: str) -> np.ndarray:
    centre = rng.uniform(0, 1, size=N_DIMS)
    if placement == "edge":
        centre[rng.integers(0, N_DIMS)] = float(rng.integers(0, 2))
    dist = np.linalg.norm(xs - centre, axis=1)
    wrong = np.zeros(len(xs), dtype=bool)
    wrong[np.argsort(dist, kind="stable")[:N_WRONG]] = True
    return wrong


def run(xs: np.ndarray, ts: np.ndarray, wrong: np.ndarray, policy: str, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    verifier = BudgetedVerifier(BUDGET, seed=seed)
    best = np.inf
    caught = checked = 0
    credit = 0.0
    for x, t, bad in zip(xs, ts, wrong, strict=True):
        if policy == "random":
            credit += BUDGET
            check = credit >= 1.0 and rng.random() < BUDGET * 1.5
            if check:
                credit -= 1.0
        else:
            features = verifier.features(x, speedup=best / t if np.isfinite(best) else None, technique=None)
            check = verifier.should_check(features)
        best = min(best, t)
        if check:
            checked += 1
            caught += int(bad)
        if policy != "random":
            verifier.record(x, bad=bool(bad and check), x=features if check else None, checked=check)
    return caught, checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(
        f"verification benchmark: {args.seeds} seeds, {N_CANDIDATES} candidates, {N_WRONG} wrong (5%) in one "
        f"region, check budget {BUDGET:.0%}"
    )
    print(f"{'placement':<10}{'policy':<14}{'checks':>8}{'caught (of 15)':>16}{'catch rate':>12}{'ratio':>8}")
    for placement in ("anywhere", "edge"):
        totals = {}
        for policy in ("random", "risk-ranked"):
            caught = checked = 0
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                xs, ts = stream(rng)
                wrong = plant(xs, rng, placement)
                c, k = run(xs, ts, wrong, policy, seed + 1000)
                caught += c
                checked += k
            totals[policy] = caught
            ratio = caught / max(1, totals["random"])
            print(
                f"{placement:<10}{policy:<14}{checked / args.seeds:>8.1f}{caught / args.seeds:>16.2f}"
                f"{caught / (args.seeds * N_WRONG):>12.1%}{ratio:>8.2f}"
            )
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
