"""Load a benchmark-hub T1 space description and T4 results into a perftune space and objective."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune import _jsonfile
from perftune.errors import PerftuneError, SpaceError

__all__ = [
    "INPUT_LIMIT_ENV",
    "ReplayFailure",
    "ReplayObjective",
    "ReplayProblem",
    "Where",
    "at",
    "check_time",
    "check_value_types",
    "input_limit_bytes",
    "json_value",
    "load",
    "measurement_goal",
    "parse_json",
    "read_json",
    "read_text",
    "space_from_t1",
]

INPUT_LIMIT_ENV = _jsonfile.INPUT_LIMIT_ENV
DEFAULT_INPUT_MAX_MB = _jsonfile.DEFAULT_INPUT_MAX_MB
_MAX_VALUES = 100_000  # values of one T1 parameter, nested items included
_MAX_VALUE_DEPTH = 4  # [[1, 2], [3, 4]] is depth 2
_MAX_INT = 2**63  # parameter values are 64-bit integers at most
# Units of work (items built or read) one T1 condition may take per configuration checked: a bound of the
# Expression's, far above what a real condition needs (tens).
_MAX_CONDITION_WORK = 100_000


class ReplayFailure(Exception):
    """Raised by a replay objective for a configuration that failed or was never measured.

    The driver records it as a FAILED trial with ``str(error)`` as the reason.
    """


def input_limit_bytes() -> int:
    """The most bytes an input file may hold once decompressed: ``$PERFTUNE_INPUT_MAX_MB`` (512) MiB.

    Files received from others (T1/T4 files, Kernel Tuner caches, warm-start files) are read through
    this cap: a 600 KB gzip file can expand to gigabytes.
    """
    return _jsonfile.input_limit_bytes(PerftuneError)


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of a file, gunzipped when its name ends in ``.gz``, read through a size cap
    (:func:`input_limit_bytes`): a gzip bomb never gets into memory.

    Raises:
        PerftuneError: the file is missing, not a regular file, unreadable, not UTF-8, or larger than
            the cap (one line naming the file, and the cap and how to raise it).
    """
    return _jsonfile.read_input_text(path, what, PerftuneError)


