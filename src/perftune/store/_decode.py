"""Reading the store's rows as untrusted input: every column is checked before it becomes a value.

A store is a file (or a database) that anyone who can write it controls, and SQLite does not enforce
column types: a ``REAL`` column can hold text, a ``TEXT`` column a blob, a JSON column anything. The
functions here turn a row into checked values, or raise :class:`Damage` naming the column and what is
wrong with it; :class:`~perftune.store.Store` turns that into one :class:`StoreDamageError` line that
names the run and the trial. Nothing here reads a clock, the network or a file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from perftune._jsonfile import shown
from perftune.errors import PerftuneError, StoreError
from perftune.trial import Status, Trial

if TYPE_CHECKING:
    from perftune.space import Space

__all__ = [
    "Damage",
    "StoreDamageError",
    "checked_samples",
    "integer",
    "json_object",
    "number",
    "run_fields",
    "summary_fields",
    "text",
    "timestamp",
    "trial_fields",
    "trial_from_row",
]

#: The times a stored timestamp may hold: those a date can show (years 1 to 9999, a day of margin for
#: the local time zone), so that formatting a stored time never overflows.
_MIN_TIME = -62_135_510_400.0
_MAX_TIME = 253_402_214_400.0

_STATUSES = {s.value: s for s in Status}


class StoreDamageError(StoreError):
    """A run, a trial or another row of the store holds a value perftune never writes there.

    The message is one line naming the store, the run, the trial (when it is a trial's) and the column.

    Attributes:
        run_id: The damaged run's id (None when unknown).
        run_name: Its name (None when unknown).
        trial_id: The damaged trial's ticket, as stored (None when the run itself is damaged).
        field: The column (``settings``, ``trials.status``, ...).
        detail: What is wrong with it.

    Example:
        >>> str(StoreDamageError("store x.db: run 'a' (id 1) is damaged: settings: not valid JSON"))
        "store x.db: run 'a' (id 1) is damaged: settings: not valid JSON"
    """

    def __init__(self, message: str, *, run_id: int | None = None, run_name: str | None = None,
                 trial_id: Any = None, field: str | None = None, detail: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.run_name = run_name
        self.trial_id = trial_id
        self.field = field
        self.detail = detail


class Damage(Exception):
    """A column that is not what perftune writes there (internal: the store names the run and trial)."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


def show(value: Any) -> str:
    """A short, printable picture of a stored value for an error message."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"a blob of {len(bytes(value))} bytes"
    return shown(value, 40)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def integer(value: Any, field: str) -> int:
    """An integer column (a run id, a ticket)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise Damage(field, f"not an integer ({show(value)})")


def number(value: Any, field: str) -> float | None:
    """A number column (None for NULL); infinities are numbers."""
    if value is None:
        return None
    if _is_number(value):
        return float(value)
    raise Damage(field, f"not a number ({show(value)})")


def timestamp(value: Any, field: str) -> float | None:
    """A ``time.time()`` column (None for NULL): a finite number that a date can show."""
    if value is None:
        return None
    if not _is_number(value):
        raise Damage(field, f"not a time ({show(value)})")
    t = float(value)
    if not (math.isfinite(t) and _MIN_TIME <= t <= _MAX_TIME):
        raise Damage(field, f"not a time ({show(value)})")
    return t


def text(value: Any, field: str) -> str | None:
    """A text column (None for NULL)."""
    if value is None or isinstance(value, str):
        return value
    raise Damage(field, f"not text ({show(value)})")


def json_object(value: Any, field: str) -> dict[str, Any] | None:
    """A column of JSON text that holds an object; None for NULL or an empty string."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Damage(field, f"not JSON text ({show(value)})")
    try:
        data = json.loads(value)
    except RecursionError:
        raise Damage(field, "JSON nested too deeply") from None
    except ValueError:  # JSONDecodeError, a number too long to read
        raise Damage(field, "not valid JSON") from None
    if not isinstance(data, dict):
        raise Damage(field, f"not a JSON object (a {type(data).__name__})")
    return data


def run_fields(m: Mapping[Any, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields of a :class:`~perftune.store.RunInfo` from a ``runs`` row, and what is damaged.

    A damaged column gets a neutral value (``{}``, None, 0.0), and ``"column: what is wrong"`` in the list:
    a damaged run is still listed (and can be deleted), and whatever reads its contents refuses it.
    """
    damaged: list[str] = []

    def take(fn: Any, key: str, neutral: Any) -> Any:
        try:
            return fn(m.get(key), key)
        except Damage as damage:
            damaged.append(str(damage))
            return neutral

    raw_name = m.get("name")
    name = take(text, "name", None)
    if name is None:
        if raw_name is None:
            damaged.append("name: missing")
        name = show(raw_name)
    status = take(text, "status", None)
    if status is None:
        if m.get("status") is None:
            damaged.append("status: missing")
        status = "damaged"
    goal = m.get("goal")
    if goal not in ("min", "max"):
        damaged.append(f"goal: not 'min' or 'max' ({show(goal)})")
        goal = goal if isinstance(goal, str) else "min"
    created = take(timestamp, "created_at", 0.0)
    if created is None:
        damaged.append("created_at: missing")
        created = 0.0
    fields = {
        "id": m.get("id"),
        "name": name,
        "created_at": created,
        "status": status,
        "goal": goal,
        "metric": take(text, "metric", None),
        "space": take(json_object, "space", None),
        "space_fingerprint": take(text, "space_fingerprint", None),
        "settings": take(json_object, "settings", None) or {},
        "environment": take(json_object, "environment", None) or {},
        "finished_at": take(timestamp, "finished_at", None),
    }
    return fields, damaged


def checked_samples(values: Sequence[Any]) -> list[float]:
    """A trial's samples (``samples.value``): numbers, NaN and infinities included."""
    out: list[float] = []
    for i, v in enumerate(values):
        if not _is_number(v):
            raise Damage("samples.value", f"sample {i} is not a number ({show(v)})")
        out.append(float(v))
    return out


def _status(value: Any) -> Status:
    status = _STATUSES.get(value) if isinstance(value, str) else None
    if status is None:
        raise Damage("status", f"not a trial status ({show(value)}; one of {', '.join(_STATUSES)})")
    return status


def _metrics(value: Any) -> dict[str, float]:
    data = json_object(value, "metrics") or {}
    for k, v in data.items():
        if not _is_number(v):
            raise Damage("metrics", f"metric {show(k)} is not a number ({show(v)})")
    return data


def _intermediate(value: Any) -> dict[int, float]:
    data = json_object(value, "intermediate") or {}
    out: dict[int, float] = {}
    for k, v in data.items():
        try:
            step = int(k)
        except ValueError:
            raise Damage("intermediate", f"step {show(k)} is not an integer") from None
        if not _is_number(v):
            raise Damage("intermediate", f"the value of step {step} is not a number ({show(v)})")
        out[step] = float(v)
    return out


def summary_fields(trial_id: Any, status: Any, value: Any, loss: Any, technique: Any, worker: Any,
                   reason: Any, started_at: Any, finished_at: Any) -> tuple[Any, ...]:
    """The columns of a :class:`~perftune.store.TrialSummary`, checked, in that order."""
    # The common case first, in few comparisons (a run's 100,000 summaries are read at once).
    if (type(trial_id) is int and status in _STATUSES
            and (value is None or type(value) is float) and (loss is None or type(loss) is float)
            and (technique is None or type(technique) is str) and (worker is None or type(worker) is str)
            and (reason is None or type(reason) is str)
            and (started_at is None or (type(started_at) is float and _MIN_TIME <= started_at <= _MAX_TIME))
            and (finished_at is None
                 or (type(finished_at) is float and _MIN_TIME <= finished_at <= _MAX_TIME))):
        return trial_id, status, value, loss, technique, worker, reason, started_at, finished_at
    return (integer(trial_id, "trial_id"), _status(status).value, number(value, "value"),
            number(loss, "loss"), text(technique, "technique"), text(worker, "worker"),
            text(reason, "reason"), timestamp(started_at, "started_at"),
            timestamp(finished_at, "finished_at"))


def trial_fields(m: Mapping[Any, Any], samples: Sequence[Any]) -> dict[str, Any]:
    """Every column of a ``trials`` row but the configuration, checked, with the trial's samples."""
    return {
        "id": integer(m["trial_id"], "trial_id"),
        "status": _status(m["status"]),
        "value": number(m["value"], "value"),
        "loss": number(m["loss"], "loss"),
        "metrics": _metrics(m["metrics"]),
        "samples": checked_samples(samples),
        "reason": text(m["reason"], "reason"),
        "technique": text(m["technique"], "technique"),
        "worker": text(m["worker"], "worker"),
        "started_at": timestamp(m["started_at"], "started_at"),
        "finished_at": timestamp(m["finished_at"], "finished_at"),
        "intermediate": _intermediate(m.get("intermediate")),
    }


def config_object(value: Any) -> dict[str, Any]:
    """A trial's configuration as stored (``trials.config``): a JSON object."""
    data = json_object(value, "config")
    if data is None:
        raise Damage("config", "missing")
    return data


def trial_from_row(m: Mapping[Any, Any], samples: Sequence[Any], space: Space | None) -> Trial:
    """A :class:`~perftune.trial.Trial` from a ``trials`` row and its samples, every column checked."""
    from perftune.space import Config

    fields = trial_fields(m, samples)
    raw = m["config"]
    if not isinstance(raw, str):
        raise Damage("config", f"not JSON text ({show(raw)})")
    try:
        config = Config.from_json(raw, space=space)
    except RecursionError:
        raise Damage("config", "JSON nested too deeply") from None
    except (PerftuneError, ValueError, TypeError, LookupError, ArithmeticError) as exc:  # SpaceError & co.
        detail = str(exc).removeprefix("config JSON: ").splitlines()[0] if str(exc) else type(exc).__name__
        raise Damage("config", detail[:200]) from None
    return Trial(config=config, **fields)
