"""Multi-fidelity: best value reached per unit of compute, perftune with and without ASHA, and Optuna.

The objective (``--problem``, one of benchmarks/fidelity_problem.py's ``PROBLEMS``: ``nn``, a small
network trained for up to 27 epochs, value the validation cross-entropy; ``gbm``, gradient-boosted trees,
27 steps of 3 rounds, value the validation RMSE) reports its value after every step; the compute of a
trial is the steps it ran. Three tools, each given the same compute (``--compute`` steps, default 40
full trainings) per seed:

- ``perftune-asha``: ``perftune.tune(objective(config, trial), pruner=ASHA(eta=3, max_steps=27))``: the
  objective reports after every step and stops when ``trial.should_prune()`` says so (the product's
  defaults: 3 Hyperband-style brackets, 9 random configurations first; ``--brackets``, ``--allocation``
  and ``--random-starts`` give others);
- ``perftune-full``: the same search without fidelity: every trial trains 27 steps;
- ``optuna-hyperband``: Optuna's TPESampler + HyperbandPruner(1, 27, 3), run in Optuna's own virtual
  environment (benchmarks/peers/run_optuna_fidelity.py).

A curve is the best *full-fidelity* value (a trial that trained all 27 steps) after each trial, against
the compute spent so far. The table gives, for quality targets taken from ``perftune-full``'s median
curve, the median compute each tool needed to reach them (over seeds; "-" when fewer than half did),
and the ratio ``perftune-full / tool``. The goal: ``perftune-asha`` reaches the same quality with at
least 2x less compute.

Writes benchmarks/results/fidelity-PROBLEM.md (the table), fidelity-PROBLEM.png and
fidelity-PROBLEM-raw.json.

Usage::

    nice .venv/bin/python benchmarks/fidelity.py --problem nn --seeds 21 \\
        --optuna /work/wt-peers/.peers/optuna/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fidelity_problem as fp  # noqa: E402

TOOLS = ("perftune-asha", "perftune-full", "optuna-hyperband")
DESCRIPTIONS = {
    "nn": "a 20-feature, 2000-point classification task, a one-hidden-layer network, 5 hyperparameters, "
          "validation cross-entropy, a step is an epoch",
    "gbm": "Friedman #1 regression, 1000 points, gradient-boosted histogram trees, 5 hyperparameters, "
           "validation RMSE, a step is 3 boosting rounds",
}
RESULTS = os.path.join(HERE, "results")


def space(problem: str = "nn") -> Any:
    from perftune.space import Choice, Float, Int, LogFloat, Space

    kinds = {"log": LogFloat, "float": Float, "int": Int}
    params, _, _ = fp.PROBLEMS[problem]
    return Space({name: Choice(list(args)) if kind == "choice" else kinds[kind](*args)
                  for name, (kind, args) in params.items()})


def run_perftune(tool: str, compute: int, seed: int, problem: str = "nn",
                 pruner: dict[str, Any] | None = None) -> list[list[Any]]:
    """[[steps so far, value or None, status], ...] for each trial of one seeded run, in finish order."""
    import perftune
    from perftune.drive import ASHA

    _, steps, train = fp.PROBLEMS[problem]
    out: list[list[Any]] = []
    spent = [0]

    def record(tuner: Any, trial: Any) -> None:
        spent[0] += len(trial.intermediate) if tool == "perftune-asha" else steps
        out.append([spent[0], trial.value, trial.status.value])
        if spent[0] >= compute:
            tuner.stop("compute")

    if tool == "perftune-asha":
        def objective(config: Any, trial: Any) -> float:
            value = 0.0
            for epoch, value in enumerate(train(dict(config)), 1):
                trial.report(epoch, value)
                if trial.should_prune():
                    raise perftune.Pruned()
            return value

        perftune.tune(objective, space(problem), budget=10**6, seed=seed, callbacks=[record],
                      pruner=ASHA(eta=3, max_steps=steps, **(pruner or {})))
    else:
        def full(config: Any) -> float:
            *_, value = train(dict(config))
            return value

        perftune.tune(full, space(problem), budget=10**6, seed=seed, callbacks=[record])
    return out


def run_optuna(python: str, compute: int, seeds: list[int],
               problem: str = "nn") -> dict[int, list[list[Any]]]:
    script = os.path.join(HERE, "peers", "run_optuna_fidelity.py")
    done = subprocess.run([python, script, "--problem", problem, str(compute), *map(str, seeds)], check=True,
                          capture_output=True, text=True)
    return {int(k): v for k, v in json.loads(done.stdout).items()}


def best_at(curve: list[list[Any]], compute: float) -> float | None:
    """The best full-fidelity value among the trials finished within ``compute`` steps."""
    values = [v for c, v, s in curve if c <= compute and s == "ok" and v is not None]
    return min(values) if values else None


def compute_to(curve: list[list[Any]], target: float) -> float:
    """Steps spent when the best full-fidelity value first reached ``target`` (inf: never)."""
    best = float("inf")
    for c, v, s in curve:
        if s == "ok" and v is not None:
            best = min(best, v)
        if best <= target:
            return float(c)
    return float("inf")


def _median_or_none(xs: list[float]) -> float | None:
    m = statistics.median(xs)
    return None if m == float("inf") else m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", choices=sorted(fp.PROBLEMS), default="nn")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--compute", type=int, default=None, help="steps per run (default 40 full trainings)")
    parser.add_argument("--optuna", default="/work/wt-peers/.peers/optuna/bin/python")
    parser.add_argument("--brackets", type=int, default=None,
                        help="perftune-asha's ASHA brackets (default: ASHA's, one per rung)")
    parser.add_argument("--allocation", choices=("even", "hyperband"), default=None,
                        help="perftune-asha's ASHA allocation of trials to brackets (default: ASHA's)")
    parser.add_argument("--random-starts", type=int, default=None,
                        help="perftune-asha's ASHA random starts (default: ASHA's, eta**2)")
    args = parser.parse_args()
    given = {"brackets": args.brackets, "allocation": args.allocation, "random_starts": args.random_starts}
    pruner = {k: v for k, v in given.items() if v is not None}
    # Results of the default pruner are fidelity-PROBLEM.*; others say their settings in the name.
    name = "-".join([args.problem, *(f"{k.replace('_', '')}{v}" for k, v in pruner.items())])
    _, steps, _ = fp.PROBLEMS[args.problem]
    if args.compute is None:
        args.compute = 40 * steps
    seeds = list(range(args.seeds))
    started = time.time()
    load_before = os.getloadavg()
    curves: dict[str, dict[int, list[list[Any]]]] = {}
    seconds: dict[str, float] = {}
    for tool in TOOLS:
        t0 = time.time()
        if tool.startswith("optuna"):
            curves[tool] = run_optuna(args.optuna, args.compute, seeds, args.problem)
        else:
            curves[tool] = {s: run_perftune(tool, args.compute, s, args.problem, pruner) for s in seeds}
        seconds[tool] = time.time() - t0
        print(f"{tool}: {seconds[tool]:.0f} s", file=sys.stderr)
    load_after = os.getloadavg()

    # Quality targets: what perftune without fidelity reaches (median over seeds) at 1/4, 1/2 and all
    # of the compute.
    fractions = (0.25, 0.5, 1.0)
    targets = []
    for f in fractions:
        reached = [best_at(curves["perftune-full"][s], f * args.compute) for s in seeds]
        targets.append(statistics.median([r if r is not None else float("inf") for r in reached]))
    rows = []
    for tool in TOOLS:
        need = [_median_or_none([compute_to(curves[tool][s], q) for s in seeds]) for q in targets]
        finals = [best_at(curves[tool][s], args.compute) for s in seeds]
        n_trials = statistics.median(len(curves[tool][s]) for s in seeds)
        n_full = statistics.median(sum(1 for *_, st in curves[tool][s] if st == "ok") for s in seeds)
        rows.append((tool, need, statistics.median([f for f in finals if f is not None]), n_trials, n_full))
    base = rows[1][1]

    def ratio(b: float | None, x: float | None) -> str:
        return "-" if b is None or x is None or x == 0 else f"{b / x:.1f}x"

    lines = [
        "# Multi-fidelity: best value per unit of compute",
        "",
        "Command: `nice .venv/bin/python benchmarks/fidelity.py "
        f"--problem {args.problem} --seeds {args.seeds} --compute {args.compute} --optuna {args.optuna}"
        + "".join(f" --{k.replace('_', '-')} {v}" for k, v in pruner.items()) + "`",
        f"perftune-asha: `{_asha_text(steps, pruner)}`.",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; "
        f"wall {time.time() - started:.0f} s.",
        f"Machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"1-minute load average {load_before[0]:.1f} at the start, "
        f"{load_after[0]:.1f} at the end (compute is counted in steps, so the load does not change "
        "the numbers, only the wall time).",
        "",
        f"Objective: benchmarks/fidelity_problem.py, problem `{args.problem}` ({DESCRIPTIONS[args.problem]}, "
        f"up to {steps} steps). Each tool gets {args.compute} steps "
        f"(= {args.compute // steps} full trainings) per seed; {args.seeds} seeds "
        f"(0..{args.seeds - 1}).",
        "",
        "Compute (steps, median over seeds) to reach the quality `perftune-full` reaches at 1/4, 1/2 and "
        "all of the compute, and the ratio to `perftune-full` (higher is better; `-`: fewer than half "
        "the seeds got there):",
        "",
        "| tool | " + " | ".join(f"to {q:.4f} (full@{f:g})" for q, f in zip(targets, fractions, strict=True))
        + " | ratio at 1/4 | ratio at 1/2 | ratio at all | final best (median) | trials | full trials |",
        "|---|" + "---|" * (2 * len(targets) + 3),
    ]
    for tool, need, final, n_trials, n_full in rows:
        cells = ["-" if n is None else f"{n:.0f}" for n in need]
        ratios = [ratio(b, n) for b, n in zip(base, need, strict=True)]
        lines.append(f"| {tool} | " + " | ".join(cells) + " | " + " | ".join(ratios)
                     + f" | {final:.4f} | {n_trials:.0f} | {n_full:.0f} |")
    lines += [
        "",
        "Wall time per tool (all seeds, this shared machine): "
        + ", ".join(f"{t} {seconds[t]:.0f} s" for t in TOOLS) + ".",
        "",
        f"![best value against compute](fidelity-{name}.png)",
        "",
    ]
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"fidelity-{name}-raw.json"), "w") as f:
        json.dump({"problem": args.problem, "pruner": pruner, "compute": args.compute, "seeds": seeds,
                   "curves": curves}, f)
    _plot(curves, seeds, args.compute, os.path.join(RESULTS, f"fidelity-{name}.png"))
    with open(os.path.join(RESULTS, f"fidelity-{name}.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def _asha_text(steps: int, pruner: dict[str, Any]) -> str:
    """The pruner as it ran, its defaults resolved: ``ASHA(eta=3, max_steps=27, brackets=3, ...)``."""
    from perftune.drive import ASHA

    p = ASHA(eta=3, max_steps=steps, **pruner)
    return (f"ASHA(eta=3, max_steps={steps}, brackets={p.brackets}, allocation={p.allocation!r}, "
            f"random_starts={p.random_starts})")


def _plot(curves: dict[str, dict[int, list[list[Any]]]], seeds: list[int], compute: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.linspace(compute / 60, compute, 60)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for tool in TOOLS:
        ys = np.array([[best_at(curves[tool][s], g) or np.nan for g in grid] for s in seeds], dtype=float)
        # Early grid points where no seed has a full evaluation yet are NaN: not worth a warning.
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med = np.nanmedian(ys, axis=0)
            lo, hi = np.nanpercentile(ys, 25, axis=0), np.nanpercentile(ys, 75, axis=0)
        ax.plot(grid, med, label=tool)
        ax.fill_between(grid, lo, hi, alpha=0.2)
    ax.set_xlabel("compute (steps trained, all trials)")
    ax.set_ylabel("best full-fidelity validation loss")
    ax.set_title(f"median and interquartile range over {len(seeds)} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
