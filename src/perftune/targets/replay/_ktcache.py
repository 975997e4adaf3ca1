"""Kernel Tuner cache files: load one (with a T1 file for its restrictions) and write any run as one.

A Kernel Tuner cache is a JSON document::

    {"device_name": ..., "kernel_name": ..., "problem_size": ..., "objective": "time",
     "tune_params_keys": [names in order], "tune_params": {name: [values]},
     "cache": {"v1,v2,...": {name: value, ..., "time": 1.23 | "CompilationFailedConfig", "times": [...],
                             "compile_time": ..., "verification_time": ..., "benchmark_time": ...,
                             "strategy_time": ..., "framework_time": ..., "timestamp": ...}}}

Each ``cache`` key is the configuration's values, in ``tune_params_keys`` order, joined by commas with
``str``; Kernel Tuner's simulation mode looks configurations up by that key. A failed configuration's
``time`` is the name of its error class (``CompilationFailedConfig``, ``RuntimeFailedConfig``,
``InvalidConfig``, ``ErrorConfig``). Kernel Tuner appends entries while it tunes, so a file left by an
interrupted session lacks its closing brackets; it is read as if they were there.
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from perftune._atomic import write_bytes_atomic
from perftune.errors import PerftuneError
from perftune.targets.replay._load import (
    ReplayObjective,
    ReplayProblem,
    _best,
    _keep,
    _number,
    _Record,
    _shown,
    at,
    check_time,
    check_value_types,
    json_value,
    measurement_goal,
    parse_json,
    read_json,
    read_text,
    space_from_t1,
)
from perftune.trial import Status, Trial

__all__ = ["KT_ERRORS", "TIME_UNITS", "export_kt", "export_run_kt", "kt_cache_document", "load_kt"]

KT_ERRORS = ("CompilationFailedConfig", "RuntimeFailedConfig", "InvalidConfig", "ErrorConfig")
"""The failure strings Kernel Tuner writes as a configuration's ``time``."""

# Keys Kernel Tuner itself writes into every entry; an exported metric of the same name is left out.
_BOOKKEEPING = ("time", "times", "compile_time", "verification_time", "benchmark_time", "strategy_time",
                "framework_time", "timestamp")
_EXC_PREFIX = re.compile(r"^\w+(Error|Failure|Exception|Warning): ")
# Kernel Tuner keeps every time of an entry in milliseconds (its timing observers' unit): a trial's value
# and samples in these units are multiplied by the factor when they are written as its "time".
TIME_UNITS = {"s": 1000.0, "ms": 1.0, "us": 1e-3, "ns": 1e-6}
# Runs whose values are seconds: the command target's wall and CPU times, torch.compile's and the
# compiler-flag target's times per call.
_SECONDS_METRICS = ("wall_time", "cpu_time")
_SECONDS_TARGETS = ("torch_compile", "flags")


def _read_cache_text(path: Path) -> Any:
    # Read through the input cap (a gzip bomb is refused before it is in memory).
    text = read_text(path, "Kernel Tuner cache")
    try:
        return parse_json(text, path, "Kernel Tuner cache")
    except PerftuneError as first:
        # Kernel Tuner appends ``"key": {...},`` while tuning and closes the file at the end; a
        # session that was interrupted leaves it open. Close it the way Kernel Tuner does.
        body = text.rstrip()
        body = body.removesuffix(",")
        del text
        try:
            return parse_json(body + "}\n}", path, "Kernel Tuner cache")
        except PerftuneError:
            raise first from None


