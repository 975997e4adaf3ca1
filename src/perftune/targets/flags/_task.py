"""``[target] kind = "flags"`` sections of task files.

Example task file::

    name = "prog-flags"              # the run's name (or [tuning] name)
    [target]
    kind = "flags"
    compiler = "gcc"
    sources = ["prog.c"]
    run = ["1000", "input.txt"]      # the program's arguments (no shell); a string is split like a shell
    rel_tol = 1e-6                   # numbers in the output may differ this much (FP programs)
    link = ["-lm"]
    seeds = ["-O2 -funroll-loops"]
    [tuning]
    budget = "5m"                    # also seed, workers, name

A flags task file has these tables and keys only (:func:`check_task_file`): an unknown one, such as a
command task's ``[sandbox]`` or ``[timing]`` that this kind does not use, or a typo, is an error naming
the file and line, as in command task files.

Example:
    >>> task = task_from_toml({"kind": "flags", "sources": ["a.c"]}, "task.toml")
    >>> task.sources
    ('a.c',)
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perftune.errors import TaskError

__all__ = ["FlagsTask", "check_task_file", "task_from_toml"]

#: The top-level keys and tables of a flags task file.
_TOP_KEYS = {"name", "description", "target", "tuning"}
#: The keys of its ``[tuning]`` table (read by ``perftune run``).
_TUNING_KEYS = {"name", "budget", "seed", "workers"}

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
        lag: int | None = None,
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
            seeds_key=f"{self.path or 'task'}: key target.seeds",
            lag=lag,
        )


def _line_of(text: str, table: str, key: str) -> int | None:
    """The line of ``key`` in ``text``: its assignment in ``[table]`` (``""``: before any table), or the
    header of a table named ``key`` there (``[key]``, ``[key.x]``, ``[[key]]``)."""
    header = re.compile(r"\s*\[\[?\s*([^\]]*?)\s*\]")
    name = re.escape(key)
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        m = header.match(line)
        if m is not None:
            current = m.group(1)
            full = f"{table}.{key}" if table else key
            if current == full or current.startswith(full + "."):
                return number
            continue
        if current == table and re.match(rf"{name}\s*[=.]", stripped):
            return number
    return None


def _unknown_key(path: str, text: str, table: str, key: str, allowed: set[str]) -> TaskError:
    """The one line of a key a flags task file does not use: file and line, the allowed keys, a near one."""
    line = _line_of(text, table, key) if text else None
    where = f"{path}:{line}" if line else path
    close = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    dotted = f"{table}.{key}" if table else key
    return TaskError(f"{where}: {dotted}: unknown key (allowed: {', '.join(sorted(allowed))}){hint}")


def check_task_file(document: Mapping[str, Any], path: str, text: str = "") -> None:
    """Refuse the tables and keys of a flags task file that the flags kind does not use.

    ``[target]``'s own keys are :func:`task_from_toml`'s; this checks the rest: ``name``,
    ``description``, ``[target]`` and ``[tuning]`` (``name``, ``budget``, ``seed``, ``workers``).

    Args:
        document: The whole task file, parsed.
        path: The task file, for messages.
        text: Its text, for the line of an unknown key.

    Raises:
        TaskError: ``FILE:LINE: KEY: unknown key (allowed: ...); did you mean ...?``.

    Example:
        >>> try:
        ...     check_task_file({"target": {}, "tunning": {}}, "t.toml")
        ... except TaskError as error:
        ...     print(str(error).split(" (")[0], str(error).split("; ")[-1])
        t.toml: tunning: unknown key did you mean 'tuning'?
    """
    for key in document:
        if key not in _TOP_KEYS:
            raise _unknown_key(path, text, "", key, _TOP_KEYS)
    tuning = document.get("tuning")
    if isinstance(tuning, Mapping):
        for key in tuning:
            if key not in _TUNING_KEYS:
                raise _unknown_key(path, text, "tuning", key, _TUNING_KEYS)


def _str_list(
    table: Mapping[str, Any], key: str, path: str, default: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = table.get(key, default)
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as error:
            raise TaskError(f"{path}: key target.{key}: {str(error).lower()} in {value!r}") from None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TaskError(f"{path}: key target.{key}: expected a list of strings or a string")
    return tuple(value)


def _seeds(table: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """``target.seeds``: option strings (split as a shell would) or lists of options, checked here."""
    seeds = table.get("seeds", [])
    if not isinstance(seeds, list):
        raise TaskError(f"{path}: key target.seeds: expected a list of option strings")
    out = []
    for i, seed in enumerate(seeds):
        if isinstance(seed, list) and all(isinstance(word, str) for word in seed):
            out.append(shlex.join(seed))
            continue
        if not isinstance(seed, str):
            raise TaskError(f"{path}: key target.seeds[{i}]: expected a string of options or a list of "
                            f"strings, got {seed!r}")
        try:
            shlex.split(seed)
        except ValueError as error:
            raise TaskError(f"{path}: key target.seeds[{i}]: {str(error).lower()} in {seed!r}") from None
        out.append(seed)
    return tuple(out)


def _number(table: Mapping[str, Any], key: str, path: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise TaskError(f"{path}: key target.{key}: expected a non-negative number, got {value!r}")
    return float(value)


def task_from_toml(table: Mapping[str, Any], path: str, *, text: str = "") -> FlagsTask:
    """Read the ``[target]`` table of a task file whose ``kind`` is ``"flags"``.

    Args:
        table: The ``[target]`` table.
        path: The task file (relative paths in the table are relative to its directory).
        text: The task file's text, for the line of an unknown key.

    Raises:
        TaskError: A key is unknown ("FILE:LINE: target.X: unknown key (allowed: ...)", as in command
            task files) or has the wrong type ("FILE: key target.X: ...").
    """
    for key in table:
        if key not in _KEYS:
            raise _unknown_key(path, text, "target", key, _KEYS)
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
    seeds = _seeds(table, path)
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
        seeds=seeds,
        include_params=params,
        run_timeout_s=_number(table, "run_timeout_s", path, 60.0) or 60.0,
        clock=clock,
    )
