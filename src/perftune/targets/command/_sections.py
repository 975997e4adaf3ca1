"""The sections of a task file, one reader each: ``[space]``, ``inputs``, ``[build]``/``[run]``,
``[objective]``, ``[check]``, ``[timing]``, ``[sandbox]``, ``env``/``cwd`` and ``[tuning]``.

Each reader checks the types, ranges and templates of its section and returns frozen values (see
:mod:`perftune.targets.command._specs`); every mistake is a :class:`~perftune.errors.TaskError` of one
line that names the file, the key and, where it can be found, the line.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from perftune.errors import PerftuneError, SpaceError, TaskError
from perftune.targets.command._objective import TimingOptions
from perftune.targets.command._specs import (
    METRICS,
    CheckSpec,
    ExpensiveCheckSpec,
    FidelitySpec,
    ObjectiveSpec,
    StepSpec,
    TuningSpec,
    static_template,
    template_names,
)

if TYPE_CHECKING:
    from perftune.drive import Budget
    from perftune.space import Space

__all__ = [
    "BUILTINS",
    "MAX_WORKERS",
    "TOP_KEYS",
    "Where",
    "check_keys",
    "did_you_mean",
    "read_name",
    "read_check",
    "read_environment",
    "read_fidelity",
    "read_inputs",
    "read_objective",
    "read_sandbox",
    "read_space",
    "read_steps",
    "read_timing",
    "read_tuning",
    "template_names",
]

BUILTINS = ("scratch", "input", "task_dir")
#: The most ``[tuning] workers`` a task file may ask for (each is a process started before the first trial).
MAX_WORKERS = 1024
TOP_KEYS = {
    "name",
    "description",
    "constraints",
    "space",
    "build",
    "run",
    "objective",
    "check",
    "timing",
    "sandbox",
    "tuning",
    "env",
    "inputs",
    "cwd",
    "adapt",  # read by perftune.adapt (per-input dispatch); the command target ignores it
}
_STEP_KEYS = {"command", "timeout_s", "shell", "env", "cwd", "stdin", "sanitizer"}
_OBJECTIVE_KEYS = {"metric", "metrics", "goal", "pattern", "key", "file", "deterministic", "constraints"}
_CHECK_KEYS = {"stdout", "files", "rtol", "atol", "ignore", "expensive"}
_EXPENSIVE_KEYS = {"budget", "build", "build_timeout_s", "run_timeout_s", "inputs", "repeats", "sanitizer"}
_SANDBOX_KEYS = {
    "memory_mb", "processes", "disk_mb", "network", "isolate_files", "scratch_root", "keep_scratch"
}
_TUNING_KEYS = {"budget", "seed", "workers", "seeds", "technique"}
_BUDGET_KEYS = {"evals", "seconds", "patience", "target"}


# -- errors with file, key and line ---------------------------------------------------------------


class Where:
    """Where a key is in the task file, for errors that name the file and the line."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text

    def line_of(self, *needles: str) -> int | None:
        """The first line holding one of ``needles`` (tried in order). A needle ``name =`` is an
        assignment of that very name (``n =`` is not found in ``min = 16``; ``n     = {`` is found),
        outside comments; any other needle is found as typed."""
        lines = self.text.splitlines()
        for needle in needles:
            if not needle:
                continue
            key = re.fullmatch(r"([\w.\-]+)\s*=", needle)
            if key is not None:
                assignment = re.compile(rf"(?<![\w.\-]){re.escape(key.group(1))}\s*=(?!=)")
                found = (i for i, line in enumerate(lines, 1)
                         if not line.lstrip().startswith("#") and assignment.search(line))
            else:
                found = (i for i, line in enumerate(lines, 1) if needle in line)
            first = next(found, None)
            if first is not None:
                return first
        return None

    def line_of_key(self, key: str) -> int | None:
        """Line of ``leaf = ...`` inside the table of a dotted key (``run.timeout_s``: under ``[run]``)."""
        *tables, leaf = key.split(".")
        leaf = leaf.split("[")[0]
        table = ".".join(tables)
        assignment = re.compile(rf"{re.escape(leaf)}\s*=")
        return next((i for i, current, stripped in self._lines_in_tables()
                     if current == table and assignment.match(stripped)), None)

    def _lines_in_tables(self) -> Iterator[tuple[int, str, str]]:
        """``(line number, the table it is in, the stripped line)`` for every line but table headers."""
        current = ""
        for i, line in enumerate(self.text.splitlines(), 1):
            stripped = line.strip()
            if stripped.startswith("[") and "]" in stripped:
                current = stripped.lstrip("[").split("]")[0].strip()
                continue
            yield i, current, stripped

    def line_of_inline_key(self, key: str) -> int | None:
        """Line of a key of an inline table (``run.timeout_s`` in ``run = { ..., timeout_s = 5 }``): the
        line that assigns the table in its parent table and holds ``leaf =``."""
        *tables, leaf = key.split(".")
        if not tables:
            return None
        leaf = leaf.split("[")[0]
        *parents, name = tables
        parent = ".".join(parents)
        quoted = "|".join(re.escape(n) for n in (name, f'"{name}"', f"'{name}'"))
        opening = re.compile(rf"^(?:{quoted})\s*=\s*\{{")
        assignment = re.compile(rf"(?<![\w.\-]){re.escape(leaf)}\s*=(?!=)")
        return next((i for i, current, stripped in self._lines_in_tables()
                     if current == parent and opening.match(stripped) and assignment.search(stripped)), None)

    def error(self, key: str, message: str, *needles: str) -> TaskError:
        line = self.line_of(*needles) if needles else None
        if line is None and key:
            line = self.line_of_key(key)
        if line is None and key:
            line = self.line_of_inline_key(key)
        if line is None and key:
            leaf = key.split(".")[-1].split("[")[0]
            line = self.line_of(f"{leaf} =", f"{leaf}=", f"[{key}]")
        where = f"{self.path}:{line}: {key}" if line else f"{self.path}: {key}"
        return TaskError(f"{where}: {message}")


