"""Per-input dispatch for task files: a feature command, and one configuration chosen per input.

A task file gains one table::

    [adapt]
    features = ["python3", "{task_dir}/features.py", "{input}"]  # prints one JSON object of numbers
    columns = ["log_size", "sortedness"]   # the keys it prints that the dispatcher may use
    train = ["train/*.txt"]                # training inputs: paths or globs, relative to the task file
    budget = 40                            # trials of all landmark searches (default: [tuning] budget)
    clusters = 4                           # optional; default about one per 6 training inputs
    timeout_s = 30                         # of one feature command
    cost = "measured"                      # or "cheap": the command's time is not counted

The training inputs may come labelled by family (where each came from: a generator, a tenant, a
dataset), as a table of globs instead of an array; with three families or more the dispatcher reads a new
input as the family it resembles most (``tune_inputs(groups=...)``, docs/adapt.md)::

    [adapt.train]
    ascending = ["train/ascending-*.txt"]
    descending = ["train/descending-*.txt"]
    shuffled = ["train/shuffled-*.txt"]

``perftune adapt task.toml`` learns the dispatcher and writes it to the dispatcher file;
``perftune adapt task.toml --choose INPUT`` prints the configuration for one input (JSON), for a
script that then runs the program with it. Every configuration is measured by the command target
itself (sandboxed, checked against the default configuration's output on the same input, timed with
its sequential test); the feature command runs unsandboxed, like a build script the user wrote, once
per column the dispatcher reads.

Example:
    >>> site = CommandSite("examples/adapt/task/task.toml")  # doctest: +SKIP
    >>> site.config_for("examples/adapt/task/inputs/reversed-3000.txt")  # doctest: +SKIP
"""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perftune.adapt._features import AdaptError
from perftune.adapt._site import AdaptiveObjective

__all__ = ["CommandSite"]

_KEYS = {"features", "columns", "cost", "train", "budget", "clusters", "timeout_s"}
#: Options of a one-choice space seeded as landmarks (each timed on every training input); a longer list
#: is left to the searches, which then start from the default alone.
_MAX_SEED_OPTIONS = 8


