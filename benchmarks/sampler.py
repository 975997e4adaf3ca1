"""PerftuneSampler through Optuna's API against perftune's own driver, on the twelve development spaces.

The spaces, the counting rules and the scores are those of ``benchmarks/quality.py`` (issue [10]):
benchmark-hub T1/T4 and Kernel Tuner cache replays, the budget is the number of measured configurations
(failures count; proposals that break the space's restrictions and repeats are answered but not counted),
and a run's score at a budget is best-found / optimum. Rows, each run here, in this process:

* ``perftune``: perftune's default search through ``perftune.Tuner`` (lag 0, the default configuration
  first), exactly as ``benchmarks/peers/run_perftune.py`` runs it for quality.md.
* ``sampler+constraints``: ``optuna.create_study(sampler=PerftuneSampler(seed=s, constraints=...))`` and
  ``study.optimize``: the objective suggests each parameter (ordered value lists with
  ``suggest_categorical``, Optuna's idiom) and raises ``optuna.TrialPruned`` for a configuration that
  breaks the restrictions or failed, as ``run_optuna.py`` does for Optuna's TPE. The space's
  restrictions are given to the sampler (``constraints=``), as a perftune user porting a study would.
* ``sampler``: the same without ``constraints=``: the sampler learns the restrictions as failures.

Noise: for each (space, budget) the median over the seeds is shown with a 95% seed-bootstrap interval
(2000 resamples of the seeds); two rows agree *within noise* when their intervals overlap. The
geometric means over the twelve spaces get intervals the same way (seeds resampled within each space).

Usage::

    .venv/bin/pip install -e '.[optuna]'
    nice .venv/bin/python benchmarks/sampler.py --seeds 0-19            # run, then write the report
    .venv/bin/python benchmarks/sampler.py --report-only                # rebuild sampler.md from sampler.json

Output: ``benchmarks/results/sampler.md`` (tables) and ``benchmarks/results/sampler.json`` (every run's
score at each budget, its number of Optuna trials and its time per trial).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE / "peers"))

from _problems import (  # noqa: E402
    BUDGETS,
    BudgetSpent,
    Ledger,
    Problem,
    all_problem_specs,
    make_problem,
    parse_seeds,
    scores_after,
)

TOOLS = ("perftune", "sampler+constraints", "sampler")
#: Rows of quality.md shown for context, from its stored runs (not rerun here).
STORED = ("perftune", "optuna-tpe")
N_BOOT = 2000


def run_perftune(problem: Problem, seed: int, ledger: Ledger) -> None:
    from run_perftune import run_one

    run_one(problem, "perftune", seed, ledger)


def run_sampler(problem: Problem, seed: int, ledger: Ledger, constraints: bool) -> int:
    """One seeded study through ``study.optimize``; returns the number of Optuna trials."""
    import optuna

    from perftune.integration.optuna import PerftuneSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = PerftuneSampler(seed=seed, constraints=list(problem.constraints) if constraints else ())
    study = optuna.create_study(sampler=sampler, direction="minimize")

    def objective(trial: optuna.trial.Trial) -> float:
        config: dict[str, Any] = {}
        for p in problem.params:
            if p.kind == "int":
                config[p.name] = trial.suggest_int(p.name, int(p.lo), int(p.hi))
            else:  # ordinal and choice: a list of allowed values
                config[p.name] = trial.suggest_categorical(p.name, list(p.values))
        try:
            status, value = ledger.evaluate(config)
        except BudgetSpent:
            trial.study.stop()
            raise optuna.TrialPruned("budget spent") from None
        if ledger.done:
            trial.study.stop()
        if status == "ok" and value is not None:
            return value
        raise optuna.TrialPruned(status)  # invalid or failed: no value, as run_optuna.py tells TPE

    study.optimize(objective, n_trials=ledger.max_asks + 1)
    return len(study.trials)


def run_all(seeds: list[int], tools: list[str], budget: int, out_path: Path) -> None:
    data = json.loads(out_path.read_text()) if out_path.exists() else {"runs": []}
    done = {(r["problem"], r["tool"], r["seed"]) for r in data["runs"]}
    specs = [s for s in all_problem_specs() if s["kind"] == "table"]
    for spec in specs:
        problem = make_problem(spec)
        for tool in tools:
            t_tool = time.perf_counter()
            for seed in seeds:
                if (problem.name, tool, seed) in done:
                    continue
                ledger = Ledger(problem, budget)
                t0 = time.perf_counter()
                n_trials = None
                if tool == "perftune":
                    run_perftune(problem, seed, ledger)
                else:
                    n_trials = run_sampler(problem, seed, ledger, constraints=tool == "sampler+constraints")
                wall = time.perf_counter() - t0
                data["runs"].append({
                    "problem": problem.name, "tool": tool, "seed": seed,
                    "scores": scores_after(problem, ledger.values),
                    "n_measured": len(ledger.values), "n_asked": ledger.n_asked,
                    "n_invalid": ledger.n_invalid, "n_repeat": ledger.n_repeat,
                    "n_optuna_trials": n_trials, "stalled": ledger.stalled,
                    "ms_per_ask": 1000 * max(wall - ledger.measure_s, 0.0) / max(ledger.n_asked, 1),
                })
            out_path.write_text(json.dumps(data, indent=0))
            print(f"{problem.name:28s} {tool:20s} {time.perf_counter() - t_tool:7.1f} s", flush=True)
    data["meta"] = {
        "command": "python benchmarks/sampler.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_avg_5min_at_end": round(os.getloadavg()[1], 1),
    }
    import optuna

    data["meta"]["optuna"] = optuna.__version__
    out_path.write_text(json.dumps(data, indent=0))


def _boot_median(rng: np.random.Generator, xs: np.ndarray) -> tuple[float, float]:
    idx = rng.integers(0, len(xs), size=(N_BOOT, len(xs)))
    medians = np.median(xs[idx], axis=1)
    return float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def _boot_geomean(rng: np.random.Generator, per_space: list[np.ndarray]) -> tuple[float, float]:
    logs = []
    for xs in per_space:
        idx = rng.integers(0, len(xs), size=(N_BOOT, len(xs)))
        logs.append(np.log(np.median(xs[idx], axis=1)))
    g = np.exp(np.mean(logs, axis=0))
    return float(np.percentile(g, 2.5)), float(np.percentile(g, 97.5))


def _stored_geomeans(problems: list[str], tool: str) -> list[float] | None:
    """Geomeans over the spaces of the median score per budget, from quality.py's stored runs."""
    import gzip

    specs = {make_problem(s).name: s for s in all_problem_specs() if s["kind"] == "table"}
    logs: list[list[float]] = [[] for _ in BUDGETS]
    for name in problems:
        path = RESULTS / "quality_raw" / name / f"{tool}.jsonl.gz"
        if not path.exists() or name not in specs:
            return None
        problem = make_problem(specs[name])
        with gzip.open(path, "rt") as f:
            runs = [json.loads(line) for line in f if line.strip()]
        for b in range(len(BUDGETS)):
            xs = [scores_after(problem, r["values"])[b] for r in runs]
            logs[b].append(math.log(statistics.median(xs)))
    return [math.exp(statistics.fmean(ls)) for ls in logs]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def report(out_path: Path, md_path: Path) -> None:
    data = json.loads(out_path.read_text())
    meta = data.get("meta", {})
    runs = data["runs"]
    tools = [t for t in TOOLS if any(r["tool"] == t for r in runs)]
    problems = list(dict.fromkeys(r["problem"] for r in runs))
    rng = np.random.default_rng(0)

    def scores(problem: str, tool: str, b: int) -> np.ndarray:
        return np.array([r["scores"][b] for r in runs if r["problem"] == problem and r["tool"] == tool])

    n_seeds = {t: sorted({len(scores(p, t, 0)) for p in problems}) for t in tools}
    lines = [
        "# PerftuneSampler through Optuna's API vs perftune's own driver (development replay spaces)",
        "",
        f"- Command: `{meta.get('command', 'python benchmarks/sampler.py')}` (then `--report-only`).",
        f"- Date: {meta.get('date', '?')}; Optuna {meta.get('optuna', '?')}.",
        f"- Machine: {meta.get('machine', '?')} (load average "
        f"{meta.get('load_avg_5min_at_end', '?')} over the 5 minutes before the run ended; on a shared or "
        "loaded machine the times per trial are inflated, the scores are not: the measurements are "
        "replayed).",
        "- Seeds per (space, row): " + ", ".join(f"{t}: {'/'.join(map(str, n))}" for t, n in n_seeds.items())
        + ". Cells: median over the seeds of best-found / optimum, with the 95% seed-bootstrap interval "
        "of the median in brackets.",
        "- Rows: `perftune` = perftune.Tuner with its default search (lag 0, default configuration first); "
        "`sampler+constraints` = `study.optimize` with `PerftuneSampler(seed=s, constraints=<the space's "
        "restrictions>)`; `sampler` = the same without `constraints=` (restrictions learnt as failures). "
        "Invalid proposals and repeats are answered but do not count against the budget "
        "(quality.py's rules).",
        "- Noise: two rows agree within noise at a (space, budget) when their bootstrap intervals overlap "
        "(column `overlap`).",
        "- Differences by design between the rows: the Tuner measures the space's default configuration "
        "first, a study's first trial is sampled independently (at random) and the sampler proposes from "
        "the second on; the study's space comes from the suggest calls (ordered value lists as "
        "categoricals, searched as Ordinal by the sampler), the Tuner's from run_perftune.py's mapping "
        "(the product's replay loader for the benchmark-hub spaces).",
        "",
        "## Geometric mean over the 12 spaces",
        "",
        "| row | " + " | ".join(f"@{b}" for b in BUDGETS) + " |",
        "|---|" + "---|" * len(BUDGETS),
    ]
    geo_ci: dict[tuple[str, int], tuple[float, float]] = {}
    for tool in tools:
        cells = []
        for b in range(len(BUDGETS)):
            per_space = [scores(p, tool, b) for p in problems]
            if any(len(xs) == 0 for xs in per_space):
                cells.append("—")
                continue
            g = math.exp(statistics.fmean(math.log(float(np.median(xs))) for xs in per_space))
            lo, hi = _boot_geomean(rng, per_space)
            geo_ci[(tool, b)] = (lo, hi)
            cells.append(f"{g:.3f} [{lo:.3f}, {hi:.3f}]")
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    for stored in STORED:
        per_budget = _stored_geomeans(problems, stored)
        if per_budget is not None:
            lines.append(f"| {stored} (stored runs of quality.md) | "
                         + " | ".join(f"{g:.3f}" for g in per_budget) + " |")
    lines.append("")
    agree: dict[str, list[str]] = {t: [] for t in tools if t != "perftune"}
    per_space_lines = []
    for problem in problems:
        per_space_lines += [f"### {problem}", "", "| row | " + " | ".join(f"@{b}" for b in BUDGETS)
                            + " | ms/trial | trials/measured |", "|---|" + "---|" * (len(BUDGETS) + 2)]
        ci: dict[tuple[str, int], tuple[float, float]] = {}
        for tool in tools:
            if len(scores(problem, tool, 0)) == 0:
                continue  # not run (yet) on this space
            cells = []
            for b in range(len(BUDGETS)):
                xs = scores(problem, tool, b)
                lo, hi = _boot_median(rng, xs)
                ci[(tool, b)] = (lo, hi)
                cells.append(f"{float(np.median(xs)):.3f} [{lo:.3f}, {hi:.3f}]")
            rs = [r for r in runs if r["problem"] == problem and r["tool"] == tool]
            ms = statistics.median(r["ms_per_ask"] for r in rs)
            ratio = statistics.median(r["n_asked"] / max(r["n_measured"], 1) for r in rs)
            per_space_lines.append(f"| {tool} | " + " | ".join(cells) + f" | {ms:.2f} | {ratio:.2f} |")
        for tool in agree:
            if (tool, 0) not in ci or ("perftune", 0) not in ci:
                continue
            marks = []
            for b in range(len(BUDGETS)):
                ok = _overlap(ci[("perftune", b)], ci[(tool, b)])
                marks.append("yes" if ok else "**no**")
                if not ok:
                    agree[tool].append(f"{problem}@{BUDGETS[b]}")
            per_space_lines.append(f"| overlap {tool} vs perftune | " + " | ".join(marks) + " | | |")
        per_space_lines.append("")
    for tool, misses in agree.items():
        n_pairs = len(problems) * len(BUDGETS)
        geo = [b for b in range(len(BUDGETS)) if (tool, b) in geo_ci and not _overlap(
            geo_ci[("perftune", b)], geo_ci[(tool, b)])]
        lines.append(f"**{tool}**: within noise of perftune on {n_pairs - len(misses)} of {n_pairs} (space, "
                     f"budget) pairs" + (f"; outside: {', '.join(misses)}" if misses else "") + "; geomean "
                     + ("intervals overlap at every budget." if not geo else
                        "intervals do not overlap at " + ", ".join(f"@{BUDGETS[b]}" for b in geo) + "."))
        lines.append("")
    lines += ["## Per space", ""] + per_space_lines
    md_path.write_text("\n".join(lines) + "\n")
    print(md_path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--budget", type=int, default=max(BUDGETS))
    ap.add_argument("--out", default=str(RESULTS / "sampler.json"))
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    out_path = Path(args.out)
    if not args.report_only:
        run_all(parse_seeds(args.seeds), args.tools.split(","), args.budget, out_path)
    report(out_path, out_path.with_suffix(".md"))


if __name__ == "__main__":
    main()
