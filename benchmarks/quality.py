"""Search-quality benchmark: perftune side by side with Kernel Tuner, Optuna, OpenTuner and random search.

Every tool runs as a subprocess in its own virtual environment (under ``.peers/``, git-ignored,
created by ``--setup``); perftune and uniform random search run in the project's environment.
The problems and the counting rules live in ``benchmarks/peers/_problems.py`` and are the same for
every tool: the budget is the number of measured configurations (failures count); proposals that
violate declared constraints and repeats of measured configurations don't count.

Problems: the twelve development spaces in ``data/benchmark_hub``: six benchmark-hub T1/T4 spaces
(convolution and dedispersion on A4000, A6000, W6600) and six Kernel Tuner cache files with their T1
files (gemm on RTX 2080 Ti and RTX Titan, pnpoly and convolution on RTX 3060 laptop and RTX Titan),
OpenTuner's 2-D Rosenbrock on [-1000, 1000]^2 (300 evaluations, scored by its best value), two
generated symmetric TSP instances, and a synthetic mixed-type function with constraints, a
permutation and hidden failures.

Output (``benchmarks/results/``): ``quality.md`` (tables: median over the seeds of best/optimum per
problem and budget, the rank of each tool, geometric means over the development spaces, deciding
time per proposal), ``quality.json`` (the same numbers), ``quality_<problem>.png`` (convergence
plots) and ``quality_raw/`` (every run's measured values, in order).

Usage::

    .venv/bin/python benchmarks/quality.py --setup            # create the peers' environments once
    .venv/bin/python benchmarks/quality.py                    # run everything (20 seeds), then report
    .venv/bin/python benchmarks/quality.py --tools perftune   # rerun perftune only, reuse the peers' runs
    .venv/bin/python benchmarks/quality.py --report-only      # rebuild the tables and plots
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import gzip
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_DIR = HERE / "peers"
VENVS = ROOT / ".peers"
RESULTS = HERE / "results"
RAW = RESULTS / "quality_raw"
sys.path.insert(0, str(PEERS_DIR))

from _problems import BUDGETS, all_problem_specs, make_problem, parse_seeds  # noqa: E402

# Kernel Tuner's main strategies (each counted as a tool); run_kerneltuner.py accepts a few more.
KT_STRATEGIES = ["genetic_algorithm", "simulated_annealing", "diff_evo", "pso", "greedy_ils", "bayes_opt"]
FORCE = False  # --force: rerun jobs whose results exist
PEER_ENVS = {"optuna": "requirements-optuna.txt", "opentuner": "requirements-opentuner.txt",
             "kerneltuner": "requirements-kerneltuner.txt"}


def tool_command(tool: str) -> tuple[list[str], bool]:
    """(command prefix, table-spaces-only) for a tool."""
    py_main = sys.executable
    if tool == "random":
        return [py_main, str(PEERS_DIR / "run_random.py")], False
    if tool.startswith("perftune"):
        return [py_main, str(PEERS_DIR / "run_perftune.py")], False
    if tool.startswith("optuna"):
        return [str(VENVS / "optuna" / "bin" / "python"), str(PEERS_DIR / "run_optuna.py")], False
    if tool == "opentuner":
        return [str(VENVS / "opentuner" / "bin" / "python"), str(PEERS_DIR / "run_opentuner.py")], False
    if tool.startswith("kt-"):
        return [str(VENVS / "kerneltuner" / "bin" / "python"), str(PEERS_DIR / "run_kerneltuner.py")], True
    raise SystemExit(f"unknown tool {tool!r}")


DEFAULT_TOOLS = ["perftune", "random", "optuna-tpe", "optuna-cmaes", "opentuner"] + [
    f"kt-{s}" for s in KT_STRATEGIES
]


def setup() -> None:
    """Create one virtual environment per peer under .peers/ and install its pinned requirements."""
    VENVS.mkdir(exist_ok=True)
    for name, req in PEER_ENVS.items():
        env_dir = VENVS / name
        if not (env_dir / "bin" / "python").exists():
            print(f"creating {env_dir}", flush=True)
            venv.create(env_dir, with_pip=True)
        print(f"installing {req} into {env_dir}", flush=True)
        subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "-r", str(PEERS_DIR / req)], check=True)


def problem_key(spec: dict[str, Any]) -> str:
    return make_problem_cached(spec).name


_PROBLEMS: dict[str, Any] = {}


def make_problem_cached(spec: dict[str, Any]) -> Any:
    k = json.dumps(spec, sort_keys=True)
    if k not in _PROBLEMS:
        _PROBLEMS[k] = make_problem(spec)
    return _PROBLEMS[k]


def run_job(spec: dict[str, Any], tool: str, seeds: str, budget: int) -> tuple[str, str, float, str]:
    cmd, _ = tool_command(tool)
    name = problem_key(spec)
    out_dir = RAW / name
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"{tool.replace(':', '_')}.jsonl.part"
    # Skip a finished job (use --force to rerun); resume an interrupted one from the seeds it finished.
    wanted = parse_seeds(seeds)
    final = out_dir / f"{tool.replace(':', '_')}.jsonl.gz"
    if final.exists() and not FORCE:
        with gzip.open(final, "rt") as f:
            have = {json.loads(line)["seed"] for line in f if line.strip()}
        if set(wanted) <= have:
            return name, tool, 0.0, "(already done)"
        if not tmp.exists():  # more seeds for a finished job: keep the seeds it has
            with gzip.open(final, "rt") as f:
                tmp.write_text("".join(line.strip() + "\n" for line in f if line.strip()))
    done = set()
    if tmp.exists():
        kept = [line for line in tmp.read_text().splitlines() if line.strip().endswith("}")]
        kept = [line for line in kept if json.loads(line)["seed"] in wanted]
        done = {json.loads(line)["seed"] for line in kept}
        tmp.write_text("".join(line + "\n" for line in kept))
    todo = [s for s in wanted if s not in done]
    seeds = ",".join(str(s) for s in todo)
    t0 = time.perf_counter()
    # The caller's PYTHONPATH stays behind the peers' folder: a worktree's own src/ must win over the
    # editable install that the project's environment points at.
    path = os.pathsep.join(p for p in (str(PEERS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    proc = subprocess.run(
        [*cmd, "--spec", json.dumps(spec), "--tool", tool, "--seeds", seeds, "--budget", str(budget),
         "--out", str(tmp)],
        capture_output=True, text=True, env=env, cwd=ROOT,
    ) if todo else subprocess.CompletedProcess([], 0, "", "")
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not tmp.exists():
        return name, tool, wall, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    lines = [json.loads(line) for line in tmp.read_text().splitlines() if line.strip()]
    for rec in lines:
        rec["values"] = [None if v is None else float(f"{v:.7g}") for v in rec["values"]]
    with gzip.open(out_dir / f"{tool.replace(':', '_')}.jsonl.gz", "wt") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")
    tmp.unlink()
    errors = [r["error"] for r in lines if r.get("error")]
    return name, tool, wall, (f"{len(errors)} runs failed: {errors[0]}" if errors else "")


def tool_of(path: Path) -> str:
    with gzip.open(path, "rt") as f:
        return str(json.loads(f.readline())["tool"])


def load_raw(name: str, tool: str) -> list[dict[str, Any]]:
    path = RAW / name / f"{tool.replace(':', '_')}.jsonl.gz"
    if not path.exists():
        return []
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


# ----------------------------------------------------------------------------- analysis


def best_curve(values: list[float | None], n: int) -> list[float | None]:
    out: list[float | None] = []
    best: float | None = None
    for i in range(n):
        if i < len(values) and values[i] is not None:
            v = values[i]
            best = v if best is None or v < best else best
        out.append(best)
    return out


def median_score(problem: Any, runs: list[dict[str, Any]], budget: int) -> float:
    scores = []
    for r in runs:
        vals = [v for v in r["values"][:budget] if v is not None]
        scores.append(problem.score(min(vals) if vals else None))
    return statistics.median(scores) if scores else math.nan


def geomean(xs: list[float]) -> float:
    if not xs or any(not math.isfinite(x) or x <= 0 for x in xs):
        return math.nan
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def tool_label(tool: str) -> str:
    return tool


def analyse(specs: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
    summary: dict[str, Any] = {"problems": {}, "tools": tools}
    for spec in specs:
        problem = make_problem_cached(spec)
        budgets = [b for b in (*BUDGETS, problem.default_budget_max) if b <= problem.default_budget_max]
        budgets = sorted(set(budgets))
        entry: dict[str, Any] = {"optimum": problem.optimum, "budgets": budgets, "median": {}, "rank": {},
                                 "deciding": {}, "curves": {}, "n_seeds": {}, "score_by_value":
                                 problem.score_by_value}
        for tool in tools:
            runs = load_raw(problem.name, tool)
            if not runs:
                continue
            entry["n_seeds"][tool] = len(runs)
            entry["median"][tool] = {str(b): median_score(problem, runs, b) for b in budgets}
            n_asked = sum(r["n_asked"] for r in runs)
            n_meas = sum(len(r["values"]) for r in runs)
            dec = sum(r["deciding_s"] for r in runs)
            entry["deciding"][tool] = {
                "ms_per_proposal": 1000 * dec / max(n_asked, 1),
                "ms_per_measurement": 1000 * dec / max(n_meas, 1),
                "proposals_per_measurement": n_asked / max(n_meas, 1),
                "n_stalled": sum(1 for r in runs if r.get("stalled")),
                "n_errors": sum(1 for r in runs if r.get("error")),
            }
            tails = [r["decide_ms_last20"] for r in runs if "decide_ms_last20" in r]
            if tails:
                entry["deciding"][tool]["ms_per_proposal_last20"] = statistics.median(tails)
            cpu_tails = [r["decide_cpu_ms_last20"] for r in runs if "decide_cpu_ms_last20" in r]
            if cpu_tails:
                entry["deciding"][tool]["cpu_ms_per_proposal_last20"] = statistics.median(cpu_tails)
            n = problem.default_budget_max
            curves = [best_curve(r["values"], n) for r in runs]
            med = []
            for i in range(n):
                col = [problem.score(c[i]) for c in curves]
                med.append(statistics.median(col))
            entry["curves"][tool] = med
        for b in budgets:
            scored = sorted((entry["median"][t][str(b)], t) for t in entry["median"])
            ranks: dict[str, int] = {}
            for t in entry["median"]:
                v = entry["median"][t][str(b)]
                ranks[t] = 1 + sum(1 for w, _ in scored if w < v)
            entry["rank"][str(b)] = ranks
        summary["problems"][problem.name] = entry
    return summary


def dev_names(fmt: str | None = None) -> list[str]:
    """Names of the development spaces; ``fmt`` "t4" or "kt" picks the six of one file format."""
    return [make_problem_cached(s).name for s in all_problem_specs() if s["kind"] == "table"
            and (fmt is None or s.get("format", "t4") == fmt)]


# The groups of development spaces whose geomeans the report gives (the targets are on all twelve).
DEV_GROUPS = {"six T4 (original)": "t4", "six Kernel Tuner cache (new)": "kt"}


def verdicts(summary: dict[str, Any], ours: str = "perftune") -> dict[str, Any]:
    """The issue's targets, computed from the summary."""
    probs = summary["problems"]
    devs = [n for n in dev_names() if n in probs]
    out: dict[str, Any] = {"geomean": {}, "first_or_tied": [], "worse_than_best_peer_by_2pct": []}
    tools = sorted({t for n in devs for t in probs[n]["median"]})
    for t in tools:
        out["geomean"][t] = {
            str(b): geomean([probs[n]["median"][t][str(b)] for n in devs if t in probs[n]["median"]])
            if all(t in probs[n]["median"] for n in devs) else math.nan
            for b in BUDGETS
        }
    kt = [t for t in tools if t.startswith("kt-")]
    if kt:
        out["geomean"]["Kernel Tuner (best strategy per budget)"] = {
            str(b): min(out["geomean"][t][str(b)] for t in kt) for b in BUDGETS
        }
    n_pairs = n_good = 0
    for name, entry in probs.items():
        if ours not in entry["median"]:
            continue
        for b in entry["budgets"]:
            if b not in BUDGETS:
                continue
            mine = entry["median"][ours][str(b)]
            others = [entry["median"][t][str(b)] for t in entry["median"] if not t.startswith("perftune")]
            if not others:
                continue
            best_other = min(others)
            n_pairs += 1
            if entry["score_by_value"]:
                good = mine <= best_other * 1.01 or mine - best_other <= 1e-9
            else:
                good = mine <= best_other * 1.01
            n_good += good
            out["first_or_tied"].append({"problem": name, "budget": b, "ours": mine, "best_peer": best_other,
                                         "ok": bool(good)})
            if name in devs and mine > best_other * 1.02:
                out["worse_than_best_peer_by_2pct"].append({"problem": name, "budget": b, "ours": mine,
                                                           "best_peer": best_other})
    out["geomean_groups"] = {}
    for label, group_fmt in DEV_GROUPS.items():
        names = [n for n in dev_names(group_fmt) if n in probs]
        out["geomean_groups"][label] = {
            t: {str(b): geomean([probs[n]["median"][t][str(b)] for n in names])
                if names and all(t in probs[n]["median"] for n in names) else math.nan for b in BUDGETS}
            for t in tools
        }
    out["first_or_tied_fraction"] = n_good / n_pairs if n_pairs else math.nan
    out["n_pairs"] = n_pairs
    dev_pairs = [p for p in out["first_or_tied"] if p["problem"] in devs]
    out["first_or_tied_fraction_dev"] = (sum(p["ok"] for p in dev_pairs) / len(dev_pairs)) if dev_pairs else math.nan
    return out


def fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3f}"


def _target_lines(v: dict[str, Any], ours: str, probs: dict[str, Any]) -> list[str]:
    g = v["geomean"].get(ours)
    if not g:
        return []
    # A single peer: not perftune, not the best-Kernel-Tuner-strategy-per-budget composite.
    peers = [t for t in v["geomean"] if not t.startswith(("perftune", "Kernel Tuner"))]
    best_peer = {b: min((v["geomean"][t][str(b)] for t in peers if not math.isnan(v["geomean"][t][str(b)])),
                        default=math.nan) for b in BUDGETS}
    lines = [f"**{ours}**: geomean " + ", ".join(
        f"at {b} = {fmt(g[str(b)])} (best single peer {fmt(best_peer[b])})" for b in BUDGETS) + ";",
             f"first or tied (within 1%) on {v['first_or_tied_fraction_dev']:.0%} of the development"
             f" (space, budget) pairs and on {v['first_or_tied_fraction']:.0%} of all {v['n_pairs']}"
             " (problem, budget) pairs it ran (target ≥ 90% of the development pairs);"]
    if v["worse_than_best_peer_by_2pct"]:
        worst = ", ".join(f"{w['problem']}@{w['budget']}: {fmt(w['ours'])} vs {fmt(w['best_peer'])}"
                          for w in v["worse_than_best_peer_by_2pct"])
        lines.append(f"more than 2% worse than the best peer: {worst};")
    else:
        lines.append("no development space more than 2% worse than the best peer at any budget;")
    rb = probs.get("rosenbrock2d")
    if rb and ours in rb["median"]:
        lines.append(f"Rosenbrock 2-D median best after 300 evaluations: {fmt(rb['median'][ours]['300'])}"
                     " (target < 1.0).")
    return [" ".join(lines), ""]


