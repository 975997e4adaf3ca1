"""The data behind every view of a run, as JSON-able dicts: one source for the dashboard and the report.

The dashboard serves these dicts from its JSON endpoints and the report inlines them into its page; the
same script (``_assets/views.js``) draws them in both. Everything here reads the store through its
public API, and the expensive parts are bounded: the convergence reads no configuration
(:meth:`~perftune.store.Store.trial_summaries`), the trial table is one page read in the database
(:meth:`~perftune.store.Store.trial_page`), and the parameter views decode at most
``max_trials`` configurations (the best ones and an even sample of the rest).

Example:
    >>> from perftune.store import open_store
    >>> with open_store("sqlite://") as store:
    ...     _ = store.create_run("demo", None, {}, "min", None)
    ...     [row["name"] for row in runs_view(store)]
    ['demo']
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from perftune.errors import PerftuneError, StoreError
from perftune.report._improvement import FinalAnswer, answer_value, improvement_of, infeasible
from perftune.trial import FAILURE_KEY_CHARS, Status, failure_key

__all__ = [
    "FAILURE_KEY_CHARS",
    "IMPORTANCE_METHOD",
    "METRIC_UNITS",
    "check_comparable",
    "compare_view",
    "driver_gone",
    "failure_key",
    "failure_label",
    "flag_groups",
    "metric_unit",
    "parameter_view",
    "pareto_view",
    "report_trials",
    "run_view",
    "runs_view",
    "trials_view",
    "value_text",
    "with_failed_default",
]

#: How :func:`parameter_view` ranks the parameters, as the pages print it.
IMPORTANCE_METHOD = ("permutation importance of a random forest (scikit-learn, 60 trees) fitted on the "
                     "successful trials' log values, measured on a held-out quarter of them")

# Plotly draws this many points per curve smoothly in the browser; longer curves are thinned (the
# best-so-far curve keeps every step, the scatter of values keeps every point).
_MAX_LINE_POINTS = 4000
# A run of 100,000 trials would send megabytes of points that no screen can tell apart: the scatter of
# values shows at most this many (evenly spaced trials); the best-so-far curve keeps every step.
_MAX_SCATTER_POINTS = 20_000
_MAX_PARAMS_SHOWN = 12
_GROUP_LABELS = {"level": "level and target", "flag": "-f flags", "param": "--param values",
                 "other": "parameters"}


def failure_label(status: str, reason: str | None) -> str:
    """One line for a failure: ``status: reason``, without saying the status twice.

    The reason is its :func:`failure_key`: the labels group failures as every other view does.

    Example:
        >>> failure_label("timeout", "timeout: run timed out after 2 s")
        'timeout: run timed out after 2 s'
        >>> failure_label("failed", "RuntimeError: boom")
        'failed: RuntimeError: boom'
    """
    first = failure_key(reason)
    if not first:
        return status
    # Reasons often start with the status already ("timeout: ...", "Timed out: ..."): say it once.
    if re.match(rf"{re.escape(status)}\b\W*", first, flags=re.IGNORECASE):
        return first
    return f"{status}: {first}"


#: The units of the metrics perftune measures itself (a task file's ``[objective] metric``, TASK_FILES.md);
#: a metric of the user's own has no known unit, and its values are shown bare.
METRIC_UNITS = {"wall_time": "s", "cpu_time": "s", "max_rss": "KiB", "file_size": "bytes"}


def metric_unit(metric: str | None) -> str | None:
    """The unit of a built-in metric's values (:data:`METRIC_UNITS`), else None.

    Example:
        >>> metric_unit("wall_time"), metric_unit("max_rss"), metric_unit("gflops"), metric_unit(None)
        ('s', 'KiB', None, None)
    """
    return METRIC_UNITS.get(metric) if isinstance(metric, str) else None


def value_text(value: float | None, unit: str | None = None) -> str:
    """A value as every text view prints it: six significant digits and its unit, "-" for none.

    Example:
        >>> value_text(0.0279357, "s"), value_text(80.0), value_text(None, "s")
        ('0.0279357 s', '80', '-')
    """
    if value is None:
        return "-"
    text = f"{value:.6g}" if isinstance(value, int | float) else str(value)
    return f"{text} {unit}" if unit else text


def _aim(info: Any) -> tuple[Any, ...]:
    """What a run optimises: its goal and metric, and its objectives when it has several."""
    objectives = _objectives_of(info)
    pairs = None if objectives is None else tuple(zip(*objectives, strict=True))
    return info.goal or "min", info.metric or None, pairs


def _aim_text(info: Any) -> str:
    """``minimises wall_time``, ``maximises its value``, ``minimises time and maximises size``."""
    verb = {"min": "minimises", "max": "maximises"}
    objectives = _objectives_of(info)
    if objectives is not None:
        return " and ".join(f"{verb.get(g, g)} {n}" for n, g in zip(*objectives, strict=True))
    goal = info.goal or "min"
    return f"{verb.get(goal, str(goal))} {info.metric or 'its value'}"


def driver_gone(store: Any, info: Any, now: float | None = None) -> bool:
    """Whether a run that says ``running`` has no live driver: no lease, or a stale one (its driver was
    killed). What ``runs``, ``show``, the report and the dashboard print as "running (no driver)".

    ``now`` is the store's clock (:meth:`~perftune.store.Store.clock`), read here when not given.

    Raises:
        StoreDamageError: the run's lease holds what perftune never writes.
    """
    if info.status != "running":
        return False
    lease = store.get_lease(info.id)
    return lease is None or lease.is_stale(store.clock() if now is None else now)


def _default_failed(default: Any) -> str | None:
    """The line saying the default configuration did not succeed, or broke a constraint, so that there is
    no improvement."""
    if default is None or (default.ok and not infeasible(default)):
        return None
    status = default.status.value if isinstance(default.status, Status) else str(default.status)
    why = failure_key(default.reason)
    if default.ok:  # measured, but infeasible: "infeasible (accuracy >= 0.99 (accuracy=0.985))"
        status, why = "infeasible", why.removeprefix("infeasible").lstrip(": ")
    shown = f"{status} ({why})" if why and why.lower() != status.lower() else status
    return f"default configuration: {shown}: no improvement can be computed"


def with_failed_default(answer: FinalAnswer, default: Any) -> FinalAnswer:
    """``answer`` with a note saying that the default configuration (the baseline) did not succeed, when it
    did not and the answer therefore has no improvement; else ``answer`` itself.

    Example:
        >>> from perftune.space import Config
        >>> from perftune.trial import Trial
        >>> broken = Trial(0, Config({"x": 0}), Status.FAILED, reason="RuntimeError: broken")
        >>> with_failed_default(FinalAnswer(None, trial=3), broken).lines()
        ['default configuration: failed (RuntimeError: broken): no improvement can be computed']
    """
    line = _default_failed(default)
    if line is None or answer.improvement is not None or (answer.note and line in answer.note):
        return answer
    import dataclasses

    return dataclasses.replace(answer, note=f"{answer.note}; {line}" if answer.note else line)


def _trial_id(value: Any, info: Any) -> int:
    """A trial id read from the store, checked to be an integer.

    SQLite keeps whatever type a row was given: a store written by someone else may hold a trial id that
    is text, such as HTML. The ids go into the pages (the dashboard's JSON, the report's script), so a run
    with such a row is refused with one line rather than shown.

    Raises:
        StoreError: ``value`` is not an integer.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise StoreError(f"run {info.name!r}: a trial id is not an integer ({repr(value)[:60]}): the store is "
                     "damaged or was edited; this run cannot be shown")


