"""Command line shared by the per-tool runner scripts (stdlib + numpy only)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _problems import Ledger, Problem, make_problem, parse_seeds


def main(run_one: Callable[[Problem, str, int, Ledger], dict[str, Any] | None], tools: list[str]) -> None:
    """Run ``run_one(problem, tool, seed, ledger)`` for every seed; append one JSON line per run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True, help="problem spec as JSON text")
    ap.add_argument("--tool", required=True, choices=tools)
    ap.add_argument("--seeds", default="0-19")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    problem = make_problem(json.loads(args.spec))
    with open(Path(args.out), "a") as out:
        for seed in parse_seeds(args.seeds):
            ledger = Ledger(problem, args.budget)
            extra: dict[str, Any] | None = None
            try:
                extra = run_one(problem, args.tool, seed, ledger)
            except Exception as e:  # a crashing tool is recorded, not hidden
                traceback.print_exc()
                extra = {"error": f"{type(e).__name__}: {e}"}
            rec = ledger.record(args.tool, seed, extra)
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"{problem.name} {args.tool} seed={seed} n={len(ledger.values)} asked={ledger.n_asked}",
                  file=sys.stderr)
