"""Optuna through its ask/tell interface: TPE (its default sampler settings) and CMA-ES.

Mapping: integers -> suggest_int; ordered value lists -> suggest_int over the index (so the samplers
see the order); choices and booleans -> suggest_categorical; floats -> suggest_float; permutations ->
random keys (one float per item, the order is their argsort). Proposals that violate the declared
constraints and measured failures are told the worst value measured so far (before the first success:
FAIL), so that TPE learns to avoid those regions; telling them FAIL instead leaves TPE's model blind to
them and some seeds then propose invalid configurations thousands of times. Repeats are told the
value already measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from _problems import BudgetSpent, Ledger, Problem
from _runner import main

optuna.logging.set_verbosity(optuna.logging.ERROR)


def make_sampler(tool: str, seed: int) -> Any:
    if tool == "optuna-tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if tool == "optuna-tpe-multivariate":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if tool == "optuna-cmaes":
        # CMA-ES needs numbers; categorical parameters fall back to Optuna's independent sampler.
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    raise ValueError(tool)


def suggest(trial: optuna.trial.Trial, problem: Problem) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for p in problem.params:
        if p.kind == "int":
            config[p.name] = trial.suggest_int(p.name, int(p.lo), int(p.hi))
        elif p.kind == "float":
            config[p.name] = trial.suggest_float(p.name, p.lo, p.hi)
        elif p.kind == "ordinal":
            if len(p.values) == 1:
                config[p.name] = p.values[0]
            else:
                config[p.name] = p.values[trial.suggest_int(p.name, 0, len(p.values) - 1)]
        elif p.kind in ("choice", "bool"):
            config[p.name] = trial.suggest_categorical(p.name, list(p.values))
        elif p.kind == "perm":
            keys = [trial.suggest_float(f"{p.name}_{i}", 0.0, 1.0) for i in range(len(p.values))]
            config[p.name] = tuple(p.values[i] for i in np.argsort(keys, kind="stable"))
    return config


def run_one(problem: Problem, tool: str, seed: int, ledger: Ledger) -> None:
    study = optuna.create_study(sampler=make_sampler(tool, seed), direction="minimize")
    worst: float | None = None
    try:
        while not ledger.done:
            trial = study.ask()
            status, value = ledger.evaluate(suggest(trial, problem))
            if status == "ok" and value is not None:
                worst = value if worst is None else max(worst, value)
                study.tell(trial, value)
            elif worst is not None:
                study.tell(trial, worst)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
    except BudgetSpent:
        pass


if __name__ == "__main__":
    main(run_one, ["optuna-tpe", "optuna-tpe-multivariate", "optuna-cmaes"])