def _trial_ids(values: Iterable[Any], info: Any) -> None:
    """Check that every trial id of ``values`` is an integer (see :func:`_trial_id`)."""
    for value in values:
        if type(value) is not int:  # the fast path of a run of 100,000 trials: one type check each
            _trial_id(value, info)


def _damaged(store: Any, info: Any, field: str, detail: str) -> StoreError:
    """The store's damage error (one line) for a run whose ``field`` holds what perftune never writes."""
    from perftune.store import StoreDamageError

    where = getattr(store, "location", None)
    prefix = f"store {where}: " if where else ""
    return StoreDamageError(f"{prefix}run {info.name!r} (id {info.id}) is damaged: {field}: {detail}",
                            run_id=info.id, run_name=info.name, field=field, detail=detail)


def _run_total(info: Any, store: Any = None) -> tuple[int | None, float | None]:
    """The run's budget of evaluations and seconds (None where it has none).

    Raises:
        StoreDamageError: a budget that is no finite, non-negative number (the store was edited).
    """
    budget = (info.settings or {}).get("budget")
    if not isinstance(budget, dict):
        return None, None
    out: list[Any] = []
    for key in ("evals", "seconds"):
        value = budget.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool):
            out.append(None)
            continue
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number) or number < 0:
            raise _damaged(store, info, f"settings.budget.{key}", f"not a finite number ({repr(value)[:40]})")
        out.append(int(value) if key == "evals" else number)
    return out[0], out[1]


def _kind(info: Any) -> str:
    settings = info.settings or {}
    if isinstance(settings.get("target"), str):
        return settings["target"]
    if settings.get("task"):
        return "command"
    return "python"


def _answer(store: Any, info: Any) -> FinalAnswer:
    """The recorded final answer, else best against default: two indexed lookups, never all trials.

    An answer without an improvement says so when the default configuration failed
    (:func:`with_failed_default`).
    """
    recorded = FinalAnswer.from_json((info.settings or {}).get("result"))
    if recorded is not None and recorded.improvement is not None:
        return recorded
    # The first trial of the default technique: an index walk that stops at it (no count of them all).
    _, defaults = store.trial_page(info.id, technique="default", limit=1, count=False)
    default = defaults[0] if defaults else None
    if recorded is not None:
        return with_failed_default(recorded, default)
    best = store.best(info.id)
    imp = improvement_of(best, default, goal=info.goal or "min")
    return with_failed_default(FinalAnswer(imp, trial=None if best is None else best.id), default)


