"""LLVM pass-ordering benchmarks: search quality (IrInstructionCountOz) and step throughput.

Quality: for csmith seeds 1..N and the bundled runnable suite (benchmark://perftune-v0/*), each
search gets at most SECONDS of wall time per benchmark; the table gives each benchmark's
IrInstructionCountOz episode reward ((C0 - C) / max(C0 - C_Oz, 1), as on CompilerGym's
leaderboard), and the geometric mean per search. Searches: perftune's ensemble
(`tune_passes(search="perftune")`), CompilerGym's random search and greedy search baselines.
Every winning sequence is replayed with `opt` (and the program run against its -O0 build);
a failed validation is reported in the table. "bound" is the largest reward possible on that
benchmark (an empty module: C0 / (C0 - C_Oz)).

Throughput: median milliseconds per environment step (uniformly random actions from the
unoptimised module, the episode reset every 20 steps) for the persistent helper and the
one-`opt`-per-step fallback, on modules of about 200, 8k and 14k instructions.

Usage:
    python benchmarks/llvm.py                       # full: 20 csmith seeds + suite, 60 s per search
    python benchmarks/llvm.py --seconds 20 --seeds 10 --out benchmarks/results/llvm-reduced.md
    python benchmarks/llvm.py --only throughput
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SEARCHES = ("perftune", "random", "greedy")
THROUGHPUT_MODULES = {  # benchmark -> nominal size
    "generator://csmith-v0/5": "200",
    "generator://csmith-v0/3": "8k",
    "generator://csmith-v0/2": "14k",
}


def machine() -> str:
    cpu = ""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    load = os.getloadavg()
    return (f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
            f"load average at start {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}")


def geomean(values: list[float]) -> float:
    positive = [max(v, 1e-9) for v in values]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else float("nan")


def _record(uri: str, search: str, seconds: float) -> dict[str, Any]:
    """Tune one benchmark with one search and return what the table needs."""
    from perftune.targets.llvm import tune_passes

    result = tune_passes(uri, seconds=seconds, search=search, seed=0, validate=True, run=True)
    ok = result.validation is not None and result.validation.ok
    return {
        "uri": uri, "search": search, "seconds": seconds, "c0": result.count_start, "coz": result.count_oz,
        "count": result.count_result, "evals": result.n_evaluations, "reward": result.reward, "ok": ok,
        "errors": [] if ok or result.validation is None else list(result.validation.errors),
        "n_rejected": result.n_rejected,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def table(records: list[dict[str, Any]], out) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The reward table (one row per benchmark, one column per search) and the geometric means."""
    uris = list(dict.fromkeys(r["uri"] for r in records))
    searches = [s for s in SEARCHES if any(r["search"] == s for r in records)]
    by = {(r["uri"], r["search"]): r for r in records}
    columns = " | ".join(f"{s} reward (C, evals)" for s in searches)
    out(f"| benchmark | C0 | C_Oz | bound | {columns} |")
    out("|---|---:|---:|---:|" + "---:|" * len(searches))
    rewards: dict[str, list[float]] = {s: [] for s in searches}
    bounds: list[float] = []
    for uri in uris:
        cells = []
        first = next(r for r in records if r["uri"] == uri)
        c0, coz = first["c0"], first["coz"]
        for search in searches:
            r = by.get((uri, search))
            if r is None:
                cells.append("-")
                continue
            rewards[search].append(r["reward"])
            mark = "" if r["ok"] else " **INVALID: " + "; ".join(r["errors"])[:80] + "**"
            if r["n_rejected"]:
                mark += f" [{r['n_rejected']} better rejected by validation]"
            cells.append(f"{r['reward']:.3f} ({r['count']}, {r['evals']}){mark}")
        bound = c0 / max(c0 - coz, 1)
        bounds.append(bound)
        out(f"| {uri} | {c0} | {coz} | {bound:.3f} | " + " | ".join(cells) + " |")
    means = " | ".join(f"**{geomean(rewards[s]):.4f}**" for s in searches)
    out(f"| **geometric mean** | | | {geomean(bounds):.3f} | {means} |")
    return {s: geomean(rewards[s]) for s in searches}


def quality(  # type: ignore[no-untyped-def]
    uris: list[str], seconds: float, searches: tuple[str, ...], out, jsonl: str | None = None
) -> dict[str, float]:
    records = []
    for uri in uris:
        for search in searches:
            record = _record(uri, search, seconds)
            records.append(record)
            print(f"[{uri}] {search}: reward {record['reward']:.3f}", file=sys.stderr, flush=True)
            if jsonl:
                with open(jsonl, "a") as f:  # one line per result: nothing measured is lost
                    f.write(json.dumps(record) + "\n")
    return table(records, out)


