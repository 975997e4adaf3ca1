"""Transfer across hardware: tuning one GPU's replayed space with the other GPUs' results as a prior.

For each development space (convolution_milo and dedispersion_milo on A4000, A6000 and W6600, replayed
from the benchmark-hub T4 files), perftune's default search runs 20 seeds without a prior and 20 seeds
with ``warm_start`` = the T4 files of the same kernel on the two other GPUs. Counting as in
``benchmarks/quality.py``: the budget is the number of measured configurations, failures and the default
configuration included; the run is sequential (``lag=0``). The score at budget B is the best value among
the first B measurements divided by the space's optimum; the table gives the median over seeds per space
and the geometric mean of those medians over the six spaces.

Usage:
    python benchmarks/transfer.py [--seeds 20] [--jobs 2] [--n-propose 4] [--out FILE]
    python benchmarks/transfer.py --ranks-only   # the best of the prior's top k per space, no search
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "data" / "benchmark_hub"
KERNELS = ("convolution_milo", "dedispersion_milo")
GPUS = ("A4000", "A6000", "W6600")
BUDGETS = (25, 50, 100, 200)
DEFAULT_N_PROPOSE = 4  # the default of perftune.drive.WarmStart.n_propose


def t4(kernel: str, gpu: str) -> Path:
    return HUB / f"{kernel}.{gpu}.T4.json.gz"


@cache
def problem(kernel: str, gpu: str) -> Any:
    from perftune.targets import replay

    return replay.load(HUB / f"{kernel}.T1.json", t4(kernel, gpu))


@cache
def prior(kernel: str, gpu: str) -> Any:
    """The other GPUs' results of ``kernel``, read once per process (the product reads the same files)."""
    from perftune.drive import Prior

    return Prior.from_sources([t4(kernel, o) for o in GPUS if o != gpu], problem(kernel, gpu).space)


def run(kernel: str, gpu: str, seed: int, with_prior: bool, n_propose: int = DEFAULT_N_PROPOSE
        ) -> list[float]:
    """The score after each measurement (best so far / optimum) of one seeded run."""
    import perftune
    from perftune.drive import WarmStart
    from perftune.targets.replay import ReplayFailure

    p = problem(kernel, gpu)
    warm = WarmStart([prior(kernel, gpu)], n_propose=n_propose) if with_prior else None
    tuner = perftune.Tuner(p.space, seed=seed, lag=0, warm_start=warm)
    best, scores = math.inf, []
    while len(scores) < max(BUDGETS):
        trial = tuner.ask()
        if trial is None:
            break
        try:
            value = p.objective(trial.config)
        except ReplayFailure as failure:
            tuner.tell(trial, error=str(failure))
        else:
            tuner.tell(trial, value)
            best = min(best, value)
        scores.append(best / p.optimum)
    scores += [scores[-1]] * (max(BUDGETS) - len(scores))
    return scores


def ranks_only() -> str:
    """What the ranks alone give: the best of the prior's top k configurations, measured on the target."""
    tops = (1, 3, 5, 10, 20)
    rows = ["| space | " + " | ".join(f"top {k}" for k in tops) + " |", "|---" * (1 + len(tops)) + "|"]
    for kernel in KERNELS:
        for gpu in GPUS:
            p = problem(kernel, gpu)
            cells = []
            for k in tops:
                found = [p.objective.lookup(c) for c in prior(kernel, gpu).ranked[:k]]
                values = [r.value for r in found if r is not None and r.value is not None]
                cells.append(f"{min(values) / p.optimum:.3f}" if values else "-")
            rows.append(f"| {kernel}.{gpu} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _job(args: tuple[str, str, int, bool, int]) -> tuple[tuple[str, str, int, bool], list[float]]:
    return args[:4], run(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--n-propose", type=int, default=DEFAULT_N_PROPOSE,
                        help="prior configurations measured early (WarmStart.n_propose)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--ranks-only", action="store_true",
                        help="print the best of the prior's top k on each space (no search) and stop")
    args = parser.parse_args()
    if args.ranks_only:
        print(ranks_only())
        return
    jobs = [(k, g, s, w, args.n_propose)
            for k in KERNELS for g in GPUS for w in (False, True) for s in range(args.seeds)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(pool.map(_job, jobs, chunksize=4))
    elapsed_s = time.perf_counter() - t0
    rows = []
    header = "| space | " + " | ".join(f"{b} without | {b} with" for b in BUDGETS) + " |"
    rows.append(header)
    rows.append("|---" * (1 + 2 * len(BUDGETS)) + "|")
    medians: dict[tuple[bool, int], list[float]] = {(w, b): [] for w in (False, True) for b in BUDGETS}
    for k in KERNELS:
        for g in GPUS:
            cells = []
            for b in BUDGETS:
                for w in (False, True):
                    m = statistics.median(results[(k, g, s, w)][b - 1] for s in range(args.seeds))
                    medians[(w, b)].append(m)
                    cells.append(f"{m:.3f}")
            rows.append(f"| {k}.{g} | " + " | ".join(cells) + " |")

    def geomean(xs: list[float]) -> float:
        return math.exp(sum(map(math.log, xs)) / len(xs))

    geo = {key: geomean(v) for key, v in medians.items()}
    cells = [f"**{geo[(w, b)]:.3f}**" for b in BUDGETS for w in (False, True)]
    rows.append("| **geomean** | " + " | ".join(cells) + " |")
    summary = ["", "| budget | without prior | with prior | distance to 1.0 removed |", "|---|---|---|---|"]
    for b in BUDGETS:
        without, with_ = geo[(False, b)], geo[(True, b)]
        gain = (without - with_) / (without - 1) if without > 1 else 0.0
        summary.append(f"| {b} | {without:.4f} | {with_:.4f} | {gain:.0%} |")
    command = " ".join(["python", "benchmarks/transfer.py", *sys.argv[1:]])
    text = "\n".join([
        "# Transfer across hardware",
        "",
        "Each GPU's replayed space tuned by the default search, without a prior and with",
        "`warm_start=[the T4 files of the same kernel on the two other GPUs]`. Score: best of the first B",
        "measurements / optimum (failures and the default configuration count); median over",
        f"{args.seeds} seeds per space, geometric mean over the six spaces.",
        "",
        f"- Command: `{command}`",
        f"- Machine: {os.cpu_count()}-core VM ({platform.machine()}), Python {platform.python_version()}, "
        f"{args.jobs} worker processes, {elapsed_s:.0f} s; `WarmStart.n_propose` = {args.n_propose}",
        f"- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        *rows,
        *summary,
        "",
    ])
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
