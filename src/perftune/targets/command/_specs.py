"""What a task file declares, as frozen values: its steps, objective and checks, and how it is tuned.

These are what :mod:`perftune.targets.command._sections` reads from the TOML file and what
:class:`~perftune.targets.command.CommandObjective` runs; both import them from here.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "METRICS",
    "TIME_LIKE",
    "CheckSpec",
    "ExpensiveCheckSpec",
    "FidelitySpec",
    "ObjectiveSpec",
    "StepSpec",
    "TuningSpec",
    "static_template",
    "template_names",
]

_FORMATTER = string.Formatter()


def template_names(template: str) -> list[str]:
    """Placeholder names of a template (``{x}``); ``{{`` and ``}}`` are literal braces."""
    names = []
    for _, name, spec, conv in _FORMATTER.parse(template):
        if name is not None:
            if name == "" or spec or conv:
                raise ValueError(
                    f"placeholder {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} "
                    "must be a plain name"
                )
            names.append(name)
    return names


def static_template(template: str, task_dir: str | os.PathLike[str]) -> str | None:
    """``template`` rendered when it is known before any candidate runs (its only placeholder, if any,
    is ``{task_dir}``); None when a candidate's values render it, or when it is malformed (the
    template check reports that)."""
    try:
        names = template_names(template)
    except ValueError:
        return None
    if set(names) - {"task_dir"}:
        return None
    return template.format_map({"task_dir": os.fspath(task_dir)})

METRICS = ("wall_time", "cpu_time", "max_rss", "file_size", "stdout_regex", "stdout_json")
TIME_LIKE = ("wall_time", "cpu_time", "max_rss")
"""Metrics measured by the clock or the kernel: noisy, so always the sequential test (unless declared)."""


@dataclass(frozen=True)
class FidelitySpec:
    """A fidelity parameter of ``[space]`` (``n = { type = "int", fidelity = [1000, 10000, 100000] }``).

    Not searched: every candidate runs at the first level, and goes on to the next while ASHA promotes
    it (the best ``1/eta`` at each level); the last level is the full evaluation (docs/fidelity.md).
    """

    name: str
    levels: tuple[int | float, ...]
    eta: int = 3


@dataclass(frozen=True)
class StepSpec:
    """A build or run step: an argument-vector template and how to run it."""

    command: tuple[str, ...] | str
    timeout_s: float
    shell: bool = False
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    stdin: str | None = None
    sanitizer: bool = False


@dataclass(frozen=True)
class ObjectiveSpec:
    """``[objective]``: what is optimised.

    ``deterministic``: True (one run per configuration), False (the sequential test, always) or None
    (``"auto"``: time-like metrics get the sequential test, ``file_size`` one run, and a value read
    from stdout is measured once per configuration when the default configuration printed the same
    value twice).
    """

    metric: str = "wall_time"
    goal: str = "min"
    pattern: str | None = None
    key: str | None = None
    file: str | None = None
    deterministic: bool | None = None
    #: Several objectives (``metrics = [...]``): the primary (``metric``) first, then metrics the run
    #: reports anyway (``wall_time``, ``cpu_time``, ``max_rss``); ``goals`` one per name.
    metrics: tuple[str, ...] = ()
    goals: tuple[str, ...] = ()
    #: ``constraints = ["max_rss <= 200000"]``: bounds on reported metrics (docs/multiobjective.md).
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExpensiveCheckSpec:
    """The expensive check, run on risky candidates within ``budget`` and on every potential winner."""

    budget: float = 0.1
    build: tuple[str, ...] | None = None  # e.g. a sanitizer build; the run command is reused
    build_timeout_s: float = 300.0
    run_timeout_s: float | None = None
    sanitizer: bool = True
    inputs: tuple[str, ...] = ()
    repeats: int = 0


@dataclass(frozen=True)
class CheckSpec:
    """Correctness check against the default configuration's output (cheap: every candidate)."""

    stdout: str = "none"  # "none", "exact", "numeric"
    files: tuple[str, ...] = ()
    rtol: float = 0.0
    atol: float = 0.0
    ignore: str | None = None  # regex: lines matching it are not compared (timings printed by the program)
    expensive: ExpensiveCheckSpec | None = None
    #: ``[check] stdout`` is written in the file: a ``"none"`` there is on purpose (no note at the start).
    stdout_declared: bool = False

    @property
    def active(self) -> bool:
        return self.stdout != "none" or bool(self.files)


@dataclass(frozen=True)
class TuningSpec:
    """``[tuning]``: the run's budget, seed, workers, technique and the configurations to try early."""

    budget: Any = None  # a perftune.drive.Budget
    seed: int | None = None
    workers: int | None = None
    technique: str | None = None
    seeds: tuple[dict[str, Any], ...] = field(default_factory=tuple)