def parse_json(text: str, path: str | os.PathLike[str], what: str) -> Any:
    """``json.loads(text)``, with one line naming the file for anything it cannot take.

    Raises:
        PerftuneError: not JSON, nested too deeply, or an integer of more than 4,300 digits.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise PerftuneError(f"{path}: not a valid {what} JSON file (nested too deeply)") from None
    except MemoryError:
        raise PerftuneError(f"{path}: {what} file is too large to parse") from None
    except ValueError as e:  # JSONDecodeError, and int() of a number with too many digits
        detail = " ".join(str(e).split())
        raise PerftuneError(f"{path}: not a valid {what} JSON file ({detail[:300]})") from None


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """Read a JSON file, gzip-compressed when its name ends in ``.gz``, through a size cap.

    Raises:
        PerftuneError: the file is missing, larger than :func:`input_limit_bytes`, or is not JSON
            (one line naming the file).
    """
    return parse_json(read_text(path, what), Path(path), what)


Where = str | Callable[[], str]
"""Where a value is, for an error message: the text, or a function that makes it (only on error)."""


def _place(where: Where) -> str:
    return where if isinstance(where, str) else where()


def _describe(where: str, label: str, key: Any) -> str:
    return f"{where}: {label}{_shown(key)}"


def at(where: str, label: str, key: Any) -> Callable[[], str]:
    """``"{where}: {label}{key!r}"``, made only if an error message needs it (files have many values)."""
    return functools.partial(_describe, where, label, key)


def json_value(raw: Any, where: Where, *, budget: list[int] | None = None, depth: int = 0) -> Any:
    """A parameter value read from a file: hashable (lists as tuples), finite, 64-bit integers.

    Raises:
        PerftuneError: a JSON object, NaN or infinity, an integer beyond 2**63, lists nested more than
            four levels deep or holding more than 100,000 items; the message starts with ``where``.
    """
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise PerftuneError(f"{_place(where)}: more than {_MAX_VALUES} values")
    kind = type(raw)
    if kind is str or kind is bool or raw is None:
        return raw
    if kind is int:
        if not -_MAX_INT <= raw <= _MAX_INT:
            bits = raw.bit_length()
            raise PerftuneError(f"{_place(where)}: integer of {bits} bits is too large (at most 2**63)")
        return raw
    if kind is float:
        if not math.isfinite(raw):
            raise PerftuneError(f"{_place(where)}: {raw!r} is not a usable value")
        return raw
    if isinstance(raw, list | tuple):
        if depth >= _MAX_VALUE_DEPTH:
            raise PerftuneError(f"{_place(where)}: lists nested more than {_MAX_VALUE_DEPTH} levels deep")
        items = budget if budget is not None else [_MAX_VALUES]
        return tuple(json_value(v, where, budget=items, depth=depth + 1) for v in raw)
    what = "a JSON object" if isinstance(raw, Mapping) else type(raw).__name__
    raise PerftuneError(
        f"{_place(where)}: {what} is not a parameter value (numbers, strings, booleans, lists)"
    )


def _is_int_value(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shown(raw: Any) -> str:
    """``repr(raw)`` for a one-line message: shortened, and safe for deeply nested values."""
    try:
        text = repr(raw)
    except (RecursionError, ValueError):  # ValueError: an integer of more than 4,300 digits
        return f"a {type(raw).__name__} nested too deeply to show"
    return text if len(text) <= 200 else text[:160] + f"... ({len(text)} characters)"


def _parse_values(raw: Any, where: str) -> list[Any]:
    # T1 stores the value list as a JSON list, or as the text of a Python list expression (Kernel
    # Tuner's files write "[32 * i for i in range(1, 32)]"): evaluated safely, never with eval.
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except RecursionError:
            raise PerftuneError(f"{where}: Values is nested too deeply") from None
        except json.JSONDecodeError:
            from perftune.errors import ExpressionError
            from perftune.space import evaluate_constant

            try:
                raw = evaluate_constant(raw)
            except ExpressionError as e:
                raise PerftuneError(f"{where}: Values {_shown(raw)} is not a list: {e}") from None
        except ValueError as e:  # an integer of more than 4,300 digits
            detail = " ".join(str(e).split())
            raise PerftuneError(f"{where}: Values is not a usable list ({detail})") from None
    if not isinstance(raw, list | tuple) or not raw:
        raise PerftuneError(f"{where}: Values must be a non-empty list")
    if len(raw) > _MAX_VALUES:
        raise PerftuneError(f"{where}: Values has {len(raw)} values (at most {_MAX_VALUES})")
    budget = [_MAX_VALUES]
    values = [json_value(v, f"{where}: Values[{i}]", budget=budget) for i, v in enumerate(raw)]
    for i, v in enumerate(values):
        if isinstance(v, tuple):
            raise PerftuneError(f"{where}: Values[{i}] is the list {_shown(list(v))}; a parameter value is a "
                                "number, a string or a boolean")
    if len(set(values)) != len(values):
        raise PerftuneError(f"{where}: Values {_shown(list(values))} has duplicates")
    return values


def _param_for(values: list[Any], declared_type: str, default: Any) -> Any:
    """Choose the perftune parameter type that describes a T1 value list best."""
    from perftune.space import Choice, Int, Ordinal, Pow2

    if default is not None and default not in values:
        default = None  # T1 files sometimes name a default outside the list; use the natural one
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if declared_type in ("string", "str", "bool", "boolean") or not numeric:
        return Choice(values, default=default)
    if len(values) == 1:
        return Ordinal(values, default=default)
    ordered = sorted(values)
    if all(_is_int_value(v) for v in values):
        lo, hi = ordered[0], ordered[-1]
        if hi - lo + 1 == len(ordered):  # distinct integers: consecutive (never list a huge range)
            return Int(lo, hi, default=default)
        if lo >= 1 and all(v & (v - 1) == 0 for v in ordered):
            n = int(math.log2(hi)) - int(math.log2(lo)) + 1
            if n == len(ordered):
                return Pow2(lo, hi, default=default)
    # Numbers are ordered even when the file lists them in another order.
    return Ordinal(ordered, default=default)


def space_from_t1(t1: Mapping[str, Any], where: str = "T1") -> Any:
    """Build a :class:`perftune.space.Space` from a parsed T1 document.

    Each ``TuningParameters`` entry becomes a parameter (consecutive integers: ``Int``; a power-of-two
    range: ``Pow2``; other numbers: ``Ordinal``; strings: ``Choice``) and each ``Conditions`` expression
    becomes a constraint.

    Example:
        >>> t1 = {"ConfigurationSpace": {"TuningParameters": [
        ...     {"Name": "bx", "Type": "int", "Values": "[16, 32, 64]", "Default": 16}],
        ...     "Conditions": [{"Expression": "bx >= 32", "Parameters": ["bx"]}]}}
        >>> space = space_from_t1(t1)  # doctest: +SKIP
    """
    from perftune.space import Space

    cs = t1.get("ConfigurationSpace") if isinstance(t1, Mapping) else None
    params_raw = cs.get("TuningParameters") if isinstance(cs, Mapping) else None
    if params_raw is None:
        raise PerftuneError(f"{where}: no ConfigurationSpace.TuningParameters")
    if not isinstance(params_raw, list):
        raise PerftuneError(f"{where}: ConfigurationSpace.TuningParameters must be a list, "
                            f"not {type(params_raw).__name__}")
    assert isinstance(cs, Mapping)
    params: dict[str, Any] = {}
    try:
        for i, p in enumerate(params_raw):
            name = p.get("Name") if isinstance(p, Mapping) else None
            if not isinstance(name, str) or not name:
                raise PerftuneError(f"{where}: TuningParameters[{i}] has no Name")
            if name in params:
                raise PerftuneError(f"{where}: parameter {_shown(name)} declared twice")
            pwhere = f"{where}: parameter {_shown(name)}"
            values = _parse_values(p.get("Values"), pwhere)
            try:
                default = json_value(p.get("Default"), pwhere)
            except PerftuneError:
                default = None  # as for a default outside the list: the natural one
            kind = p.get("Type", "")
            params[name] = _param_for(values, kind.lower() if isinstance(kind, str) else "", default)
        conditions = cs.get("Conditions", []) or []
        if not isinstance(conditions, list):
            raise PerftuneError(f"{where}: ConfigurationSpace.Conditions must be a list, "
                                f"not {type(conditions).__name__}")
        constraints = [_condition(c, i, params, where) for i, c in enumerate(conditions)]
        return Space(params, constraints)
    except SpaceError as e:  # a bad default, condition or value list: say which file it is in
        raise type(e)(f"{where}: {e}") from None


def _condition(raw: Any, i: int, params: Mapping[str, Any], where: str) -> Any:
    """The ``Conditions[i]`` expression, compiled; refused when one configuration's check may take more
    than :data:`_MAX_CONDITION_WORK` units of work (every configuration of the space is checked)."""
    from perftune.errors import ExpressionError
    from perftune.space import Expression

    text = raw.get("Expression") if isinstance(raw, Mapping) else raw
    if not isinstance(text, str) or not text.strip():
        raise PerftuneError(f"{where}: Conditions[{i}] has no Expression")
    # Each parameter's values: numbers (None) or the longest string.
    sizes = {name: max((len(v) for v in p.values() if isinstance(v, str)), default=None)
             for name, p in params.items()}
    try:
        expr = Expression(text, value_sizes=sizes)
    except ExpressionError as e:  # space_from_t1 puts the file's name first
        raise type(e)(f"Conditions[{i}]: {e}") from None
    if expr.work > _MAX_CONDITION_WORK:
        raise PerftuneError(f"{where}: Conditions[{i}]: expression {_shown(text)} may take {expr.work} units "
                            f"of work per configuration (at most {_MAX_CONDITION_WORK})")
    return expr


@dataclass(frozen=True)
class _Record:
    value: float | None  # None: failed
    reason: str | None
    metrics: dict[str, float]


@dataclass
class ReplayObjective:
    """Objective that looks measurements up in T4 results instead of running anything.

    Calling it with a configuration returns the recorded objective value, or raises
    :class:`ReplayFailure` when the configuration failed (compile/runtime/correctness/timeout) or
    is missing from the results although it satisfies the declared constraints (a hidden constraint).

    Example:
        >>> problem = load("convolution_milo.T1.json", "convolution_milo.A4000.T4.json.gz")  # doctest: +SKIP
        >>> problem.objective(problem.space.default())  # doctest: +SKIP
        5.900492995977402
    """

    names: tuple[str, ...]
    records: dict[tuple[Any, ...], _Record]
    space: Any = None
    n_calls: int = 0
    missing_reason: str = "missing: not in the T4 results (hidden constraint)"

    def key(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        try:
            return tuple(config[n] for n in self.names)
        except KeyError as e:
            raise ReplayFailure(f"configuration lacks parameter {e.args[0]!r}") from None

    def lookup(self, config: Mapping[str, Any]) -> _Record | None:
        """The recorded outcome of ``config`` (None when it was never measured)."""
        return self.records.get(self.key(config))

    def __call__(self, config: Mapping[str, Any]) -> float:
        self.n_calls += 1
        rec = self.records.get(self.key(config))
        if rec is None:
            if self.space is not None and not self.space.is_valid(config):
                raise ReplayFailure(f"violates constraints: {self.space.why_invalid(config)}")
            raise ReplayFailure(self.missing_reason)
        if rec.value is None:
            raise ReplayFailure(rec.reason or "failed")
        return rec.value


@dataclass
class ReplayProblem:
    """A replayed tuning problem: space, objective and what is known about it.

    Attributes:
        name: ``<benchmark>.<device>`` from the file names.
        space: The perftune space (T1 parameters, Conditions as constraints).
        objective: The replay objective (see :class:`ReplayObjective`).
        objective_name: Name of the replayed measurement (``"time"``).
        optimum: The best recorded value among successful configurations.
        best_config: A configuration that reaches ``optimum``.
        n_results: Number of T4 records.
        n_failed: Number of records that failed.
        n_outside: Records that violate the declared constraints (ignored).
        metadata: What the file says about itself (device, kernel...).
        goal: ``"min"`` or ``"max"``: the direction of the replayed measurement (``optimum`` is its best);
            pass it on, as ``perftune.tune(problem.objective, problem.space, goal=problem.goal)``.
    """

    name: str
    space: Any
    objective: ReplayObjective
    objective_name: str
    optimum: float
    best_config: Any
    n_results: int
    n_failed: int
    n_outside: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    goal: str = "min"

    def values(self) -> list[float]:
        """All successful recorded values (for distributions and ranks)."""
        return [r.value for r in self.objective.records.values() if r.value is not None]


def _measurements(record: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    """A T4 record's ``measurements`` (entries that are not objects are left out)."""
    raw = record.get("measurements")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PerftuneError(f"{where}: measurements must be a list, not {type(raw).__name__}")
    return [m for m in raw if isinstance(m, Mapping)]


