"""Write perftune trials as a T4 results file (the benchmark hub's open autotuning results format)."""

from __future__ import annotations

import contextlib
import datetime
import gzip
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from perftune.errors import PerftuneError
from perftune.trial import Status, Trial

__all__ = ["export_run_t4", "export_t4", "t4_document"]

T4_SCHEMA_VERSION = "1.0.0"
_EXC_PREFIX = re.compile(r"^\w+(Error|Failure|Exception|Warning): ")


def _json_value(space: Any, name: str, value: Any) -> Any:
    if space is not None and name in getattr(space, "params", {}):
        return space.params[name].to_json_value(value)
    if isinstance(value, tuple):
        return [_json_value(None, name, v) for v in value]
    return value


def _invalidity(trial: Trial) -> str:
    if trial.status is Status.OK:
        return "correct"
    if trial.status is Status.TIMEOUT:
        return "timeout"
    # The driver prefixes the exception type ("ReplayFailure: compile (...)"); look past it.
    reason = _EXC_PREFIX.sub("", (trial.reason or "").strip()).lower()
    # Keep the T4 category when a replayed failure is exported again ("compile (...)", "runtime (...)").
    for category in ("compile", "correctness", "constraints", "timeout", "runtime"):
        if reason.startswith(category):
            return category
    return "runtime"


def _timestamp(t: float | None) -> str:
    if t is None:
        return ""
    return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).isoformat(sep=" ")


def t4_document(
    trials: Iterable[Trial],
    *,
    objective: str = "time",
    space: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the T4 document (a dict) for ``trials``.

    OK trials become ``"invalidity": "correct"`` with their value as the ``objective`` measurement
    (and every other metric as a further measurement); failures keep their category when the reason
    starts with one (``compile``, ``runtime``, ``correctness``, ``constraints``), timeouts become
    ``"timeout"``, anything else ``"runtime"``. Pending and cancelled trials are left out, since
    they were never measured.

    Example:
        >>> from perftune.space import Config
        >>> doc = t4_document([Trial(0, Config({"x": 1}), Status.OK, value=2.0, loss=2.0)])  # doctest: +SKIP
        >>> doc["results"][0]["measurements"]  # doctest: +SKIP
        [{'name': 'time', 'value': 2.0, 'unit': ''}]
    """
    results: list[dict[str, Any]] = []
    for t in trials:
        if t.status in (Status.PENDING, Status.CANCELLED):
            continue
        conf = {k: _json_value(space, k, v) for k, v in dict(t.config).items()}
        ok = t.status is Status.OK and t.value is not None
        value: float | str = float(t.value) if t.value is not None and ok else (t.reason or t.status.value)
        measurements: list[dict[str, Any]] = [{"name": objective, "value": value, "unit": ""}]
        for k, v in sorted(t.metrics.items()):
            if k != objective:
                measurements.append({"name": k, "value": float(v), "unit": ""})
        search_s = t.metrics.get("search_time_s")
        results.append(
            {
                "timestamp": _timestamp(t.finished_at or t.started_at),
                "configuration": conf,
                "times": {
                    "runtimes": [float(s) for s in t.samples] if ok else [],
                    "framework": 0.0,
                    "search_algorithm": float(search_s) if search_s is not None else 0.0,
                    "validation": 0.0,
                },
                "invalidity": _invalidity(t),
                "correctness": 1 if ok else 0,
                "measurements": measurements,
                "objectives": [objective],
            }
        )
    meta: dict[str, Any] = {"generator": "perftune"}
    meta.update(metadata or {})
    return {"schema_version": T4_SCHEMA_VERSION, "metadata": meta, "results": results}


def export_t4(
    trials: Iterable[Trial],
    path: str | os.PathLike[str],
    *,
    objective: str = "time",
    space: Any = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``trials`` as a T4 file (gzip-compressed when ``path`` ends in ``.gz``).

    Args:
        trials: Finished trials, e.g. ``result.trials`` or ``store.trials(run_id)``.
        path: Output file, ``*.T4.json`` or ``*.T4.json.gz``.
        objective: Name of the measurement that holds each trial's value.
        space: The run's space; when given, values are written with each parameter's JSON form.
        metadata: Extra T4 metadata (e.g. ``{"timeunit": "milliseconds"}``).

    Returns:
        The path written.

    Example:
        >>> export_t4(result.trials, "run.T4.json.gz", space=space)  # doctest: +SKIP
    """
    p = Path(path)
    doc = t4_document(trials, objective=objective, space=space, metadata=metadata)
    text = json.dumps(doc, indent=1)
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise PerftuneError(f"{p}: cannot write T4 file ({e.strerror or e})") from None
    return p


@contextlib.contextmanager
def opened_store(store: Any) -> Iterator[Any]:
    """``store`` itself when it is an open store; else the store at that path or URL, opened for the
    block (it must exist) and closed after it."""
    if not isinstance(store, (str, os.PathLike)):
        yield store
        return
    from perftune.store import open_store

    st = open_store(store, must_exist=True)
    try:
        yield st
    finally:
        st.close()


def export_run_t4(
    store: Any, run: str | int, path: str | os.PathLike[str], *, objective: str | None = None
) -> Path:
    """Write a stored run as a T4 file.

    Args:
        store: An open :class:`perftune.store.Store`, or a store's path or URL.
        run: Run name, numeric id, or ``"latest"``.
        path: Output file.
        objective: Measurement name; default: the run's metric, else ``"time"``.

    Example:
        >>> from perftune.store import open_store
        >>> export_run_t4(open_store("perftune.db"), "latest", "latest.T4.json")  # doctest: +SKIP
        >>> export_run_t4("perftune.db", "latest", "latest.T4.json")  # the same  # doctest: +SKIP
    """
    with opened_store(store) as st:
        info = st.get_run(run)
        run_id = getattr(info, "id", info)
        space = info.load_space() if getattr(info, "space", None) else None
        name = objective or getattr(info, "metric", None) or "time"
        meta = {"run": getattr(info, "name", None) or str(run_id)}
        return export_t4(st.trials(run_id), path, objective=name, space=space, metadata=meta)