def _run_row(store: Any, info: Any, counts: tuple[int, int] | None = None) -> dict[str, Any]:
    n_evals, n_seconds = _run_total(info, store)
    best = store.best(info.id)
    answer = _answer(store, info)
    env = info.environment or {}
    n_trials, n_ok = counts if counts is not None else (store.count(info.id), -1)
    return {
        "id": info.id, "name": info.name, "status": info.status, "goal": info.goal, "metric": info.metric,
        "unit": metric_unit(info.metric), "aim": _shown_aim(info), "driver_gone": _driver_gone(store, info),
        "kind": _kind(info), "n_trials": n_trials, "budget_evals": n_evals, "budget_seconds": n_seconds,
        "progress": None if not n_evals else min(1.0, n_trials / n_evals),
        "best": answer_value(store, info, answer, best),
        "improvement": None if answer.improvement is None else answer.improvement.to_json(),
        "machine": env.get("hostname") or env.get("machine"), "cpu": env.get("cpu"),
        "started_at": info.created_at, "finished_at": info.finished_at,
        "space_fingerprint": info.space_fingerprint,
        "n_failed": _n_failed(store, info.id, n_trials, n_ok),
    }


def _shown_aim(info: Any) -> str | None:
    """:func:`_aim_text` for a view's row: None for damaged objectives (the run page names the damage)."""
    try:
        return _aim_text(info)
    except StoreError:
        return None


def _driver_gone(store: Any, info: Any) -> bool:
    """:func:`driver_gone` for a view: a damaged lease is not said to be gone (``perftune runs`` names it)."""
    try:
        return driver_gone(store, info)
    except StoreError:
        return False


def _n_failed(store: Any, run_id: int, n_trials: int, n_ok: int) -> int:
    """Trials that failed: neither ok, nor still pending, nor pruned early by a fidelity schedule, nor
    cancelled (stopped by the run's end, no fault of theirs)."""
    if not n_trials:
        return 0
    n_ok = n_ok if n_ok >= 0 else store.count(run_id, Status.OK)
    if n_ok == n_trials:
        return 0
    not_failed = (Status.PRUNED, Status.PENDING, Status.CANCELLED)
    return n_trials - n_ok - sum(store.count(run_id, status) for status in not_failed)


def runs_view(store: Any) -> list[dict[str, Any]]:
    """One row per run: status, progress, best, improvement with its interval, machine, start and end.

    A run whose trials cannot be read (a damaged store: :class:`~perftune.errors.StoreError`) has a row
    of its name, status and ``error`` (one line), so that it does not hide the other runs.
    """
    rows = []
    for info in store.list_runs():
        try:
            rows.append(_run_row(store, info))
        except (StoreError, ValueError, TypeError, OverflowError, RecursionError) as error:
            # A run that cannot be read must not hide the others: its row says what is wrong, in one line.
            message = str(error) if isinstance(error, StoreError) else (
                f"store {store.location}: run {info.name!r} (id {info.id}) cannot be read: "
                f"{type(error).__name__}: {str(error)[:120]}")
            rows.append({"id": info.id, "name": info.name, "status": info.status, "goal": info.goal,
                         "metric": info.metric, "unit": metric_unit(info.metric), "aim": None,
                         "driver_gone": False, "kind": _kind(info), "n_trials": None, "budget_evals": None,
                         "budget_seconds": None, "progress": None, "best": None, "improvement": None,
                         "machine": None, "cpu": None, "started_at": info.created_at,
                         "finished_at": info.finished_at, "space_fingerprint": info.space_fingerprint,
                         "n_failed": None, "error": message})
    return rows


def _thin(n: int, limit: int) -> list[int]:
    if n <= limit:
        return list(range(n))
    step = n / limit
    picked = sorted({int(i * step) for i in range(limit)} | {n - 1})
    return picked


def _default_config(info: Any) -> dict[str, Any] | None:
    if info.space is None:
        return None
    try:
        return json.loads(info.load_space().default().to_json())
    except (PerftuneError, ValueError, KeyError, TypeError):
        return None


def _group(name: str, kind: str) -> str:
    if kind != "flags":
        return "other"
    if name in ("O", "march", "mtune"):
        return "level"
    if name.startswith("param_"):
        return "param"
    return "flag"


