"""Real-valued test functions: how perftune's default search does on spaces of real numbers only.

This is the evidence behind ``perftune.search.CONTINUOUS_PORTFOLIO``, the bandit portfolio that the
default search uses when every parameter is a real number. It runs perftune's default search, the
general portfolio that such spaces used before (``DEFAULT_PORTFOLIO``, still the one for spaces that
mix real numbers with other types) and uniform random search on 13 classic test functions, 300
evaluations each, 20 seeds. Several functions are shifted by a per-seed random offset so that the
optimum is not at the centre of the box, one is rotated and ill-conditioned, one is noisy (scored on
the noise-free value of the configuration the search believed best) and three are multimodal.
The peers' results on OpenTuner's Rosenbrock are in ``quality.md``; this suite compares perftune's
portfolios with each other.

Output: a table of the median over seeds of (best - optimum), the number of seeds within 1.0 of the
optimum, and the mean of log10(max(best - optimum, 1e-12)), per function and search;
``--out`` writes it as Markdown.

Usage::

    .venv/bin/python benchmarks/continuous.py                      # everything, 20 seeds (~2 minutes)
    .venv/bin/python benchmarks/continuous.py --functions rosen2 --seeds 0-39
    .venv/bin/python benchmarks/continuous.py --out benchmarks/results/continuous.md
    .venv/bin/python benchmarks/continuous.py --lag 8 --searches default   # as a seeded run's default lag
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import perftune
from perftune import search
from perftune.space import Float, Space

Objective = Callable[[np.ndarray], float]


@dataclass
class Problem:
    bounds: list[tuple[float, float]]
    measure: Objective  # what the search sees
    truth: Objective  # what the result is scored on (differs only for the noisy function)
    optimum: float


def _rosen(x: np.ndarray) -> float:
    return float(np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2))


def _plain(bounds: list[tuple[float, float]], f: Objective, optimum: float = 0.0) -> Problem:
    return Problem(bounds, f, f, optimum)


def _problem(name: str, seed: int) -> Problem:
    """The test function ``name``; shifted functions draw their offset from ``seed``."""
    rng = np.random.default_rng(1000 + seed)
    if name == "rosen2":  # OpenTuner's example: optimum (1, 1), near the centre of a huge box
        return _plain([(-1000.0, 1000.0)] * 2, _rosen)
    if name == "rosen2-shifted":
        s = rng.uniform(-600, 600, 2)
        return _plain([(-1000.0, 1000.0)] * 2, lambda x: _rosen(x - s + 1.0))
    if name == "rosen2-noisy":  # shifted, 2% multiplicative noise
        s = rng.uniform(-600, 600, 2)
        noise = np.random.default_rng(seed)
        return Problem([(-1000.0, 1000.0)] * 2, lambda x: _rosen(x - s + 1.0) * (1 + 0.02 * noise.normal()),
                       lambda x: _rosen(x - s + 1.0), 0.0)
    if name == "rosen4":
        return _plain([(-2.048, 2.048)] * 4, _rosen)
    if name == "branin":
        def branin(x: np.ndarray) -> float:
            b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
            return float((x[1] - b * x[0] ** 2 + c * x[0] - 6) ** 2 + 10 * (1 - t) * math.cos(x[0]) + 10)
        return _plain([(-5.0, 10.0), (0.0, 15.0)], branin, 0.397887)
    if name == "himmelblau":
        return _plain([(-6.0, 6.0)] * 2,
                      lambda x: float((x[0] ** 2 + x[1] - 11) ** 2 + (x[0] + x[1] ** 2 - 7) ** 2))
    if name == "sphere5-shifted":
        s = rng.uniform(-80, 80, 5)
        return _plain([(-100.0, 100.0)] * 5, lambda x: float(np.sum((x - s) ** 2)))
    if name == "sphere10-shifted":
        s = rng.uniform(-3, 3, 10)
        return _plain([(-5.0, 5.0)] * 10, lambda x: float(np.sum((x - s) ** 2)))
    if name == "ellipsoid3-rotated":  # condition number 1000, random rotation, shifted
        s = rng.uniform(-3, 3, 3)
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        w = np.array([1.0, 30.0, 1000.0])
        return _plain([(-5.0, 5.0)] * 3, lambda x: float(np.sum(w * (q @ (x - s)) ** 2)))
    if name == "styblinski-tang4":  # multimodal, 2^4 local minima
        return _plain([(-5.0, 5.0)] * 4, lambda x: float(0.5 * np.sum(x**4 - 16 * x**2 + 5 * x)),
                      -39.16617 * 4)
    if name == "rastrigin2-shifted":  # multimodal, a regular grid of local minima
        s = rng.uniform(-3, 3, 2)
        return _plain([(-5.12, 5.12)] * 2,
                      lambda x: float(20 + np.sum((x - s) ** 2 - 10 * np.cos(2 * np.pi * (x - s)))))
    if name == "ackley2-shifted":
        s = rng.uniform(-20, 20, 2)

        def ackley(x: np.ndarray) -> float:
            z = x - s
            ripple = np.exp(0.5 * np.sum(np.cos(2 * np.pi * z)))
            return float(-20 * np.exp(-0.2 * np.sqrt(0.5 * np.sum(z * z))) - ripple + math.e + 20)
        return _plain([(-32.0, 32.0)] * 2, ackley)
    if name == "levy3":
        def levy(x: np.ndarray) -> float:
            w = 1 + (x - 1) / 4
            return float(np.sin(np.pi * w[0]) ** 2
                         + np.sum((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:-1] + 1) ** 2))
                         + (w[-1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[-1]) ** 2))
        return _plain([(-10.0, 10.0)] * 3, levy)
    raise KeyError(name)


FUNCTIONS = ["rosen2", "rosen2-shifted", "rosen2-noisy", "rosen4", "branin", "himmelblau", "sphere5-shifted",
             "sphere10-shifted", "ellipsoid3-rotated", "styblinski-tang4", "rastrigin2-shifted",
             "ackley2-shifted", "levy3"]


def _technique(search_name: str) -> str:
    """The technique name for a search of this benchmark, registering the comparison ones."""
    if search_name in ("default", "random"):
        return search_name
    if search_name == "general":  # the general portfolio on the same staged search
        name = "bench-general-portfolio"
        if name not in search.names():
            base = search.StagedBandit

            class General(base):  # type: ignore[misc, valid-type]
                def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
                    super().__init__(space, seed=seed,
                                     settings=search.StagedSettings(techniques=search.DEFAULT_PORTFOLIO))

            General.name = name
            search.register(General)
        return name
    raise KeyError(search_name)


def run(function: str, search_name: str, seed: int, budget: int, lag: int = 0) -> float:
    """best - optimum after ``budget`` evaluations (scored on the noise-free value); ``lag``: results
    reach the search that many proposals late, as in a seeded run with ``lag + 1`` evaluations in flight."""
    p = _problem(function, seed)
    names = [f"x{i}" for i in range(len(p.bounds))]
    space = Space({n: Float(lo, hi) for n, (lo, hi) in zip(names, p.bounds, strict=True)})
    tuner = perftune.Tuner(space, seed=seed, technique=_technique(search_name), lag=lag)
    best, best_x = math.inf, None
    for _ in range(budget):
        trial = tuner.ask()
        if trial is None:
            break
        x = np.array([trial.config[n] for n in names], dtype=float)
        value = p.measure(x)
        tuner.tell(trial, value)
        if value < best:
            best, best_x = value, x
    assert best_x is not None
    return p.truth(best_x) - p.optimum


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", default=",".join(FUNCTIONS))
    ap.add_argument("--searches", default="default,general,random")
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--lag", type=int, default=0,
                    help="results reach the search this many proposals late (seeded runs' default: 8)")
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    functions, searches, seeds = a.functions.split(","), a.searches.split(","), _seeds(a.seeds)
    rows = []
    for fn in functions:
        for s in searches:
            t0 = time.perf_counter()
            gaps = [max(run(fn, s, seed, a.budget, a.lag), 0.0) for seed in seeds]
            row = (fn, s, statistics.median(gaps), sum(g < 1.0 for g in gaps),
                   float(np.mean(np.log10(np.maximum(gaps, 1e-12)))), time.perf_counter() - t0)
            rows.append(row)
            print(f"{fn:20s} {s:8s} median {row[2]:10.3g}  within 1: {row[3]:2d}/{len(seeds)}  "
                  f"mean log10 {row[4]:7.2f}  ({row[5]:.0f} s)", flush=True)
    if a.out:
        args = sys.argv[1:] if argv is None else argv
        lines = [
            "# Real-valued test functions: perftune's searches compared",
            "",
            f"- Command: `python benchmarks/continuous.py {' '.join(args)}`",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
            f"Python {platform.python_version()}; {a.budget} evaluations, seeds {a.seeds}, lag {a.lag}.",
            "- `default`: perftune's default search (on these spaces: the bandit over CONTINUOUS_PORTFOLIO); "
            "`general`: the same bandit over DEFAULT_PORTFOLIO (the previous choice for these spaces); "
            "`random`: uniform random search.",
            "- Cells: median over seeds of best - optimum; in brackets, seeds within 1.0 of the optimum "
            "and the mean of log10(max(best - optimum, 1e-12)).",
            "",
            "| function | " + " | ".join(searches) + " |",
            "|---|" + "---:|" * len(searches),
        ]
        by = {(r[0], r[1]): r for r in rows}
        for fn in functions:
            cells = [f"{by[fn, s][2]:.3g} ({by[fn, s][3]}/{len(seeds)}, {by[fn, s][4]:.1f})"
                     for s in searches]
            lines.append(f"| {fn} | " + " | ".join(cells) + " |")
        with open(a.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
