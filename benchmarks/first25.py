"""The first measurements of a search on the twelve development spaces: after its design, and at 25.

A quick loop for changes to the default search's initial design (the quality table's cells at 25 are
decided there): each tool runs ``--budget`` measurements (default 25) per space and seed, with the
quality table's counting rules (``benchmarks/peers/_problems.py``, lag 0), and the script prints the
median over the seeds of best/optimum after 17 measurements (the default configuration and the 16 design
points of the default search) and after 25, per space, with the geometric means. About 70 s for 100
seeds on 2 cores; the full budgets and the leave-one-kernel-out rule are ``lag.py`` and ``cv_seeds.py``.

Usage::

    .venv/bin/python benchmarks/first25.py --tool perftune --seeds 0-99
    .venv/bin/python benchmarks/first25.py --tool perftune-exp:quality_variants:StagedLatinHalf --seeds 0-99
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from multiprocessing import Pool
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _problems import (  # noqa: E402
    DEV_SPACES,
    KT_DEV_SPACES,
    KTTableProblem,
    Ledger,
    TableProblem,
    parse_seeds,
    scores_after,
)
from run_perftune import run_one  # noqa: E402

AFTER = (17, 25)


def run_space(job: tuple[str, str, str, str, list[int], int]) -> tuple[str, dict[int, float]]:
    kind, bench, device, tool, seeds, budget = job
    problem = KTTableProblem(bench, device) if kind == "kt" else TableProblem(bench, device)
    scores: dict[int, list[float]] = {n: [] for n in AFTER if n <= budget}
    errors = 0
    for seed in seeds:
        ledger = Ledger(problem, budget)
        errors += run_one(problem, tool, seed, ledger, lag=0).get("n_errors", 0)
        for n, score in zip(scores, scores_after(problem, ledger.values, list(scores)), strict=True):
            scores[n].append(score)
    if errors:
        print(f"WARNING: {problem.name}: {errors} internal errors of the search (proposals that fell back)")
    return problem.name, {n: statistics.median(v) for n, v in scores.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", default="perftune")
    ap.add_argument("--seeds", default="0-99")
    ap.add_argument("--budget", type=int, default=25)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    jobs: list[Any] = [("t4", b, d, args.tool, seeds, args.budget) for b, d in DEV_SPACES]
    jobs += [("kt", b, d, args.tool, seeds, args.budget) for b, d in KT_DEV_SPACES]
    with Pool(args.jobs) as pool:
        results = pool.map(run_space, jobs)
    after = [n for n in AFTER if n <= args.budget]
    print(f"{args.tool}, seeds {args.seeds}: median best/optimum after " + " / ".join(map(str, after)))
    for name, row in results:
        print(f"| {name} | " + " | ".join(f"{row[n]:.3f}" for n in after) + " |")
    geo = [math.exp(statistics.mean(math.log(r[n]) for _, r in results)) for n in after]
    print("| geomean | " + " | ".join(f"{g:.4f}" for g in geo) + " |")


if __name__ == "__main__":
    main()
