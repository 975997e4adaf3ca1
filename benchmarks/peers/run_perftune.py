"""perftune through its ask/tell Tuner (run with the project's own virtual environment).

Tools: ``perftune`` (the default technique: a boundary-biased design, then the AUC-bandit ensemble),
``perftune:<technique>`` (one registered technique alone), and ``perftune-exp:<module>:<Class>`` (an
experimental technique class from a module in benchmarks/, registered for the run). The run is
sequential (``lag=0``), like every peer's; the default configuration is measured first, as perftune
always does, and counts.

The benchmark-hub T4 spaces are built by ``perftune.targets.replay.load`` (the product path); the
Kernel Tuner caches and the other problems are mapped from the shared descriptions in ``_problems.py``.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

from _problems import BudgetSpent, KTTableProblem, Ledger, Problem, TableProblem
from _runner import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ for experimental techniques


def build_space(problem: Problem) -> Any:
    from perftune.space import Bool, Choice, Float, Int, Ordinal, Permutation, Space

    # Kernel Tuner caches take the generic mapping below: the product's cache loader is not this
    # benchmark's to depend on (ordered values -> Ordinal, the T1 restrictions as constraints).
    if isinstance(problem, TableProblem) and not isinstance(problem, KTTableProblem):
        from perftune.targets import replay

        return replay.load(problem.t1_path, problem.t4_path).space
    params: dict[str, Any] = {}
    for p in problem.params:
        if p.kind == "int":
            params[p.name] = Int(int(p.lo), int(p.hi))
        elif p.kind == "float":
            params[p.name] = Float(p.lo, p.hi)
        elif p.kind == "ordinal":
            params[p.name] = Ordinal(list(p.values))
        elif p.kind == "choice":
            params[p.name] = Choice(list(p.values))
        elif p.kind == "bool":
            params[p.name] = Bool()
        elif p.kind == "perm":
            params[p.name] = Permutation(list(p.values))
    return Space(params, list(problem.constraints))


_SPACES: dict[str, Any] = {}


def technique_name(tool: str) -> str:
    if tool == "perftune":
        return "default"
    if tool.startswith("perftune:"):
        return tool.split(":", 1)[1]
    if tool.startswith("perftune-exp:"):
        _, module, cls_name = tool.split(":")
        from perftune import search

        cls = getattr(importlib.import_module(module), cls_name)
        if cls.name not in search.names():
            search.register(cls)
        return str(cls.name)
    raise ValueError(tool)


def run_one(problem: Problem, tool: str, seed: int, ledger: Ledger, lag: int = 0) -> dict[str, Any]:
    """One run of ``tool`` on ``problem`` through ``ledger``; ``lag``: as ``perftune.Tuner``'s (0, the
    quality benchmark's: sequential)."""
    import perftune

    if problem.name not in _SPACES:
        _SPACES[problem.name] = build_space(problem)
    space = _SPACES[problem.name]
    tuner = perftune.Tuner(space, seed=seed, technique=technique_name(tool), lag=lag)
    ask_s: list[float] = []
    ask_cpu_s: list[float] = []  # CPU time: less distorted than wall time on a shared machine
    try:
        while not ledger.done:
            t0, c0 = time.perf_counter(), time.process_time()
            trial = tuner.ask()
            ask_s.append(time.perf_counter() - t0)
            ask_cpu_s.append(time.process_time() - c0)
            if trial is None:
                ledger.stalled = True
                break
            status, value = ledger.evaluate(dict(trial.config))
            t0, c0 = time.perf_counter(), time.process_time()
            if status == "ok":
                tuner.tell(trial, value)
            else:
                tuner.tell(trial, error=status)
            ask_s[-1] += time.perf_counter() - t0
            ask_cpu_s[-1] += time.process_time() - c0
    except BudgetSpent:
        pass
    tail = ask_s[-20:]
    cpu_tail = ask_cpu_s[-20:]
    extra: dict[str, Any] = {"decide_ms_last20": 1000 * sum(tail) / max(len(tail), 1),
                             "decide_cpu_ms_last20": 1000 * sum(cpu_tail) / max(len(cpu_tail), 1),
                             "decide_cpu_ms_mean": 1000 * sum(ask_cpu_s) / max(len(ask_cpu_s), 1)}
    credits = getattr(tuner.technique, "credits", None)
    if callable(credits):
        extra["credits"] = {k: round(float(v), 4) for k, v in credits().items()}
    counts = getattr(tuner.technique, "counts", None)
    if isinstance(counts, dict):
        extra["counts"] = dict(counts)
    # Proposals a technique failed to make (an exception, turned into a fallback by fault tolerance): a
    # broken variant looks like a plausible run otherwise.
    extra["n_errors"] = int(getattr(tuner.technique, "n_errors", 0) or 0)
    extra["origins"] = {}
    for t in tuner.trials:
        extra["origins"][t.technique or "?"] = extra["origins"].get(t.technique or "?", 0) + 1
    return extra


if __name__ == "__main__":
    tools = sys.argv[sys.argv.index("--tool") + 1 :][:1] if "--tool" in sys.argv else []
    main(run_one, [t for t in tools if t.startswith("perftune")] or ["perftune"])
