"""Optuna through its ask/tell interface: TPE (its default sampler settings) and CMA-ES.

Mapping: integers -> suggest_int; ordered value lists -> suggest_categorical for TPE (Optuna's idiom
for a list of allowed values; over the index, TPE's integer kernel collapses onto a plateau and then
mostly re-proposes measured configurations: benchmarks/results/quality_notes.md) and suggest_int over
the index for CMA-ES (it needs numbers); choices and booleans -> suggest_categorical; floats ->
suggest_float; permutations -> random keys (one float per item, the order is their argsort).

Proposals that violate the declared constraints and measured failures are told as PRUNED (no value):
Optuna's TPE puts pruned trials without intermediate values in its "bad" group, so it learns to
avoid those regions without a made-up number. Repeats are told the value already measured (a failed
one as PRUNED again). Rows kept for comparison: ``optuna-tpe-tellworst`` (this harness's earlier
rule: ordered values over the index, invalid proposals and failures told the worst value measured so
far) and ``optuna-tpe-index`` (told as PRUNED, ordered values over the index). ``optuna-cmaes`` is
CMA-ES with margin (``optuna-cmaes-plain`` without, as this harness ran it before).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import optuna
from _problems import BudgetSpent, Ledger, Problem
from _runner import main

optuna.logging.set_verbosity(optuna.logging.ERROR)


def make_sampler(tool: str, seed: int) -> Any:
    if tool in ("optuna-tpe", "optuna-tpe-tellworst", "optuna-tpe-index"):
        return optuna.samplers.TPESampler(seed=seed)
    if tool == "optuna-tpe-multivariate":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if tool in ("optuna-cmaes", "optuna-cmaes-plain"):
        # CMA-ES needs numbers; categorical parameters fall back to Optuna's independent sampler. On
        # these integer (index) spaces plain CMA-ES collapses onto one lattice point and then proposes
        # only configurations it has measured (every seed stalled after 42-84 measurements); Optuna's
        # documented remedy for integer distributions is CMA-ES with margin, so that is the row.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False,
                                                with_margin=tool == "optuna-cmaes")
    raise ValueError(tool)


def suggest(trial: optuna.trial.Trial, problem: Problem, ordinal_as_index: bool) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for p in problem.params:
        if p.kind == "int":
            config[p.name] = trial.suggest_int(p.name, int(p.lo), int(p.hi))
        elif p.kind == "float":
            config[p.name] = trial.suggest_float(p.name, p.lo, p.hi)
        elif p.kind == "ordinal" and not ordinal_as_index:
            config[p.name] = trial.suggest_categorical(p.name, list(p.values))
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
    tell_worst = tool == "optuna-tpe-tellworst"
    # TPE takes an ordered list of values as a categorical (Optuna's idiom for a list of allowed values);
    # CMA-ES needs numbers, and the two earlier TPE rows are kept as they were run (over the index).
    ordinal_as_index = tool in ("optuna-cmaes", "optuna-cmaes-plain", "optuna-tpe-tellworst",
                                "optuna-tpe-index")
    worst: float | None = None
    try:
        while not ledger.done:
            trial = study.ask()
            status, value = ledger.evaluate(suggest(trial, problem, ordinal_as_index))
            if status == "ok" and value is not None:
                worst = value if worst is None else max(worst, value)
                study.tell(trial, value)
            elif tell_worst and worst is not None:
                study.tell(trial, worst)
            elif tell_worst:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    except BudgetSpent:
        pass


if __name__ == "__main__":
    main(run_one, ["optuna-tpe", "optuna-tpe-tellworst", "optuna-tpe-index", "optuna-tpe-multivariate",
                   "optuna-cmaes", "optuna-cmaes-plain"])
