"""``[target] kind = "flags"`` sections of task files.

Example task file::

    [target]
    kind = "flags"
    compiler = "gcc"
    sources = ["prog.c"]
    run = ["1000", "input.txt"]      # the program's arguments (no shell); a string is split like a shell
    rel_tol = 1e-6                   # numbers in the output may differ this much (FP programs)
    link = ["-lm"]
    seeds = ["-O2 -funroll-loops"]

Example:
    >>> task = task_from_toml({"kind": "flags", "sources": ["a.c"]}, "task.toml")
    >>> task.sources
    ('a.c',)
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perftune.errors import TaskError

__all__ = ["FlagsTask", "task_from_toml"]

_KEYS = {
    "kind",
    "compiler",
    "sources",
    "run",
    "rel_tol",
    "abs_tol",
    "link",
    "compile_args",
    "seeds",
    "params",
    "run_timeout_s",
    "clock",
}


@dataclass(frozen=True)
class FlagsTask:
    """A flags-tuning task read from a task file; :meth:`run` tunes it.

    Example:
        >>> FlagsTask(sources=("a.c",), run_args=(), cwd=".").compiler
        'gcc'
    """

    sources: tuple[str, ...]
    run_args: tuple[str, ...]
    cwd: str
    path: str = ""
    compiler: str = "gcc"
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    link_args: tuple[str, ...] = ("-lm",)
    compile_args: tuple[str, ...] = ()
    seeds: tuple[str, ...] = ()
    include_params: bool = True
    run_timeout_s: float = 60.0
    clock: str = "wall"

    @property
    def name(self) -> str:
        """Run name: the task file's stem."""
        return os.path.splitext(os.path.basename(self.path))[0] if self.path else "flags"

    def run(
        self,
        *,
        budget: Any = "5m",
        workers: int = 1,
        store: Any = None,
        seed: int | None = None,
        reduce: bool = True,
        on_trial: Any = None,
        name: str | None = None,
    ) -> Any:
        """Tune the task; returns a :class:`FlagsResult`. ``name`` names the run in the store."""
        from perftune.targets.flags._tune import tune_flags

        return tune_flags(
            self.sources,
            self.run_args,
            compiler=self.compiler,
            budget=budget,
            workers=workers,
            seeds=self.seeds,
            rel_tol=self.rel_tol,
            abs_tol=self.abs_tol,
            link_args=self.link_args,
            compile_args=self.compile_args,
            cwd=self.cwd,
            store=store,
            seed=seed,
            reduce=reduce,
            include_params=self.include_params,
            run_timeout_s=self.run_timeout_s,
            clock=self.clock,
            on_trial=on_trial,
            name=name,
        )


def _str_list(
    table: Mapping[str, Any], key: str, path: str, default: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = table.get(key, default)
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{path}: key target.{key}: expected a list of strings or a string")
    return tuple(value)


def _number(table: Mapping[str, Any], key: str, path: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TaskError(f"{path}: key target.{key}: expected a non-negative number, got {value!r}")
    return float(value)


def task_from_toml(table: Mapping[str, Any], path: str) -> FlagsTask:
    """Read the ``[target]`` table of a task file whose ``kind`` is ``"flags"``.

    Args:
        table: The ``[target]`` table.
        path: The task file (relative paths in the table are relative to its directory).

    Raises:
        TaskError: A key is unknown or has the wrong type ("FILE: key target.X: ...").
    """
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise TaskError(f"{path}: key target.{unknown[0]}: unknown key (known: {', '.join(sorted(_KEYS))})")
    if table.get("kind", "flags") != "flags":
        raise TaskError(f"{path}: key target.kind: expected 'flags', got {table.get('kind')!r}")
    compiler = table.get("compiler", "gcc")
    if not isinstance(compiler, str) or not compiler:
        raise TaskError(f"{path}: key target.compiler: expected a compiler name or path")
    sources = _str_list(table, "sources", path)
    if not sources:
        raise TaskError(f"{path}: key target.sources: give at least one source file")
    params = table.get("params", True)
    if not isinstance(params, bool):
        raise TaskError(f"{path}: key target.params: expected true or false")
    seeds = table.get("seeds", [])
    if not isinstance(seeds, list) or not all(isinstance(s, str | list) for s in seeds):
        raise TaskError(f"{path}: key target.seeds: expected a list of option strings")
    clock = table.get("clock", "wall")
    if clock not in ("wall", "cpu"):
        raise TaskError(f"{path}: key target.clock: expected 'wall' or 'cpu', got {clock!r}")
    return FlagsTask(
        sources=sources,
        run_args=_str_list(table, "run", path),
        cwd=os.path.dirname(os.path.abspath(path)),
        path=str(path),
        compiler=compiler,
        rel_tol=_number(table, "rel_tol", path, 0.0),
        abs_tol=_number(table, "abs_tol", path, 0.0),
        link_args=_str_list(table, "link", path, ("-lm",)),
        compile_args=_str_list(table, "compile_args", path),
        seeds=tuple(s if isinstance(s, str) else shlex.join(s) for s in seeds),
        include_params=params,
        run_timeout_s=_number(table, "run_timeout_s", path, 60.0) or 60.0,
        clock=clock,
    )