def flag_groups(flags: Sequence[str]) -> dict[str, list[str]]:
    """A compiler command line's options grouped for reading: level and target, -f on, -f off, --param.

    Example:
        >>> flag_groups(["-O2", "-funroll-loops", "-fno-tree-pre", "--param", "max-unroll-times=4"])
        {'level and target': ['-O2'], '-f flags on': ['-funroll-loops'], '-f flags off': ['-fno-tree-pre'], \
'--param values': ['--param max-unroll-times=4']}
    """
    groups: dict[str, list[str]] = {}
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        if flag == "--param" and i + 1 < len(items):
            group, flag = "--param values", f"--param {items[i + 1]}"
            i += 1
        elif flag.startswith("--param"):
            group = "--param values"
        elif flag.startswith(("-O", "-march", "-mtune")):
            group = "level and target"
        elif flag.startswith("-fno-"):
            group = "-f flags off"
        elif flag.startswith("-f"):
            group = "-f flags on"
        else:
            group = "other options"
        groups.setdefault(group, []).append(flag)
        i += 1
    return groups


def _best_view(store: Any, info: Any, answer: FinalAnswer) -> dict[str, Any] | None:
    best = store.best(info.id)
    trial = best
    if answer.trial is not None and (best is None or answer.trial != best.id):
        _, found = store.trial_page(info.id, trial_ids=[answer.trial], limit=1, count=False)
        trial = found[0] if found else best
    if trial is None:
        return None
    trial_id = _trial_id(trial.id, info)
    config = json.loads(trial.config.to_json())
    default = _default_config(info) or {}
    kind = _kind(info)
    differing = {k: v for k, v in config.items() if k not in default or default[k] != v}
    # A large space (flags) shows what differs from the default; a small one shows every parameter.
    shown = differing if len(config) > 20 else config
    groups: dict[str, list[list[Any]]] = {}
    for k, v in shown.items():
        groups.setdefault(_GROUP_LABELS[_group(k, kind)], []).append([k, v, default.get(k)])
    flags = (answer.config or {}).get("flags")
    is_flags = isinstance(flags, list) and all(isinstance(f, str) for f in flags)
    final_flags = flag_groups(flags) if isinstance(flags, list) and is_flags else None
    n_final = len(flags) if isinstance(flags, list) and is_flags else None
    return {
        "final_flags": final_flags, "n_final_flags": n_final,
        # The final answer's value (a flags run's final option set's), and that of the trial shown.
        "trial": trial_id, "value": answer_value(store, info, answer, trial), "trial_value": trial.value,
        "technique": trial.technique, "samples": trial.samples,
        "n_params": len(config), "n_differing": len(differing), "only_differing": len(config) > 20,
        "groups": groups, "command_line": answer.command_line,
        "improvement": None if answer.improvement is None else answer.improvement.to_json(),
        "lines": answer.lines(),
    }