def load_kt(
    t1_path: str | os.PathLike[str],
    kt_path: str | os.PathLike[str],
    *,
    objective: str | None = None,
    goal: str | None = None,
    name: str | None = None,
) -> ReplayProblem:
    """Load a Kernel Tuner cache file, with a T1 file for its space, into a :class:`ReplayProblem`.

    The T1 file gives the parameters and their ``Conditions`` (a cache holds neither restrictions nor,
    for a brute-forced space, the configurations they exclude). Every cache entry whose ``time`` is a
    number is a successful measurement; an entry whose ``time`` is a failure string
    (``CompilationFailedConfig``, ``RuntimeFailedConfig``, ``InvalidConfig``, ...) is a failed
    measurement with that string as its reason. A configuration that satisfies the T1 Conditions but
    is not in the cache is a failed measurement too (``missing: not in the Kernel Tuner cache``), the
    same hidden-constraint rule as for T4 results: Kernel Tuner caches of brute-forced spaces hold
    every configuration it could build, so one that is absent could not be built. Entries that violate
    the Conditions are counted in ``n_outside`` and ignored.

    Args:
        t1_path: The ``*.T1.json`` file of the kernel.
        kt_path: The cache, ``*.kt.json``, ``*.json`` or gzip-compressed ``*.json.gz``.
        objective: Entry key to replay; default: the cache's ``objective``, else ``"time"``.
        goal: ``"min"`` or ``"max"``; default: by the objective's name (``time``, in milliseconds as
            Kernel Tuner measures it, is minimised; a rate such as ``GFLOP/s`` maximised; any other
            name needs ``goal``: a cache does not say which way its objective goes).
        name: Problem name; default: the cache file's name without ``.kt.json(.gz)``.

    Raises:
        PerftuneError: a file is missing or malformed, the cache's parameters are not the T1 file's
            (names, or a value of another type), a time is negative, or the objective's direction is
            unknown; the message names the file.

    Example:
        >>> p = load_kt("data/benchmark_hub/pnpoly.T1.json",
        ...             "data/benchmark_hub/pnpoly.RTX_Titan.kt.json.gz")  # doctest: +SKIP
        >>> p.n_failed, p.objective.lookup(p.best_config).value == p.optimum  # doctest: +SKIP
        (..., True)
    """
    t1 = read_json(t1_path, "T1")
    space = space_from_t1(t1, where=str(t1_path))
    doc = _read_cache_text(Path(kt_path))
    cache = doc.get("cache") if isinstance(doc, Mapping) else None
    keys = doc.get("tune_params_keys") if isinstance(doc, Mapping) else None
    if not isinstance(cache, Mapping) or not isinstance(keys, list):
        raise PerftuneError(f"{kt_path}: no 'tune_params_keys' and 'cache' (not a Kernel Tuner cache file)")
    if not all(isinstance(k, str) for k in keys):
        raise PerftuneError(f"{kt_path}: tune_params_keys must be a list of parameter names, "
                            f"not {_shown(keys)}")
    names = tuple(space.names)
    if set(keys) != set(names):
        only_kt = sorted(set(keys) - set(names))
        only_t1 = sorted(set(names) - set(keys))
        raise PerftuneError(
            f"{kt_path}: its tune parameters do not match {t1_path} "
            f"(only in the cache: {only_kt or 'none'}; only in the T1 file: {only_t1 or 'none'})"
        )
    declared = doc.get("objective")
    obj_name = objective or (declared if isinstance(declared, str) and declared else "time")
    obj_goal = measurement_goal(obj_name, goal, str(kt_path))
    from perftune.space import Config

    records: dict[tuple[Any, ...], _Record] = {}
    n_failed = n_outside = 0
    for key_text, entry in cache.items():
        where = f"{kt_path}: cache entry {_shown(key_text)}"
        if not isinstance(entry, Mapping):
            raise PerftuneError(f"{where} is not an object")
        try:
            values = {n: json_value(entry[n], at(where, "parameter ", n)) for n in names}
        except KeyError as e:
            raise PerftuneError(f"{where} lacks parameter {e.args[0]!r}") from None
        cfg = Config(values)
        if not space.is_valid(cfg):
            check_value_types(space, values, where, str(t1_path))
            n_outside += 1
            continue
        key = tuple(cfg[n] for n in names)
        metrics = {
            str(k): f for k, v in entry.items()
            if k not in names and (f := _number(v, at(where, "", k))) is not None
        }
        raw = entry.get(obj_name)
        value = _number(raw, at(where, "", obj_name))
        if value is None:
            n_failed += 1
            reason = raw if isinstance(raw, str) and raw else f"no numeric {obj_name!r}"
            _keep(records, key, _Record(None, reason, metrics))
            continue
        check_time(value, obj_name, where)
        _keep(records, key, _Record(value, None, metrics))
    best = _best(records, obj_goal)
    if best is None:
        raise PerftuneError(f"{kt_path}: no successful measurement of {obj_name!r}")
    best_value, best_key = best
    base = Path(kt_path).name
    for suffix in (".gz", ".json", ".kt"):
        base = base.removesuffix(suffix)
    replay = ReplayObjective(
        names, records, space, missing_reason="missing: not in the Kernel Tuner cache (hidden constraint)"
    )
    meta = {k: doc[k] for k in ("device_name", "kernel_name", "problem_size", "objective") if k in doc}
    return ReplayProblem(
        name=name or base,
        space=space,
        objective=replay,
        objective_name=obj_name,
        optimum=best_value,
        best_config=Config(dict(zip(names, best_key, strict=True))),
        n_results=len(cache),
        n_failed=n_failed,
        n_outside=n_outside,
        metadata=meta,
        goal=obj_goal,
    )