def _objectives(record: Mapping[str, Any], where: str) -> list[str]:
    """A T4 record's ``objectives`` (default ``["time"]``)."""
    raw = record.get("objectives")
    if raw is None or raw == []:
        return ["time"]
    if not isinstance(raw, list) or not all(isinstance(o, str) for o in raw):
        raise PerftuneError(f"{where}: objectives must be a list of measurement names, not {_shown(raw)}")
    return raw


def _measurement(measurements: list[Mapping[str, Any]], name: str) -> Any:
    for m in measurements:
        if m.get("name") == name:
            return m.get("value")
    return None


def check_time(value: float, name: str, where: str) -> None:
    """Refuse a negative time (a corrupt file: no configuration runs in less than no time).

    Raises:
        PerftuneError: one line naming ``where``.
    """
    if value < 0 and name.lower().endswith("time"):
        raise PerftuneError(f"{where}: {name} {value!r} is negative")


def _number(v: Any, where: Where = "") -> float | None:
    """``v`` as a finite float, None when it is not a number (a failure string, NaN, infinity).

    Raises:
        PerftuneError: an integer too large for a float (``where`` starts the message).
    """
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        bits = v.bit_length() if isinstance(v, int) else 0
        raise PerftuneError(f"{_place(where)}: integer of {bits} bits is too large for a number") from None
    return f if math.isfinite(f) else None


