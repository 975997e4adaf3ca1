"""Quick in-process comparison of perftune technique variants on the development spaces.

For trying ideas before a full ``quality.py`` run: runs each variant on the six benchmark-hub spaces
with the same counting ledger, then prints the median best/optimum per space and the geometric means.
Variants are ``perftune`` (default), ``perftune:<technique>``, or ``perftune-exp:<module>:<Class>``
(a technique class in a module under benchmarks/, e.g. ``quality_variants:BanditCorners``).

Usage::

    .venv/bin/python benchmarks/quality_explore.py perftune perftune-exp:quality_variants:BanditX \\
        --seeds 0-9 --budget 100
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _problems import DEV_SPACES, Ledger, TableProblem, parse_seeds  # noqa: E402
from run_perftune import run_one  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tools", nargs="+")
    ap.add_argument("--seeds", default="0-9")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--spaces", default="", help="comma-separated, e.g. convolution.W6600")
    args = ap.parse_args()
    problems = [TableProblem(b, d) for b, d in DEV_SPACES]
    if args.spaces:
        problems = [p for p in problems if p.name in args.spaces.split(",")]
    budgets = [b for b in (25, 50, 100, 200) if b <= args.budget]
    seeds = parse_seeds(args.seeds)
    for tool in args.tools:
        t0 = time.perf_counter()
        per_budget: dict[int, list[float]] = {b: [] for b in budgets}
        cells = []
        for problem in problems:
            scores: dict[int, list[float]] = {b: [] for b in budgets}
            for seed in seeds:
                ledger = Ledger(problem, args.budget)
                run_one(problem, tool, seed, ledger)
                for b in budgets:
                    vals = [v for v in ledger.values[:b] if v is not None]
                    scores[b].append(problem.score(min(vals) if vals else None))
            meds = {b: statistics.median(scores[b]) for b in budgets}
            for b in budgets:
                per_budget[b].append(meds[b])
            cells.append(f"{problem.name}: " + " ".join(f"{meds[b]:.3f}" for b in budgets))
        geo = {b: math.exp(sum(math.log(x) for x in per_budget[b]) / len(per_budget[b])) for b in budgets}
        print(f"== {tool}  ({time.perf_counter() - t0:.0f} s)  geomean " +
              " ".join(f"@{b}={geo[b]:.4f}" for b in budgets))
        for c in cells:
            print("   ", c)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