def _get(
    table: Mapping[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    where: Where,
    path: str,
    default: Any = None,
) -> Any:
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise where.error(path, f"expected a number, got {value!r}")
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise where.error(path, f"expected {expected}, got {type(value).__name__} {value!r}")
    return value


def _flag(table: Mapping[str, Any], key: str, where: Where, path: str, default: Any = None) -> Any:
    """A boolean setting: a TOML ``true``/``false``; the string "false" (which is truthy) is refused."""
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, bool):
        raise where.error(path, f"expected true or false (a TOML boolean, without quotes), got {value!r}")
    return value


def _number(
    table: Mapping[str, Any],
    key: str,
    where: Where,
    path: str,
    default: Any = None,
    *,
    integer: bool = False,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
) -> Any:
    """A numeric setting: the right type, finite (TOML allows nan and inf), and in range."""
    if key not in table:
        return default
    value = table[key]
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = "an integer" if integer else "a number"
        raise where.error(path, f"expected {expected}, got {type(value).__name__} {value!r}")
    value = cast(float, value)  # an int, or a float when not ``integer``
    if not math.isfinite(value):
        raise where.error(path, f"must be a finite number, got {value}")
    bounds = [f"{op} {b}" if isinstance(b, int) else f"{op} {b:g}"  # an integer bound in full
              for op, b in ((">", above), (">=", at_least), ("<", below), ("<=", at_most)) if b is not None]
    if (
        (above is not None and not value > above)
        or (at_least is not None and not value >= at_least)
        or (below is not None and not value < below)
        or (at_most is not None and not value <= at_most)
    ):
        raise where.error(path, f"must be {' and '.join(bounds)}, got {value!r}")
    return value