def _kt_error(trial: Trial) -> str:
    # The driver prefixes the exception type ("ReplayFailure: CompilationFailedConfig"); look past it.
    reason = _EXC_PREFIX.sub("", (trial.reason or "").strip())
    for error in KT_ERRORS:
        if reason.startswith(error):
            return error
    lowered = reason.lower()
    if lowered.startswith("compile"):
        return "CompilationFailedConfig"
    if lowered.startswith(("constraints", "violates constraints", "invalid")):
        return "InvalidConfig"
    return "RuntimeFailedConfig"  # runtime errors, wrong results and timeouts alike


def _json_value(space: Any, name: str, value: Any) -> Any:
    if space is not None and name in space.params:
        return space.params[name].to_json_value(value)
    return list(value) if isinstance(value, tuple) else value


def _cache_key(values: Iterable[Any]) -> str:
    # Kernel Tuner's key: str() of each value as its tune_params list holds it, joined by commas.
    return ",".join(str(v) for v in values)


def kt_cache_document(
    trials: Iterable[Trial],
    *,
    space: Any = None,
    kernel_name: str = "perftune",
    device_name: str = "perftune",
    problem_size: Any = None,
    objective: str = "time",
    time_unit: str = "ms",
) -> dict[str, Any]:
    """Build the Kernel Tuner cache document (a dict) for ``trials``.

    ``tune_params`` lists every value of each parameter of ``space`` (a parameter with more than
    10,000 values, or a run without a space, lists the values its trials measured), in the space's
    parameter order. An OK trial's value is its ``time`` and its samples its ``times``, in milliseconds
    as Kernel Tuner keeps every time of an entry (``time_unit`` says the unit of the trials' values:
    ``"s"`` values are multiplied by 1000; ``"ms"``, the default, is what :func:`load_kt` replays, so a
    loaded cache is written back unchanged); a failed or timed-out trial's ``time`` is
    ``CompilationFailedConfig`` when its reason says so (a replayed Kernel Tuner failure keeps its
    string), ``InvalidConfig`` for a constraint violation, else ``RuntimeFailedConfig``. Pending and
    cancelled trials are left out. When a configuration was measured twice, a success wins over a
    failure and otherwise the first trial. Other metrics become further keys of the entry.

    Kernel Tuner's simulation mode refuses a configuration that passes its restrictions but is not
    in the cache, so a strategy replays such a file only while it stays on measured configurations;
    a run that measured the whole space (``perftune.tune`` with the exhaustive technique, or a budget
    of at least the space's size) replays with any strategy.

    Example:
        >>> from perftune.space import Config, Int, Space
        >>> space = Space({"x": Int(1, 2)})
        >>> doc = kt_cache_document([Trial(0, Config({"x": 1}), Status.OK, value=2.0, loss=2.0,
        ...                                samples=[2.0])], space=space)
        >>> doc["tune_params"], doc["cache"]["1"]["time"]
        ({'x': [1, 2]}, 2.0)
    """
    if time_unit not in TIME_UNITS:
        raise PerftuneError(f"time_unit must be one of {sorted(TIME_UNITS)}, got {time_unit!r}")
    to_ms = TIME_UNITS[time_unit] if objective == "time" else 1.0
    kept: dict[tuple[Any, ...], Trial] = {}
    order: list[str] = list(space.names) if space is not None else []
    for t in trials:
        if t.status in (Status.PENDING, Status.CANCELLED):
            continue
        if space is None:
            order.extend(k for k in t.config if k not in order)
        ident = tuple(sorted(dict(t.config).items(), key=lambda kv: kv[0]))
        earlier = kept.get(ident)
        if earlier is None or (not earlier.ok and t.ok and t.value is not None):
            kept[ident] = t
    if space is None:
        order.sort()
    tune_params: dict[str, list[Any]] = {}
    for n in order:
        listed = space.params[n].values() if space is not None else None
        if listed is not None:
            tune_params[n] = [_json_value(space, n, v) for v in listed]
        else:
            seen = {json.dumps(_json_value(space, n, t.config[n])): t.config[n]
                    for t in kept.values() if n in t.config}
            tune_params[n] = [_json_value(space, n, v) for v in sorted(seen.values(), key=repr)]
    cache: dict[str, dict[str, Any]] = {}
    for t in kept.values():
        missing = [n for n in order if n not in t.config]
        if missing:
            raise PerftuneError(
                f"trial {t.id} has no value for {', '.join(missing)} (inactive parameters): a Kernel Tuner "
                "cache needs every parameter in every configuration"
            )
        values = [_json_value(space, n, t.config[n]) for n in order]
        entry: dict[str, Any] = dict(zip(order, values, strict=True))
        ok = t.ok and t.value is not None
        if ok:
            entry[objective] = float(t.value) * to_ms  # type: ignore[arg-type]
            if objective == "time":
                entry["times"] = [float(s) * to_ms for s in t.samples] or [entry["time"]]
        else:
            entry[objective] = _kt_error(t)
        search_s = t.metrics.get("search_time_s")
        entry["compile_time"] = 0.0
        entry["verification_time"] = 0.0
        entry["benchmark_time"] = float(sum(entry.get("times", [])))
        entry["strategy_time"] = 1000.0 * float(search_s) if search_s is not None else 0.0
        entry["framework_time"] = 0.0
        when = t.finished_at or t.started_at
        entry["timestamp"] = (
            datetime.datetime.fromtimestamp(when, tz=datetime.UTC).isoformat(sep=" ") if when else ""
        )
        for k, v in sorted(t.metrics.items()):
            if k not in entry and k not in _BOOKKEEPING and k != objective:
                entry[k] = float(v)
        cache[_cache_key(values)] = entry
    doc: dict[str, Any] = {"device_name": device_name, "kernel_name": kernel_name}
    if problem_size is not None:
        doc["problem_size"] = problem_size
    doc.update({"tune_params_keys": order, "tune_params": tune_params, "objective": objective})
    doc["cache"] = cache  # last: Kernel Tuner checks that a closed file ends with the cache's brackets
    return doc


