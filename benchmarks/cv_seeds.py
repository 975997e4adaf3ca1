"""The leave-one-kernel-out rule on many seeds, and how much of a verdict the seed draw decides.

``lag.py --json`` keeps every run of a search (best/optimum at 25, 50, 100 and 200 measurements, per
space and seed). This script reads such files for the default (``--baseline``) and for variants, and
applies the rule of ``cv.py`` (no family worse than the default by more than 1% at any budget, the
geomean over the twelve spaces and four budgets lower) to blocks of seeds: each block of ``--block``
seeds, each file's seeds, and all of them together. ``--aa`` compares the baseline's blocks with each
other (the same search on other seeds): what a verdict looks like when nothing changed, the noise floor
of the rule.

Usage::

    .venv/bin/python benchmarks/lag.py --lags 0 --seeds 0-99 --json /tmp/base-a.json
    .venv/bin/python benchmarks/lag.py --lags 0 --seeds 100-199 --json /tmp/base-b.json
    .venv/bin/python benchmarks/lag.py --lags 0 --seeds 0-99 --tool perftune-exp:quality_variants:X \\
        --json /tmp/x-a.json   # and 100-199 into /tmp/x-b.json
    .venv/bin/python benchmarks/cv_seeds.py --baseline /tmp/base-a.json,/tmp/base-b.json \\
        --variant X=/tmp/x-a.json,/tmp/x-b.json --aa

The runs of decision 6 (``results/cv_notes.md``) are kept, gzipped, in ``results/cv_runs/``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cv import FAMILIES, TOLERANCE  # noqa: E402

BUDGETS = (25, 50, 100, 200)

Runs = dict[str, dict[int, list[float]]]  # space -> seed -> score at each budget


def _read(path: str) -> Any:
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(Path(path).read_text())


def load(paths: str) -> Runs:
    """The runs of one or more ``lag.py --json`` files (lag 0; ``.gz`` too), merged by space and seed."""
    out: Runs = {}
    for path in paths.split(","):
        for name, lag, runs in _read(path):
            if lag != 0:
                continue
            for seed, run in runs.items():
                out.setdefault(name, {})[int(seed)] = run["scores"]
    return out


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def cells(runs: Runs, seeds: list[int]) -> dict[tuple[str, int], float]:
    """(family, budget) -> geomean over the family's spaces of the median over ``seeds``."""
    out = {}
    for family, spaces in FAMILIES:
        for i, budget in enumerate(BUDGETS):
            out[family, budget] = _geomean([statistics.median(runs[s][k][i] for k in seeds) for s in spaces])
    return out


def overall(runs: Runs, seeds: list[int]) -> float:
    spaces = [s for _, names in FAMILIES for s in names]
    return _geomean([statistics.median(runs[s][k][i] for k in seeds) for s in spaces for i in range(4)])


def verdict(base: Runs, variant: Runs, seeds: list[int]) -> dict[str, Any]:
    """The rule on ``seeds``: overall before/after, the worst family cell, and whether it passes."""
    a, b = cells(base, seeds), cells(variant, seeds)
    change = {key: b[key] / a[key] - 1 for key in a}
    worst = max(change, key=lambda k: change[k])
    before, after = overall(base, seeds), overall(variant, seeds)
    passes = change[worst] <= TOLERANCE and after < before
    return {"before": before, "after": after, "worst": worst, "worst_change": change[worst], "passes": passes}


def family_table(base: Runs, variant: Runs, seeds: list[int]) -> list[str]:
    """The leave-one-kernel-out table: per family and budget, default / variant and the change."""
    a, b = cells(base, seeds), cells(variant, seeds)
    lines = ["| family | " + " | ".join(f"@{budget}" for budget in BUDGETS) + " |",
             "|---|" + "---|" * len(BUDGETS)]
    for family, _ in FAMILIES:
        row = []
        for budget in BUDGETS:
            before, after = a[family, budget], b[family, budget]
            row.append(f"{before:.4f} / {after:.4f} ({100 * (after / before - 1):+.1f}%)")
        lines.append(f"| {family} | " + " | ".join(row) + " |")
    return lines


def _seed_text(seeds: list[int]) -> str:
    contiguous = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}-{seeds[-1]}" if contiguous else f"{len(seeds)} seeds"


def _row(label: str, v: dict[str, Any]) -> str:
    family, budget = v["worst"]
    return (f"| {label} | {v['before']:.4f} -> {v['after']:.4f} | {family} @{budget} "
            f"{100 * v['worst_change']:+.1f}% | {'pass' if v['passes'] else 'fail'} |")


def blocks(seeds: list[int], size: int) -> list[list[int]]:
    return [seeds[i:i + size] for i in range(0, len(seeds) - size + 1, size)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="lag.py --json files of the default, comma-separated")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FILE[,FILE]")
    ap.add_argument("--block", type=int, default=20, help="seeds per block (default 20, the rule's count)")
    ap.add_argument("--aa", action="store_true", help="also compare the baseline's blocks with each other")
    args = ap.parse_args()
    base = load(args.baseline)
    base_seeds = sorted(set.intersection(*(set(r) for r in base.values())))
    head = ["| seeds | overall: default -> variant | worst family cell | rule |", "|---|---|---|---|"]
    if args.aa:
        print(f"### A/A: the default on blocks of {args.block} seeds against its first block\n")
        print("\n".join(head))
        first, *rest = blocks(base_seeds, args.block)
        for block in rest:
            shifted = {s: {k: runs[b] for k, b in zip(first, block, strict=True)} for s, runs in base.items()}
            print(_row(f"{_seed_text(first)} vs {_seed_text(block)}", verdict(base, shifted, first)))
        print()
    for spec in args.variant:
        name, _, paths = spec.partition("=")
        variant = load(paths)
        seeds = sorted(set(base_seeds) & set.intersection(*(set(r) for r in variant.values())))
        print(f"### `{name}` against the default\n")
        print("\n".join(head))
        for block in blocks(seeds, args.block):
            print(_row(_seed_text(block), verdict(base, variant, block)))
        per_file = [sorted(set(load(p)[next(iter(variant))]) & set(seeds)) for p in paths.split(",")]
        if len(per_file) > 1:
            for file_seeds in per_file:
                print(_row(f"**{_seed_text(file_seeds)}**", verdict(base, variant, file_seeds)))
        print(_row(f"**all {_seed_text(seeds)}**", verdict(base, variant, seeds)))
        print(f"\nPer family on all {_seed_text(seeds)} (default / variant, the median over the seeds):\n")
        print("\n".join(family_table(base, variant, seeds)))
        print()


if __name__ == "__main__":
    main()
