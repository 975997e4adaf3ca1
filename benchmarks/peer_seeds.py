"""Every peer on a few spaces over many seeds: is a quality-table cell's gap larger than the seed draw?

``quality.py`` ranks the tools by the median over 20 seeds of best/optimum per (space, budget), and the
best peer of a cell is the lowest of about ten such medians. This script reruns the peers of
``quality.py`` (each in its own environment under ``.peers/``, the same runners and counting rules) on
the spaces named, for more seeds (the 20 seeds of ``results/quality_raw/`` are reused, not rerun),
keeps their runs under ``--raw``, and prints per space and budget: each peer's median over all seeds,
the best peer's median on each block of 20 seeds, and perftune's median over the same seeds from
``lag.py --json`` files (lag 0: the quality table's sequential protocol).

Usage::

    .venv/bin/python benchmarks/quality.py --setup     # the peers' environments, once
    .venv/bin/python benchmarks/peer_seeds.py --spaces gemm.RTX_2080_Ti,gemm.RTX_Titan,pnpoly.RTX_Titan \\
        --seeds 0-99 --perftune benchmarks/results/cv_runs/StagedSidedDesignBoost-seeds0-99.json.gz \\
        --out benchmarks/results/peer_seeds.md
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE))

from _problems import BUDGETS, all_problem_specs, make_problem, parse_seeds, scores_after  # noqa: E402
from quality import DEFAULT_TOOLS, PEERS_DIR, RAW, ROOT, tool_command  # noqa: E402

BLOCK = 20


def read_runs(path: Path) -> dict[int, list[float | None]]:
    if not path.exists():
        return {}
    with gzip.open(path, "rt") as f:
        return {(r := json.loads(line))["seed"]: r["values"] for line in f if line.strip()}


def run_runner(spec: dict[str, Any], tool: str, seeds: list[int], budget: int, part: Path) -> Any:
    """``tool``'s runner (``benchmarks/peers/``, in its environment) for ``seeds``, its runs into ``part``."""
    cmd, _ = tool_command(tool)
    path = os.pathsep.join(p for p in (str(PEERS_DIR), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run(
        [*cmd, "--spec", json.dumps(spec), "--tool", tool, "--seeds", ",".join(map(str, seeds)),
         "--budget", str(budget), "--out", str(part)],
        capture_output=True, text=True, env=env, cwd=ROOT)


def run_peer(spec: dict[str, Any], tool: str, seeds: list[int], out: Path, budget: int) -> str:
    """Runs of ``tool`` for ``seeds`` with ``budget`` measurements into ``out`` (jsonl.gz), the seeds it
    already has kept (the quality table's runs, cut to ``budget``, among them)."""
    have = read_runs(out)
    stored = RAW / make_problem(spec).name / f"{tool}.jsonl.gz"
    if not have and stored.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(out, "wt") as f:
            for seed, values in read_runs(stored).items():
                f.write(json.dumps({"seed": seed, "values": values[:budget]}) + "\n")
        have = read_runs(out)
    todo = [s for s in seeds if s not in have]
    if not todo:
        return "(done)"
    part = out.with_suffix(".part")
    proc = run_runner(spec, tool, todo, budget, part)
    if proc.returncode != 0 or not part.exists():
        return f"exit {proc.returncode}: {proc.stderr[-500:]}"
    lines = [json.loads(x) for x in part.read_text().splitlines() if x.strip()]
    with gzip.open(out, "at") as f:
        for rec in lines:
            f.write(json.dumps({"seed": rec["seed"], "values": rec["values"]}) + "\n")
    part.unlink()
    return f"{len(lines)} runs"


def prefix_check(spec: dict[str, Any], tool: str, budget: int, where: Path) -> str:
    """Whether ``tool`` with ``budget`` measurements measures the first ``budget`` of its stored runs
    (the full budget, ``results/quality_raw/``) on seeds 0-2: '3 of 3 identical' when it does."""
    stored = read_runs(RAW / make_problem(spec).name / f"{tool}.jsonl.gz")
    where.mkdir(parents=True, exist_ok=True)
    part = where / f"{tool}.probe.part"
    run_runner(spec, tool, [0, 1, 2], budget, part)
    got = {(r := json.loads(x))["seed"]: r["values"] for x in part.read_text().splitlines() if x.strip()}
    part.unlink()

    def same(a: float | None, b: float | None) -> bool:
        return (a is None) == (b is None) and (a is None or abs(a - b) <= 1e-6 * max(1.0, abs(a)))

    n = sum(1 for s, v in got.items() if s in stored and all(map(same, v, stored[s][:budget])))
    return f"{n} of {len(got)} identical"


def perftune_scores(paths: list[str]) -> dict[str, dict[int, list[float]]]:
    out: dict[str, dict[int, list[float]]] = {}
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            for space, lag, runs in json.load(f):
                if lag == 0:
                    out.setdefault(space, {}).update({int(s): r["scores"] for s, r in runs.items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spaces", required=True, help="comma-separated development spaces")
    ap.add_argument("--seeds", default="0-99")
    ap.add_argument("--tools", default=",".join(t for t in DEFAULT_TOOLS if t != "perftune"))
    ap.add_argument("--budget", type=int, default=max(BUDGETS),
                    help="measurements per run (the cells reported: the quality table's budgets up to it)")
    ap.add_argument("--short", default="", metavar="N:TOOL,...",
                    help="run these (slow) tools with N measurements only; checked first on seeds 0-2 to"
                    " measure the same first N as their stored runs of the full budget")
    ap.add_argument("--raw", default=str(HERE / "results" / "peer_seeds_raw"))
    ap.add_argument("--perftune", default="", help="comma-separated lag.py --json files (.gz ok)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    budgets = [b for b in BUDGETS if b <= args.budget]
    short_n, short_tools = 0, []
    if args.short:
        short_n, short_tools = int(args.short.split(":")[0]), args.short.split(":")[1].split(",")
    tools = [t for t in args.tools.split(",") if t]
    specs = {make_problem(s).name: s for s in all_problem_specs() if s.get("kind") == "table"}
    ours = perftune_scores([p for p in args.perftune.split(",") if p])
    t0 = time.perf_counter()
    lines = [
        "# Peers over many seeds on the cells where perftune is behind",
        "",
        f"- Command: `python benchmarks/peer_seeds.py --spaces {args.spaces} --seeds {args.seeds}"
        f" --budget {args.budget} --tools {args.tools}" + (f" --short {args.short}" if args.short else "")
        + (f" --perftune {args.perftune}" if args.perftune else "") + "`",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; Python"
        f" {platform.python_version()}; replayed look-ups (the machine's load does not change the numbers).",
        f"- Seeds {args.seeds}; seeds 0-19 are the runs of `results/quality_raw/` (the quality table's).",
        "- Cells: median over the seeds of best/optimum after the budget; `block min-max`: the lowest and"
        f" highest median over the blocks of {BLOCK} seeds.",
        "",
    ]
    for space in args.spaces.split(","):
        problem = make_problem(specs[space])
        runs: dict[str, dict[int, list[float]]] = {}
        checks = []
        for tool in tools + short_tools:
            budget = short_n if tool in short_tools else args.budget
            if tool in short_tools:
                checks.append(f"{tool}: {prefix_check(specs[space], tool, budget, Path(args.raw) / space)}")
            out = Path(args.raw) / space / f"{tool}.jsonl.gz"
            status = run_peer(specs[space], tool, seeds, out, budget)
            print(f"{space} {tool}: {status} ({time.perf_counter() - t0:.0f} s)", flush=True)
            cells = [b for b in budgets if b <= budget]
            got = read_runs(out)
            runs[tool] = {s: scores_after(problem, v, cells) for s, v in got.items() if s in seeds}
        if space in ours:
            runs["perftune"] = {s: v[:len(budgets)] for s, v in ours[space].items() if s in seeds}
        if checks:
            lines += [f"## {space}", "", f"Tools run with {short_n} measurements, their first {short_n} on"
                      " seeds 0-2 against the stored runs of the full budget: " + "; ".join(checks) + ".", ""]
        else:
            lines += [f"## {space}", ""]
        lines += [
                  "| tool | seeds | " + " | ".join(f"@{b} all (block min-max)" for b in budgets) + " |",
                  "|---|---:|" + "---|" * len(budgets)]
        for tool, by_seed in runs.items():
            cells = []
            for i in range(len(budgets)):
                if any(len(v) <= i for v in by_seed.values()):
                    cells.append("")
                    continue
                med = statistics.median(v[i] for v in by_seed.values())
                chunks = [[s for s in seeds[k:k + BLOCK] if s in by_seed]
                          for k in range(0, len(seeds), BLOCK)]
                blocks = [statistics.median(by_seed[s][i] for s in chunk) for chunk in chunks if chunk]
                cells.append(f"{med:.3f} ({min(blocks):.3f}-{max(blocks):.3f})")
            lines.append(f"| {tool} | {len(by_seed)} | " + " | ".join(cells) + " |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