def run_view(store: Any, ref: str | int) -> dict[str, Any]:
    """The run page's data: summary, convergence, technique credits, failures and the best configuration.

    ``objectives`` lists the objectives of a run with several (else None): its front is
    :func:`pareto_view`'s.

    Raises:
        StoreError: no such run.
    """
    info = store.get_run(ref)
    goal = info.goal or "min"
    rows = store.trial_summaries(info.id)
    _trial_ids((r.trial_id for r in rows), info)
    t0 = min((r.started_at for r in rows if r.started_at is not None), default=info.created_at)
    ids, values, elapsed, ok_ids = [], [], [], []
    best_ids: list[int] = []
    best_techniques: list[str] = []
    best_values: list[float] = []
    best_elapsed: list[float | None] = []
    failed: dict[str, list[Any]] = {}
    best_loss = math.inf
    credit = Counter[str]()
    credit_points: list[tuple[int, dict[str, float]]] = []
    techniques = Counter[str]()
    ok_by_tech = Counter[str]()
    failures = Counter[tuple[str, str]]()
    n_pruned = 0
    n_cancelled = 0
    # Looked up once: this loop sees every trial.
    ok, pending, pruned = Status.OK.value, Status.PENDING.value, Status.PRUNED.value
    cancelled = Status.CANCELLED.value
    for r in rows:
        techniques[r.technique or "?"] += 1
        when = None if r.finished_at is None else round(r.finished_at - t0, 3)
        if r.status == ok and r.value is not None:
            ok_by_tech[r.technique or "?"] += 1
            ids.append(r.trial_id)
            values.append(r.value)
            elapsed.append(when)
            ok_ids.append(r.trial_id)
            loss = r.loss if r.loss is not None else (r.value if goal == "min" else -r.value)
            if loss < best_loss:
                if math.isfinite(best_loss):
                    credit[r.technique or "?"] += (best_loss - loss) / max(abs(best_loss), 1e-300)
                    credit_points.append((r.trial_id, dict(credit)))
                best_loss = loss
                best_ids.append(r.trial_id)
                best_techniques.append(r.technique or "?")
                best_values.append(r.value)
                best_elapsed.append(when)
        elif r.status != pending:
            f = failed.setdefault(r.status, [[], []])
            f[0].append(r.trial_id)
            f[1].append(when)
            if r.status == pruned:  # stopped early by the fidelity schedule: not a failure
                n_pruned += 1
            elif r.status == cancelled:  # stopped by the run's end (a time budget): not a failure either
                n_cancelled += 1
            else:
                failures[(r.status, failure_label(r.status, r.reason))] += 1
    keep = _thin(len(ids), _MAX_SCATTER_POINTS)
    last_id = rows[-1].trial_id if rows else 0
    # Credits change only when the best improves: one point per improvement, and the end of the run.
    names = sorted(techniques)
    total_credit = sum(credit.values())
    credits = {"trial": [p[0] for p in credit_points] + ([last_id] if rows else []),
               "share": {n: [(c.get(n, 0.0) / max(sum(c.values()), 1e-300)) for _, c in credit_points]
                         + ([credit.get(n, 0.0) / total_credit if total_credit > 0 else 0.0] if rows else [])
                         for n in names}}
    window = max(10, len(rows) // 50)
    share_x, share = _proposal_shares(rows, names, window)
    answer = _answer(store, info)
    n_evals, n_seconds = _run_total(info, store)
    objectives = _objectives_of(info, store)
    return {
        "run": {**_run_row(store, info, (len(rows), len(ids))),
                "settings": {k: v for k, v in (info.settings or {}).items() if k != "result"},
                "environment": info.environment or {}},
        "convergence": {
            "trial": [ids[i] for i in keep], "value": [values[i] for i in keep],
            "elapsed_s": [elapsed[i] for i in keep],
            "best_trial": best_ids + ([last_id] if best_ids else []),
            "best_value": best_values + (best_values[-1:] if best_ids else []),
            "best_technique": best_techniques,
            "best_elapsed_s": best_elapsed + ([round((rows[-1].finished_at or t0) - t0, 3)]
                                              if best_ids else []),
            "failed": {s: {"trial": v[0], "elapsed_s": v[1]} for s, v in failed.items()},
            "log_y": bool(values) and min(values) > 0 and max(values) / min(values) > 30,
            "n_points": len(ids), "n_shown": len(keep),
        },
        "credits": credits,
        "proposals": {"trial": share_x, "share": share, "window": window},
        "techniques": [{"technique": n, "trials": techniques[n], "ok": ok_by_tech[n],
                        "credit": credit.get(n, 0.0) / total_credit if total_credit > 0 else 0.0}
                       for n, _ in techniques.most_common()],
        "failures": [{"status": s, "label": label, "count": c} for (s, label), c in failures.most_common()],
        "pruned": n_pruned,
        "cancelled": n_cancelled,
        "best": _best_view(store, info, answer),
        # The front has its own view (it reads every trial's metrics): the page loads it when this is set.
        "objectives": None if objectives is None
        else [{"name": n, "goal": g} for n, g in zip(*objectives, strict=True)],
        "budget": {"evals": n_evals, "seconds": n_seconds},
        "n_trials": len(rows),
        # The trial table's status filter: every status a trial ends with (pending ones while it runs).
        "statuses": [s.value for s in Status if s is not Status.PENDING or info.status == "running"],
    }


def _objectives_of(info: Any, store: Any = None) -> tuple[list[str], list[str]] | None:
    """The run's objective names and goals when it has two or more (``settings["objectives"]``), else None.

    Raises:
        StoreDamageError: a name that is no string, or a goal other than "min" and "max".
    """
    raw = (info.settings or {}).get("objectives")
    if not isinstance(raw, dict):
        return None
    names, goals = raw.get("names"), raw.get("goals")
    if not isinstance(names, list) or not isinstance(goals, list) or not 2 <= len(names) == len(goals):
        return None
    for name in names:
        if not isinstance(name, str) or not name:
            raise _damaged(store, info, "settings.objectives", f"a name is not a string ({repr(name)[:40]})")
    if len(set(names)) != len(names):
        raise _damaged(store, info, "settings.objectives", "a name is given twice")
    for goal in goals:
        if goal not in ("min", "max"):
            raise _damaged(store, info, "settings.objectives",
                           f"a goal is not 'min' or 'max' ({repr(goal)[:40]})")
    return list(names), list(goals)


def _objective_values(trial: Any, names: Sequence[str]) -> list[float] | None:
    metrics = trial.metrics or {}
    out = []
    for i, name in enumerate(names):
        # The primary objective is the trial's value; older rows may not repeat it among the metrics.
        v = metrics.get(name, trial.value if i == 0 else None)
        if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
            return None
        out.append(float(v))
    return out


def pareto_view(store: Any, ref: str | int, *,
                max_points: int = _MAX_SCATTER_POINTS) -> dict[str, Any] | None:
    """The Pareto front of a run with several objectives, and every successful trial's objective values.

    The front is :meth:`~perftune.store.Store.pareto`'s (successful, feasible, non-dominated trials, one
    per configuration, in ticket order), computed from the one read of the run's trials that gives the
    cloud of successful trials too. The cloud is thinned to ``max_points`` evenly spaced trials (the front
    is always whole); ``feasible`` says which ones met the run's constraints. A run with one objective has
    no front to draw: None.

    Raises:
        StoreError: no such run.
    """
    info = store.get_run(ref)
    objectives = _objectives_of(info, store)
    if objectives is None:
        return None
    from perftune.search import Objectives

    names, goals = objectives
    # Store.pareto's front without reading the run twice: the same objectives over the same trials.
    everything = store.trials(info.id)
    _trial_ids((t.id for t in everything), info)
    try:
        front = Objectives.from_dict((info.settings or {})["objectives"]).pareto(everything)
    except StoreError:
        raise
    except PerftuneError as error:  # constraints the objectives cannot read
        raise _damaged(store, info, "settings.objectives", str(error)) from None
    ok = [t for t in everything if t.status is Status.OK]
    points = [(t, v) for t in ok if (v := _objective_values(t, names)) is not None]
    keep = _thin(len(points), max_points)
    front_values = [_objective_values(t, names) or [math.nan] * len(names) for t in front]
    return {
        "objectives": [{"name": n, "goal": g} for n, g in zip(names, goals, strict=True)],
        "trial": [points[i][0].id for i in keep],
        "values": {n: [points[i][1][k] for i in keep] for k, n in enumerate(names)},
        "feasible": [points[i][0].loss is not None for i in keep],
        "front": {"trial": [t.id for t in front],
                  "values": {n: [v[k] for v in front_values] for k, n in enumerate(names)},
                  "technique": [t.technique for t in front],
                  "config": [t.config.to_json() for t in front]},
        "n_ok": len(points), "n_shown": len(keep), "n_front": len(front),
    }


def _proposal_shares(rows: Sequence[Any], names: list[str],
                     window: int) -> tuple[list[int], dict[str, list[float]]]:
    """Share of proposals per technique in a sliding window: how the ensemble moved its budget."""
    picks = _thin(len(rows), 500)
    counts = Counter[str]()
    out: dict[str, list[float]] = {n: [] for n in names}
    xs: list[int] = []
    j = 0
    for i, r in enumerate(rows):
        counts[r.technique or "?"] += 1
        if i >= window:
            counts[rows[i - window].technique or "?"] -= 1
        if j < len(picks) and picks[j] == i:
            j += 1
            size = min(i + 1, window)
            xs.append(r.trial_id)
            for n in names:
                out[n].append(round(counts[n] / size, 4))
    return xs, out


def trials_view(store: Any, ref: str | int, *, offset: int = 0, limit: int = 50, sort: str = "trial",
                descending: bool = False, status: str | None = None, technique: str | None = None,
                text: str | None = None, total: int | None = None, after: str | None = None,
                before: str | None = None) -> dict[str, Any]:
    """One page of the trial table, filtered and sorted by the store (never the whole run in memory).

    ``total`` is the number of matching trials when the caller knows it already (the dashboard keeps
    it while the run's trial count stays the same): counting them is a scan when the table is filtered.

    ``after`` (or ``before``) is the ``last`` (or ``first``) cursor of a page this returned: the page that
    follows (precedes) it is then read from that row (:meth:`~perftune.store.Store.trial_keyset_page`), at
    the same cost however deep it is; ``offset`` is only reported back (where the caller says the page
    is). Without a cursor the page is read at ``offset``.

    Raises:
        StoreError: no such run, or an unknown sort key.
        PerftuneError: a cursor that is not one of ``first``/``last``, or both of them.
    """
    from perftune.store import trial_sort_key

    info = store.get_run(ref)
    limit = max(1, min(int(limit), 500))
    filters = {"order_by": sort, "descending": descending, "status": status or None,
               "technique": technique or None, "text": text or None, "count": total is None}
    if after or before:
        counted, page = store.trial_keyset_page(info.id, after=_cursor(after), before=_cursor(before),
                                                limit=limit, **filters)
    else:
        counted, page = store.trial_page(info.id, offset=offset, limit=limit, **filters)
    total = counted if total is None else total
    _trial_ids((t.id for t in page), info)
    return {
        "total": total, "offset": offset, "limit": limit, "sort": sort, "descending": descending,
        # Where the page starts and ends in its order: ``after=last`` reads the next page, ``before=first``
        # the one before.
        "first": json.dumps(trial_sort_key(page[0], sort)) if page else None,
        "last": json.dumps(trial_sort_key(page[-1], sort)) if page else None,
        "rows": _trial_rows(page),
    }


def _trial_rows(trials: Iterable[Any]) -> list[dict[str, Any]]:
    """The trial table's rows (the dashboard's pages and the report's inlined table)."""
    return [{"trial": t.id, "status": t.status.value, "value": t.value,
             "reason": None if t.ok else failure_label(t.status.value, t.reason),
             "samples": len(t.samples), "technique": t.technique, "worker": t.worker,
             "duration_s": None if t.started_at is None or t.finished_at is None
             else round(t.finished_at - t.started_at, 4),
             "config": t.config.to_json()} for t in trials]


def report_trials(store: Any, ref: str | int, *, limit: int,
                  keep: Iterable[int] = ()) -> dict[str, Any]:
    """The trial table the report inlines: every trial of a run of at most ``limit`` trials; of a larger
    run, the first ones by ticket and always its best trial, its final answer's and the tickets of
    ``keep`` (such as a Pareto front), ``limit`` rows in all. Not the dashboard's page size: the report's
    table is the run's, filtered and sorted in the page.

    Returns:
        ``{"rows": [...], "n_trials": n, "note": str | None}``: the rows in ticket order, the run's trial
        count, and the line the page shows beside its table when rows were left out (else None).

    Raises:
        StoreError: no such run.
    """
    info = store.get_run(ref)
    limit = max(1, int(limit))
    n_trials = store.count(info.id)
    if n_trials <= limit:
        _, trials = store.trial_page(info.id, limit=None, count=False)
        note = None
    else:
        best = store.best(info.id)
        answer = _answer(store, info)
        wanted = [t for t in (best.id if best is not None else None, answer.trial) if t is not None]
        wanted = list(dict.fromkeys([*wanted, *keep]))[:limit // 2]
        _trial_ids(wanted, info)
        chosen = set(wanted)
        _, first = store.trial_page(info.id, limit=limit, count=False)
        _trial_ids((t.id for t in first), info)
        plain = [t for t in first if t.id not in chosen][:limit - len(wanted)]
        found = [t for t in first if t.id in chosen]
        missing = [i for i in wanted if i not in {t.id for t in found}]
        if missing:
            found += store.trial_page(info.id, trial_ids=missing, limit=None, count=False)[1]
        trials = sorted(plain + found, key=lambda t: t.id)
        end = plain[-1].id if plain else -1
        n_after = sum(1 for t in trials if t.id > end)
        after = "" if not n_after else (" and the best trial after them" if n_after == 1 else
                                        f" and {n_after} best trials after them")
        note = (f"table: the first {len(trials) - n_after} of {n_trials} trials{after} (the dashboard "
                "or perftune export has them all)")
    _trial_ids((t.id for t in trials), info)
    return {"rows": _trial_rows(trials), "n_trials": n_trials, "note": note}


#: The longest page cursor read (the JSON of ``[key, ticket]``; a key is a value, a status or a duration).
_CURSOR_MAX_CHARS = 4096


def _cursor(text: str | None) -> tuple[Any, int] | None:
    """A page's ``first``/``last`` cursor (the JSON of ``[key, ticket]``) back as the store's tuple."""
    if not text:
        return None
    bad = PerftuneError(f"trial table: {text[:60]!r} is not a page cursor (a page's 'first' or 'last')")
    # A cursor is short: a longer text is no page's (and a deep nesting would exhaust the parser's stack).
    if len(text) > _CURSOR_MAX_CHARS:
        raise bad
    try:
        key, ticket = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        raise bad from None
    if isinstance(ticket, bool) or not isinstance(ticket, int) or isinstance(key, list | dict):
        raise bad
    # The database's numbers: 64-bit integers and finite floats (another would overflow the query).
    for number in (ticket, key):
        if isinstance(number, int) and not isinstance(number, bool) and not -(2**63) <= number < 2**63:
            raise bad
        if isinstance(number, float) and not math.isfinite(number):
            raise bad
    return key, ticket


def _encode_column(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """A parameter's values as numbers (categories as their index, with the category names)."""
    if all(isinstance(v, bool) for v in values):
        return [float(v) for v in values], ["false", "true"]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], None
    keys = [json.dumps(v, sort_keys=True) if not isinstance(v, str) else v for v in values]
    cats = sorted(set(keys))
    index = {c: i for i, c in enumerate(cats)}
    return [float(index[k]) for k in keys], cats


def _importance(columns: dict[str, list[float]], y: list[float], seed: int = 0) -> dict[str, float]:
    """Permutation importance of a random forest on held-out trials (see :data:`IMPORTANCE_METHOD`)."""
    import numpy as np
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    names = list(columns)
    if len(y) < 8 or not names:
        return {}
    x = np.array([columns[n] for n in names], dtype=float).T
    target = np.log(np.maximum(np.array(y, dtype=float), 1e-300)) if min(y) > 0 else np.array(y, dtype=float)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = max(2, len(y) // 4)
    test, train = order[:n_test], order[n_test:]
    forest = RandomForestRegressor(n_estimators=60, min_samples_leaf=2, random_state=seed, n_jobs=1)
    forest.fit(x[train], target[train])
    result = permutation_importance(forest, x[test], target[test], n_repeats=5, random_state=seed, n_jobs=1)
    raw = np.maximum(result.importances_mean, 0.0)
    total = float(raw.sum())
    return {n: (float(v) / total if total > 0 else 0.0) for n, v in zip(names, raw, strict=True)}


def parameter_view(store: Any, ref: str | int, *, max_trials: int = 2000) -> dict[str, Any]:
    """Parallel coordinates, slice plots and parameter importance of a run's successful trials.

    At most ``max_trials`` configurations are decoded: the best quarter of them and an even sample of
    the rest, so that a run of 100,000 trials answers as fast as one of 2,000. The plots show the
    ``12`` most important parameters (a flags run has hundreds).

    Raises:
        StoreError: no such run.
    """
    info = store.get_run(ref)
    n_ok = store.count(info.id, Status.OK)
    if n_ok <= max_trials:
        _, trials = store.trial_page(info.id, status="ok", limit=None)
    else:
        n_best = max_trials // 4
        _, best = store.trial_page(info.id, status="ok", order_by="value", descending=info.goal == "max",
                                   limit=n_best, count=False)
        ok_ids = [r.trial_id for r in store.trial_summaries(info.id) if r.status == Status.OK.value]
        taken = {t.id for t in best}
        rest = [ok_ids[i] for i in _thin(len(ok_ids), max_trials - n_best)]
        _, sample = store.trial_page(info.id, trial_ids=[i for i in rest if i not in taken], limit=None,
                                     count=False)
        trials = sorted(best + sample, key=lambda t: t.id)
    _trial_ids((t.id for t in trials), info)
    trials = [t for t in trials if t.value is not None and math.isfinite(t.value)]
    configs = [json.loads(t.config.to_json()) for t in trials]
    names: list[str] = []
    for c in configs:
        names.extend(k for k in c if k not in names)
    columns: dict[str, list[float]] = {}
    categories: dict[str, list[str] | None] = {}
    for n in names:
        present = [c[n] for c in configs if n in c]
        if len(present) != len(configs):
            continue  # conditional parameter: not active in every trial, left out of the joint views
        try:
            columns[n], categories[n] = _encode_column(present)
        except TypeError:
            continue
        if len(set(columns[n])) < 2:
            del columns[n], categories[n]  # never varied: nothing to show
    y = [float(t.value) for t in trials]  # type: ignore[arg-type]
    importance = _importance(columns, y)
    ranked = sorted(columns, key=lambda n: -importance.get(n, 0.0))[:_MAX_PARAMS_SHOWN]
    return {
        "n_trials": len(trials), "n_ok": n_ok, "sampled": n_ok > max_trials,
        "params": ranked, "values": y, "trial": [t.id for t in trials], "goal": info.goal or "min",
        "columns": {n: columns[n] for n in ranked}, "categories": {n: categories[n] for n in ranked},
        "importance": [[n, round(v, 4)] for n, v in sorted(importance.items(), key=lambda p: -p[1])][:30],
        "importance_method": IMPORTANCE_METHOD if importance else
        "not enough successful trials (8 or more) or no parameter that varied",
        "n_params": len(names),
    }


#: The most runs :func:`compare_view` draws on one axis (each costs a run's whole view).
COMPARE_MAX_RUNS = 20


def compare_view(store: Any, refs: Sequence[str | int]) -> dict[str, Any]:
    """Best-so-far curves of two or more runs of the same space, on one axis.

    A run named twice (by name and by id too) is drawn once; at most :data:`COMPARE_MAX_RUNS` runs.

    Raises:
        PerftuneError: fewer than two runs, more than COMPARE_MAX_RUNS, runs of different search spaces or
            runs that optimise different things (:func:`check_comparable`).
        StoreError: no such run.
    """
    unique = list(dict.fromkeys(refs))
    if len(unique) > COMPARE_MAX_RUNS:
        raise PerftuneError(f"compare: at most {COMPARE_MAX_RUNS} runs at a time ({len(unique)} given)")
    found = [store.get_run(r) for r in unique]
    infos = list({i.id: i for i in found}.values())
    if len(infos) < 2:
        raise PerftuneError("compare: give two or more different runs")
    check_comparable(infos)
    runs = []
    for info in infos:
        view = run_view(store, info.id)
        conv = view["convergence"]
        runs.append({"run": view["run"], "best_trial": conv["best_trial"], "best_value": conv["best_value"],
                     "best_elapsed_s": conv["best_elapsed_s"], "n_trials": view["n_trials"],
                     "best": view["best"]})
    return {"runs": runs, "goal": infos[0].goal or "min", "metric": infos[0].metric,
            "unit": metric_unit(infos[0].metric)}


def check_comparable(infos: Sequence[Any]) -> None:
    """Refuse, in one line, runs that cannot be compared: of different search spaces, or optimising
    different things (another goal, metric or set of objectives), whose values a speedup cannot relate.

    Raises:
        PerftuneError: naming each run's space, or what each run optimises.
        StoreDamageError: a run's stored objectives are not what perftune writes.
    """
    prints = {i.space_fingerprint for i in infos}
    if len(prints) > 1:
        listed = ", ".join(f"{i.name} ({(i.space_fingerprint or 'no space')[:8]})" for i in infos)
        raise PerftuneError(f"compare: the runs do not share a search space: {listed}")
    if len({_aim(i) for i in infos}) > 1:
        listed = ", ".join(f"{i.name} {_aim_text(i)}" for i in infos)
        raise PerftuneError(f"compare: the runs optimise different things: {listed}")