def export_kt(
    trials: Iterable[Trial],
    path: str | os.PathLike[str],
    *,
    space: Any = None,
    kernel_name: str = "perftune",
    device_name: str = "perftune",
    problem_size: Any = None,
    objective: str = "time",
    time_unit: str = "ms",
) -> Path:
    """Write ``trials`` as a Kernel Tuner cache file (see :func:`kt_cache_document`; ``time_unit`` is the
    unit of the trials' values, written in milliseconds).

    Kernel Tuner reads its cache with a plain ``open``, so write ``*.json`` for it; ``*.gz`` is
    gzip-compressed for storage (and :func:`load_kt` reads it). Replay the file with
    ``kernel_tuner.tune_kernel(kernel_name, source, problem_size, [], tune_params, restrictions=...,
    cache=path, simulation_mode=True)``, where ``kernel_name`` (and ``problem_size``, when given
    here) must be the ones written and ``tune_params`` lists the parameters in the same order.

    Returns:
        The path written.

    Example:
        >>> export_kt(result.trials, "run.kt.json", space=space, kernel_name="matmul")  # doctest: +SKIP
    """
    p = Path(path)
    doc = kt_cache_document(trials, space=space, kernel_name=kernel_name, device_name=device_name,
                            problem_size=problem_size, objective=objective, time_unit=time_unit)
    # Compact separators: Kernel Tuner recognises a closed file by its last three characters "}}}".
    text = json.dumps(doc, separators=(",", ":"))
    try:
        # Whole or not at all (an interrupted export leaves the file that was there); a symbolic link named
        # here is followed, its target replaced.
        data = text.encode("utf-8")
        if p.name.endswith(".gz"):
            data = gzip.compress(data, mtime=0)
        write_bytes_atomic(os.path.realpath(p), data)
    except OSError as e:
        raise PerftuneError(f"{p}: cannot write the Kernel Tuner cache ({e.strerror or e})") from None
    return p


