"""Optuna side of benchmarks/overhead.py; runs in its own virtual environment.

Usage: python optuna_runner.py SAMPLER STORAGE N_TRIALS MAX_SECONDS
Prints one JSON line: {"elapsed_s": [...], "n": N} with the cumulative wall time after each trial.
"""

import json
import math
import sys
import time

import optuna

sampler_name, storage_kind, n_trials, max_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
optuna.logging.set_verbosity(optuna.logging.ERROR)
sampler = optuna.samplers.TPESampler(seed=1) if sampler_name == "tpe" else optuna.samplers.RandomSampler(seed=1)
storage = None
if storage_kind == "sqlite":
    storage = f"sqlite:///{sys.argv[5]}"
study = optuna.create_study(sampler=sampler, storage=storage)
elapsed = []
t0 = time.perf_counter()
for _ in range(n_trials):
    trial = study.ask()
    x = trial.suggest_int("block", 1, 64)
    y = trial.suggest_float("alpha", 0.0, 1.0)
    z = trial.suggest_float("rate", 1e-4, 1.0, log=True)
    w = trial.suggest_categorical("tile", [16, 32, 64, 128, 256])
    a = trial.suggest_categorical("algo", ["a", "b", "c", "d"])
    b = trial.suggest_categorical("unroll", [False, True])
    value = (x - 17) ** 2 + y + abs(math.log(z)) + w / 256 + len(a) + b
    study.tell(trial, value)
    now = time.perf_counter() - t0
    elapsed.append(now)
    if now > max_s:
        break
print(json.dumps({"elapsed_s": elapsed, "n": len(elapsed)}))