class CommandSite(AdaptiveObjective):
    """A task file whose configuration is chosen per input by a learned dispatcher.

    Args:
        task_path: The task file, with an ``[adapt]`` table (see the module).

    Attributes:
        train: Training input paths (from ``[adapt] train``).
        groups: The family of each training input (``[adapt.train]`` as a table), or None.
        budget: ``[adapt] budget``, else ``[tuning] budget``, else None.
        n_clusters: ``[adapt] clusters`` or None.
    """

    target_kind = "command"
    stoppable = False  # the command target's own [run] timeout_s cuts a hopeless run

    def __init__(self, task_path: str | os.PathLike[str]) -> None:
        from perftune.targets import read_task_text
        from perftune.targets.command import load_task

        self.task_path = Path(task_path)
        where = f"{self.task_path}: adapt"
        # Read as every task file is: a regular file, bounded, UTF-8 (TaskError, one line, otherwise).
        text = read_task_text(self.task_path)
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise AdaptError(f"{self.task_path}: cannot read the task file: {e}") from None
        table = doc.get("adapt")
        if not isinstance(table, dict):
            raise AdaptError(
                f"{self.task_path}: no [adapt] table (features, columns, train): see docs/adapt.md"
            )
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise AdaptError(f"{where}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(_KEYS))})")
        self.task_dir = self.task_path.resolve().parent
        command = table.get("features")
        if isinstance(command, str):
            command = command.split()
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise AdaptError(f"{where}.features: expected a command, as an array of strings")
        self.feature_command = list(command)
        columns = table.get("columns")
        if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
            raise AdaptError(f"{where}.columns: expected a non-empty array of the keys the command prints")
        self.train, self.groups = self._training_inputs(table.get("train", []), f"{where}.train")
        timeout_s = table.get("timeout_s", 30.0)
        if (isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float)
                or not math.isfinite(timeout_s) or timeout_s <= 0):
            raise AdaptError(f"{where}.timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        task = load_task(self.task_path, prepare=False)
        budget = table.get("budget")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise AdaptError(f"{where}.budget: expected a positive whole number of trials, got {budget!r}")
        self.budget = task.budget if budget is None else budget
        clusters = table.get("clusters")
        if clusters is not None and (isinstance(clusters, bool) or not isinstance(clusters, int)
                                     or clusters < 1):
            raise AdaptError(f"{where}.clusters: expected a positive whole number, got {clusters!r}")
        self.n_clusters = clusters
        if task.goal != "min":
            raise AdaptError(f"{where}: per-input dispatch minimises the metric; [objective] goal is 'max'")
        self._tasks: dict[str, Any] = {}
        super().__init__(task.name, self._run_on, task.space)
        cost = table.get("cost", "measured")
        if cost not in ("measured", "cheap"):
            raise AdaptError(f"{where}.cost: expected 'measured' or 'cheap', got {cost!r}")
        for column in columns:
            self.feature(_Column(self, column), name=column, cost=cost)

    def _training_inputs(self, spec: Any, where: str) -> tuple[list[str], list[str] | None]:
        """``[adapt] train``: paths or globs (an array or one string), or a table of them per family."""

        def matches(patterns: Any, at: str) -> list[str]:
            if isinstance(patterns, str):
                patterns = [patterns]
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise AdaptError(f"{at}: expected an array of paths or globs")
            return sorted({os.path.abspath(m) for p in patterns for m in glob.glob(str(self.task_dir / p))})

        if not isinstance(spec, dict):
            return matches(spec, where), None
        owner: dict[str, str] = {}
        for family, patterns in spec.items():
            for path in matches(patterns, f"{where}.{family}"):
                if path in owner:
                    raise AdaptError(f"{where}.{family}: {path} is already in family {owner[path]!r}")
                owner[path] = str(family)
        train = sorted(owner)
        return train, [owner[p] for p in train]

    def _domain(self) -> Any:
        return [self.space.fingerprint(), self.feature_command]

    def features_of(self, input_path: str) -> dict[str, float]:
        """Run the feature command on one input; its last output line that is a JSON object."""
        ctx = {"input": os.path.abspath(input_path), "task_dir": str(self.task_dir)}
        try:
            argv = [a.format_map(ctx) for a in self.feature_command]
        except (KeyError, ValueError, AttributeError, IndexError) as e:
            raise AdaptError(f"{self.task_path}: adapt.features: bad placeholder ({e}; known: {{input}}, "
                             "{task_dir})") from None
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s,
                                  cwd=self.task_dir, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise AdaptError(f"{self.task_path}: adapt.features on {input_path}: {e}") from None
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
            raise AdaptError(
                f"{self.task_path}: adapt.features on {input_path}: exit {done.returncode}: {tail}"
            )
        for line in reversed(done.stdout.strip().splitlines()):
            try:
                values = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(values, dict):
                return values
        raise AdaptError(f"{self.task_path}: adapt.features on {input_path}: printed no JSON object")

    def _task_for(self, input_path: str) -> Any:
        from perftune.targets.command import load_task

        key = os.path.abspath(input_path)
        if key not in self._tasks:
            self._tasks[key] = load_task(self.task_path, prepare=True, inputs=[key])
        return self._tasks[key]

    def _run_on(self, config: Mapping[str, Any], input_path: str) -> dict[str, Any]:
        return dict(self._task_for(input_path).objective(config))

    clock_choice = False  # the task's metric is the time

    def measure(self, landmark: Any, x: Any, timer: Any = None) -> tuple[float, Any]:
        """The task's own metric (its sequential test's median), not the sandbox's overhead; ``timer``
        is ignored."""
        task = self._task_for(x)
        out = self._run_on(landmark, x)
        return float(out[task.metric]), out

    def seed_configs(self) -> list[dict[str, Any]]:
        """The default and, when the space is one choice (which algorithm or program to run), each option.

        Such a task is a choice site on the command line, and its options are seeds as a choice site's
        algorithms are: each is timed on every training input before the landmark searches, so a cluster
        that mixes input families (ascending and shuffled files, say) cannot leave one family without
        its best option because the cluster's representatives favour another (docs/adapt.md).
        """
        from perftune.space import Choice, Config

        default = dict(self.default)
        params = list(self.space.params.items())
        if len(params) != 1 or not isinstance(params[0][1], Choice):
            return [default]
        name, param = params[0]
        if len(param.options) > _MAX_SEED_OPTIONS:
            return [default]
        others = [{name: o} for o in param.options if o != default[name]]
        return [default, *(c for c in others if self.space.is_valid(Config(c)))]

    def tune(self, *, budget: Any = None, seed: int | None = None, on_progress: Any = None) -> Any:
        """:func:`perftune.adapt.tune_inputs` on the ``[adapt] train`` inputs (``on_progress``: its own)."""
        from perftune.adapt._tune import tune_inputs

        if len(self.train) < 4:
            raise AdaptError(
                f"{self.task_path}: adapt.train: matched {len(self.train)} inputs; at least 4 are needed"
            )
        budget = budget if budget is not None else self.budget
        if budget is None:
            raise AdaptError(f"{self.task_path}: adapt.budget: give a budget (here, [tuning] or --budget)")
        return tune_inputs(self, self.train, budget=budget, n_clusters=self.n_clusters, seed=seed, repeats=1,
                           on_progress=on_progress, groups=self.groups)


class _Column:
    """One key of the feature command's output, as a feature function."""

    def __init__(self, site: CommandSite, key: str) -> None:
        self.site = site
        self.key = key
        self.__name__ = key

    def __call__(self, input_path: str) -> float:
        values = self.site.features_of(input_path)
        if self.key not in values:
            raise AdaptError(f"{self.site.task_path}: adapt.features printed no {self.key!r} "
                             f"(printed: {sorted(values)})")
        value = values[self.key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise AdaptError(f"{self.site.task_path}: adapt.features printed {self.key!r}: {value!r} on "
                             f"{input_path}, not a finite number")
        return float(value)