def quality_heading(out, n_benchmarks: int, seconds: list[float]) -> None:  # type: ignore[no-untyped-def]
    """The heading of the reward table, for a run and for a report built from result files alike."""
    out(f"## IrInstructionCountOz reward, {'/'.join(f'{x:g}' for x in seconds)} s per benchmark and search")
    out()
    out(f"{n_benchmarks} benchmarks. Cells: reward (instructions reached, sequences evaluated).")
    out()


def parse_uris(spec: str) -> list[str]:
    """``csmith:A-B``, ``suite`` or URIs, comma-separated."""
    from perftune.targets.llvm import bundled_uris, csmith_uris

    uris: list[str] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part.startswith("csmith:"):
            lo, _, hi = part[len("csmith:"):].partition("-")
            uris += csmith_uris(range(int(lo), int(hi or lo) + 1))
        elif part == "suite":
            uris += bundled_uris()
        else:
            uris.append(part)
    return uris


def throughput(out, n_helper: int = 60, n_opt: int = 20) -> None:  # type: ignore[no-untyped-def]
    from perftune.targets.llvm import ACTIONS, LlvmEnv

    out("| module | instructions | helper ms/step (median) | opt fallback ms/step (median) | speed-up |")
    out("|---|---:|---:|---:|---:|")
    for uri, size in THROUGHPUT_MODULES.items():
        medians = {}
        count0 = 0
        for engine, n_steps in (("helper", n_helper), ("opt", n_opt)):
            env = LlvmEnv(uri, engine=engine, observation_space="IrInstructionCount")
            rng = np.random.default_rng(0)
            times = []
            try:
                _, info = env.reset()
                count0 = info["instruction_count"]
                for i in range(n_steps):
                    if i % 20 == 0 and i:
                        env.reset()
                    action = int(rng.integers(len(ACTIONS)))
                    t = time.perf_counter()
                    _, _, terminated, _, _ = env.step(action)
                    times.append(time.perf_counter() - t)
                    if terminated:
                        env.reset()
            finally:
                env.close()
            medians[engine] = statistics.median(times) * 1000
        out(f"| {uri} (~{size}) | {count0} | {medians['helper']:.2f} | {medians['opt']:.1f} | "
            f"{medians['opt'] / medians['helper']:.0f}x |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="search time per benchmark and search")
    parser.add_argument("--seeds", type=int, default=20, help="csmith seeds 1..N")
    parser.add_argument("--no-suite", action="store_true", help="skip the bundled runnable programs")
    parser.add_argument("--searches", default=",".join(SEARCHES))
    parser.add_argument("--only", choices=["quality", "throughput"], default=None)
    parser.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    parser.add_argument("--uris", default=None,
                        help="benchmarks instead of --seeds/--no-suite: csmith:A-B, suite or URIs, comma-separated")
    parser.add_argument("--jsonl", default=None, help="append every result to this file as it comes")
    parser.add_argument("--report", nargs="+", default=None, metavar="JSONL",
                        help="only build the table from result files (runs split over several processes)")
    parser.add_argument("--note", action="append", default=[], help="a line added to the header")
    args = parser.parse_args(argv)

    # Import everything now: a long run must not pick up half-edited modules later.
    from perftune.targets.llvm import _env, _run, _tune, _validate, bundled_uris, csmith_uris  # noqa: F401

    lines: list[str] = []

    def out(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    out("# LLVM pass ordering benchmark")
    out()
    out(f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`")
    out(f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    out(f"- machine: {machine()}")
    for note in args.note:
        out(f"- note: {note}")
    out()
    if args.only in (None, "throughput") and not args.report:
        out("## Step throughput")
        out()
        throughput(out)
        out()
    if args.report:
        records = [json.loads(line) for path in args.report for line in Path(path).read_text().splitlines() if line]
        quality_heading(out, len({r["uri"] for r in records}), sorted({r["seconds"] for r in records}))
        table(records, out)
        out()
    elif args.only in (None, "quality"):
        if args.uris:
            uris = parse_uris(args.uris)
        else:
            uris = csmith_uris(range(1, args.seeds + 1)) + ([] if args.no_suite else bundled_uris())
        searches = tuple(s for s in args.searches.split(",") if s)
        quality_heading(out, len(uris), [args.seconds])
        quality(uris, args.seconds, searches, out, args.jsonl)
        out()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