def write_report(summary: dict[str, Any], verdict_by_tool: dict[str, dict[str, Any]], command: str,
                 started: str) -> None:
    probs = summary["problems"]
    v = next(iter(verdict_by_tool.values()))
    seeds = sorted({n for e in probs.values() for n in e["n_seeds"].values()})
    lines = ["# Search quality: perftune vs Kernel Tuner, Optuna, OpenTuner, random", ""]
    lines += [f"- Command: `{command}` (the tables are rebuilt from every run stored in `quality_raw/`).",
              f"- Date: {started} (UTC).",
              f"- Machine: {os.cpu_count()}-core VM ({platform.machine()}), Python {platform.python_version()},"
              f" shared with other jobs (load average {os.getloadavg()[1]:.1f} over the 5 minutes before this"
              " report): deciding times are inflated; quality numbers are not affected.",
              f"- Seeds per (problem, tool): {'/'.join(str(n) for n in seeds)} (the column `seeds` says which);"
              " cells are the median over the seeds of best-found / optimum (Rosenbrock: the best value).",
              "- Counting (every tool): budget = measured configurations, failures included; constraint"
              " violations and repeats are answered but not counted. Deciding time = the tool's wall time"
              " minus the replayed measurement, per proposal (constraint violations and repeats included).",
              "- Kernel Tuner runs its own loop in simulation mode (`kt-<strategy>`, each strategy a tool);"
              " its `results` are counted afterwards with the same rules, and its deciding time includes"
              " its search-space construction. Kernel Tuner runs only on the benchmark-hub spaces.",
              "- `perftune` is the default technique (a boundary-biased design, then the AUC bandit) driven through `perftune.Tuner` with lag 0;"
              " `perftune-exp:...` rows are experimental variants from `benchmarks/quality_variants.py`"
              " (not perftune's default; they are there to show what helps); `perftune-previous` is the"
              " default before decision 1 of `benchmarks/results/cv_notes.md` (its stored runs; the"
              " defaults before decisions 2, 3, 4 and 5 are the rows of StagedScaledDesign, StagedLeanRefit8,"
              " StagedSklearnTrees and StagedGreedyUniform).",
              ""]
    lines += ["## Targets (development spaces)", "",
              f"Geomean over all {len(dev_names())} development spaces:", ""]
    g = v["geomean"]
    lines += ["| tool | " + " | ".join(f"geomean @{b}" for b in BUDGETS) + " |",
              "|---|" + "---|" * len(BUDGETS)]
    order = sorted(g, key=lambda t: g[t].get("50", math.inf) if not math.isnan(g[t].get("50", math.nan)) else 9e9)
    for t in order:
        lines.append(f"| {t} | " + " | ".join(fmt(g[t][str(b)]) for b in BUDGETS) + " |")
    lines.append("")
    for label, by_tool in v.get("geomean_groups", {}).items():
        lines += [f"Geomean over the {label} development spaces ({len(dev_names(DEV_GROUPS[label]))}"
                  " spaces; — where a tool has not run on all of them):", "",
                  "| tool | " + " | ".join(f"@{b}" for b in BUDGETS) + " |", "|---|" + "---|" * len(BUDGETS)]
        for t in sorted(by_tool, key=lambda t: (math.isnan(by_tool[t]["50"]), by_tool[t]["50"])):
            lines.append(f"| {t} | " + " | ".join(fmt(by_tool[t][str(b)]) for b in BUDGETS) + " |")
        lines.append("")
    not_first = [p for p in v["first_or_tied"] if p["problem"] in dev_names() and not p["ok"]]
    if not_first:
        lines += ["(space, budget) pairs of the development spaces where perftune is not first or tied"
                  " within 1%: " + ", ".join(f"{p['problem']}@{p['budget']} ({fmt(p['ours'])} vs best peer"
                                            f" {fmt(p['best_peer'])})" for p in not_first) + ".", ""]
    for ours, vv in verdict_by_tool.items():
        lines += _target_lines(vv, ours, probs)
    for name, entry in probs.items():
        budgets = entry["budgets"]
        lines += [f"## {name}", "",
                  f"optimum {fmt(entry['optimum'])}" + (" (scored by best value)" if entry["score_by_value"] else ""),
                  "", "| tool | " + " | ".join(f"@{b}" for b in budgets) + " | rank " + " / ".join(
                      str(b) for b in budgets) + " | ms/proposal | proposals/measured | seeds |",
                  "|---|" + "---|" * (len(budgets) + 4)]
        tools = sorted(entry["median"], key=lambda t: entry["median"][t][str(budgets[-1])])
        for t in tools:
            m = entry["median"][t]
            ranks = " / ".join(str(entry["rank"][str(b)][t]) for b in budgets)
            d = entry["deciding"][t]
            lines.append(f"| {t} | " + " | ".join(fmt(m[str(b)]) for b in budgets) +
                         f" | {ranks} | {d['ms_per_proposal']:.2f} | {d['proposals_per_measurement']:.2f}"
                         f" | {entry['n_seeds'][t]} |")
        lines += ["", f"![convergence](quality_{name}.png)", ""]
    lines += ["## Deciding time per proposal, every tool", "",
              "Milliseconds of the tool's own time per proposal, mean over all its runs on the problem"
              " (200 measurements; Rosenbrock 300). For perftune also the last 20 proposals of a run"
              " (median over seeds), i.e. the cost at 200 trials with the model on.", ""]
    all_tools = sorted({t for e in probs.values() for t in e["deciding"]})
    lines += ["| problem | " + " | ".join(all_tools) + " |", "|---|" + "---|" * len(all_tools)]
    for name, entry in probs.items():
        cells = []
        for t in all_tools:
            d = entry["deciding"].get(t)
            if not d:
                cells.append("—")
            elif "ms_per_proposal_last20" in d:
                cpu = d.get("cpu_ms_per_proposal_last20")
                cpu_text = f", CPU {cpu:.1f}" if cpu is not None else ""
                cells.append(f"{d['ms_per_proposal']:.1f} (last 20: {d['ms_per_proposal_last20']:.1f}{cpu_text})")
            else:
                cells.append(f"{d['ms_per_proposal']:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    notes = RESULTS / "quality_notes.md"  # hand-written findings, kept next to the generated tables
    if notes.exists():
        lines += ["", notes.read_text()]
    (RESULTS / "quality.md").write_text("\n".join(lines) + "\n")


def plot(summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, entry in summary["problems"].items():
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        n_exp = 0
        tops = []
        for tool, curve in sorted(entry["curves"].items()):
            if len(curve) > 10 and curve[10] is not None and math.isfinite(curve[10]):
                tops.append(curve[10])
            xs = list(range(1, len(curve) + 1))
            ys = [c if c is not None and math.isfinite(c) else math.nan for c in curve]
            if entry["score_by_value"]:
                ys = [y + 1e-6 for y in ys]
            style: dict[str, Any] = {"lw": 1.0, "alpha": 0.8}
            if tool == "perftune":
                style = {"lw": 2.6, "color": "black", "zorder": 10}
            elif tool.startswith("perftune"):
                colour = ["tab:red", "tab:orange", "tab:purple", "tab:brown"][n_exp % 4]
                n_exp += 1
                style = {"lw": 2.0, "color": colour, "ls": "-.", "zorder": 9}
            elif tool.startswith("kt-"):
                style = {"lw": 0.8, "alpha": 0.6, "ls": "--"}
            ax.plot(xs, ys, label=tool, **style)
        ax.set_yscale("log")
        if tops and not entry["score_by_value"]:
            # Zoom on what matters: from the optimum to where the tools stand after 10 measurements.
            ax.set_ylim(0.99, max(1.05, max(tops)))
        ax.set_xlabel("measured configurations")
        ax.set_ylabel("median best value" if entry["score_by_value"] else "median best / optimum")
        ax.set_title(f"{name}: median over seeds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2, loc="upper right")
        fig.tight_layout()
        fig.savefig(RESULTS / f"quality_{name}.png", dpi=90)
        plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="create the peers' virtual environments and exit")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS), help="comma-separated tools to (re)run")
    ap.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--jobs", type=int, default=2, help="tool runs in parallel (default 2)")
    ap.add_argument("--force", action="store_true", help="rerun (problem, tool) jobs that already have results")
    ap.add_argument("--report-only", action="store_true", help="only rebuild tables and plots from quality_raw/")
    ap.add_argument("--report-tools", default="", help="tools in the tables (default: every tool with raw runs)")
    args = ap.parse_args()
    if args.setup:
        setup()
        return
    global FORCE
    FORCE = args.force
    RESULTS.mkdir(exist_ok=True)
    specs = all_problem_specs()
    if args.problems:
        wanted = set(args.problems.split(","))
        specs = [s for s in specs if make_problem_cached(s).name in wanted]
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    if not args.report_only:
        jobs = []
        for spec in specs:
            problem = make_problem_cached(spec)
            for tool in args.tools.split(","):
                _, table_only = tool_command(tool)
                if table_only and spec["kind"] != "table":
                    continue
                jobs.append((spec, tool, args.seeds, problem.default_budget_max))
        # The development spaces first (they carry the targets), then the other problems.
        jobs.sort(key=lambda j: j[0]["kind"] != "table")
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for name, tool, wall, err in pool.map(lambda j: run_job(*j), jobs):
                print(f"{name:22s} {tool:26s} {wall:7.1f} s {err}", flush=True)
    all_tools = sorted({tool_of(p) for p in RAW.glob("*/*.jsonl.gz")})
    tools = args.report_tools.split(",") if args.report_tools else all_tools
    summary = analyse(all_problem_specs(), tools)
    ours_all = [t for t in tools if t.startswith("perftune")] or ["perftune"]
    v = {t: verdicts(summary, t) for t in ours_all}
    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    write_report(summary, v, command, started)
    slim = {k: {n: {kk: vv for kk, vv in e.items() if kk != "curves"} for n, e in summary["problems"].items()}
            if k == "problems" else val for k, val in summary.items()}
    (RESULTS / "quality.json").write_text(json.dumps({"summary": slim, "verdicts": v}, indent=1, default=str))
    plot(summary)
    print((RESULTS / "quality.md").read_text())


if __name__ == "__main__":
    main()
