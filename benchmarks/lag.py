"""The default search when results arrive late: the twelve development spaces at several lags.

A seeded run applies results in ticket order with a fixed lag (``perftune.Tuner(seed=..., lag=L)``,
default :data:`perftune.drive.DEFAULT_LAG` = 8), so that it is the same for any number of workers up to
``L + 1``; the proposal for ticket ``k`` sees the results of tickets before ``k - L`` only. The quality
tables (``quality.py``) run every tool sequentially (lag 0). This script measures what the lag costs
the default search, with the same counting rules (``benchmarks/peers/_problems.py``): for each space,
lag and seed, the best/optimum after 25, 50, 100 and 200 measurements; the median over seeds; the
geometric mean over the twelve spaces and over each of the five kernel families (the groups of the
leave-one-kernel-out rule of ``results/cv.md``). ``--json`` keeps every run (and a hash of its
measured values, so that two versions can be checked for identical trajectories); ``--against`` reads
such a file from another version and prints the family table side by side.

Usage::

    .venv/bin/python benchmarks/lag.py --lags 0,8 --seeds 0-19 --json /tmp/lag-new.json
    PYTHONPATH=<old>/src .venv/bin/python benchmarks/lag.py --lags 8 --json /tmp/lag-old.json
    .venv/bin/python benchmarks/lag.py --lags 8 --json /tmp/lag-new.json --against /tmp/lag-old.json
    .venv/bin/python benchmarks/lag.py --lags 0 --tool perftune-exp:quality_variants:StagedExploitFirst \
        --against /tmp/lag-new.json   # a variant of the default against the default
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _problems import (  # noqa: E402
    BUDGETS,
    DEV_SPACES,
    KT_DEV_SPACES,
    KTTableProblem,
    Ledger,
    TableProblem,
    parse_seeds,
    scores_after,
)
from cv import FAMILIES  # noqa: E402
from quality import geomean  # noqa: E402
from run_perftune import run_one  # noqa: E402

FAMILY_OF = {space: label for label, spaces in FAMILIES for space in spaces}


def run_space(job: tuple[str, str, str, int, list[int], str]) -> tuple[str, int, dict[str, Any]]:
    """Every seed of one (space, lag): scores at each budget and a hash of the measured values."""
    kind, bench, device, lag, seeds, tool = job
    problem = KTTableProblem(bench, device) if kind == "kt" else TableProblem(bench, device)
    out: dict[str, Any] = {}
    for seed in seeds:
        ledger = Ledger(problem, max(BUDGETS))
        extra = run_one(problem, tool, seed, ledger, lag=lag)
        scores = scores_after(problem, ledger.values)
        digest = hashlib.sha256(repr(ledger.values).encode()).hexdigest()[:16]
        out[str(seed)] = {"scores": scores, "hash": digest, "n_errors": extra.get("n_errors", 0)}
    return problem.name, lag, out


def medians(runs: dict[str, Any]) -> list[float]:
    return [statistics.median(r["scores"][i] for r in runs.values()) for i in range(len(BUDGETS))]


def table(results: list[list[Any]]) -> list[str]:
    """Per space and lag: the median best/optimum at each budget; then the geomeans."""
    lags = sorted({lag for _, lag, _ in results})
    by = {(name, lag): medians(runs) for name, lag, runs in results}
    names = list(dict.fromkeys(name for name, _, _ in results))
    head = " | ".join(f"lag {lag} @{b}" for b in BUDGETS for lag in lags)
    lines = [f"| space | {head} |", "|---|" + "---:|" * (len(BUDGETS) * len(lags))]
    for name in names:
        cells = [f"{by[name, lag][i]:.3f}" for i in range(len(BUDGETS)) for lag in lags]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    geo = [f"**{geomean([by[n, lag][i] for n in names]):.3f}**" for i in range(len(BUDGETS)) for lag in lags]
    lines.append("| geomean | " + " | ".join(geo) + " |")
    return lines


def family_table(old: list[list[Any]], new: list[list[Any]], lag: int) -> list[str]:
    """The leave-one-kernel-out view of two versions at one lag: per family and overall, old -> new."""
    def by_family(results: list[list[Any]]) -> dict[str, list[list[float]]]:
        fam: dict[str, list[list[float]]] = defaultdict(list)
        for name, lg, runs in results:
            if lg == lag:
                fam[FAMILY_OF[name]].append(medians(runs))
        return fam

    a, b = by_family(old), by_family(new)
    fams = [f for f in a if f in b]
    lines = ["| budget | all: before -> after | " + " | ".join(fams) + " |",
             "|---|---|" + "---|" * len(fams)]
    for i, budget in enumerate(BUDGETS):
        every_a = [m[i] for f in fams for m in a[f]]
        every_b = [m[i] for f in fams for m in b[f]]
        cells = []
        for f in fams:
            ga, gb = geomean([m[i] for m in a[f]]), geomean([m[i] for m in b[f]])
            cells.append(f"{ga:.4f} -> {gb:.4f} ({100 * (gb / ga - 1):+.1f}%)")
        overall = f"{geomean(every_a):.4f} -> {geomean(every_b):.4f}"
        lines.append(f"| {budget} | {overall} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lags", default="0,8")
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tool", default="perftune",
                    help="perftune (the default search) or a variant, perftune-exp:quality_variants:<class>")
    ap.add_argument("--json", default="", help="write every run here (read it back with --against)")
    ap.add_argument("--against", default="", help="a --json file of another version: family table")
    args = ap.parse_args()
    lags = [int(x) for x in args.lags.split(",")]
    seeds = parse_seeds(args.seeds)
    jobs = [("t4", b, d, lag, seeds, args.tool) for b, d in DEV_SPACES for lag in lags]
    jobs += [("kt", b, d, lag, seeds, args.tool) for b, d in KT_DEV_SPACES for lag in lags]
    t0 = time.perf_counter()
    with Pool(args.workers) as pool:
        results = [list(r) for r in pool.map(run_space, jobs, chunksize=1)]
    print(f"{len(jobs)} jobs x {len(seeds)} seeds in {time.perf_counter() - t0:.0f} s\n")
    print("\n".join(table(results)))
    errors = {(name, lag): sum(r.get("n_errors", 0) for r in runs.values()) for name, lag, runs in results}
    if any(errors.values()):
        bad = ", ".join(f"{name} lag {lag}: {n}" for (name, lag), n in errors.items() if n)
        print(f"\nWARNING: internal errors of the search (proposals that fell back): {bad}")
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    if args.against:
        old = json.loads(Path(args.against).read_text())
        before = {(name, lag, seed): run["hash"] for name, lag, runs in old for seed, run in runs.items()}
        for lag in lags:
            same = sum(before.get((name, lg, seed)) == run["hash"]
                       for name, lg, runs in results if lg == lag for seed, run in runs.items())
            print(f"\nlag {lag}: before -> after (identical runs: {same})\n")
            print("\n".join(family_table(old, results, lag)))


if __name__ == "__main__":
    main()
