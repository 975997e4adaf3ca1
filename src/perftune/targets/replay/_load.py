"""Load a benchmark-hub T1 space description and T4 results into a perftune space and objective."""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["ReplayFailure", "ReplayObjective", "ReplayProblem", "load", "read_json", "space_from_t1"]


class ReplayFailure(Exception):
    """Raised by a replay objective for a configuration that failed or was never measured.

    The driver records it as a FAILED trial with ``str(error)`` as the reason.
    """


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """Read a JSON file, gzip-compressed when its name ends in ``.gz``.

    Raises:
        PerftuneError: the file is missing or is not JSON (one line naming the file).
    """
    p = Path(path)
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8") as f:
                return json.load(f)
        with open(p, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise PerftuneError(f"{p}: {what} file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError) as e:
        raise PerftuneError(f"{p}: not a valid {what} JSON file ({e})") from None


def _is_int_value(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_values(raw: Any, where: str) -> list[Any]:
    # T1 stores the value list as a JSON list, or as the text of a Python list expression (Kernel
    # Tuner's files write "[32 * i for i in range(1, 32)]"): evaluated safely, never with eval.
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            from perftune.errors import ExpressionError
            from perftune.space import evaluate_constant

            try:
                raw = evaluate_constant(raw)
            except ExpressionError as e:
                raise PerftuneError(f"{where}: Values {raw!r} is not a list: {e}") from None
    if not isinstance(raw, list | tuple) or not raw:
        raise PerftuneError(f"{where}: Values must be a non-empty list")
    values = [tuple(v) if isinstance(v, list) else v for v in raw]
    if len(set(values)) != len(values):
        raise PerftuneError(f"{where}: Values {list(values)!r} has duplicates")
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
        if ordered == list(range(lo, hi + 1)):
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

    try:
        cs = t1["ConfigurationSpace"]
        params_raw = cs["TuningParameters"]
    except (KeyError, TypeError):
        raise PerftuneError(f"{where}: no ConfigurationSpace.TuningParameters") from None
    params: dict[str, Any] = {}
    for i, p in enumerate(params_raw):
        name = p.get("Name") if isinstance(p, Mapping) else None
        if not isinstance(name, str) or not name:
            raise PerftuneError(f"{where}: TuningParameters[{i}] has no Name")
        if name in params:
            raise PerftuneError(f"{where}: parameter {name!r} declared twice")
        pwhere = f"{where}: parameter {name!r}"
        values = _parse_values(p.get("Values"), pwhere)
        params[name] = _param_for(values, str(p.get("Type", "")).lower(), p.get("Default"))
    constraints: list[str] = []
    for i, c in enumerate(cs.get("Conditions", []) or []):
        expr = c.get("Expression") if isinstance(c, Mapping) else c
        if not isinstance(expr, str) or not expr.strip():
            raise PerftuneError(f"{where}: Conditions[{i}] has no Expression")
        constraints.append(expr)
    return Space(params, constraints)


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

    def values(self) -> list[float]:
        """All successful recorded values (for distributions and ranks)."""
        return [r.value for r in self.objective.records.values() if r.value is not None]


def _measurement(record: Mapping[str, Any], name: str) -> Any:
    for m in record.get("measurements", []) or []:
        if isinstance(m, Mapping) and m.get("name") == name:
            return m.get("value")
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def load(
    t1_path: str | os.PathLike[str],
    t4_path: str | os.PathLike[str],
    *,
    objective: str | None = None,
    name: str | None = None,
) -> ReplayProblem:
    """Load a T1 space description and T4 results into a :class:`ReplayProblem`.

    Args:
        t1_path: The ``*.T1.json`` file (``TuningParameters`` and ``Conditions``).
        t4_path: The ``*.T4.json`` or ``*.T4.json.gz`` results file.
        objective: Measurement to replay; default: the records' ``objectives[0]``, else ``"time"``.
        name: Problem name; default: the T4 file name without ``.T4.json(.gz)``.

    Raises:
        PerftuneError: a file is missing or malformed, or a T4 configuration does not match the T1
            parameters; the message names the file.

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
    best_value = math.inf
    best_key: tuple[Any, ...] | None = None
    obj_name = objective
    from perftune.space import Config

    for i, r in enumerate(results):
        conf = r.get("configuration") if isinstance(r, Mapping) else None
        if not isinstance(conf, Mapping):
            raise PerftuneError(f"{t4_path}: results[{i}] has no configuration")
        try:
            values = {n: conf[n] for n in names}
        except KeyError as e:
            raise PerftuneError(
                f"{t4_path}: results[{i}] lacks parameter {e.args[0]!r} declared in {t1_path}"
            ) from None
        cfg = Config({n: tuple(v) if isinstance(v, list) else v for n, v in values.items()})
        if not space.is_valid(cfg):
            n_outside += 1
            continue
        key = tuple(cfg[n] for n in names)
        if obj_name is None:
            objs = r.get("objectives") or ["time"]
            obj_name = str(objs[0])
        invalidity = str(r.get("invalidity", "correct"))
        raw = _measurement(r, obj_name)
        value = _number(raw)
        metrics = {}
        for m in r.get("measurements", []) or []:
            mv = _number(m.get("value")) if isinstance(m, Mapping) else None
            if mv is not None:
                metrics[str(m.get("name"))] = mv
        if invalidity != "correct" or value is None:
            n_failed += 1
            detail = f" ({raw})" if isinstance(raw, str) and raw else ""
            reason = f"{invalidity}{detail}" if invalidity != "correct" else f"no numeric {obj_name!r}"
            records[key] = _Record(None, reason, metrics)
            continue
        records[key] = _Record(value, None, metrics)
        if value < best_value:
            best_value, best_key = value, key
    if best_key is None:
        raise PerftuneError(f"{t4_path}: no successful measurement of {obj_name or 'time'!r}")
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
        metadata=dict(t4.get("metadata") or {}),
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
