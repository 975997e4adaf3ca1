"""Loading a TOML task file into a :class:`Task` (space, objective, goal, budget, seeds).

The schema is documented in :mod:`perftune.targets.command` and in ``examples/README.md``; each
section is read by its own function in :mod:`perftune.targets.command._sections`.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune.errors import TaskError
from perftune.targets._registry import read_task_text
from perftune.targets.command._objective import CommandObjective
from perftune.targets.command._sections import (
    BUILTINS,
    TOP_KEYS,
    Where,
    check_keys,
    read_check,
    read_environment,
    read_fidelity,
    read_inputs,
    read_name,
    read_objective,
    read_sandbox,
    read_space,
    read_steps,
    read_timing,
    read_tuning,
)
from perftune.targets.command._specs import CheckSpec, ExpensiveCheckSpec, ObjectiveSpec, StepSpec

__all__ = ["CheckSpec", "ExpensiveCheckSpec", "ObjectiveSpec", "StepSpec", "Task", "load_task"]


@dataclass
class Task:
    """Everything ``perftune run task.toml`` needs.

    Attributes:
        name: Run name (from the file, else the file's stem; for a task.toml, its directory's name).
        path: The task file.
        space: The search space.
        objective: ``objective(config) -> {metric: value, "samples": [...], ...}``; picklable; raises
            :class:`~perftune.trial.TrialTimeout` for a timeout and :class:`CandidateError` for any
            other failure, with a one-line reason.
        goal: ``"min"`` or ``"max"``.
        metric: Name of the optimised metric in the objective's mapping (e.g. ``"wall_time"``).
        budget: From ``[tuning] budget`` (a :class:`perftune.Budget`), or None.
        seed: From ``[tuning] seed``.
        workers: From ``[tuning] workers``.
        seeds: Configurations to try early (``[tuning] seeds``).
        timeout_s: None: the objective enforces its own timeouts per step.

    Example:
        >>> task = load_task("examples/python_metric/task.toml")  # doctest: +SKIP
        >>> task.objective(task.space.default())["value"]  # doctest: +SKIP
    """

    name: str
    path: str
    space: Any
    objective: Any
    goal: str
    metric: str
    budget: Any = None
    seed: int | None = None
    workers: int | None = None
    seeds: list[dict[str, Any]] = field(default_factory=list)
    timeout_s: float | None = None
    technique: str | None = None
    #: Several objectives (``[objective] metrics = [...]``; empty: one) with their goals, and constraints.
    metrics: tuple[str, ...] = ()
    goals: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()

    def observe(self, trial: Any) -> None:
        """Optional: tell the task how a trial ended (technique and status feed the risk model)."""
        self.objective.observe(trial)

    def verify(self, config: Mapping[str, Any]) -> str | None:
        """Run the expensive check on ``config`` now; None if it passes, else the reason."""
        return self.objective.verify(config)

    def speedup(self, best: Any, default: Any, confidence: float = 0.95) -> Any:
        """Speedup of trial ``best`` over trial ``default`` with a confidence interval (from samples).

        The same number as every view of the run prints (:func:`perftune.report.trial_speedup`).
        """
        from perftune.report import trial_speedup

        return trial_speedup(best, default, goal=self.goal, confidence=confidence)


def load_task(
    path: str | os.PathLike[str], *, prepare: bool = True, inputs: Sequence[str] | None = None
) -> Task:
    """Read a task file; with ``prepare``, also build and run the default configuration (twice with a check).

    Preparing catches, before any measurement, a default configuration that fails, a metric that
    cannot be read from its output (a regex that never matches), output that the check tells apart
    between two runs of the default (one run more, when there is a check), and an expensive check that
    the default fails (its build included); and it produces the reference output for the correctness
    check.

    ``inputs`` replaces the file's ``inputs`` (paths, absolute or relative to the current directory):
    ``perftune.adapt`` measures one configuration per input this way, each with its own reference.

    Raises:
        TaskError: One line naming the file and the key or line: not a regular file, over 1 MiB,
            not UTF-8, malformed TOML, an unknown key, a value of the wrong type or out of range, an
            unknown parameter in a template, a working directory that does not exist, a missing or
            non-executable program, an unreadable input, a regex that never matches, a default
            configuration that fails, fails its own checks or prints a different output each run.
    """
    file = Path(path)
    text = read_task_text(path)
    where = Where(str(path), text)
    doc = _parse_toml(text, path)
    check_keys(doc, TOP_KEYS, where, "")
    task_dir = file.resolve().parent
    # Sections are read in this order so that a file with several mistakes reports the same one first.
    space, render = read_space(doc, where)
    fidelity = read_fidelity(doc, where)
    known = set(space.names) | set(BUILTINS) | ({fidelity.name} if fidelity is not None else set())
    input_paths = read_inputs(doc, where, task_dir)
    if inputs is not None:
        input_paths = read_inputs({"inputs": [os.path.abspath(p) for p in inputs]}, where, task_dir)
    build, run = read_steps(doc, where, known, input_paths, task_dir=task_dir)
    objective_spec = read_objective(doc, where, known)
    if fidelity is not None and len(objective_spec.metrics) > 1:
        # Refused by the driver too, but only once the run had been created, empty, in the store.
        names = ", ".join(objective_spec.metrics)
        raise where.error("objective.metrics",
                          f"pruning a run of several objectives ({names}) is not supported, and the "
                          f"fidelity levels of space.{fidelity.name} prune: drop the fidelity levels or keep "
                          "one metric")
    check = read_check(doc, where, known, task_dir, input_paths)
    timing = read_timing(doc, where, objective_spec)
    sandbox_options = read_sandbox(doc, where)
    env, cwd = read_environment(doc, where, known, task_dir=task_dir)
    tuning = read_tuning(doc, where, space)
    name = read_name(doc, where, file.stem if file.stem != "task" else task_dir.name)
    objective = CommandObjective(
        task_path=str(path),
        task_dir=str(task_dir),
        space=space,
        render=render,
        build=build,
        run=run,
        objective=objective_spec,
        check=check,
        timing=timing,
        inputs=tuple(input_paths),
        env=env,
        cwd=cwd,
        sandbox_options=sandbox_options,
        state_dir=_state_dir(),
        fidelity=fidelity,
    )
    objective.check_executables(where.error)
    task = Task(
        name=name,
        path=str(path),
        space=space,
        objective=objective,
        goal=objective_spec.goal,
        metric=objective_spec.metric,
        budget=tuning.budget,
        seed=tuning.seed,
        workers=tuning.workers,
        seeds=list(tuning.seeds),
        timeout_s=None,
        technique=tuning.technique,
        metrics=objective_spec.metrics,
        goals=objective_spec.goals,
        constraints=objective_spec.constraints,
    )
    if prepare:
        objective.prepare()
    return task


def _parse_toml(text: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        msg = str(error)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            raise TaskError(
                f"{path}:{m.group(1)}: malformed TOML: {msg[: m.start()].strip()} (column {m.group(2)})"
            ) from None
        raise TaskError(f"{path}: malformed TOML: {msg}") from None


def _state_dir() -> str:
    """A directory shared by the worker processes of this run (incumbent, reference, risk model)."""
    owner = os.getpid()
    root = tempfile.gettempdir()
    # Remove the state of runs whose process died without cleaning up (killed, os._exit).
    for name in os.listdir(root):
        parts = name.split("-")
        if name.startswith("perftune-task-") and len(parts) >= 4 and parts[2].isdigit():
            try:
                os.kill(int(parts[2]), 0)
            except ProcessLookupError:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            except OSError:
                pass
    path = tempfile.mkdtemp(prefix=f"perftune-task-{owner}-", dir=root)

    def cleanup() -> None:
        if os.getpid() == owner:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(cleanup)
    return path
