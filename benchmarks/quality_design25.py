"""What the first measurements of a search find without any search: initial designs replayed.

For each development space of ``quality.py`` and ``--reps`` repetitions, the best of the first ``--n``
configurations of:

- ``uniform``: uniform over the valid configurations (what ``random`` and ``Space.sample`` draw);
- ``boundary``: perftune's initial design (``Boundary`` with ``design_settings(space)``; the default
  search's first 16);
- ``lhs-low`` / ``lhs-high`` / ``lhs-random``: Kernel Tuner's initial population for differential
  evolution (``Searchspace.get_LHS_sample``: a Latin hypercube over the parameters' value indices, each
  point moved to the valid configuration with the smallest sum of index differences), with ties among
  the nearest valid configurations broken towards the first in lexicographic order (smaller values),
  the last (larger values), or at random.

The table is the median over the repetitions of best / optimum. Nothing is measured: every number is a
look-up in the replayed data, so the machine's load does not matter.

Usage::

    .venv/bin/python benchmarks/quality_design25.py --n 25 --reps 100 \
        --out benchmarks/results/quality_design25.md
"""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _problems import all_problem_specs, make_problem  # noqa: E402
from run_perftune import build_space  # noqa: E402

DESIGNS = ("uniform", "boundary", "lhs-low", "lhs-high", "lhs-random")


def lhs_snapped(index: np.ndarray, upper: np.ndarray, n: int, seed: int, tie: str) -> list[int]:
    """Kernel Tuner's LHS sample: rows of ``index`` (valid configurations as value indices) nearest to
    the points of a Latin hypercube over the index ranges."""
    from scipy.stats.qmc import LatinHypercube

    rng = np.random.default_rng(seed)
    points = LatinHypercube(index.shape[1], seed=seed).integers(
        l_bounds=np.zeros(index.shape[1], dtype=int), u_bounds=upper, n=n, endpoint=True)
    out = []
    for point in points:
        distance = np.abs(index - point).sum(axis=1)
        ties = np.flatnonzero(distance == distance.min())
        out.append(int(ties[0] if tie == "low" else ties[-1] if tie == "high" else rng.choice(ties)))
    return out


def main() -> None:
    from perftune.search import Boundary
    from perftune.search._boundary import design_settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=25, help="first configurations counted")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows: dict[str, dict[str, float]] = {}
    for spec in all_problem_specs():
        if spec["kind"] != "table":
            continue
        problem = make_problem(spec)
        space = build_space(problem)
        names = [p.name for p in problem.params]
        values = [p.values for p in problem.params]
        valid = problem.valid_keys()  # lexicographic order of the T1 values
        index = np.array([[values[j].index(c[j]) for j in range(len(names))] for c in valid])
        upper = np.array([len(v) - 1 for v in values])

        def score(keys: list[tuple[Any, ...]], problem: Any = problem) -> float:
            found = [v for k in keys if (v := problem.table.get(k)) is not None]
            return min(found) / problem.optimum if found else math.inf

        row: dict[str, float] = {}
        for design in DESIGNS:
            scores = []
            for r in range(args.reps):
                if design == "uniform":
                    rng = np.random.default_rng(r)
                    keys = [valid[i] for i in rng.choice(len(valid), args.n, replace=False)]
                elif design == "boundary":
                    tech = Boundary(space, seed=r, settings=design_settings(space))
                    keys = [tuple(c[n] for n in names) for c in tech.ask(args.n)]
                else:
                    keys = [valid[i] for i in lhs_snapped(index, upper, args.n, r, design.split("-")[1])]
                scores.append(score(keys))
            row[design] = statistics.median(scores)
        rows[problem.name] = row
        print(problem.name, {k: round(v, 3) for k, v in row.items()}, flush=True)
    lines = [f"# The first {args.n} configurations of initial designs, replayed (no search)", "",
             f"- Command: `python benchmarks/quality_design25.py --n {args.n} --reps {args.reps}"
             + (f" --out {args.out}`" if args.out else "`"),
             f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; Python "
             f"{platform.python_version()}; look-ups only (the machine's load does not change the numbers).",
             f"- Cells: median over {args.reps} repetitions of the best of the first {args.n} / optimum.", "",
             "| space | " + " | ".join(DESIGNS) + " |", "|---|" + "---|" * len(DESIGNS)]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[d]:.3f}" for d in DESIGNS) + " |")
    geo = {d: math.exp(statistics.mean(math.log(r[d]) for r in rows.values())) for d in DESIGNS}
    lines.append("| geomean | " + " | ".join(f"{geo[d]:.3f}" for d in DESIGNS) + " |")
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