def did_you_mean(word: str, options: Any) -> str:
    """``"; did you mean 'x'?"`` when one of ``options`` is close to ``word`` (a typo), else ``""``."""
    from difflib import get_close_matches

    close = get_close_matches(str(word), sorted(str(o) for o in options), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_keys(table: Mapping[str, Any], allowed: set[str], where: Where, prefix: str) -> None:
    for key in table:
        if key not in allowed:
            full = f"{prefix}{key}" if prefix else key
            message = f"unknown key (allowed: {', '.join(sorted(allowed))}){did_you_mean(key, allowed)}"
            if not did_you_mean(key, allowed):
                message += _elsewhere(key, prefix)
            if where.line_of_key(full) is not None or where.line_of_inline_key(full) is not None:
                raise where.error(full, message)  # at the key's own table, not its first namesake
            raise where.error(full, message, f"{key} =", f"{key}=", f"[{full}]")


def _elsewhere(key: str, prefix: str) -> str:
    """``"; 'budget' is a key of [tuning]"`` when ``key`` belongs to other tables of a task file."""
    tables = [t for t, keys in _TABLE_KEYS.items() if key in keys and f"{t}." != prefix]
    if not tables:
        return ""
    return f"; {key!r} is a key of " + " and ".join(f"[{t}]" if t else "the top level" for t in tables)


def _toml_type(value: Any) -> str:
    """The TOML name of a value's type, for messages (``boolean``, ``integer``, ``array``, ...)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "table"
    return "date/time" if hasattr(value, "isoformat") else type(value).__name__


def _env_value(value: Any, where: Where, key: str) -> str:
    """A value of an ``env`` table: a string (a number is written as typed; a boolean is refused)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        hint = f' (quote it, "{shown}", if the program expects that text)' if isinstance(value, bool) else ""
        raise where.error(key, f"expected a string, got {_toml_type(value)} {shown}{hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise where.error(key, f"expected a string, got float {value}")
    if isinstance(value, str) and "\0" in value:
        raise where.error(key, "holds a NUL byte, which no environment variable can hold")
    return str(value)


def _check_env_name(name: str, where: Where, key: str) -> None:
    """The name of an ``env`` variable: a program cannot be started with one that is empty or holds
    ``=`` or a NUL byte (the first step of the default configuration would fail, naming no key)."""
    if name and "=" not in name and "\0" not in name:
        return
    why = "is empty" if not name else "holds '='" if "=" in name else "holds a NUL byte"
    raise where.error(key, f"environment variable name {name!r} {why}: no program can be started with it",
                      *_quoted(name))


# -- templates --------------------------------------------------------------------------------------

def _check_template(template: str, known: set[str], where: Where, key: str) -> None:
    try:
        names = template_names(template)
    except ValueError as error:
        raise where.error(key, f"{error} in {template!r}", template) from None
    for name in names:
        if name not in known:
            from difflib import get_close_matches

            close = get_close_matches(name, sorted(known), n=1)
            hint = f"; did you mean {{{close[0]}}}?" if close else ""
            raise where.error(
                key,
                f"unknown parameter {{{name}}} in {template!r} (known: {', '.join(sorted(known))}){hint}",
                "{" + name + "}",
            )


def _check_cwd(template: str, where: Where, key: str, task_dir: Path) -> None:
    """A working directory known before any candidate runs (no placeholder but ``{task_dir}``) must exist."""
    path = static_template(template, task_dir)
    if path is None:
        return  # rendered per candidate ({scratch}/..., a parameter): it may be made by the build
    full = path if os.path.isabs(path) else os.path.join(task_dir, path)
    if not os.path.exists(full):
        raise where.error(key, f"directory {path!r} does not exist" + (f" ({full})" if full != path else ""))
    if not os.path.isdir(full):
        raise where.error(key, f"{path!r} is not a directory")


def _check_stdin(template: str, where: Where, key: str, task_dir: Path) -> None:
    """A ``stdin`` known before any candidate runs (no placeholder but ``{task_dir}``) must be a readable
    regular file, as it must be when a candidate runs (where a missing one failed the default
    configuration's first run, naming neither key nor line)."""
    path = static_template(template, task_dir)
    if path is None:
        return  # rendered per candidate ({scratch}/..., {input}, a parameter): checked when it runs
    full = path if os.path.isabs(path) else os.path.join(task_dir, path)
    if not os.path.exists(full):
        why = "does not exist"
    elif not os.path.isfile(full):
        why = "is not a regular file"
    elif not os.access(full, os.R_OK):
        why = "is not readable"
    else:
        return
    shown = f" ({full})" if full != path else ""
    raise where.error(key, f"file {path!r} {why}{shown}", *_quoted(template))


def _step(
    table: Any,
    where: Where,
    section: str,
    default_timeout_s: float,
    known: set[str],
    task_dir: Path | None = None,
) -> StepSpec:
    if not isinstance(table, Mapping):
        raise where.error(section, f"expected a table [{section}]")
    check_keys(table, _STEP_KEYS, where, f"{section}.")
    if "command" not in table:
        raise where.error(section, "missing 'command' (an array of arguments)", f"[{section}]")
    shell = _flag(table, "shell", where, f"{section}.shell", False)
    command = table["command"]
    if isinstance(command, str):
        if not shell:
            raise where.error(
                f"{section}.command",
                "a string runs through a shell: write an array of arguments, or add shell = true",
            )
        parts: tuple[str, ...] | str = command
        templates = [command]
    elif (
        isinstance(command, list)
        and command
        and all(isinstance(c, str | int | float) and not isinstance(c, bool) for c in command)
    ):
        parts = tuple(str(c) for c in command)
        templates = list(parts)
    else:
        raise where.error(f"{section}.command", "expected a non-empty array of strings")
    for i, t in enumerate(templates):
        _check_template(t, known, where, f"{section}.command[{i}]")
    timeout = _number(table, "timeout_s", where, f"{section}.timeout_s", default_timeout_s, above=0)
    env = _get(table, "env", dict, where, f"{section}.env", {})
    for k, v in env.items():
        _check_env_name(k, where, f"{section}.env.{k}")
        _check_template(_env_value(v, where, f"{section}.env.{k}"), known, where, f"{section}.env.{k}")
    cwd = _get(table, "cwd", str, where, f"{section}.cwd")
    stdin = _get(table, "stdin", str, where, f"{section}.stdin")
    for k, v in (("cwd", cwd), ("stdin", stdin)):
        if v is not None:
            _check_template(v, known, where, f"{section}.{k}")
    if cwd is not None and task_dir is not None:
        _check_cwd(cwd, where, f"{section}.cwd", task_dir)
    if stdin is not None and task_dir is not None:
        _check_stdin(stdin, where, f"{section}.stdin", task_dir)
    sanitizer = _flag(table, "sanitizer", where, f"{section}.sanitizer", None)
    if sanitizer is None:
        sanitizer = any("-fsanitize" in t for t in templates)
    return StepSpec(
        parts, float(timeout), shell, tuple((k, str(v)) for k, v in env.items()), cwd, stdin, sanitizer
    )


def read_space(doc: Mapping[str, Any], where: Where) -> tuple[Space, dict[str, dict[str, Any]]]:
    """``[space]`` and ``constraints``: the space, and how each parameter is rendered (on, off, sep)."""
    from perftune.space import Space, parameter_from_dict

    table = doc.get("space")
    if not isinstance(table, Mapping) or not table:
        raise where.error(
            "space",
            "missing or empty [space] table (one entry per parameter, e.g. "
            'block = { type = "pow2", min = 16, max = 512 })',
            "[space]",
        )
    params = {}
    render: dict[str, dict[str, Any]] = {}
    for name, spec in table.items():
        _check_param_name(name, where)
        if isinstance(spec, Mapping) and "fidelity" in spec:
            continue  # not searched: read_fidelity reads it
        if name in BUILTINS:
            raise where.error(f"space.{name}", f"{name!r} is a reserved placeholder name", f"{name} =")
        if not isinstance(spec, Mapping):
            raise where.error(
                f"space.{name}",
                'expected an inline table such as { type = "int", min = 1, max = 8 }',
                f"{name} =",
            )
        spec = dict(spec)
        extra: dict[str, Any] = {}
        for rkey in ("on", "off", "sep"):
            if rkey in spec:
                value = spec.pop(rkey)
                if not isinstance(value, str):
                    raise where.error(
                        f"space.{name}.{rkey}", f"expected a string, got {value!r}", f"{name} ="
                    )
                extra[rkey] = value
        ptype = str(spec.get("type", "")).lower()
        if ("on" in extra or "off" in extra) and ptype != "bool":
            raise where.error(f"space.{name}", "'on'/'off' only apply to type \"bool\"", f"{name} =")
        if "sep" in extra and ptype not in ("permutation", "schedule"):
            raise where.error(
                f"space.{name}", '\'sep\' only applies to type "permutation" or "schedule"', f"{name} ="
            )
        if (
            ptype in ("choice", "ordinal")
            and "values" in spec
            and "options" not in spec
            and ptype == "choice"
        ):
            spec["options"] = spec.pop("values")
        _check_default_type(spec, ptype, where, f"space.{name}", f"{name} =")
        _check_when(spec, name, where)
        try:
            params[name] = parameter_from_dict(spec, name)
        except PerftuneError as error:
            message = str(error).split(": ", 1)[-1]
            raise where.error(f"space.{name}", message + _space_hint(message), f"{name} =") from None
        except (TypeError, ValueError) as error:
            raise where.error(f"space.{name}", str(error), f"{name} =") from None
        render[name] = extra
    if not params:
        raise where.error("space", "only a fidelity parameter: declare at least one parameter to search",
                          "[space]")
    constraints = doc.get("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise where.error("constraints", "expected an array of expression strings")
    try:
        space = Space(params, constraints)
    except SpaceError as error:
        msg = str(error)
        # A parameter's when= (an unknown name, itself): at that parameter's own line, not at [space].
        m = re.match(r"parameter '([^']*)': when=", msg)
        if m and m.group(1) in params:
            name = m.group(1)
            when = table[name].get("when") if isinstance(table.get(name), Mapping) else None
            needles = (*(_quoted(when) if isinstance(when, str) else ()), *_name_needles(name))
            raise where.error(f"space.{name}.when", msg.split(": ", 1)[1], *needles) from None
        needle = next((c for c in constraints if c in msg), "")
        raise where.error("constraints" if needle else "space", msg, needle) from None
    return space, render


def _name_needles(name: str) -> tuple[str, ...]:
    """Needles for the line of ``[space]`` entry ``name``, bare or quoted (``"a-b" = {...}``)."""
    return f"{name} =", f'"{name}" =', f"'{name}' ="


def _check_param_name(name: str, where: Where) -> None:
    """A parameter's name must be one that constraints and ``when`` can name: an identifier, not a
    keyword (``a-b`` would read as ``a - b`` there). Templates could use any name, but a parameter that
    no expression can name is a trap found only when a constraint is added."""
    import keyword

    if name.isidentifier() and not keyword.iskeyword(name):
        return
    if name.isidentifier():
        why = "is a Python keyword"
    else:
        why = "is not an identifier (letters, digits and _, not starting with a digit)"
    fixed = re.sub(r"\W", "_", name)
    fixed = fixed if fixed.isidentifier() and not keyword.iskeyword(fixed) else f"p_{fixed}"
    raise where.error(f"space.{name}", f"parameter name {name!r} {why}, so constraints and when could not "
                      f"name it: rename it (e.g. {fixed}) in [space] and in the templates",
                      *_name_needles(name))


def _check_when(spec: Mapping[str, Any], name: str, where: Where) -> None:
    """A parameter's ``when``: a string that parses, its errors at its own key and line, quoting it."""
    from perftune.space import Expression

    if "when" not in spec:
        return
    when = spec["when"]
    if not isinstance(when, str):
        raise where.error(f"space.{name}.when", "expected an expression string such as \"order == 'ikj'\", "
                          f"got {_toml_type(when)} {when!r}", *_name_needles(name))
    try:
        Expression(when)
    except PerftuneError as error:
        raise where.error(f"space.{name}.when", str(error), *_quoted(when), *_name_needles(name)) from None


_INTEGER_TYPES = ("int", "logint", "pow2")
_NUMBER_TYPES = ("float", "logfloat")


def _check_default_type(spec: Mapping[str, Any], ptype: str, where: Where, key: str, needle: str) -> None:
    """A ``default`` of the wrong type (``default = "1"`` for an int) is said to be so, not out of range."""
    if "default" not in spec:
        return
    problem = _type_mismatch(spec["default"], ptype)
    if problem:
        raise where.error(f"{key}.default", problem, needle)


def _type_mismatch(value: Any, ptype: str) -> str | None:
    """``expected an integer for type 'int', got string '3' (remove the quotes)``, or None when ``value``
    has the type of a ``ptype`` parameter (or the parameter checks its own values: choice, ordinal...)."""
    if ptype in _INTEGER_TYPES:
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif ptype in _NUMBER_TYPES:
        ok, expected = isinstance(value, int | float) and not isinstance(value, bool), "a number"
    elif ptype == "bool":
        ok, expected = isinstance(value, bool), "true or false (a TOML boolean, without quotes)"
    else:
        return None
    if ok:
        return None
    shown = str(value).lower() if isinstance(value, bool) else repr(value)
    hint = " (remove the quotes)" if isinstance(value, str) and _unquoted_fits(value, ptype) else ""
    return f"expected {expected} for type {ptype!r}, got {_toml_type(value)} {shown}{hint}"


def _unquoted_fits(text: str, ptype: str) -> bool:
    """Whether ``text`` without its quotes would be a value of ``ptype`` (``"1"`` for an int)."""
    import tomllib

    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return False
    if ptype == "bool":
        return isinstance(value, bool)
    kinds: tuple[type, ...] = (int,) if ptype in _INTEGER_TYPES else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def _space_hint(message: str) -> str:
    """A "did you mean" for a parameter's unknown key or type (``defualt``, ``integer``)."""
    m = re.search(r"unknown key '([^']*)' for type '[^']*' \(allowed: ([^)]*)\)", message)
    if m:
        allowed = set(m.group(2).split(", "))
        if "lo" in allowed:
            allowed |= {"min", "max"}  # the aliases the task files use
        return did_you_mean(m.group(1), allowed)
    m = re.search(r"unknown parameter type '([^']*)' \(one of ([^)]*)\)", message)
    if m:
        return did_you_mean(m.group(1), m.group(2).split(", "))
    return ""


_FIDELITY_KEYS = {"type", "fidelity", "eta"}


def read_fidelity(doc: Mapping[str, Any], where: Where) -> FidelitySpec | None:
    """The ``[space]`` parameter declared with ``fidelity = [levels]``, if any (at most one)."""
    table = doc.get("space")
    if not isinstance(table, Mapping):
        return None
    found: FidelitySpec | None = None
    for name, spec in table.items():
        if not isinstance(spec, Mapping) or "fidelity" not in spec:
            continue
        key = f"space.{name}"
        if found is not None:
            raise where.error(f"{key}.fidelity", f"a second fidelity parameter (the first is "
                              f"{found.name!r}): a task file has at most one", f"{name} =")
        if name in BUILTINS:
            raise where.error(key, f"{name!r} is a reserved placeholder name", f"{name} =")
        unknown = sorted(set(spec) - _FIDELITY_KEYS)
        if unknown:
            raise where.error(f"{key}.{unknown[0]}", "a fidelity parameter takes only type, fidelity and "
                              f"eta (its levels are its values), not {', '.join(unknown)}", f"{name} =")
        ptype = str(spec.get("type", "int")).lower()
        if ptype not in ("int", "float"):
            raise where.error(f"{key}.type", f'a fidelity parameter is "int" or "float", not {ptype!r}',
                              f"{name} =")
        levels = spec["fidelity"]
        numeric = isinstance(levels, list) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            for v in levels)
        if not numeric or len(levels) < 2:
            raise where.error(f"{key}.fidelity", "expected an array of at least 2 positive numbers, cheapest "
                              f"first (e.g. [1000, 10000, 100000]), got {levels!r}", f"{name} =")
        if ptype == "int" and not all(isinstance(v, int) for v in levels):
            raise where.error(f"{key}.fidelity", f'type "int" needs integer levels, got {levels!r}',
                              f"{name} =")
        if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
            raise where.error(f"{key}.fidelity", f"levels must increase (cheapest first), got {levels!r}",
                              f"{name} =")
        eta = spec.get("eta", 3)
        if isinstance(eta, bool) or not isinstance(eta, int) or eta < 2:
            raise where.error(f"{key}.eta", f"expected an integer of at least 2, got {eta!r}", f"{name} =")
        found = FidelitySpec(str(name), tuple(levels), eta)
    return found


def _check_timing(table: Mapping[str, Any], where: Where) -> None:
    """Types and ranges of ``[timing]``, each error naming its key and line."""
    for k in ("min_runs", "max_runs", "first_runs", "repeats"):
        _number(table, k, where, f"timing.{k}", integer=True, at_least=1)
    _number(table, "warmup_runs", where, "timing.warmup_runs", integer=True, at_least=0)
    try:
        _number(table, "tie", where, "timing.tie", at_least=0, below=1)
    except TaskError as error:
        raise TaskError(f"{error} (a relative difference: 0.01 = 1%)") from None
    for k in ("confidence", "futility_confidence"):
        _number(table, k, where, f"timing.{k}", above=0, below=1)
    _number(table, "timeout_factor", where, "timing.timeout_factor", at_least=1)
    _number(table, "min_timeout_s", where, "timing.min_timeout_s", above=0)
    if "min_runs" in table and "max_runs" in table and table["min_runs"] > table["max_runs"]:
        raise where.error(
            "timing.min_runs", f"must be at most max_runs ({table['max_runs']}), got {table['min_runs']}"
        )
    pin = table.get("pin_cpus")
    if pin is not None and (
        not isinstance(pin, list)
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in pin)
    ):
        raise where.error("timing.pin_cpus", f"expected an array of core numbers, got {pin!r}")
    available = _available_cpus()
    if pin and available:
        missing = [c for c in pin if c not in available]
        if missing:
            cores = "core" if len(missing) == 1 else "cores"
            raise where.error(
                "timing.pin_cpus",
                f"{cores} {', '.join(map(str, missing))} not available to this process "
                f"(available: {_ranges(sorted(available))})",
            )


def _available_cpus() -> set[int] | None:
    """The cores this process may run on (None where the platform cannot say)."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None:
        return None
    try:
        return set(getter(0))
    except OSError:
        return None


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2, 5"``."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _quoted(value: str) -> tuple[str, str]:
    """Needles for the line of a string value: as TOML writes it, quoted (a bare "." is everywhere)."""
    return f'"{value}"', f"'{value}'"


def _resolve_path(value: str, base: Path) -> str:
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else (base / p).resolve())


def read_name(doc: Mapping[str, Any], where: Where, default: str) -> str:
    """``name``: the run's name."""
    name: str = _get(doc, "name", str, where, "name", default)
    return name


def read_inputs(doc: Mapping[str, Any], where: Where, task_dir: Path) -> list[str]:
    """``inputs``: a path or an array of paths, each a readable file; ``{input}`` is the first one."""
    inputs = doc.get("inputs", [])
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
        raise where.error("inputs", "expected a path or an array of paths")
    input_paths = []
    for i, inp in enumerate(inputs):
        resolved = _resolve_path(inp, task_dir)
        if not os.path.isfile(resolved) or not os.access(resolved, os.R_OK):
            why = "does not exist" if not os.path.exists(resolved) else "is not a readable file"
            raise where.error(f"inputs[{i}]", f"input {inp!r} {why} ({resolved})", *_quoted(inp))
        input_paths.append(resolved)
    return input_paths


def read_steps(
    doc: Mapping[str, Any],
    where: Where,
    known: set[str],
    input_paths: list[str],
    *,
    task_dir: Path | None = None,
) -> tuple[StepSpec | None, StepSpec]:
    """``[build]`` (optional) and ``[run]`` (required).

    With ``task_dir``, a ``cwd`` that names no placeholder but ``{task_dir}`` must be a directory.
    """
    build = _step(doc["build"], where, "build", 300.0, known, task_dir) if "build" in doc else None
    if "run" not in doc:
        raise where.error("run", "missing [run] table with command = [...]")
    run = _step(doc["run"], where, "run", 60.0, known, task_dir)

    for section, step in (("build", build), ("run", run)):
        if step is None:
            continue
        if (
            any("{input}" in t for t in ([step.command] if isinstance(step.command, str) else step.command))
            and not input_paths
        ):
            raise where.error(
                f"{section}.command", "uses {input} but the task declares no inputs = [...]", "{input}"
            )
    return build, run


def read_objective(doc: Mapping[str, Any], where: Where, known: set[str]) -> ObjectiveSpec:
    """``[objective]``: the metric, the goal, how the metric is read and whether it is deterministic."""
    obj_table = doc.get("objective", {})
    if not isinstance(obj_table, Mapping):
        raise where.error("objective", "expected a table [objective]")
    check_keys(obj_table, _OBJECTIVE_KEYS, where, "objective.")
    metrics = _read_metrics(obj_table, where)
    metric = _get(obj_table, "metric", str, where, "objective.metric", metrics[0] if metrics else "wall_time")
    if metrics and metric != metrics[0]:
        raise where.error("objective.metric", f"{metric!r} must be the first of metrics = [...] "
                          f"({metrics[0]!r}); give one of the two keys", metric)
    if metric not in METRICS:
        raise where.error(
            "objective.metric", f"unknown metric {metric!r} (one of: {', '.join(METRICS)})", metric
        )
    default_goal = "min" if metric in ("wall_time", "cpu_time", "max_rss", "file_size") else None
    goals: tuple[str, ...] = ()
    if metrics and isinstance(obj_table.get("goal"), list):
        raw_goals = obj_table["goal"]
        if len(raw_goals) != len(metrics) or not all(g in ("min", "max") for g in raw_goals):
            raise where.error("objective.goal", f'expected one "min" or "max" per metric '
                              f"({len(metrics)}), got {raw_goals!r}")
        goals = tuple(raw_goals)
        goal = goals[0]
    else:
        goal = _get(obj_table, "goal", str, where, "objective.goal", default_goal)
        # A string is the primary's goal; the others (times, memory) are minimised.
        goals = (goal, *("min",) * (len(metrics) - 1)) if metrics else ()
    constraints = _read_constraints(obj_table, where, metric)
    if goal not in ("min", "max"):
        raise where.error(
            "objective.goal",
            'expected "min" or "max"' if goal else f'metric {metric!r} needs goal = "min" or "max"',
        )
    pattern = _get(obj_table, "pattern", str, where, "objective.pattern")
    key = _get(obj_table, "key", str, where, "objective.key")
    out_file = _get(obj_table, "file", str, where, "objective.file")
    if metric == "stdout_regex":
        if not pattern:
            raise where.error(
                "objective.pattern",
                "metric \"stdout_regex\" needs pattern = '...' "
                "(its first group, or the whole match, is the number)",
                "[objective]",
            )
        try:
            re.compile(pattern, re.MULTILINE)
        except re.error as error:
            raise where.error("objective.pattern", f"bad regular expression: {error}", pattern) from None
    if metric == "stdout_json" and not key:
        raise where.error(
            "objective.key",
            'metric "stdout_json" needs key = "..." (dotted for nested objects)',
            "[objective]",
        )
    if metric == "file_size":
        if not out_file:
            raise where.error(
                "objective.file", 'metric "file_size" needs file = "{scratch}/..."', "[objective]"
            )
        _check_template(out_file, known, where, "objective.file")
    deterministic = obj_table.get("deterministic", "auto")
    if deterministic == "auto" and not isinstance(deterministic, bool):
        deterministic = None
    elif not isinstance(deterministic, bool):
        raise where.error(
            "objective.deterministic", f'expected true, false or "auto", got {deterministic!r}'
        )
    elif deterministic and metric in ("wall_time", "cpu_time"):
        raise where.error(
            "objective.deterministic",
            f"{metric} is measured by the clock and never deterministic: remove the key, or set it to false",
        )
    return ObjectiveSpec(metric, goal, pattern, key, out_file, deterministic, metrics=metrics, goals=goals,
                         constraints=constraints)


#: Metrics every run of a command reports beside the optimised one: what ``metrics = [...]`` and
#: ``constraints`` may name.
REPORTED_METRICS = ("wall_time", "cpu_time", "max_rss")


def _read_metrics(table: Mapping[str, Any], where: Where) -> tuple[str, ...]:
    """``metrics = ["wall_time", "max_rss"]``: several objectives, the primary first."""
    if "metrics" not in table:
        return ()
    raw = table["metrics"]
    if not isinstance(raw, list) or not raw or not all(isinstance(m, str) for m in raw):
        raise where.error("objective.metrics", f"expected a list of metric names, got {raw!r}")
    if len(set(raw)) != len(raw):
        raise where.error("objective.metrics", f"a metric is named twice in {raw!r}")
    for name in raw[1:]:
        if name not in REPORTED_METRICS:
            raise where.error("objective.metrics", f"{name!r} cannot be a second objective: each run "
                              f"reports {', '.join(REPORTED_METRICS)} beside the first metric", name)
    return tuple(raw)


def _read_constraints(table: Mapping[str, Any], where: Where, metric: str) -> tuple[str, ...]:
    """``constraints = ["max_rss <= 200000"]``: bounds on the metrics each run reports."""
    from perftune.errors import PerftuneError
    from perftune.search import Constraint

    if "constraints" not in table:
        return ()
    raw = table["constraints"]
    if not isinstance(raw, list) or not all(isinstance(c, str) for c in raw):
        raise where.error("objective.constraints", f'expected a list like ["max_rss <= 200000"], got {raw!r}')
    for text in raw:
        try:
            constraint = Constraint.parse(text)
        except PerftuneError:
            raise where.error("objective.constraints", f"cannot read {text!r}: expected 'metric >= number' "
                              "(or <=, >, <)", text) from None
        if constraint.metric not in (metric, *REPORTED_METRICS):
            raise where.error("objective.constraints", f"{constraint.metric!r} is not reported by a run "
                              f"(one of: {', '.join((metric, *REPORTED_METRICS))})", text)
    return tuple(raw)


def read_check(
    doc: Mapping[str, Any], where: Where, known: set[str], task_dir: Path, input_paths: list[str]
) -> CheckSpec:
    """``[check]``: how a candidate's output is compared with the default's, and ``[check.expensive]``."""
    check_table = doc.get("check", {})
    if not isinstance(check_table, Mapping):
        raise where.error("check", "expected a table [check]")
    check_keys(check_table, _CHECK_KEYS, where, "check.")
    stdout_mode = _get(check_table, "stdout", (str, bool), where, "check.stdout", "none")
    if stdout_mode is True:
        stdout_mode = "exact"
    elif stdout_mode is False:
        stdout_mode = "none"
    if stdout_mode not in ("none", "exact", "numeric"):
        raise where.error("check.stdout", f'expected "exact", "numeric" or "none", got {stdout_mode!r}')
    files = _get(check_table, "files", list, where, "check.files", [])
    for i, f in enumerate(files):
        if not isinstance(f, str):
            raise where.error(f"check.files[{i}]", f"expected a path template, got {f!r}")
        _check_template(f, known, where, f"check.files[{i}]")
    rtol = float(_number(check_table, "rtol", where, "check.rtol", 0.0, at_least=0))
    atol = float(_number(check_table, "atol", where, "check.atol", 0.0, at_least=0))
    if (rtol or atol) and stdout_mode == "exact":
        stdout_mode = "numeric"
    ignore = _get(check_table, "ignore", str, where, "check.ignore")
    if ignore is not None:
        try:
            re.compile(ignore)
        except re.error as error:
            raise where.error("check.ignore", f"bad regular expression: {error}", ignore) from None
    expensive = None
    if "expensive" in check_table:
        expensive = _read_expensive(check_table["expensive"], where, known, task_dir, input_paths)
    return CheckSpec(stdout_mode, tuple(files), rtol, atol, ignore, expensive,
                     stdout_declared="stdout" in check_table)


def _read_expensive(
    ex: Any, where: Where, known: set[str], task_dir: Path, input_paths: list[str]
) -> ExpensiveCheckSpec:
    """``[check.expensive]``: a costlier check (a sanitizer build, more inputs) within a budget."""
    if not isinstance(ex, Mapping):
        raise where.error("check.expensive", "expected a table [check.expensive]")
    check_keys(ex, _EXPENSIVE_KEYS, where, "check.expensive.")
    try:
        budget_frac = float(
            _number(ex, "budget", where, "check.expensive.budget", 0.1, at_least=0, at_most=1)
        )
    except TaskError as error:
        raise TaskError(f"{error} (a fraction of the candidates)") from None
    ex_build = _get(ex, "build", list, where, "check.expensive.build")
    if ex_build is not None:
        if not ex_build:
            raise where.error("check.expensive.build", "expected a non-empty array of arguments")
        for i, t in enumerate(ex_build):
            if isinstance(t, bool) or not isinstance(t, str | int | float):
                raise where.error(f"check.expensive.build[{i}]", f"expected a string, got {t!r}")
            _check_template(str(t), known, where, f"check.expensive.build[{i}]")
    ex_inputs = []
    for i, inp in enumerate(_get(ex, "inputs", list, where, "check.expensive.inputs", [])):
        resolved = _resolve_path(str(inp), task_dir)
        if not os.path.isfile(resolved) or not os.access(resolved, os.R_OK):
            raise where.error(
                f"check.expensive.inputs[{i}]", f"input {inp!r} is missing or unreadable", *_quoted(str(inp))
            )
        ex_inputs.append(resolved)
    if ex_inputs and not input_paths:
        raise where.error(
            "check.expensive.inputs", "extra inputs replace {input}, but the task has no inputs"
        )
    return ExpensiveCheckSpec(
        budget=budget_frac,
        build=tuple(str(t) for t in ex_build) if ex_build is not None else None,
        build_timeout_s=float(
            _number(ex, "build_timeout_s", where, "check.expensive.build_timeout_s", 300.0, above=0)
        ),
        run_timeout_s=_number(ex, "run_timeout_s", where, "check.expensive.run_timeout_s", above=0),
        sanitizer=_flag(ex, "sanitizer", where, "check.expensive.sanitizer", True),
        inputs=tuple(ex_inputs),
        repeats=int(
            _number(ex, "repeats", where, "check.expensive.repeats", 0, integer=True, at_least=0)
        ),
    )


_TIMING_KEYS = {
    "min_runs",
    "max_runs",
    "warmup_runs",
    "first_runs",
    "tie",
    "confidence",
    "repeats",
    "timeout_factor",
    "min_timeout_s",
    "pin_cpus",
    "futility_confidence",
}

#: The keys of every table of a task file, by table: where a key written in the wrong table belongs.
_TABLE_KEYS: dict[str, set[str]] = {
    "": TOP_KEYS,
    "build": _STEP_KEYS,
    "run": _STEP_KEYS,
    "objective": _OBJECTIVE_KEYS,
    "check": _CHECK_KEYS,
    "check.expensive": _EXPENSIVE_KEYS,
    "timing": _TIMING_KEYS,
    "sandbox": _SANDBOX_KEYS,
    "tuning": _TUNING_KEYS,
}


def read_timing(doc: Mapping[str, Any], where: Where, objective: ObjectiveSpec) -> TimingOptions:
    """``[timing]``: how often a candidate runs and when the sequential test stops."""
    timing_table = doc.get("timing", {})
    if not isinstance(timing_table, Mapping):
        raise where.error("timing", "expected a table [timing]")
    check_keys(timing_table, _TIMING_KEYS, where, "timing.")
    _check_timing(timing_table, where)
    if objective.deterministic and timing_table.get("repeats", 1) > 1:
        raise where.error(
            "timing.repeats",
            "objective.deterministic = true measures each configuration once: remove one of the two",
        )
    try:
        return TimingOptions.from_table(timing_table, objective.metric)
    except (TypeError, ValueError) as error:
        raise where.error("timing", str(error), "[timing]") from None


#: The largest values of ``[sandbox]``: sizes in MiB whose bytes (4x for a sanitizer's memory) fit the
#: kernel's limits (a C long), and no more processes than Linux can number (PID_MAX_LIMIT).
_SANDBOX_MOST = {"memory_mb": 2**40, "processes": 2**22, "disk_mb": 2**42}


def read_sandbox(doc: Mapping[str, Any], where: Where) -> dict[str, Any]:
    """``[sandbox]``: limits and isolation of the candidates, checked here and passed on as given."""
    sandbox_table = doc.get("sandbox", {})
    if not isinstance(sandbox_table, Mapping):
        raise where.error("sandbox", "expected a table [sandbox]")
    check_keys(sandbox_table, _SANDBOX_KEYS, where, "sandbox.")
    for k, most in _SANDBOX_MOST.items():
        _number(sandbox_table, k, where, f"sandbox.{k}", integer=True, at_least=1, at_most=most)
    for k in ("network", "isolate_files", "keep_scratch"):
        _flag(sandbox_table, k, where, f"sandbox.{k}")
    _get(sandbox_table, "scratch_root", str, where, "sandbox.scratch_root")
    return dict(sandbox_table)


def read_environment(
    doc: Mapping[str, Any], where: Where, known: set[str], *, task_dir: Path | None = None
) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """Top-level ``env`` (variables of every step) and ``cwd`` (the steps' working directory).

    With ``task_dir``, a ``cwd`` that names no placeholder but ``{task_dir}`` must be a directory.
    """
    env = _get(doc, "env", dict, where, "env", {})
    for k, v in env.items():
        _check_env_name(k, where, f"env.{k}")
        _check_template(_env_value(v, where, f"env.{k}"), known, where, f"env.{k}")
    cwd = _get(doc, "cwd", str, where, "cwd")
    if cwd is not None:
        _check_template(cwd, known, where, "cwd")
        if task_dir is not None:
            _check_cwd(cwd, where, "cwd", task_dir)
    return tuple((k, str(v)) for k, v in env.items()), cwd


def read_tuning(doc: Mapping[str, Any], where: Where, space: Space) -> TuningSpec:
    """``[tuning]``: budget, seed, workers, technique and seed configurations (each must be valid)."""
    tuning = doc.get("tuning", {})
    if not isinstance(tuning, Mapping):
        raise where.error("tuning", "expected a table [tuning]")
    check_keys(tuning, _TUNING_KEYS, where, "tuning.")
    budget = _read_budget(tuning, where) if "budget" in tuning else None
    seed = _number(tuning, "seed", where, "tuning.seed", integer=True, at_least=0)
    workers = _number(
        tuning, "workers", where, "tuning.workers", integer=True, at_least=1, at_most=MAX_WORKERS
    )
    technique = _get(tuning, "technique", str, where, "tuning.technique")
    if technique is not None:
        _check_technique(technique, where)
    seeds_raw = _get(tuning, "seeds", list, where, "tuning.seeds", [])
    seeds: list[dict[str, Any]] = []
    for i, s in enumerate(seeds_raw):
        if not isinstance(s, Mapping):
            raise where.error(
                f"tuning.seeds[{i}]", f"expected an inline table of parameter values, got {s!r}"
            )
        unknown = [k for k in s if k not in space.params]
        if unknown:
            raise where.error(f"tuning.seeds[{i}]", f"unknown parameter {unknown[0]!r}"
                              f"{did_you_mean(unknown[0], space.names)}")
        for name, value in s.items():
            problem = _type_mismatch(value, space.params[name].type_name)
            if problem:
                raise where.error(f"tuning.seeds[{i}]", f"parameter {name!r}: {problem}")
        seeds.append(_read_seed(s, space, where, f"tuning.seeds[{i}]"))
    return TuningSpec(budget=budget, seed=seed, workers=workers, technique=technique, seeds=tuple(seeds))


def _check_technique(name: str, where: Where) -> None:
    """``[tuning] technique``: a registered technique (or alias), else one line with the known names."""
    from perftune.search import ALIASES, get, names

    try:
        get(name)
    except PerftuneError:
        known = [*names(), *ALIASES]
        raise where.error("tuning.technique", f"unknown technique {name!r} (known: {', '.join(known)})"
                          f"{did_you_mean(name, known)}", *_quoted(name)) from None


def _read_seed(raw: Mapping[str, Any], space: Space, where: Where, key: str) -> dict[str, Any]:
    """One ``[tuning] seeds`` entry: a valid and complete configuration. As ``perftune.tune(seeds=...)``,
    a seed names every active parameter: missing ones are not filled from their defaults."""
    from perftune.space import Config

    cfg = Config.from_json(dict(raw), space)
    problem = space.why_invalid(cfg)
    missing: list[str] = []
    filled = dict(cfg)
    while problem is not None and (m := re.fullmatch(r"parameter '(\w+)' is missing", problem)) is not None:
        # Every missing parameter at once (the activity of a conditional one may hang on another's value).
        if m.group(1) in missing or m.group(1) not in space.params:
            break
        missing.append(m.group(1))
        filled[m.group(1)] = space.params[m.group(1)].default_value()
        problem = space.why_invalid(Config(filled))
    if missing:
        names = ", ".join(repr(n) for n in missing)
        raise where.error(key, f"parameter{'s' if len(missing) > 1 else ''} {names} "
                          f"{'are' if len(missing) > 1 else 'is'} missing: a seed gives a value to every "
                          "active parameter (missing ones are not filled from their defaults)")
    if problem:
        raise where.error(key, f"invalid configuration: {problem}")
    return dict(cfg)


def _read_budget(tuning: Mapping[str, Any], where: Where) -> Budget | None:
    """``[tuning] budget``: a number of evaluations, a duration, or a table of limits."""
    from perftune.drive import Budget

    raw = tuning["budget"]
    if isinstance(raw, Mapping):
        check_keys(raw, _BUDGET_KEYS, where, "tuning.budget.")
        for k in ("evals", "patience"):
            _number(raw, k, where, f"tuning.budget.{k}", integer=True, at_least=1)
        _number(raw, "seconds", where, "tuning.budget.seconds", above=0)
        _number(raw, "target", where, "tuning.budget.target")
    elif isinstance(raw, int | float):
        _number(tuning, "budget", where, "tuning.budget", integer=True, at_least=1)
    try:
        if isinstance(raw, Mapping):
            return Budget(**{k: v for k, v in raw.items()})
        return Budget.coerce(raw)
    except (PerftuneError, TypeError) as error:
        raise where.error("tuning.budget", str(error).split(": ", 1)[-1]) from None
