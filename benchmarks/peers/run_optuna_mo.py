"""Optuna's multi-objective samplers on benchmarks/mo_problems.py (run in Optuna's virtual environment).

Usage: python run_optuna_mo.py PROBLEM SAMPLER BUDGET SEED [SEED ...]   (SAMPLER: nsga2 or tpe)
Prints one JSON object: {seed: [loss vector of each evaluation, in order]}. Default settings of both
samplers (NSGAIISampler: population 50; TPESampler with several directions is Optuna's MOTPE).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import optuna

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
from mo_problems import FLAGS, LEVELS, Problem, problems  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def run(problem: Problem, sampler_name: str, budget: int, seed: int) -> list[list[float]]:
    if sampler_name == "nsga2":
        sampler: Any = optuna.samplers.NSGAIISampler(seed=seed)
    elif sampler_name == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed)
    else:
        raise SystemExit(f"unknown sampler {sampler_name!r}")
    study = optuna.create_study(directions=["minimize"] * problem.n_objectives, sampler=sampler)
    out: list[list[float]] = []
    for _ in range(budget):
        trial = study.ask()
        if problem.kind == "float":
            config: dict[str, Any] = {f"x{i}": trial.suggest_float(f"x{i}", 0.0, 1.0)
                                      for i in range(problem.n_vars)}
        else:
            config = {"O": trial.suggest_categorical("O", list(LEVELS))}
            for flag in FLAGS:
                config[flag] = trial.suggest_categorical(flag, [False, True])
        values = list(problem.evaluate(config))
        study.tell(trial, values)
        out.append(values)
    return out


def main() -> None:
    name, sampler_name, budget, *seeds = sys.argv[1:]
    (problem,) = problems([name])
    print(json.dumps({seed: run(problem, sampler_name, int(budget), int(seed)) for seed in seeds}))


if __name__ == "__main__":
    main()
