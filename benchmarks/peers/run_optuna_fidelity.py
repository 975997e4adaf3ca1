"""Optuna's TPE + HyperbandPruner on benchmarks/fidelity_problem.py (run in Optuna's virtual environment).

Usage: python run_optuna_fidelity.py COMPUTE SEED [SEED ...]
Prints one JSON object: {seed: [[epochs so far, value or null, status], ...] for each trial in order}.
TPESampler(seed) and HyperbandPruner(min_resource=1, max_resource=27, reduction_factor=3), the
settings that match perftune's ASHA(eta=3, max_steps=27); the study stops once COMPUTE epochs ran.
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


def run(compute: int, seed: int) -> list[list[Any]]:
    sampler = optuna.samplers.TPESampler(seed=seed)
    pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=fp.MAX_EPOCHS, reduction_factor=3)
    study = optuna.create_study(direction="minimize", sampler=sampler, pruner=pruner)
    out: list[list[Any]] = []
    spent = [0]

    def objective(trial: optuna.Trial) -> float:
        config = {
            "lr": trial.suggest_float("lr", *fp.LIMITS["lr"], log=True),
            "momentum": trial.suggest_float("momentum", *fp.LIMITS["momentum"]),
            "l2": trial.suggest_float("l2", *fp.LIMITS["l2"], log=True),
            "hidden": trial.suggest_int("hidden", *fp.LIMITS["hidden"]),
            "batch": trial.suggest_categorical("batch", list(fp.BATCHES)),
        }
        value = 0.0
        for epoch, value in enumerate(fp.train(config), 1):
            spent[0] += 1
            trial.report(value, epoch)
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
    compute, *seeds = sys.argv[1:]
    print(json.dumps({seed: run(int(compute), int(seed)) for seed in seeds}))


if __name__ == "__main__":
    main()
