"""Optuna's TPE + HyperbandPruner on benchmarks/fidelity_problem.py (run in Optuna's virtual environment).

Usage: python run_optuna_fidelity.py [--problem NAME] COMPUTE SEED [SEED ...]
Prints one JSON object: {seed: [[steps so far, value or null, status], ...] for each trial in order}.
TPESampler(seed) and HyperbandPruner(min_resource=1, max_resource=STEPS, reduction_factor=3), the
settings that match perftune's ASHA(eta=3, max_steps=STEPS); the study stops once COMPUTE steps ran.
The problem (default ``nn``) is one of benchmarks/fidelity_problem.py's ``PROBLEMS``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import optuna

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import fidelity_problem as fp  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)


def suggest(trial: optuna.Trial, params: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, (kind, args) in params.items():
        if kind == "choice":
            config[name] = trial.suggest_categorical(name, list(args))
        elif kind == "int":
            config[name] = trial.suggest_int(name, *args)
        else:
            config[name] = trial.suggest_float(name, *args, log=kind == "log")
    return config


def run(problem: str, compute: int, seed: int) -> list[list[Any]]:
    params, steps, train = fp.PROBLEMS[problem]
    sampler = optuna.samplers.TPESampler(seed=seed)
    pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=steps, reduction_factor=3)
    study = optuna.create_study(direction="minimize", sampler=sampler, pruner=pruner)
    out: list[list[Any]] = []
    spent = [0]

    def objective(trial: optuna.Trial) -> float:
        config = suggest(trial, params)
        value = 0.0
        for step, value in enumerate(train(config), 1):
            spent[0] += 1
            trial.report(value, step)
            if trial.should_prune():
                out.append([spent[0], None, "pruned"])
                raise optuna.TrialPruned()
        out.append([spent[0], value, "ok"])
        return value

    def stop(study: optuna.Study, trial: Any) -> None:
        if spent[0] >= compute:
            study.stop()

    study.optimize(objective, callbacks=[stop])
    return out


def main() -> None:
    argv = sys.argv[1:]
    problem = "nn"
    if argv[:1] == ["--problem"]:
        problem, argv = argv[1], argv[2:]
    compute, *seeds = argv
    print(json.dumps({seed: run(problem, int(compute), int(seed)) for seed in seeds}))


if __name__ == "__main__":
    main()