# Measurements that are better low (times, energies) or high (rates: GFLOP/s, GB/s), by their names.
_LOWER_IS_BETTER = ("time", "_s", "_ms", "_us", "_ns", "energy", "latency")
_HIGHER_IS_BETTER = ("/s",)


def measurement_goal(name: str, goal: str | None, where: str) -> str:
    """``goal`` when given, else the direction a measurement's name says: ``"min"`` for a time (``time``,
    ``*_time``, ``*_ms``...) or an energy, ``"max"`` for a rate (``GFLOP/s``, ``GB/s``).

    Raises:
        PerftuneError: ``goal`` is not ``"min"``, ``"max"`` or None, or it is None and the name says
            nothing (one line naming ``where`` and how to say it).
    """
    if goal is not None:
        if goal not in ("min", "max"):
            raise PerftuneError(f"goal must be 'min' or 'max', got {_shown(goal)}")
        return goal
    lowered = name.lower()
    if lowered.endswith(_HIGHER_IS_BETTER):
        return "max"
    if lowered.endswith(_LOWER_IS_BETTER):
        return "min"
    raise PerftuneError(f"{where}: the objective {_shown(name)} is not a time or a rate, so whether it is "
                        "better low or high is not known: pass goal='min' or goal='max'")


def _best(records: Mapping[tuple[Any, ...], _Record], goal: str) -> tuple[float, tuple[Any, ...]] | None:
    """The best successful value and its key (the first one recorded among equals), or None."""
    found: tuple[float, tuple[Any, ...]] | None = None
    for key, rec in records.items():
        v = rec.value
        if v is not None and (found is None or (v > found[0] if goal == "max" else v < found[0])):
            found = (v, key)
    return found


