"""Kernel Tuner 1.x in simulation mode: each of its main strategies is one tool.

Kernel Tuner cache files (the ``*.kt.json.gz`` spaces) are replayed as they are; the T4 results are
converted once into a Kernel Tuner cache file (failures as
``RuntimeFailedConfig``/``CompilationFailedConfig``); Kernel Tuner then replays it with
``simulation_mode=True`` and ``max_fevals`` = the budget. Kernel Tuner runs its own loop, so the
configurations it measured (``results``, in order) are passed through the same counting ledger
afterwards; repeats it made are dropped there. Deciding time is the wall time of ``tune_kernel``
(search-space construction included) minus nothing: the replayed measurements are dictionary look-ups.
Only the benchmark-hub spaces run here (simulation mode needs a cache of every configuration).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from _problems import BudgetSpent, KTTableProblem, Ledger, Problem, TableProblem
from _runner import main

STRATEGIES = [
    "genetic_algorithm",
    "simulated_annealing",
    "diff_evo",
    "pso",
    "mls",
    "greedy_ils",
    "dual_annealing",
    "bayes_opt",
    "firefly_algorithm",
    "basinhopping",
]


def write_cache(problem: TableProblem, path: Path) -> None:
    names = [p.name for p in problem.params]
    if isinstance(problem, KTTableProblem):
        # Already a Kernel Tuner cache: replay it as it is, under the names this runner passes.
        # (the cache's keys are its tune_params_keys' order, kept; the T1 values are what tune_kernel gets)
        values = {p.name: p.values for p in problem.params}
        keys = problem.kt_doc["tune_params_keys"]
        doc = dict(problem.kt_doc, kernel_name=problem.bench, device_name=problem.device, objective="time",
                   problem_size=[1, 1], tune_params={k: values[k] for k in keys})
        # "cache" must come last: Kernel Tuner takes a file that does not end in "}}}" for an open
        # cache and appends to it (a cache without "objective" would get that key last otherwise).
        doc["cache"] = doc.pop("cache")
        path.write_text(json.dumps(doc))
        return
    cache: dict[str, Any] = {}
    for r in problem.raw_t4:
        values = [r["configuration"][n] for n in names]
        key = ",".join(str(v) for v in values)
        entry: dict[str, Any] = dict(zip(names, values, strict=True))
        v = next((m["value"] for m in r["measurements"] if m["name"] == "time"), None)
        if r.get("invalidity") == "correct" and isinstance(v, int | float):
            entry["time"] = float(v)
        else:
            entry["time"] = "CompilationFailedConfig" if r.get("invalidity") == "compile" else "RuntimeFailedConfig"
        times = r.get("times", {})
        entry["compile_time"] = float(times.get("compilation", 0.0) or 0.0)
        entry["verification_time"] = 0.0
        entry["benchmark_time"] = float(sum(times.get("runtimes", []) or []))
        entry["strategy_time"] = 0.0
        entry["framework_time"] = 0.0
        entry["timestamp"] = r.get("timestamp", "")
        cache[key] = entry
    doc = {
        "device_name": problem.device,
        "kernel_name": problem.bench,
        "problem_size": [1, 1],
        "tune_params_keys": names,
        "tune_params": {p.name: p.values for p in problem.params},
        "objective": "time",
        "cache": cache,
    }
    path.write_text(json.dumps(doc))


_CACHE: dict[str, Path] = {}


def run_one(problem: Problem, tool: str, seed: int, ledger: Ledger) -> dict[str, Any] | None:
    import kernel_tuner

    assert isinstance(problem, TableProblem), "Kernel Tuner runs only on the benchmark-hub spaces"
    strategy = tool.removeprefix("kt-")
    if problem.name not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="ktcache"))
        _CACHE[problem.name] = d / "cache.json"
        write_cache(problem, _CACHE[problem.name])
    tune_params = {p.name: list(p.values) for p in problem.params}
    names = list(tune_params)
    np.random.seed(seed)  # some strategies draw from numpy's global state
    t0 = time.perf_counter()
    with warnings.catch_warnings(), open(os.devnull, "w") as devnull:
        warnings.simplefilter("ignore")
        import contextlib

        with contextlib.redirect_stdout(devnull):
            results, _env = kernel_tuner.tune_kernel(
                problem.bench, "__global__ void k() {}", [1, 1], [], tune_params,
                restrictions=list(problem.constraints), strategy=strategy,
                strategy_options={"max_fevals": ledger.budget}, cache=str(_CACHE[problem.name]),
                simulation_mode=True, quiet=True, seed=seed,
            )
    wall = time.perf_counter() - t0
    # Kernel Tuner ran the loop itself: count what it measured, in order, with the shared ledger.
    ledger.measure_s = 0.0
    try:
        for r in results:
            ledger.evaluate({n: r[n] for n in names})
    except BudgetSpent:
        pass
    return {"deciding_s_override": wall}


if __name__ == "__main__":
    main(run_one, [f"kt-{s}" for s in STRATEGIES])
