"""Uniform random search: each parameter uniformly, proposals outside the constraints rejected.

Rejected proposals and repeats are free under the counting rules, so this samples uniformly from the
valid configurations without replacement.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _problems import BudgetSpent, Ledger, Problem
from _runner import main


def sample(problem: Problem, rng: np.random.Generator) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for p in problem.params:
        if p.kind == "int":
            config[p.name] = int(rng.integers(int(p.lo), int(p.hi) + 1))
        elif p.kind == "float":
            config[p.name] = float(rng.uniform(p.lo, p.hi))
        elif p.kind == "perm":
            config[p.name] = tuple(p.values[i] for i in rng.permutation(len(p.values)))
        else:
            v = p.values[int(rng.integers(len(p.values)))]
            config[p.name] = v.item() if hasattr(v, "item") else v
    return config


def run_one(problem: Problem, tool: str, seed: int, ledger: Ledger) -> None:
    rng = np.random.default_rng(seed)
    try:
        while not ledger.done:
            ledger.evaluate(sample(problem, rng))
    except BudgetSpent:
        pass


if __name__ == "__main__":
    main(run_one, ["random"])