def _keep(records: dict[tuple[Any, ...], _Record], key: tuple[Any, ...], rec: _Record) -> None:
    """Record ``rec`` for ``key`` unless it was recorded already: a success wins over a failure, otherwise
    the first record stays (as :func:`perftune.targets.replay.kt_cache_document` writes one)."""
    earlier = records.get(key)
    if earlier is None or (earlier.value is None and rec.value is not None):
        records[key] = rec


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def check_value_types(space: Any, values: Mapping[str, Any], where: str, source: str) -> None:
    """Refuse a configuration value of another type than its parameter's values (``"32"`` for ``32``):
    the configuration would otherwise count as outside the space, without a word.

    Raises:
        PerftuneError: one line naming ``where``, the parameter, the value and ``source`` (the T1 file).
    """
    for name, value in values.items():
        p = space.params.get(name)
        if p is None or p.contains(value):
            continue
        listed = p.values() if (p.cardinality() or _MAX_VALUES + 1) <= _MAX_VALUES else None
        kinds = {_kind(v) for v in listed} if listed is not None else {"number"}
        if _kind(value) not in kinds:
            expected = " or ".join(sorted(kinds))
            raise PerftuneError(f"{where}: parameter {_shown(name)} is {_shown(value)} (a {_kind(value)}); "
                                f"{source} gives it {expected} values")


