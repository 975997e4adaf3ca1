"""Multi-objective search: hypervolume after 100 and 300 evaluations, perftune against Optuna.

Problems (``benchmarks/mo_problems.py``): ZDT1, ZDT2, ZDT3 (30 variables, two objectives), DTLZ2 (12
variables, three objectives), and gcc flags on two bundled programs (matmul, hashsort): time against
code size over a reduced space (-O1/-O2/-O3/-Os and eight on/off flags: 1024 configurations each),
measured once into a table (``--measure-flags``) so that every tool and seed sees the same numbers.

Tools, side by side in one run: perftune's default multi-objective search (``mo-bandit``), perftune's
``nsga2`` alone, Optuna's NSGAIISampler and multi-objective TPESampler (their default settings, run by
``benchmarks/peers/run_optuna_mo.py`` in the Optuna virtual environment). Each run has 300
evaluations; the hypervolume after 100 is that of its first 100 evaluations (neither tool's proposals
depend on the budget, so that is what a run of 100 would have measured). Hypervolume: exact
(``perftune.search.hypervolume``), of the feasible front, against the fixed reference point of each
problem, the same code for every tool; the table reports the median over seeds.

Usage:
    python benchmarks/multiobjective.py --measure-flags          # once: the flags table (minutes)
    python benchmarks/multiobjective.py --seeds 20 --flags-seeds 5 \\
        --optuna /work/wt-peers/.peers/optuna/bin/python
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mo_problems import FLAGS, FLAGS_TABLE, LEVELS, PROGRAMS, Problem, flags_key, problems  # noqa: E402

BUDGETS = (100, 300)


# ---------------------------------------------------------------------------------------- the flags table
def measure_flags(repeats: int) -> None:
    """Build and time every configuration of the reduced flag space for both programs."""
    import itertools
    import shutil
    import tempfile

    from perftune.targets.flags import code_size

    src_dir = os.path.join(HERE, os.pardir, "src", "perftune", "targets", "flags", "programs")
    out: dict[str, Any] = {"levels": LEVELS, "flags": FLAGS, "programs": {}, "reference": {},
                           "repeats": repeats, "machine": platform.node(), "load": os.getloadavg(),
                           "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    scratch = tempfile.mkdtemp(prefix="mo-flags-")
    t0 = time.time()
    try:
        for program, (source, args) in PROGRAMS.items():
            table: dict[str, tuple[float, int]] = {}
            binary = os.path.join(scratch, program)
            for level in LEVELS:
                for bits in itertools.product((False, True), repeat=len(FLAGS)):
                    config = {"O": level, **dict(zip(FLAGS, bits, strict=True))}
                    key = flags_key(config)
                    cmd = ["gcc", *key.split(), os.path.join(src_dir, source), "-o", binary, "-lm"]
                    subprocess.run(cmd, check=True, capture_output=True)
                    times = []
                    for _ in range(repeats):
                        start = time.perf_counter()
                        subprocess.run([binary, *args], check=True, capture_output=True)
                        times.append(time.perf_counter() - start)
                    table[key] = (min(times), code_size(binary))
            out["programs"][program] = table
            worst_t = max(v[0] for v in table.values())
            worst_s = max(v[1] for v in table.values())
            out["reference"][program] = (1.1 * worst_t, 1.1 * worst_s)
            print(f"{program}: {len(table)} configurations, {time.time() - t0:.0f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out["seconds"] = time.time() - t0
    with open(FLAGS_TABLE, "w") as fh:
        json.dump(out, fh, indent=0)


if __name__ == "__main__" and "--measure-flags" in sys.argv:
    measure_flags(repeats=3)
    sys.exit(0)


# ---------------------------------------------------------------------------------------- the tools
def run_perftune(problem: Problem, technique: str, budget: int, seed: int) -> list[tuple[float, ...]]:
    """Loss vectors of one seeded perftune run, in ticket order."""
    import perftune
    from perftune.space import Bool, Choice, Float, Space

    if problem.kind == "float":
        space = Space({f"x{i}": Float(0.0, 1.0) for i in range(problem.n_vars)})
    else:
        space = Space({"O": Choice(list(LEVELS), default="-O2"), **{f: Bool(default=False) for f in FLAGS}})
    names = [f"f{k + 1}" for k in range(problem.n_objectives)]

    def objective(config: Any) -> dict[str, float]:
        return dict(zip(names, problem.evaluate(dict(config)), strict=True))

    result = perftune.tune(objective, space, budget=budget, seed=seed, technique=technique,
                           goal=dict.fromkeys(names, "min"))
    return [tuple(t.metrics[n] for n in names) for t in result.trials if t.ok]


def run_optuna(python: str, problem: Problem, sampler: str, budget: int, seeds: list[int]) -> dict[int, Any]:
    script = os.path.join(HERE, "peers", "run_optuna_mo.py")
    done = subprocess.run([python, script, problem.name, sampler, str(budget), *map(str, seeds)],
                          check=True, capture_output=True, text=True)
    return {int(k): [tuple(v) for v in vs] for k, vs in json.loads(done.stdout).items()}


def _hv(points: list[tuple[float, ...]], reference: tuple[float, ...]) -> float:
    from perftune.search import hypervolume

    return hypervolume(points, reference)


def _job(args: tuple[str, str, list[int], str]) -> tuple[str, str, dict[int, list[float]], float]:
    """One (problem, tool) cell: hypervolumes per seed at each budget, and the seconds it took."""
    problem_name, tool, seeds, python = args
    (problem,) = problems([problem_name])
    t0 = time.time()
    budget = max(BUDGETS)
    if tool.startswith("optuna-"):
        runs = run_optuna(python, problem, tool.removeprefix("optuna-"), budget, seeds)
    else:
        runs = {s: run_perftune(problem, tool.removeprefix("perftune-"), budget, s) for s in seeds}
    hvs = {s: [_hv(list(runs[s][:b]), problem.reference) for b in BUDGETS] for s in seeds}
    return problem_name, tool, hvs, time.time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--flags-seeds", type=int, default=5)
    parser.add_argument("--problems", nargs="*", default=None)
    parser.add_argument("--tools", nargs="*",
                        default=["perftune-default", "perftune-nsga2", "optuna-nsga2", "optuna-tpe"])
    parser.add_argument("--optuna", default="/work/wt-peers/.peers/optuna/bin/python")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "multiobjective.md"))
    args = parser.parse_args()
    import multiprocessing

    chosen = problems(args.problems)
    jobs = []
    for p in chosen:
        n = args.flags_seeds if p.kind == "flags" else args.seeds
        for tool in args.tools:
            jobs.append((p.name, tool, list(range(n)), args.optuna))
    load_before = os.getloadavg()
    t0 = time.time()
    results: dict[tuple[str, str], dict[int, list[float]]] = {}
    seconds: dict[tuple[str, str], float] = {}
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for name, tool, hvs, dt in pool.imap_unordered(_job, jobs):
            results[(name, tool)] = hvs
            seconds[(name, tool)] = dt
            print(f"{name:16s} {tool:18s} {dt:7.1f} s", flush=True)
    write_report(args, chosen, results, seconds, load_before, time.time() - t0)


def write_report(args: Any, chosen: list[Problem], results: dict[tuple[str, str], dict[int, list[float]]],
                 seconds: dict[tuple[str, str], float], load_before: tuple[float, ...], wall_s: float) -> None:
    tools = args.tools
    lines = [
        "# Multi-objective search: hypervolume after 100 and 300 evaluations",
        "",
        f"Command: `{' '.join(['python', *sys.argv])}`  ",
        f"Machine: {platform.node()}, {os.cpu_count()} CPUs shared by eight engineers "
        f"(load average {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end); "
        f"Python {platform.python_version()}; {wall_s / 60:.1f} min.  ",
        f"Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}.  ",
        f"Seeds: {args.seeds} per synthetic problem, {args.flags_seeds} per flags program (0..n-1); "
        "the median hypervolume over seeds (higher is better; exact, against each problem's fixed "
        "reference point, the same code for every tool).",
        "",
    ]
    for budget_i, budget in enumerate(BUDGETS):
        lines += [f"## After {budget} evaluations", "",
                  "| problem | reference | " + " | ".join(tools) + " | perftune best? |",
                  "|---|---|" + "---|" * len(tools) + "---|"]
        for p in chosen:
            medians = {}
            for tool in tools:
                hvs = results.get((p.name, tool))
                if hvs:
                    medians[tool] = statistics.median(v[budget_i] for v in hvs.values())
            cells = [f"{medians[t]:.4f}" if t in medians else "-" for t in tools]
            ours = medians.get("perftune-default")
            theirs = [v for t, v in medians.items() if t.startswith("optuna-")]
            verdict = "-" if ours is None or not theirs else ("yes" if ours > max(theirs) else "**no**")
            ref = ", ".join(f"{r:.4g}" for r in p.reference)
            lines.append(f"| {p.name} | ({ref}) | " + " | ".join(cells) + f" | {verdict} |")
        lines.append("")
    lines += ["## Seconds per cell (all seeds of one problem and tool, in one process)", "",
              "| problem | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
    for p in chosen:
        lines.append(f"| {p.name} | " + " | ".join(f"{seconds.get((p.name, t), float('nan')):.0f}"
                                                    for t in tools) + " |")
    lines.append("")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