def export_run_kt(
    store: Any,
    run: str | int,
    path: str | os.PathLike[str],
    *,
    kernel_name: str | None = None,
    device_name: str = "perftune",
    problem_size: Any = None,
    time_unit: str | None = None,
) -> Path:
    """Write a stored run as a Kernel Tuner cache file.

    Args:
        store: An open :class:`perftune.store.Store`, or a store's path or URL.
        run: Run name, numeric id, or ``"latest"``.
        path: Output file (``*.json`` for Kernel Tuner).
        kernel_name: The name Kernel Tuner is called with; default: the run's name.
        device_name: Written as the cache's device (simulation mode takes it from the file).
        problem_size: Written when given; Kernel Tuner then checks it against its own.
        time_unit: The unit of the run's values (written in milliseconds, see :data:`TIME_UNITS`);
            default: ``"s"`` for a run of perftune's own timers (metric ``wall_time`` or ``cpu_time``
            of a task file, ``tune_compile``, the compiler-flag target), else ``"ms"`` (a replayed
            Kernel Tuner cache or T4 file, Triton's times), written as they are.

    Raises:
        PerftuneError: the run maximises its metric (Kernel Tuner minimises a cache's objective).

    Example:
        >>> from perftune.store import open_store
        >>> export_run_kt(open_store("perftune.db"), "latest", "latest.kt.json")  # doctest: +SKIP
    """
    from perftune.targets.replay._export import opened_store

    with opened_store(store) as st:
        info = st.get_run(run)
        run_id = getattr(info, "id", info)
        goal = getattr(info, "goal", "min")
        if goal not in (None, "min"):
            # Kernel Tuner minimises the cache's objective: a maximised value written as "time" would replay
            # with its worst configurations first.
            metric = getattr(info, "metric", None) or "its value"
            raise PerftuneError(f"run {getattr(info, 'name', run_id)!r} maximises {metric} (goal {goal}); a "
                                "Kernel Tuner cache holds a time to minimise: export it as CSV or JSON")
        space = info.load_space() if getattr(info, "space", None) else None
        name = kernel_name or getattr(info, "name", None) or str(run_id)
        unit = time_unit if time_unit is not None else _run_time_unit(info)
        return export_kt(st.trials(run_id), path, space=space, kernel_name=name, device_name=device_name,
                         problem_size=problem_size, time_unit=unit)


def _run_time_unit(info: Any) -> str:
    """The unit of a stored run's values as far as the run says: ``"s"`` for perftune's own timers (a
    task file's ``wall_time``/``cpu_time``, ``tune_compile``, the compiler-flag target), else ``"ms"``.

    Example:
        >>> from types import SimpleNamespace
        >>> _run_time_unit(SimpleNamespace(metric="wall_time", settings={}))
        's'
    """
    settings = getattr(info, "settings", None) or {}
    metric = getattr(info, "metric", None) or settings.get("metric")
    if metric in _SECONDS_METRICS or settings.get("target") in _SECONDS_TARGETS:
        return "s"
    return "ms"