def load(
    t1_path: str | os.PathLike[str],
    t4_path: str | os.PathLike[str],
    *,
    objective: str | None = None,
    goal: str | None = None,
    name: str | None = None,
) -> ReplayProblem:
    """Load a T1 space description and T4 results into a :class:`ReplayProblem`.

    Args:
        t1_path: The ``*.T1.json`` file (``TuningParameters`` and ``Conditions``).
        t4_path: The ``*.T4.json`` or ``*.T4.json.gz`` results file.
        objective: Measurement to replay; default: the records' ``objectives[0]``, else ``"time"``.
        goal: ``"min"`` or ``"max"``; default: by the objective's name (a time is minimised, a rate such
            as ``GFLOP/s`` maximised; any other name needs ``goal``).
        name: Problem name; default: the T4 file name without ``.T4.json(.gz)``.

    A configuration recorded more than once replays as its success (the first, if several), else as its
    first failure; ``optimum`` and ``best_config`` are those of the replayed outcomes.

    Raises:
        PerftuneError: a file is missing or malformed, a T4 configuration does not match the T1
            parameters (a missing parameter, a value of another type), a time is negative, or the
            objective's direction is unknown; the message names the file.

    Example:
        >>> p = load("data/benchmark_hub/convolution_milo.T1.json",
        ...          "data/benchmark_hub/convolution_milo.A4000.T4.json.gz")  # doctest: +SKIP
        >>> p.space.cardinality(), round(p.optimum, 3)  # doctest: +SKIP
        (4362, 1.021)
    """
    t1 = read_json(t1_path, "T1")
    space = space_from_t1(t1, where=str(t1_path))
    t4 = read_json(t4_path, "T4")
    results = t4.get("results") if isinstance(t4, Mapping) else None
    if not isinstance(results, list):
        cache = isinstance(t4, Mapping) and "cache" in t4
        hint = "; a Kernel Tuner cache loads with replay.load_kt" if cache else ""
        raise PerftuneError(f"{t4_path}: no 'results' list (not a T4 file{hint})")
    names = tuple(space.names)
    records: dict[tuple[Any, ...], _Record] = {}
    n_failed = n_outside = 0
    obj_name = objective
    from perftune.space import Config

    metadata = t4.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise PerftuneError(f"{t4_path}: metadata must be an object, not {type(metadata).__name__}")
    for i, r in enumerate(results):
        where = f"{t4_path}: results[{i}]"
        conf = r.get("configuration") if isinstance(r, Mapping) else None
        if not isinstance(conf, Mapping):
            raise PerftuneError(f"{where} has no configuration")
        try:
            values = {n: json_value(conf[n], at(where, "parameter ", n)) for n in names}
        except KeyError as e:
            raise PerftuneError(f"{where} lacks parameter {e.args[0]!r} declared in {t1_path}") from None
        measurements = _measurements(r, where)
        objectives = _objectives(r, where)
        cfg = Config(values)
        if not space.is_valid(cfg):
            check_value_types(space, values, where, str(t1_path))
            n_outside += 1
            continue
        key = tuple(cfg[n] for n in names)
        if obj_name is None:
            obj_name = objectives[0]
            obj_goal = measurement_goal(obj_name, goal, f"{t4_path}")
        invalidity = str(r.get("invalidity", "correct"))
        raw = _measurement(measurements, obj_name)
        value = _number(raw, at(where, "", obj_name))
        metrics = {}
        for m in measurements:
            mv = _number(m.get("value"), at(where, "measurement ", m.get("name")))
            if mv is not None:
                metrics[str(m.get("name"))] = mv
        if invalidity != "correct" or value is None:
            n_failed += 1
            detail = f" ({raw})" if isinstance(raw, str) and raw else ""
            reason = f"{invalidity}{detail}" if invalidity != "correct" else f"no numeric {obj_name!r}"
            _keep(records, key, _Record(None, reason, metrics))
            continue
        check_time(value, obj_name, where)
        _keep(records, key, _Record(value, None, metrics))
    obj_goal = measurement_goal(obj_name or "time", goal, f"{t4_path}")
    best = _best(records, obj_goal)
    if best is None:
        raise PerftuneError(f"{t4_path}: no successful measurement of {obj_name or 'time'!r}")
    best_value, best_key = best
    base = Path(t4_path).name
    for suffix in (".gz", ".json", ".T4"):
        base = base.removesuffix(suffix)
    replay = ReplayObjective(names, records, space)
    return ReplayProblem(
        name=name or base,
        space=space,
        objective=replay,
        objective_name=obj_name or "time",
        optimum=best_value,
        best_config=Config(dict(zip(names, best_key, strict=True))),
        n_results=len(results),
        n_failed=n_failed,
        n_outside=n_outside,
        metadata=dict(metadata or {}),
        goal=obj_goal,
    )


def dev_problem_files(directory: str | os.PathLike[str]) -> list[tuple[Path, Path]]:
    """All ``(T1, T4)`` pairs in a benchmark-hub folder, sorted by name."""
    d = Path(directory)
    pairs: list[tuple[Path, Path]] = []
    for t4 in sorted(d.glob("*.T4.json*")):
        bench = t4.name.split(".")[0]
        t1 = d / f"{bench}.T1.json"
        if t1.exists():
            pairs.append((t1, t4))
    return pairs
