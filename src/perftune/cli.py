"""The ``perftune`` command line.

Argument parsing lives here only. Every user mistake surfaces as one line on stderr and exit code 2;
nothing already measured is lost.

Example:
    $ perftune examples
    $ perftune run perftune-examples/python_metric/task.toml --budget 50
    $ perftune runs
    $ perftune best latest
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

import click

from perftune.errors import PerftuneError, StoreError

__all__ = ["main"]

JSON_SCHEMA_VERSION = 1


class _Cli(click.Group):
    """A click group that turns perftune's user errors (and usage errors) into one clear line."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as error:
            where = f" (see '{error.ctx.command_path} --help')" if error.ctx is not None else ""
            click.echo(f"perftune: error: {_printable(error.format_message())}{where}", err=True)
            sys.exit(2)
        except click.ClickException as error:
            click.echo(f"perftune: error: {_printable(error.format_message())}", err=True)
            sys.exit(error.exit_code)
        except click.Abort:
            with _interrupts_ignored():
                click.echo("perftune: interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PerftuneError as error:
            click.echo(f"perftune: error: {_printable(str(error))}", err=True)
            sys.exit(2)
        except ImportError as error:
            # A feature of an extra reached without it: the message names the extra to install.
            if "pip install 'perftune[" not in str(error):
                raise
            click.echo(f"perftune: error: {_printable(str(error))}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            with _interrupts_ignored():
                click.echo("perftune: interrupted", err=True)
            sys.exit(130)


#: C0 and C1 control characters but tab and newline: what a terminal would act on rather than show; and
#: Unicode's format characters (category Cf: bidirectional overrides and isolates such as U+202E, zero-width
#: characters, tags) and line/paragraph separators, which reorder or hide what a line shows.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")


def _shown(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _printable(text: str) -> str:
    """``text`` with each terminal control character shown as ``\\xNN`` (a format character such as a
    bidirectional override as ``\\uNNNN``): a candidate's output and whatever the store holds are
    untrusted, and an escape sequence in them (clear the screen, set the window title, move the cursor
    over earlier lines) must not reach the user's terminal as one, nor an override reverse what it shows."""
    return _CONTROL.sub(lambda m: _shown(m.group()), text)


def _escape(text: str) -> str:
    """Untrusted text for rich: printable (:func:`_printable`) and its markup shown, not parsed."""
    from rich.markup import escape

    return escape(_printable(text))


def _text(text: str) -> Any:
    """Untrusted text as a rich ``Text`` cell: printable, never parsed as markup."""
    from rich.text import Text

    return Text(_printable(text))


def _emit_json(payload: dict[str, Any]) -> None:
    click.echo(json.dumps({"schema": JSON_SCHEMA_VERSION, **payload}, indent=2, default=str))


#: Trials of a run when neither --budget nor the task file's tuning.budget says.
DEFAULT_EVALS = 50


def _factor(imp: dict[str, Any], key: str) -> str:
    """One number of an improvement's JSON as the text prints it: ``3.871x``, or ``+100.0%`` where the values
    reach 0 or below and there is no ratio (``"ratio": false``)."""
    from perftune.report import format_factor

    return format_factor(float(imp[key]), bool(imp.get("ratio", True)))


def _budget_option(f: Any) -> Any:
    return click.option("--budget", "budget", multiple=True, metavar="N|DURATION",
                        help="Trials (200) or wall time (90s, 10m, 1h); give twice for both, the first "
                             "reached ends the run. Default: the task's tuning.budget, else "
                             f"{DEFAULT_EVALS} trials (a gcc flags task: 5m); resume: the run's own budget, "
                             "+N for N more.")(f)


def _progress_options(f: Any) -> Any:
    f = click.option("--progress-every", "progress_every", type=click.FloatRange(min=0.1), default=None,
                     metavar="S", help="When the output is not a terminal: a progress line every S seconds "
                                       "(default 10).")(f)
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress lines (the result is still printed).")(f)


def _common_options(f: Any, *, resumed: bool = False) -> Any:
    f = _budget_option(f)
    f = _progress_options(f)
    f = click.option("--scheduler", default=None, metavar="ADDRESS",
                     help="With --executor dask: tcp://host:8786, "
                          "or local:N for a local cluster of N workers.")(f)
    f = click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                     help="Where evaluations run: local processes or a Dask cluster.")(f)
    # A resumed run keeps its seed and lag: the options may only repeat them.
    keeps = " A resumed run keeps the run's own: only that value is accepted." if resumed else ""
    f = click.option("--lag", type=click.IntRange(min=0), default=None,
                     help="Seeded runs: results reach the search this many trials late (default 8); "
                          f"at most lag+1 evaluations are in flight.{keeps}")(f)
    f = click.option("--workers", type=click.IntRange(min=1, max=1024), default=None,
                     help="Evaluations in flight (local processes).")(f)
    f = click.option("--seed", type=click.IntRange(min=0), default=None,
                     help=f"Seed: makes the run reproducible.{keeps}")(f)
    return click.option("--store", "store", default=None, metavar="URL",
                        help="Results store (overrides the global --store).")(f)


def _resume_options(f: Any) -> Any:
    return _common_options(f, resumed=True)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perftune")
@click.option("--store", envvar="PERFTUNE_STORE", default=None, metavar="URL",
              help="Results store: a SQLite path, a sqlite:/// or postgresql:// URL "
                   "(default: ./perftune.db, or $PERFTUNE_STORE).")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seed for every run started by this command.")
@click.option("--workers", type=click.IntRange(min=1, max=1024), default=None,
              help="Evaluations in flight (local processes).")
@_budget_option
@click.pass_context
def cli(ctx: click.Context, store: str | None, seed: int | None, workers: int | None,
        budget: tuple[str, ...]) -> None:
    """perftune: autotune programs, compilers and kernels.

    \b
    Start here:
      perftune examples             # copy the bundled examples to ./perftune-examples
      perftune run perftune-examples/python_metric/task.toml --budget 40
      perftune runs                 # what is in the store
      perftune show latest          # one run: best, history, failures
      perftune best latest          # the best configuration as JSON
    """
    ctx.ensure_object(dict)
    ctx.obj.update(store=store, seed=seed, workers=workers, budget=budget)


def _import_in_background(module: str) -> None:
    """Start importing ``module`` in a daemon thread; the next ``import`` of it waits for that one."""
    import contextlib
    import importlib
    import threading

    def load() -> None:
        with contextlib.suppress(Exception):  # the next import of it, in the main thread, says why
            importlib.import_module(module)

    threading.Thread(target=load, name=f"perftune-import-{module}", daemon=True).start()


def _opt(ctx: click.Context, key: str, value: Any) -> Any:
    """A subcommand's option, else the global one."""
    if value is None or value == ():
        return ctx.obj.get(key)
    return value


def _open(ctx: click.Context, store: str | None = None, *, must_exist: bool = True,
          read_only: bool = False) -> Any:
    """The store; commands that only read (and resume) refuse to create an empty one from a typo, and
    commands that only read (``read_only``) write nothing to it: no schema upgrade, no WAL switch."""
    from perftune.store import open_store

    st = open_store(_opt(ctx, "store", store), must_exist=must_exist, read_only=read_only)
    # Closed when the command ends, error or not: a SQLite store's log is folded into its file then.
    ctx.call_on_close(st.close)
    return st


def _trial_json(trial: Any) -> dict[str, Any] | None:
    if trial is None:
        return None
    return {
        "id": trial.id, "status": trial.status.value, "value": trial.value,
        "config": json.loads(trial.config.to_json()), "metrics": trial.metrics, "samples": trial.samples,
        "reason": trial.reason, "technique": trial.technique, "worker": trial.worker,
        "started_at": trial.started_at, "finished_at": trial.finished_at,
        **({"intermediate": {str(k): v for k, v in sorted(trial.intermediate.items())}}
           if getattr(trial, "intermediate", None) else {}),
    }


def _console() -> Any:
    """A rich console for user and candidate strings: no emoji codes, no wrapping inside a line.

    Strings given to it still need ``rich.markup.escape`` (or a ``Text``): a ``[/]`` in a name or a
    reason is then printed as typed, and a long command line stays one line that can be pasted.
    """
    from rich.console import Console

    # highlight=False: rich's highlighter runs a dozen regular expressions over every string printed, some
    # of them in quadratic time on a long name from the store; it would also colour parts of a store's text.
    return Console(emoji=False, soft_wrap=True, highlight=False)


def _print_result(result: Any, *, as_json: bool, answer: Any = None) -> None:

    from perftune.report import FinalAnswer, with_failed_default

    # A default configuration that failed or broke a constraint leaves no improvement: say so, as show does.
    answer = with_failed_default(answer if answer is not None else FinalAnswer(None), result.default)
    imp = answer.improvement
    # The older flat fields hold ratios: none where the values reach 0 or below ("improvement" says why).
    ratio = imp if imp is not None and imp.ratio else None
    ci = None if ratio is None else {"speedup": ratio.estimate, "low": ratio.low, "high": ratio.high,
                                     "confidence": ratio.confidence}
    objectives: Any = getattr(result, "objectives", None)
    multi = objectives is not None and objectives.is_multi
    if as_json:
        doc = {
            "run": {"id": result.run_id, "name": result.run_name}, "stop_reason": result.stop_reason,
            "counts": result.counts(), "best": _trial_json(result.best),
            "default": _trial_json(result.default),
            "improvement_over_default": None if ratio is None else ratio.to_json()["estimate"],
            "speedup_ci": ci,
            "improvement": None if imp is None else imp.to_json(), "note": answer.note,
        }
        if multi:
            doc["objectives"] = objectives.to_dict()
            doc["pareto"] = _pareto_json(objectives.names, objectives.goals, result.pareto)  # as show --json
        _emit_json(doc)
        return
    console = _console()
    counts = ", ".join(f"{n} {k}" for k, n in sorted(result.counts().items()))
    console.print(f"run [bold]{_escape(str(result.run_name))}[/] (id {result.run_id}): "
                  f"{len(result.trials)} trials ({counts}); "
                  f"stopped: {_escape(result.stop_reason or 'budget')}")
    if result.best is None:
        console.print("[red]no successful trial[/]")
        for line in answer.lines():
            console.print(_escape(line))
        return
    if result.default is not None and result.default.ok:
        console.print(f"default configuration: {result.default.value:.6g}")
    console.print(f"best: [bold green]{result.best.value:.6g}[/] "
                  f"(trial {result.best.id}, by {_escape(str(result.best.technique))})")
    console.print(f"best configuration: {_escape(result.best.config.to_json())}")
    for line in answer.lines():
        console.print(_escape(line))
    if multi:
        front = result.pareto
        names = ", ".join(f"{n} ({g})" for n, g in zip(objectives.names, objectives.goals, strict=True))
        console.print(f"Pareto front of {names}: {len(front)} trials")
        for t in front:
            values = "  ".join(f"{n}={t.metrics.get(n, t.value):.6g}" for n in objectives.names)
            console.print(f"  trial {t.id}: {values}  {_escape(t.config.to_json())}")


@cli.command("run")
@click.argument("task", type=click.Path(dir_okay=False))
@_common_options
@click.option("--name", default=None, help="Name of the run (unique in the store; generated if absent).")
@click.option("--warm-start", "warm_start", multiple=True, metavar="SOURCE",
              help="Measure early the best-ranked configurations of SOURCE: a run in the store, another "
                   "store, or a T4 / Kernel Tuner cache file of the same space (repeatable: ranks combined).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def run_cmd(ctx: click.Context, task: str, store: str | None, seed: int | None, workers: int | None,
            lag: int | None, budget: tuple[str, ...], executor: str, scheduler: str | None, name: str | None,
            warm_start: tuple[str, ...], as_json: bool, quiet: bool = False,
            progress_every: float | None = None) -> None:
    """Tune the program described by the task file TASK (TOML)."""
    _check_scheduler(executor, scheduler)
    ctx.obj["progress"] = _progress_settings(as_json, quiet, progress_every)
    from perftune import targets
    from perftune.drive import Budget, Tuner, parse_budget

    # The store (SQLAlchemy: a few tenths of a second) is imported while the task loads and its default
    # configuration runs once (not earlier: two threads importing at once wait for each other); _open
    # below waits for it (the import lock), so it is done before anything forks.
    _import_in_background("perftune.store")

    kind = targets.task_kind(task)
    if kind != targets.DEFAULT_KIND:
        _run_target(ctx, task, targets.from_task_file(task), store, seed, workers, lag, budget, executor,
                    scheduler, as_json, warm_start, name)
        return
    command_target = targets.get(kind).from_task(task, {})  # type: ignore[attr-defined]
    spec = command_target.task
    limit = parse_budget(_opt(ctx, "budget", budget)) if _opt(ctx, "budget", budget) else spec.budget
    if limit is None:
        limit = Budget(evals=DEFAULT_EVALS)
    seed = _opt(ctx, "seed", seed) if _opt(ctx, "seed", seed) is not None else spec.seed
    n_workers = _opt(ctx, "workers", workers) or spec.workers or 1
    st = _open(ctx, store, must_exist=False)
    seeds = list(spec.seeds)
    sources = [_warm_start_source(st, source) for source in warm_start]
    limit = Budget.coerce(limit)
    _warn_lag(seed, lag, n_workers)
    from perftune.store import capture_environment

    # The git commit recorded is the tuned program's (the task's folder), not that of the current folder.
    environment = capture_environment(os.path.dirname(os.path.abspath(task)))
    settings = {"task": os.path.abspath(task), "task_fingerprint": _task_fingerprint(task)}
    for attempt in range(50):
        try:
            # Several objectives: goal={metric: goal} (the primary first); constraints in any run.
            goal: Any = dict(zip(spec.metrics, spec.goals, strict=True)) if spec.metrics else spec.goal
            tuner = Tuner(spec.space, goal=goal, seed=seed, store=st, seeds=seeds,
                          metric=None if spec.metrics else spec.metric, constraints=list(spec.constraints),
                          name=name or _free_name(st, spec.name), settings=settings, budget=limit, lag=lag,
                          warm_start=sources or None,
                          technique=spec.technique or "default", environment=environment)
            break
        except StoreError as error:
            # Another driver of the same task took the name between our look and our insert.
            if name or "already exists" not in str(error) or attempt == 49:
                raise
    _note_warm_start_skipped(st, tuner)
    _tune_task(tuner, command_target, limit, n_workers, executor, scheduler, as_json, store=st)


def _note_warm_start_skipped(st: Any, tuner: Any) -> None:
    """Say which runs of a --warm-start store were left out (no successful configuration in this space)."""
    if tuner.run_id is None:
        return
    warm = (st.get_run(tuner.run_id).settings or {}).get("warm_start") or {}
    skipped = warm.get("skipped") if isinstance(warm, dict) else None
    if skipped:
        click.echo(f"perftune: note: warm start: left out {_printable(', '.join(map(str, skipped)))} "
                   "(no successful configuration valid in this space)", err=True)


def _run_target(ctx: click.Context, task: str, target: Any, store: str | None, seed: int | None,
                workers: int | None, lag: int | None, budget: tuple[str, ...], executor: str,
                scheduler: str | None, as_json: bool, warm_start: tuple[str, ...] = (),
                name: str | None = None) -> None:
    """``perftune run`` of a task file with a ``[target]`` table: the registry's target of that kind."""
    from perftune.targets import TaskRunner

    # A target that drives its own run (TaskRunner) takes no technique or seeds from the task file.
    tuning = _target_tuning(task, target, searched=not isinstance(target, TaskRunner))
    items = _opt(ctx, "budget", budget) or tuning.get("budget")
    if isinstance(items, int | str):
        items = (items,)
    seed = _opt(ctx, "seed", seed)
    seed = tuning.get("seed") if seed is None else seed
    n_workers = _opt(ctx, "workers", workers) or tuning.get("workers") or 1
    if isinstance(target, TaskRunner):
        if executor != "local":
            raise PerftuneError(f"{target.kind}: builds and timed runs stay on this machine; "
                                "--executor dask is not supported")
        if warm_start:  # this target drives its own Tuner: refused rather than silently ignored
            raise PerftuneError(f"{target.kind}: --warm-start is not supported for this target yet")
        st = _open(ctx, store, must_exist=False)
        # Like the run name of any task file: --name as given; else a second run of the same file gets
        # "-2", not an error.
        name = name or _free_name(st, tuning.get("name") or _task_stem(task))
        limit = list(items) if items else ["5m"]
        progress = _flags_progress(limit, ctx.obj.get("progress"))
        try:
            _warn_lag(seed, lag, n_workers)
            result = target.run_task(budget=limit, workers=n_workers, store=st, seed=seed, name=name,
                                     on_trial=progress, lag=lag)
        except KeyboardInterrupt:
            import shlex

            with _interrupts_ignored():
                progress.close()
                shown = _printable(shlex.quote(name))
                click.echo(f"perftune: interrupted; the trials measured are kept in run {name!r} (perftune "
                           f"show {shown}); a {target.kind} run cannot be resumed: run the task again",
                           err=True)
            sys.exit(130)
        progress.close()
        _print_flags_result(result, as_json, st)
        return
    _tune_registered_target(ctx, task, target, store, seed, n_workers, lag, items, executor, scheduler,
                            as_json, name or tuning.get("name"), warm_start, tuning.get("seeds", []),
                            tuning.get("technique", "default"))


def _task_stem(task: str) -> str:
    return os.path.splitext(os.path.basename(task))[0] or "run"


def _tune_registered_target(ctx: click.Context, task: str, target: Any, store: str | None, seed: int | None,
                            workers: int, lag: int | None, items: Any, executor: str, scheduler: str | None,
                            as_json: bool, name: str | None, warm_start: tuple[str, ...] = (),
                            seeds: list[dict[str, Any]] | None = None, technique: str = "default") -> None:
    """The driver's loop over any registered target: its space, its evaluate, its verify for the winner;
    ``seeds`` are measured first (after the default) and ``technique`` searches (``[tuning]``)."""
    from perftune.drive import Budget, Tuner, parse_budget
    from perftune.report import answer_of, record_final_answer
    from perftune.targets import TargetObjective

    limit = parse_budget(list(items)) if items else Budget(evals=DEFAULT_EVALS)
    _warn_lag(seed, lag, workers)
    st = _open(ctx, store, must_exist=False)
    sources = [_warm_start_source(st, source) for source in warm_start]
    tuner = Tuner(target.space(), goal=target.goal, seed=seed, store=st, lag=lag, budget=limit,
                  warm_start=sources or None, seeds=seeds or (), technique=technique,
                  name=_free_name(st, name or _task_stem(task)),
                  settings={"target": target.kind, "task_fingerprint": _task_fingerprint(task)})
    _note_warm_start_skipped(st, tuner)
    try:
        result = tuner.run(TargetObjective(target), limit, workers=workers, executor=executor,
                           scheduler=scheduler, progress=ctx.obj.get("progress") or False)
    except KeyboardInterrupt:
        with _interrupts_ignored():
            click.echo("perftune: interrupted", err=True)
        sys.exit(130)
    searched = result.best
    result = _verified(result, target.verify)
    note = None
    if result.best is None and searched is not None:
        note = "no verified winner among the best trials: the run has no final answer"
    answer = answer_of(result.best, result.default, goal=target.goal, note=note)
    record_final_answer(st, result.run_id, answer)
    _print_result(result, as_json=as_json, answer=answer)
    if result.best is not None and not as_json:
        click.echo(target.explain(result.best.config))
    _exit_without_answer(result)


def _target_tuning(task: str, target: Any, *, searched: bool = True) -> dict[str, Any]:
    """The run name and ``[tuning]`` settings of a ``[target]`` (``[tuning] name``, else ``name``); with
    ``searched`` (the driver's loop searches the target's space), ``seeds`` and ``technique`` too."""
    import tomllib

    from perftune.targets import read_task_text

    data = tomllib.loads(read_task_text(task))
    tuning = data.get("tuning", {})
    if not isinstance(tuning, dict):
        raise PerftuneError(f"{task}: key tuning: expected a table [tuning]")
    known = {"name", "budget", "seed", "workers"} | ({"seeds", "technique"} if searched else set())
    unknown = sorted(set(tuning) - known)
    if unknown:
        raise PerftuneError(f"{task}: key tuning.{unknown[0]}: not used by the {target.kind} kind "
                            f"(known: {', '.join(sorted(known))})")
    out: dict[str, Any] = {}
    name = tuning.get("name", data.get("name"))
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            key = "tuning.name" if "name" in tuning else "name"
            raise PerftuneError(f"{task}: key {key}: expected a run name (a non-empty string)")
        out["name"] = name
    budget = tuning.get("budget")
    if budget is not None:
        if isinstance(budget, dict) and set(budget) <= {"evals", "seconds"}:  # as in any task file
            budget = [str(budget[k]) + ("s" if k == "seconds" else "") for k in sorted(budget)]
        if isinstance(budget, bool) or not isinstance(budget, int | str | list):
            raise PerftuneError(f"{task}: key tuning.budget: expected trials (200), a time (90s, 10m) "
                                "or { evals = N, seconds = S }")
        out["budget"] = tuple(str(b) for b in budget) if isinstance(budget, list) else str(budget)
    for key, least in (("seed", 0), ("workers", 1)):
        value = tuning.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise PerftuneError(f"{task}: key tuning.{key}: expected an integer of at least {least}")
            out[key] = value
    if "technique" in tuning:
        out["technique"] = _task_technique(task, tuning["technique"])
    if "seeds" in tuning:
        out["seeds"] = _task_seeds(task, tuning["seeds"], target.space())
    return out


def _task_technique(task: str, name: Any) -> str:
    """``[tuning] technique`` of a ``[target]`` task: a name that ``perftune techniques`` lists."""
    from perftune import search

    if not isinstance(name, str):
        raise PerftuneError(f"{task}: key tuning.technique: expected a technique name (a string), "
                            f"got {name!r}")
    try:
        search.get(name)
    except PerftuneError:
        known = [*search.names(), *search.ALIASES]
        raise PerftuneError(f"{task}: key tuning.technique: unknown technique {name!r} "
                            f"(known: {', '.join(known)})") from None
    return name


def _task_seeds(task: str, raw: Any, space: Any) -> list[dict[str, Any]]:
    """``[tuning] seeds`` of a ``[target]`` task: complete, valid configurations of the target's space."""
    from perftune.space import Config

    if not isinstance(raw, list):
        raise PerftuneError(f"{task}: key tuning.seeds: expected a list of inline tables of parameter values")
    seeds = []
    for i, values in enumerate(raw):
        key = f"{task}: key tuning.seeds[{i}]"
        if not isinstance(values, dict):
            raise PerftuneError(f"{key}: expected an inline table of parameter values, got {values!r}")
        unknown = [k for k in values if k not in space.params]
        if unknown:
            raise PerftuneError(f"{key}: unknown parameter {unknown[0]!r} "
                                f"(parameters: {', '.join(space.names)})")
        try:
            config = Config.from_json(values, space)
        except PerftuneError as error:
            raise PerftuneError(f"{key}: {error}") from None
        problem = space.why_invalid(config)
        if problem is not None:
            raise PerftuneError(f"{key}: {problem}")
        seeds.append(dict(config))
    return seeds


def _check_scheduler(executor: str, scheduler: str | None) -> None:
    """Refuse --scheduler without --executor dask, rather than run locally while the user meant a cluster."""
    if scheduler is not None and executor != "dask":
        raise PerftuneError(f"--scheduler {scheduler} needs --executor dask (without it the evaluations run "
                            "in local processes); add --executor dask, or leave --scheduler out")


#: The exit status of ``perftune run`` and ``perftune resume`` when the run has no final answer (no trial
#: succeeded, or none passed its check): what was measured is stored, but a script must not take it.
EXIT_NO_ANSWER = 3


def _exit_without_answer(result: Any) -> None:
    if result.best is None:
        sys.exit(EXIT_NO_ANSWER)


def _warn_lag(seed: int | None, lag: int | None, workers: int) -> None:
    from perftune.drive import DEFAULT_LAG

    effective = DEFAULT_LAG if lag is None else lag
    if seed is not None and workers > effective + 1:
        click.echo(f"perftune: warning: a seeded run keeps at most lag+1 = {effective + 1} evaluations in "
                   f"flight; pass --lag {workers - 1} to use all {workers} workers", err=True)


#: Set by :func:`entry`: the process ends with the command, so an interrupted command ignores any further
#: Ctrl-C until it has exited (called from Python, as by tests, the handlers are given back instead).
_PROCESS_ENDS_WITH_COMMAND = False


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM while the block runs, and in the executable until it exits: what a command
    does once interrupted (give the run back, print its one line, close the store) must not be cut short
    by a second Ctrl-C into a traceback."""
    import signal
    import threading

    before: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, OSError):
                before[signum] = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in () if _PROCESS_ENDS_WITH_COMMAND else before.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _tune_task(tuner: Any, target: Any, limit: Any, workers: int, executor: str, scheduler: str | None,
               as_json: bool, store: Any = None, *, resumed: bool = False) -> None:
    from perftune.report import answer_of, record_final_answer

    spec = target.task

    previous = None
    try:
        if store is not None and tuner.run_id is not None and tuner.n_trials:
            previous = (store.get_run(tuner.run_id).settings or {}).get("result")
            store.record_result(tuner.run_id, None)  # resumed: the old final answer no longer holds
        result = tuner.run(spec.objective, limit, workers=workers, executor=executor, scheduler=scheduler,
                           progress=_current_progress(), timeout_s=spec.timeout_s,
                           on_trial=spec.observe)
    except KeyboardInterrupt:
        with _interrupts_ignored():
            if store is not None and tuner.run_id is not None and tuner.holds_lease:
                # Stopped before its loop began (Ctrl-C or SIGTERM while it started; the loop ends a run it
                # stops itself): nothing new was measured. A new run is marked interrupted (not left
                # 'running'); a resumed one gets back its status and its answer.
                with contextlib.suppress(Exception, KeyboardInterrupt):
                    if not resumed:
                        tuner.close("interrupted")
                    else:
                        tuner.release()
                        if previous is not None:
                            store.record_result(tuner.run_id, previous)
            click.echo(f"perftune: interrupted; resume with: {_resume_command(tuner.run_name, store)}",
                       err=True)
        sys.exit(130)
    searched = result.best
    check = getattr(getattr(spec.objective, "check", None), "expensive", None)
    if getattr(limit, "seconds", None) is not None and check is not None and result.best is not None:
        # The driver's clock ended the search; this final step is bounded by the check's own timeouts.
        click.echo("perftune: note: the winner's expensive check runs after the time budget "
                   "(at most 5 candidates, each within the check's timeouts)", err=True)
    result = _verified(result, target.verify)
    note = None
    if result.best is None and searched is not None:
        note = "no verified winner among the best trials: the run has no final answer"
    elif searched is not None and result.best is not None and result.best.id != searched.id:
        note = (f"the best trial of the search (trial {searched.id}) failed its check: "
                f"the final answer is trial {result.best.id}")
    answer = answer_of(result.best, result.default, goal=spec.goal, note=note)
    record_final_answer(store, result.run_id, answer)
    _print_result(result, as_json=as_json, answer=answer)
    _exit_without_answer(result)


def _resume_command(run_name: str | None, store: Any) -> str:
    """A ``perftune resume`` line that works pasted into any folder: the store it used, absolute."""
    import shlex

    words = ["perftune", "resume", str(run_name)]
    if store is None:
        return shlex.join(words)
    if store.dialect == "sqlite":
        return shlex.join([*words, "--store", os.path.abspath(store.location)])
    if store.has_password:
        # Never print a password: the URL is given again the way it should have been given.
        return shlex.join(words) + (" (with the store URL, password included, in $PERFTUNE_STORE "
                                    "or --store @FILE)")
    return shlex.join([*words, "--store", store.url])


def _verified(result: Any, verify: Any, max_checks: int = 5) -> Any:
    """The final winner passes the target's ``verify``; one that fails gives way to the next best."""
    from perftune.targets import verified_winner

    if not any(t.ok for t in result.trials):
        return result
    result.best = verified_winner(result.trials, verify, max_checks=max_checks,
                                  warn=lambda line: click.echo(f"perftune: {line}", err=True))
    return result


def _task_fingerprint(path: str) -> str:
    """A hash of what defines the objective (build, run, objective, check): resuming needs the same."""
    import hashlib
    import tomllib

    from perftune.targets import read_task_text

    data = tomllib.loads(read_task_text(path))
    parts = {key: data.get(key) for key in ("build", "run", "objective", "check", "inputs", "env", "target")}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _free_name(st: Any, base: str, limit: int = 200) -> str:
    """``base``, or ``base-2``, ``base-3``... when runs of that task are already in the store; a long
    ``base`` is shortened so that the name stays within the store's ``limit`` (a task named with 199
    characters could be run once only)."""
    base = base[:limit]
    taken = {info.name for info in st.list_runs()}
    if base not in taken:
        return base
    k = 2
    while (name := f"{base[:limit - len(f'-{k}')]}-{k}") in taken:
        k += 1
    return name


def _when(timestamp: Any) -> str:
    import datetime

    try:
        return datetime.datetime.fromtimestamp(float(timestamp)).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return str(timestamp)


def _warm_start_source(st: Any, source: str) -> Any:
    """A file (T4, Kernel Tuner cache, another store) as itself; anything else names a run of ``st``."""
    if os.path.isfile(source) or "://" in source:
        return source
    return (st, source)


@cli.command("resume")
@click.argument("run")
@_resume_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def resume_cmd(ctx: click.Context, run: str, store: str | None, seed: int | None, workers: int | None,
               lag: int | None, budget: tuple[str, ...], executor: str, scheduler: str | None,
               as_json: bool, quiet: bool = False, progress_every: float | None = None) -> None:
    """Continue RUN from its last checkpoint (any worker count); --budget +100 extends a finished run."""
    _check_scheduler(executor, scheduler)
    ctx.obj["progress"] = _progress_settings(as_json, quiet, progress_every)
    from perftune import targets
    from perftune.drive import Budget, Tuner, parse_budget
    from perftune.targets.command import load_task

    st = _open(ctx, store)
    info = st.get_run(run)
    st.require_intact(info)  # a damaged run: one line naming the column, before its settings are used
    task = (info.settings or {}).get("task")
    if (info.settings or {}).get("target") == "flags":
        raise PerftuneError(f"resume: run {info.name!r} is a gcc flags run, which cannot be resumed (its "
                            "trials stay in the store); run the task or perftune flags again")
    if not task:
        raise PerftuneError(f"resume: run {info.name!r} was not started from a task file; "
                            "resume it with Tuner.resume() in Python")
    if not os.path.exists(task):
        raise PerftuneError(f"resume: the task file of run {info.name!r} is gone: {task}")
    # The lease first: preparing the task runs the default configuration, which a second driver of
    # this run must not do. While another driver drives it, this stops here (exit 2, naming it).
    lease = st.acquire_lease(info.id)
    try:
        recorded = (info.settings or {}).get("task_fingerprint")
        if not isinstance(recorded, str) or not recorded:
            # The task path comes from the store: without the fingerprint nothing says it is the task
            # the run was made with (a store from elsewhere could name any task file here).
            raise PerftuneError(f"resume: run {info.name!r} records no fingerprint of its task file, so "
                                f"{task} cannot be checked to be its task; start a new run "
                                f"(perftune run TASK --warm-start {info.name})")
        spec = load_task(task)
        if recorded != _task_fingerprint(task):
            raise PerftuneError(f"resume: {task} changed its objective (build, run, objective or check) "
                                f"since run {info.name!r} started; "
                                f"start a new run (perftune run --warm-start {info.name})")
        items = list(_opt(ctx, "budget", budget) or ())
        extra = [b for b in items if b.startswith("+")]
        plain = [b for b in items if not b.startswith("+")]
        limit = parse_budget(plain) if plain else None
        more = parse_budget([b[1:] for b in extra]) if extra else None
        tuner = Tuner.resume(info.id, st, space=spec.space, lease=lease)
        # The run's own seed and lag may be given again (a command line repeated with resume); others not.
        if (seed is not None and seed != tuner.seed) or (lag is not None and lag != tuner.lag):
            raise PerftuneError(f"resume: run {info.name!r} keeps its seed ({tuner.seed}) and lag "
                                f"({tuner.lag}); start a new run to change them")
    except BaseException:
        st.release_lease(lease)
        raise
    if more is not None:
        # N more measured: the trials in flight when the run stopped are measured again among them.
        evals = None if more.evals is None else tuner.n_trials - tuner.n_waiting + more.evals
        limit = Budget(evals=evals, seconds=more.seconds).merged(limit)
    if limit is None:
        stored = (info.settings or {}).get("budget") or {}
        kept = {k: v for k, v in stored.items() if v is not None}
        limit = Budget(**kept) if stored else Budget(evals=DEFAULT_EVALS)
    n_workers = _opt(ctx, "workers", workers) or spec.workers or 1
    if tuner.seed is not None and n_workers > tuner.lag + 1:
        click.echo(f"perftune: warning: this seeded run keeps at most lag+1 = {tuner.lag + 1} "
                   "evaluations in flight", err=True)
    if limit.evals is not None and tuner.n_trials >= limit.evals and not tuner.n_waiting:
        # Nothing to do (no ticket of a killed driver waits to be measured again either): the run, its
        # budget, its end, its status and its answer stay as they are.
        tuner.release()
        click.echo(f"perftune: note: run {info.name!r} has {tuner.n_trials} trials, as many as a budget of "
                   f"{limit.evals} allows: nothing to measure, the run is unchanged (--budget +N measures "
                   f"N more; its result: perftune show {info.name})", err=True)
        return
    # The run's settings say the budget it runs with now (show and the report print them).
    st.update_settings(info.id, {"budget": limit.__dict__})
    _tune_task(tuner, targets.get("command")(spec), limit, n_workers, executor, scheduler, as_json, store=st,
               resumed=True)


@cli.command("work")
@click.argument("run")
@click.option("--store", "store", default=None, metavar="URL",
              help="The shared store: postgresql://... for many machines, a SQLite file on one.")
@click.option("--task", "task", type=click.Path(dir_okay=False), default=None,
              help="Create RUN from this task file when the store has none (every worker may pass it: the "
                   "first creates the run); for an existing run, its task file at this path.")
@_budget_option
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of a run created here.")
@click.option("--max-trials", "max_trials", type=click.IntRange(min=1), default=None,
              help="Leave after measuring this many trials (the run goes on with the other workers).")
@click.option("--heartbeat", "heartbeat_s", type=click.FloatRange(min=0, min_open=True), default=5.0,
              show_default=True, metavar="S", help="Seconds between a worker's signs of life.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, metavar="S",
              help="A worker silent this long is dead: its trial is issued again (on one host at once).")
@click.option("--json", "as_json", is_flag=True, help="Print what this worker did as JSON.")
@click.pass_context
def work_cmd(ctx: click.Context, run: str, store: str | None, task: str | None, budget: tuple[str, ...],
             seed: int | None, max_trials: int | None, heartbeat_s: float, timeout_s: float,
             as_json: bool) -> None:
    """Measure trials of the shared run RUN, next to any number of other workers (docs/running-at-scale.md).

    \b
    Every worker, on any machine, runs the same line; one of them proposes for all:
      perftune work conv --task task.toml --budget 500 --store postgresql://tuner@db/perftune
    """
    from perftune.drive import Budget, Tuner, parse_budget
    from perftune.targets.command import load_task

    st = _open(ctx, store, must_exist=task is None)
    try:
        info = st.get_run(run)
    except StoreError:
        if task is None:
            raise
        info = None
    items = _opt(ctx, "budget", budget)
    seed = _opt(ctx, "seed", seed)
    if info is not None:
        # Every worker may run the same line: a --budget or --seed equal to the run's is fine (a worker that
        # joins later, a restarted array job); a different one cannot change the run and is refused.
        kept = info.settings or {}
        if items:
            def given(b: Any) -> dict[str, Any]:
                return {k: v for k, v in (b or {}).items() if v is not None}

            have = given(kept.get("budget"))
            if given(parse_budget(list(items)).__dict__) != have:
                raise PerftuneError(f"work: run {info.name!r} exists with budget {have}; --budget "
                                    f"{' '.join(items)} differs (a run keeps the budget it was created with: "
                                    "leave --budget out to join it)")
        if seed is not None and seed != kept.get("seed"):
            raise PerftuneError(f"work: run {info.name!r} exists with seed {kept.get('seed')}; --seed {seed} "
                                "differs (leave --seed out to join it)")
        stored_task = (info.settings or {}).get("task")
        if not stored_task:
            raise PerftuneError(f"work: run {info.name!r} was not started from a task file; "
                                "attach to it with Tuner.attach() in Python")
        task = task or stored_task
        if not os.path.exists(task):
            raise PerftuneError(f"work: the task file of run {info.name!r} is not on this machine: {task} "
                                "(give its path here with --task)")
        recorded = (info.settings or {}).get("task_fingerprint")
        if not isinstance(recorded, str) or not recorded:
            raise PerftuneError(f"work: run {info.name!r} records no fingerprint of its task file, so "
                                f"{task} cannot be checked to be its task")
        if recorded != _task_fingerprint(task):
            raise PerftuneError(f"work: {task} is not the task of run {info.name!r} (its build, run, "
                                "objective or check differ)")
    assert task is not None
    spec = load_task(task)
    limit = parse_budget(items) if items else spec.budget
    create: dict[str, Any] = {}
    if info is None:
        from perftune.store import capture_environment

        goal: Any = dict(zip(spec.metrics, spec.goals, strict=True)) if spec.metrics else spec.goal
        create = dict(goal=goal, seed=seed if seed is not None else spec.seed, seeds=list(spec.seeds),
                      metric=None if spec.metrics else spec.metric, constraints=list(spec.constraints),
                      technique=spec.technique or "default",
                      settings={"task": os.path.abspath(task), "task_fingerprint": _task_fingerprint(task)},
                      environment=capture_environment(os.path.dirname(os.path.abspath(task))))
    worker = Tuner.attach(run, store=st, space=spec.space,
                          budget=Budget.coerce(limit) or Budget(evals=DEFAULT_EVALS),
                          heartbeat_s=heartbeat_s, timeout_s=timeout_s, **create)
    try:
        summary = worker.work(spec.objective, max_trials=max_trials)
    except KeyboardInterrupt:
        with _interrupts_ignored():
            click.echo(f"perftune: interrupted; the trial in hand went back to run {worker.run_name!r}",
                       err=True)
        sys.exit(130)
    over = summary.stop_reason not in ("max_trials", "interrupted")
    result = worker.result()
    from perftune.report import answer_of

    # The improvement as show prints it for a run without a recorded answer: the best against the default.
    answer = answer_of(result.best, result.default, goal=result.goal)
    if as_json:
        imp = answer.improvement
        _emit_json({"run": {"id": worker.run_id, "name": worker.run_name}, "worker": summary.worker,
                    "n_measured": summary.n_measured, "n_reissued": summary.n_reissued,
                    "n_discarded": summary.n_discarded, "proposed": summary.proposed,
                    "stop_reason": summary.stop_reason, "run_over": over, "counts": result.counts(),
                    "best": _trial_json(result.best),
                    "improvement": None if imp is None else imp.to_json()})
        return

    console = _console()
    reissued = f" ({summary.n_reissued} issued again after a dead worker)" if summary.n_reissued else ""
    console.print(f"worker {_escape(summary.worker)}: measured {summary.n_measured} trials of run "
                  f"[bold]{_escape(worker.run_name)}[/]{reissued}; stopped: {_escape(summary.stop_reason)}")
    if over:
        _print_result(result, as_json=False, answer=answer)


@cli.group("runs", invoke_without_command=True)
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def runs_cmd(ctx: click.Context, store: str | None, as_json: bool) -> None:
    """List the runs in the store (perftune runs delete RUN removes one)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj["runs_store"] = store
        return
    st = _open(ctx, store, read_only=True)
    from perftune.report import FinalAnswer, answer_of, answer_value, driver_gone, metric_unit, value_text
    from perftune.store import StoreDamageError

    rows = []
    damaged: list[str] = []
    gone: set[int] = set()  # running runs whose driver is gone (report.driver_gone: a stale lease)
    now = st.clock()  # heartbeats are the store's time (the database server's), not this machine's
    for info in st.list_runs():
        try:
            # A damaged run (or best or default trial) is listed as damaged: it must not hide the others,
            # and `perftune runs delete` removes it.
            st.require_intact(info)
            best = st.best(info.id)
            # The recorded final answer (what show and report print), else, as they do, the best trial
            # against the default one: found by an index walk, not by reading every run's trials.
            answer = FinalAnswer.from_json((info.settings or {}).get("result"))
            if answer is None:
                _, first = st.trial_keyset_page(info.id, technique="default", limit=1, count=False)
                answer = answer_of(best, first[0] if first else None, goal=info.goal or "min")
            # The best printed is the final answer's value (a flags run's final option set), as in show.
            value = answer_value(st, info, answer, best)
            # A running run's lease says whether its driver is still there; a damaged one is this run's
            # damage, not the listing's.
            if driver_gone(st, info, now):
                gone.add(info.id)  # its driver was killed: the table says so (the JSON keeps the status)
        except StoreDamageError as error:
            what = error.detail if error.trial_id is None else f"trial {error.trial_id}: {error.field}"
            damaged.append(f"run {info.name!r} (id {info.id}) is damaged: {what} "
                           f"(perftune runs delete {info.id} removes it)")
            rows.append({"id": info.id, "name": info.name, "status": "damaged", "goal": info.goal,
                         "metric": info.metric, "unit": metric_unit(info.metric),
                         "created_at": info.created_at, "trials": st.count(info.id), "best": None,
                         "improvement": None, "damaged": str(error)})
            continue
        imp = None if answer is None or answer.improvement is None else answer.improvement.to_json()
        rows.append({"id": info.id, "name": info.name, "status": info.status, "goal": info.goal,
                     "metric": info.metric, "unit": metric_unit(info.metric), "driver_gone": info.id in gone,
                     "created_at": info.created_at, "trials": st.count(info.id),
                     "best": value, "improvement": imp})
    if as_json:
        _emit_json({"runs": rows})
        return
    from rich.table import Column, Table

    # Names are what the other commands take: never cut one short (the other columns give way).
    longest = max((len(_printable(str(r["name"]))) for r in rows), default=4)
    # Nor a best value and its unit, nor a metric's name.
    bests = {r["id"]: value_text(r["best"], r["unit"]) for r in rows}
    widest_best = max((len(b) for b in bests.values()), default=4)
    widest_metric = max((len(_printable(str(r["metric"] or "-"))) for r in rows), default=6)
    table = Table("id", Column("name", min_width=longest), Column("status", min_width=11), "goal",
                  Column("metric", min_width=min(widest_metric, 40)), "trials",
                  Column("best", min_width=widest_best), Column("improvement", min_width=11),
                  Column("created", min_width=19))
    for r in rows:
        imp = r["improvement"]
        # Text cells: a name like "[/]" is printed, not parsed as markup.
        status = f"{r['status']} (no driver)" if r["id"] in gone else str(r["status"])
        table.add_row(str(r["id"]), _text(str(r["name"])), _text(status), _text(str(r["goal"])),
                      _text(str(r["metric"] or "-")), str(r["trials"]), bests[r["id"]],
                      "-" if imp is None else _factor(imp, "estimate"), _when(r["created_at"]))
    _console().print(table)
    for line in damaged:
        click.echo(f"perftune: {_printable(line)}", err=True)


@cli.command("show")
@click.argument("run")
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, run: str, store: str | None, as_json: bool) -> None:
    """Show one run (name, id or 'latest'): best, baseline, failures, history."""
    from perftune.report import (
        answer_value,
        driver_gone,
        failure_key,
        final_answer,
        metric_unit,
        value_text,
        with_failed_default,
    )

    st = _open(ctx, store, read_only=True)
    info = st.get_run(run)
    trials = st.trials(info.id)
    best = st.best(info.id)
    default = next((t for t in trials if t.technique == "default"), None)
    # A default configuration that failed leaves no improvement: the answer's note says so.
    answer = with_failed_default(final_answer(st, info, trials), default)
    pareto = _pareto_of(st, info)
    unit = metric_unit(info.metric)
    try:
        gone = driver_gone(st, info)
    except StoreError:  # a damaged lease: `perftune runs` names it; the run's trials are still shown
        gone = False
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for t in trials:
        counts[t.status.value] = counts.get(t.status.value, 0) + 1
        # Pruning (docs/fidelity.md) and a cancellation by the run's end are no failures; grouped by
        # failure_key, as the report and the dashboard group them.
        if t.status.value not in ("ok", "pruned", "cancelled", "pending"):
            key = failure_key(t.reason) or t.status.value
            reasons[key] = reasons.get(key, 0) + 1
    if as_json:
        imp = answer.improvement
        _emit_json({"run": {"id": info.id, "name": info.name, "status": info.status, "goal": info.goal,
                            "metric": info.metric, "unit": unit, "driver_gone": gone,
                            "created_at": info.created_at,
                            "finished_at": info.finished_at,
                            "settings": info.settings, "environment": getattr(info, "environment", None)},
                    "counts": counts, "failures": reasons, "best": _trial_json(best),
                    "default": _trial_json(default), "trials": [_trial_json(t) for t in trials],
                    "improvement_over_default": (None if imp is None or not imp.ratio
                                                 else imp.to_json()["estimate"]),
                    "improvement": None if imp is None else imp.to_json(), "note": answer.note,
                    "final": answer.to_json(), "pareto": pareto})
        return
    from rich.table import Table

    console = _console()
    status = f"{info.status} (no driver)" if gone else str(info.status)
    aim = f"goal {info.goal}" + (f" {info.metric}" if info.metric else "") + (f" ({unit})" if unit else "")
    console.print(f"run [bold]{_escape(str(info.name))}[/] (id {info.id}), {_escape(status)}, "
                  f"{_escape(aim)}, {len(trials)} trials")
    console.print("by status: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    if counts.get("cancelled"):
        console.print(f"cancelled: {counts['cancelled']} trials stopped by the run's end (a time budget, an "
                      "interrupt); they are not failures")
    if counts.get("pruned"):
        console.print(f"pruned: {counts['pruned']} trials stopped early by the pruner; they are not full "
                      "evaluations and do not count against the budget")
    if default is not None and default.ok:
        console.print(f"default configuration: {value_text(default.value, unit)}")
    # The final answer (what `best` prints) apart from the search's best trial where they differ: a flags
    # run's final option set, a trial that passed its check, a Triton kernel's final comparison.
    final = answer_value(st, info, answer, best)
    apart = best is not None and (answer.command_line is not None or answer.value is not None
                                  or (answer.trial is not None and answer.trial != best.id))
    if best is not None:
        console.print(f"{'best trial of the search' if apart else 'best'}: "
                      f"[bold green]{value_text(best.value, unit)}[/] (trial {best.id}) "
                      f"{_escape(best.config.to_json())}")
    if answer.command_line is not None:
        if answer.value is not None:
            console.print(f"final answer: [bold green]{value_text(final, unit)}[/]")
        console.print(f"final command line: {_escape(answer.command_line)}")
    elif apart and answer.trial is not None and answer.config:
        config = json.dumps(answer.config, sort_keys=True)
        console.print(f"final answer: [bold green]{value_text(final, unit)}[/] (trial {answer.trial}) "
                      f"{_escape(config)}")
    for line in answer.lines():
        console.print(_escape(line))
    if pareto is not None:
        _print_pareto(console, pareto)
    if reasons:
        table = Table("failure reason", "trials")
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:10]:
            table.add_row(_text(reason), str(n))
        console.print(table)
    table = Table("trial", "status", f"value ({unit})" if unit else "value", "technique", "config",
                  title="last 15 trials")
    for t in trials[-15:]:
        value = "-" if t.value is None else f"{t.value:.6g}"
        table.add_row(str(t.id), t.status.value, value, _text(str(t.technique)),
                      _text(t.config.to_json()[:80]))
    console.print(table)


# `show` lists the front up to this many trials (best first along the first objective); --json has them all.
_SHOW_PARETO_ROWS = 20


def _pareto_of(st: Any, info: Any) -> dict[str, Any] | None:
    """The front of a run with several objectives for ``show``: objectives and trials, else None."""
    raw = (info.settings or {}).get("objectives")
    names = raw.get("names") if isinstance(raw, dict) else None
    goals = raw.get("goals") if isinstance(raw, dict) else None
    if not isinstance(names, list) or not isinstance(goals, list) or not 2 <= len(names) == len(goals):
        return None
    return _pareto_json(names, goals, st.pareto(info.id))


def _pareto_json(names: Any, goals: Any, front: Any) -> dict[str, Any]:
    """The ``"pareto"`` of ``run --json`` and ``show --json``, one shape: the objectives, then the front's
    trials in ticket order."""
    return {"objectives": [{"name": n, "goal": g} for n, g in zip(names, goals, strict=True)],
            "trials": [{"id": t.id, "values": {n: t.metrics.get(n, t.value if i == 0 else None)
                                               for i, n in enumerate(names)},
                        "technique": t.technique, "config": json.loads(t.config.to_json())} for t in front]}


def _print_pareto(console: Any, pareto: dict[str, Any]) -> None:
    from rich.table import Column, Table

    names = [o["name"] for o in pareto["objectives"]]
    # Best first along the primary objective: its loss (negated when it is maximised), not its raw value.
    sign = -1.0 if pareto["objectives"][0]["goal"] == "max" else 1.0

    def best_first(t: dict[str, Any]) -> tuple[bool, float, int]:
        value = t["values"][names[0]]
        return value is None, 0.0 if value is None else sign * value, t["id"]

    rows = sorted(pareto["trials"], key=best_first)
    shown = rows[:_SHOW_PARETO_ROWS]
    more = f", the first {len(shown)} by {names[0]} (--json lists all)" if len(rows) > len(shown) else ""
    title = (f"Pareto front: {len(rows)} trial{'s' if len(rows) != 1 else ''} of "
             + ", ".join(f"{o['name']} ({o['goal']})" for o in pareto["objectives"]) + more)
    from perftune.report import metric_unit

    # The objectives' names and goals come from the store: Text, never parsed as markup, made printable;
    # a built-in metric's column names its unit.
    table = Table("trial", *[Column(header=_text(str(n) + (f" ({metric_unit(n)})" if metric_unit(n) else "")))
                             for n in names], "technique", "config", title=_text(title))
    for t in shown:
        values = ["-" if t["values"][n] is None else f"{t['values'][n]:.6g}" for n in names]
        table.add_row(str(t["id"]), *values, _text(str(t["technique"])),
                      _text(json.dumps(t["config"], sort_keys=True)[:60]))
    console.print(table)


@cli.command("best")
@click.argument("run")
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.pass_context
def best_cmd(ctx: click.Context, run: str, store: str | None) -> None:
    """Print the configuration RUN answered as JSON (what show prints as its final answer: the best trial,
    or the one that passed its check; for a gcc flags run, its flags and command line)."""
    from perftune.report import final_answer

    st = _open(ctx, store, read_only=True)
    info = st.get_run(run)
    trials = st.trials(info.id)
    answer = final_answer(st, info, trials)
    chosen = next((t for t in trials if answer.trial is not None and t.id == answer.trial and t.ok), None)
    if chosen is not None:
        click.echo(chosen.config.to_json())
    elif answer.trial is None and answer.config is not None:  # an answer that is no trial (gcc flags)
        extra = {} if answer.command_line is None else {"command_line": answer.command_line}
        click.echo(json.dumps({**answer.config, **extra}))
    elif answer.note:
        raise PerftuneError(f"run {info.name!r} has no final answer: {answer.note}")
    else:
        best = st.best(info.id)
        if best is None:
            raise PerftuneError(f"run {info.name!r} has no successful trial")
        click.echo(best.config.to_json())


@cli.command("export")
@click.argument("run")
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "kt"]), default=None,
              help="csv, json, or kt: a Kernel Tuner cache file, replayable with tune_kernel(..., "
                   "simulation_mode=True). Default: from the file's name (.csv, .json, .kt.json), else csv.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write, replaced whole or not at all (a symbolic link named here is followed); "
                   "- writes CSV or JSON to standard output.")
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.option("--kernel-name", default=None, help="With --format kt: the kernel name (default: the run's).")
@click.option("--time-unit", "time_unit", type=click.Choice(["s", "ms", "us", "ns"]), default=None,
              help="With --format kt: the unit of the run's values, written as Kernel Tuner's milliseconds "
                   "(default: s for wall_time/cpu_time and the flags and torch_compile targets, else ms).")
@click.pass_context
def export_cmd(
    ctx: click.Context, run: str, fmt: str | None, output: str, store: str | None, kernel_name: str | None,
    time_unit: str | None,
) -> None:
    """Export the trials of RUN as CSV, JSON or a Kernel Tuner cache file.

    In the CSV, a text cell starting with =, +, -, @, a tab or a carriage return gets a leading '
    (against formula injection: the text comes from the store; a spreadsheet would run it as a formula).
    Numbers are written as they are.
    """
    to_stdout = output == "-"
    named = None if to_stdout else _export_format_of(output)
    # A Kernel Tuner cache is a .json file: --format kt and a plain .json name agree.
    if fmt is not None and named is not None and (named == "csv") != (fmt == "csv"):
        raise click.UsageError(f"--format {fmt}, but {output!r} is named as {named}: "
                               "name the file for its format, or leave --format out")
    fmt = fmt or named or "csv"
    if to_stdout and fmt == "kt":
        raise click.UsageError("-o -: a Kernel Tuner cache is a file Kernel Tuner opens; name one (.kt.json)")
    if fmt != "kt" and time_unit is not None:
        raise click.UsageError("--time-unit is only for --format kt")
    st = _open(ctx, store, read_only=True)
    info = st.get_run(run)
    if not to_stdout and st.owns_path(output):
        raise PerftuneError(f"{output}: that is the store's own file ({st.location}): an export never "
                            "replaces the store it reads; name another file")
    if fmt == "kt":
        from perftune.targets.replay import export_run_kt

        with _as_private_as(st):
            export_run_kt(st, info.id, output, kernel_name=kernel_name or info.name, time_unit=time_unit)
    else:
        if kernel_name is not None:
            raise click.UsageError("--kernel-name is only for --format kt")
        if to_stdout:
            # On a terminal, the store's text is shown with its control characters escaped (an escape
            # sequence would act on the terminal); a pipe or a file gets the bytes as stored.
            if not sys.stdout.isatty():
                st.export(info.id, fmt, sys.stdout)
                return
            shown = io.StringIO()
            st.export(info.id, fmt, shown)
            sys.stdout.write(_printable(shown.getvalue()))
            return
        with _as_private_as(st):
            st.export(info.id, fmt, output)
    click.echo(f"wrote {output}")


@contextlib.contextmanager
def _as_private_as(st: Any) -> Iterator[None]:
    """While a report or an export is written from ``st``: files readable by their owner only (0600) where
    the store is, as every SQLite store perftune creates is (evaluations may run as another user and must
    not read the results: docs/running-at-scale.md); a store without a file (PostgreSQL, in memory) counts
    as private. A store that others may read (an older one, or chmod-ed) leaves the umask's mode.

    The umask is what the atomic writers give the new file (``perftune._atomic``), so the file never has
    a wider mode, not even for a moment; this command runs no other thread that creates files meanwhile.
    """
    if st.dialect == "sqlite":
        with contextlib.suppress(OSError):
            if os.stat(st.location).st_mode & 0o077:
                yield
                return
    before = os.umask(0o077)
    os.umask(before | 0o077)
    try:
        yield
    finally:
        os.umask(before)


def _export_format_of(output: str) -> str | None:
    """The export format a file's name says (``.csv``, ``.json``, ``.kt.json`` or ``.kt.json.gz``); None
    for a name without an extension. Any other extension (``.xlsx``) is refused: it would hold CSV."""
    name = os.path.basename(output).lower()
    for suffix, fmt in ((".kt.json", "kt"), (".kt.json.gz", "kt"), (".json", "json"), (".csv", "csv")):
        if name.endswith(suffix):
            return fmt
    if "." not in name.lstrip("."):
        return None
    raise click.UsageError(f"{output!r}: export writes .csv, .json or .kt.json files (--format csv|json|kt)")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``perftune`` command."""
    cli.main(args=argv, prog_name="perftune")


def _terminated(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def entry() -> None:
    """The ``perftune`` executable (and ``python -m perftune``): :func:`main`, then a quick exit.

    Once the command is done (output flushed, ``atexit`` handlers run: staged copies removed, sandbox
    helpers stopped), the process leaves without the interpreter's teardown of every module, which
    with NumPy, SciPy and scikit-learn loaded costs a few tenths of a second, more on a busy machine.
    A thread that is still running (not a daemon) gets the ordinary exit, which waits for it.
    """
    import atexit
    import signal
    import threading

    global _PROCESS_ENDS_WITH_COMMAND  # noqa: PLW0603 - what this process is, set once at its start
    _PROCESS_ENDS_WITH_COMMAND = True
    # SIGTERM (a batch system's stop, `timeout`, `kill`) ends a run as Ctrl-C does: the run is marked
    # interrupted, its checkpoint written, and the resume command printed. Workers set their own.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        main()
        code: object = 0
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:  # pressed again between the command's own line and its exit
        code = 130
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)  # type: ignore[arg-type]
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)  # what sys.exit does with a message
        code = 1
    # The command is done: a Ctrl-C now (pressed again after an interrupt) must not interrupt the exit
    # handlers (stopping sandbox helpers, removing staged copies) into a traceback.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (perftune ... | head): nothing left to say
            code = code or 1
    os._exit(code)


# ---- commands added by other parts go below this line (one block each) ----


@cli.command("llvm-passes")
@click.argument("benchmark")
@click.option("--budget", "budget", multiple=True, metavar="N|DURATION",
              help="Wall time (90s, 10m; default 60s) or sequences evaluated (500); give twice for both, "
                   "the first reached ends the search. The search only: preparing the benchmark (the "
                   "helper's build on first use, the -O0 reference run) comes before it.")
@click.option("--seconds", type=float, default=None, metavar="S",
              help="Deprecated alias: --seconds 30 is --budget 30s.")
@click.option("--search", type=click.Choice(["perftune", "random", "greedy"]), default="perftune",
              show_default=True, help="perftune's ensemble, or CompilerGym's random/greedy baselines.")
@click.option("--length", type=int, default=160, show_default=True, help="Longest pass sequence searched.")
@click.option("--engine", type=click.Choice(["helper", "opt"]), default="helper", show_default=True,
              help="Persistent libLLVM helper (fast) or one opt process per step.")
@click.option("--no-run", is_flag=True, help="Do not run the program to check its output against -O0.")
@click.option("--json", "as_json", is_flag=True, help="Print pipeline and instruction counts as JSON.")
@click.option("--seed", type=int, default=None, help="Seed of the search (default 0).")
@_progress_options
@click.pass_context
def llvm_passes_cmd(ctx: click.Context, benchmark: str, budget: tuple[str, ...], seconds: float | None,
                    search: str, length: int, engine: str, no_run: bool, as_json: bool,
                    seed: int | None, quiet: bool = False, progress_every: float | None = None) -> None:
    """Search an LLVM 14 pass sequence that minimises the instruction count of BENCHMARK.

    BENCHMARK is a .c/.ll/.bc file or a URI (benchmark://perftune-v0/crc32, generator://csmith-v0/7).
    Prints the validated `opt -passes=...` command line.

    \b
    Example:
      perftune llvm-passes prog.c --budget 30s
    """
    from perftune.drive import parse_budget
    from perftune.targets.llvm import llvm_passes

    items = _opt(ctx, "budget", budget)
    limit = parse_budget(items) if items else None
    search_s = None if limit is None else limit.seconds
    if seconds is not None:
        click.echo(f"perftune: note: --seconds is deprecated; use --budget {seconds:g}s", err=True)
        search_s = seconds if search_s is None else min(search_s, seconds)
    llvm_passes(benchmark, seconds=60.0 if search_s is None else search_s,
                evals=None if limit is None else limit.evals, search=search, length=length, engine=engine,
                run=not no_run, as_json=as_json, seed=_opt(ctx, "seed", seed) or 0, emit_json=_emit_json,
                echo=click.echo, progress=_progress_settings(as_json, quiet, progress_every))


@cli.command("adapt")
@click.argument("task", type=click.Path(exists=True, dir_okay=False))
@click.option("--budget", default=None,
              help="Trials of all landmark searches, or a duration (default: [adapt] budget).")
@click.option("--seed", type=int, default=None, help="Seed of clustering, search and learning.")
@click.option("--out", default=None,
              help="Dispatcher file (default: perftune-dispatch.json beside the tuned choices).")
@click.option("--choose", default=None, metavar="INPUT", type=click.Path(exists=True, dir_okay=False),
              help="Print the configuration for INPUT (JSON) from the learned dispatcher; no tuning.")
@_progress_options
def adapt_cmd(task: str, budget: str | None, seed: int | None, out: str | None, choose: str | None,
              quiet: bool, progress_every: float | None) -> None:
    """Per-input dispatch for a task file with an [adapt] table: learn it, or choose for one input."""
    from perftune.adapt import CommandSite, use_dispatch

    site = CommandSite(task)
    if choose is not None:
        import warnings

        # What the program would run for INPUT: with a missing, corrupt or stale dispatcher file, the
        # default configuration and one warning (printed as one line, with what to do).
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            use_dispatch(out)
            config = site.config_for(choose)
        for warning in caught:
            click.echo(f"perftune: warning: {warning.message} (learn one: perftune adapt {task})", err=True)
        click.echo(json.dumps(site.landmark_to_json(config), sort_keys=True))
        return
    limit: Any = int(budget) if budget is not None and budget.isdigit() else budget
    progress = _AdaptProgress(_progress_settings(False, quiet, progress_every),
                              limit if limit is not None else site.budget)
    try:
        result = site.tune(budget=limit, seed=seed, on_progress=progress)
    finally:
        progress.close()
    click.echo(result.summary())
    click.echo(f"wrote {result.save(out)}")


@cli.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def doctor_cmd(as_json: bool) -> None:
    """Which protections candidates get on this machine (user, cgroups, rlimits, namespaces)."""
    from perftune.measure import doctor

    rows = doctor()
    if as_json:
        _emit_json({"protections": [{"protection": n, "active": a, "detail": d} for n, a, d in rows]})
        return
    for name, active, detail in rows:
        click.echo(f"{'[active]  ' if active else '[missing] '}{name}: {detail}")


@cli.command("flags")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--run", "run_args", default="", metavar='"ARGS"',
              help="The program's arguments, split as a shell would (run without a shell).")
@click.option("--compiler", default="gcc", show_default=True, help="Compiler to tune (name on PATH or path).")
@click.option("--seed-flags", "seed_flags", multiple=True, metavar='"OPTS"',
              help='Option set to try early, e.g. "-O2 -funroll-loops" (repeatable).')
@click.option("--rel-tol", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Relative tolerance for numbers in the output (floating-point programs; 0 = exact).")
@click.option("--abs-tol", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Absolute tolerance for numbers.")
@click.option("--link", default="-lm", show_default=True, metavar='"OPTS"', help="Options after the sources.")
@click.option("--no-params", is_flag=True, help="Do not tune --param values.")
@click.option("--clock", type=click.Choice(["wall", "cpu"]), default="wall", show_default=True,
              help="Time runs by wall clock, or by CPU time (steadier on a busy machine, one thread).")
@click.option("--no-reduce", is_flag=True, help="Skip the reduction to a minimal flag set.")
@click.option("--goal", "goal", type=click.Choice(["time", "time,size"]), default="time", show_default=True,
              help="What to optimise: run time, or run time and code size (the Pareto front of the two).")
@click.option("--json", "as_json", is_flag=True,
              help="Print flags, command line and speedup (with CI) as JSON.")
@_common_options
@click.pass_context
def flags_cmd(ctx: click.Context, sources: tuple[str, ...], run_args: str, compiler: str,
              seed_flags: tuple[str, ...], rel_tol: float, abs_tol: float, link: str, no_params: bool,
              no_reduce: bool, goal: str, as_json: bool, store: str | None, seed: int | None,
              workers: int | None, budget: tuple[str, ...], **common: Any) -> None:
    """Tune gcc flags, params, -O level and -march for SOURCES (baseline: plain -O3).

    \b
    Example:
      perftune flags prog.c --run "1000 input.txt" --budget 5m --workers 2
    """
    from perftune.targets.flags import tune_flags

    _shell_words("--run", run_args)  # a typo there is one line now, not a traceback from inside the run
    link_args = _shell_words("--link", link)
    seed_lists = [_shell_words("--seed-flags", s) for s in seed_flags]
    if common.get("executor", "local") != "local":
        raise PerftuneError("flags: builds and timed runs stay on this machine; "
                            "--executor dask is not supported")

    n_workers = _opt(ctx, "workers", workers) or 1
    _warn_lag(_opt(ctx, "seed", seed), common.get("lag"), n_workers)
    st = _open(ctx, store, must_exist=False)
    budget_items = _opt(ctx, "budget", budget) or "5m"
    progress = _flags_progress(budget_items, _progress_settings(as_json, common.get("quiet", False),
                                                                common.get("progress_every")))
    try:
        result = tune_flags(
            list(sources), run_args, compiler=compiler, budget=budget_items,
            workers=n_workers, seeds=seed_lists, rel_tol=rel_tol,
            abs_tol=abs_tol, link_args=link_args, store=st,
            seed=_opt(ctx, "seed", seed), lag=common.get("lag"),
            include_params=not no_params, reduce=not no_reduce, on_trial=progress,
            clock=common.get("clock", "wall"), goal=goal,
        )
    finally:
        progress.close()
    _print_flags_result(result, as_json, st)


def _shell_words(option: str, text: str) -> list[str]:
    """``text`` split as a shell would; a malformed one (an unclosed quote) is a usage error."""
    import shlex

    try:
        return shlex.split(text)
    except ValueError as exc:
        raise click.BadParameter(f"{str(exc).lower()} in {text!r}", param_hint=option) from None


def _print_flags_result(result: Any, as_json: bool, store: Any = None) -> None:
    if as_json:
        _emit_json(result.to_json())
        return
    run_id = getattr(result, "run_id", None)
    if store is not None and run_id is not None:
        # The run and its trials as show and runs count them (cancelled evaluations included).
        info = store.get_run(run_id)
        counts: dict[str, int] = {}
        for t in store.trials(run_id):
            counts[t.status.value] = counts.get(t.status.value, 0) + 1
        listed = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        click.echo(f"run {_printable(info.name)} (id {run_id}): {sum(counts.values())} trials ({listed}); "
                   f"{result.improvement.text()}")
    else:
        click.echo(f"{result.n_trials} trials; {result.improvement.text()}")
    if result.note:
        click.echo(result.note)
    # NaN shares (options required for the output) sort as 0.
    by_share = sorted(result.contributions.items(), key=lambda kv: -abs(kv[1]) if kv[1] == kv[1] else 0)
    for opt, share in by_share:
        if share != share:
            what = "required for the output"
        elif share > 0:
            what = f"{share * 100:.1f}% slower without it"
        else:  # the reduction measured it slower without it; the check of it alone is within the noise
            what = (f"{-share * 100:.1f}% faster without it in the last check "
                    "(kept: the reduction measured it slower without it)")
        click.echo(f"  {opt}: {what}")
    click.echo(result.command_line)
    front = getattr(result, "pareto", None)
    if front:
        click.echo(f"Pareto front of run time and code size: {len(front)} option sets")
        for point in front:
            click.echo(f"  {point['time_s']:.6g} s  {point['size_bytes']} bytes  {' '.join(point['flags'])}")
    for note in getattr(result, "notes", ()):  # what the time budget cut short
        click.echo(f"perftune: note: {note}", err=True)


@cli.command("report")
@click.argument("run")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="HTML file to write (default: report-RUN.html in the current folder, RUN's name made safe "
                   "for a file name; a symbolic link of that name is refused, not followed). A file named "
                   "here that is a symbolic link is followed.")
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.pass_context
def report_cmd(ctx: click.Context, run: str, output: str | None, store: str | None) -> None:
    """Write an HTML report of RUN: convergence, technique credits, failures by reason, best configuration.

    The plots need Plotly (pip install 'perftune[plot]'); without it the page has the tables only.

    The default file name comes from the run's name, which the store holds: characters other than
    letters, digits and -_.,+@= become _, leading dots are dropped, and a name that changed gets the run's
    id (report-a_b-7.html). The file is replaced atomically (a new file renamed over it: never written
    through a link); a symbolic link at the default name is an error, one given with -o is followed.
    """
    from perftune.report import plots_available, report_file_name, write_html

    if output is not None and "." in os.path.basename(output).lstrip(".") \
            and not output.lower().endswith((".html", ".htm")):
        raise click.UsageError(f"{output!r}: the report is an HTML page; give a .html file")
    st = _open(ctx, store, read_only=True)
    info = st.get_run(run)
    plots = plots_available()
    # A name the user gave is followed if it is a link; the default one, made of the store's run name, is not.
    with _as_private_as(st):
        path = write_html(st, info.id, output or report_file_name(info.name, info.id), plots=plots,
                          follow_symlinks=output is not None)
    click.echo(f"wrote {path}" if plots else
               f"wrote {path} (tables only; for the plots: pip install 'perftune[plot]')")


# The bundled examples live in the package (perftune/examples; the repository's examples/ links there),
# so a pip-installed user gets the same files as a checkout.
_EXAMPLES_FIRST_TASK = "python_metric/task.toml"


def _bundled_examples() -> list[tuple[str, Any]]:
    """``(relative path, resource)`` of every bundled example file, sorted."""
    from importlib.resources import files

    found: list[tuple[str, Any]] = []

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            if child.name == "__pycache__" or child.name.endswith(".pyc"):
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            else:
                found.append((prefix + child.name, child))

    walk(files("perftune") / "examples", "")
    return sorted(found, key=lambda item: item[0])


def _write_examples(directory: str, *, force: bool) -> list[str]:
    """Copy the bundled examples into ``directory``, keeping the files there unless ``force``; returns
    the relative paths written."""
    from pathlib import Path

    root = Path(directory)
    examples = _bundled_examples()
    if not examples:
        raise PerftuneError("examples: this installation of perftune has no bundled examples")
    folders = {root / parent for rel, _ in examples for parent in Path(rel).parents}
    in_the_way = sorted(str(f) for f in folders if os.path.lexists(f) and not f.is_dir())
    if in_the_way:
        raise PerftuneError(f"examples: {in_the_way[0]} is in the way: it should be a folder")
    written = []
    for rel, resource in examples:
        if not force and os.path.lexists(root / rel):
            continue  # kept as it is (a link too: never written through)
        target = root / rel
        try:
            missing = []
            folder = target.parent
            while not folder.is_dir():
                missing.append(folder)
                folder = folder.parent
            for folder in reversed(missing):
                folder.mkdir()
                # Modes are explicit, whatever the umask: a root user's candidates run as an unprivileged
                # user, who must be able to read the task files and sources.
                folder.chmod(0o755)
            if target.is_symlink():
                target.unlink()  # --force replaces the file, never what a link points to
            target.write_bytes(resource.read_bytes())
            target.chmod(0o644)
        except OSError as error:
            raise PerftuneError(f"examples: cannot write {target} ({error.strerror or error})") from None
        written.append(rel)
    return written


@cli.command("examples")
@click.argument("directory", default="perftune-examples", required=False, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Overwrite files that exist already.")
def examples_cmd(directory: str, force: bool) -> None:
    """Write the bundled examples (task files and their sources) into DIRECTORY.

    DIRECTORY defaults to ./perftune-examples; existing files are kept unless --force is given.

    \b
    Example:
      perftune examples
      perftune run perftune-examples/python_metric/task.toml --budget 40
    """
    import shlex

    written = _write_examples(directory, force=force)
    kept = len(_bundled_examples()) - len(written)
    click.echo(f"wrote {len(written)} files to {directory}" + (":" if written else ""))
    for rel in written:
        click.echo(f"  {os.path.join(directory, rel)}")
    if kept:
        files = "1 file that exists" if kept == 1 else f"{kept} files that exist"
        click.echo(f"kept {files} already (--force overwrites them)")
    task = shlex.quote(os.path.join(directory, _EXAMPLES_FIRST_TASK))
    click.echo(f"next: perftune run {task} --budget 40")


@cli.command("techniques")
def techniques_cmd() -> None:
    """List the search techniques that tune(technique=...) and a task's [tuning] technique may name.

    Each with where it comes from: built in, an alias, or a plug-in (the distribution that installed
    it under the entry-point group perftune.techniques, and its object).
    """
    from importlib import metadata

    from perftune import search

    entry_points: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a broken installation: the built-ins are listed all the same
        for ep in metadata.entry_points(group=search.ENTRY_POINT_GROUP):
            entry_points.setdefault(ep.name, ep)
    rows: list[tuple[str, str]] = []
    for name in search.names():
        try:
            cls = search.get(name)
        except PerftuneError as error:
            rows.append((name, f"plug-in that fails to load: {error}"))
            continue
        plugin = entry_points.get(name)
        if cls.__module__.split(".")[0] == "perftune":
            origin = "built-in"
        elif plugin is not None:
            dist = getattr(plugin, "dist", None)
            source = f"{dist.name} {dist.version}" if dist is not None else "an installed distribution"
            origin = f"plug-in from {source} ({plugin.value})"
        else:
            origin = f"registered in this process ({cls.__module__}.{cls.__qualname__})"
        rows.append((name, origin))
    rows += [(alias, f"alias of {target}") for alias, target in sorted(search.ALIASES.items())]
    width = max(len(name) for name, _ in rows)
    for name, origin in rows:
        click.echo(_printable(f"{name:<{width}}  {origin}"))


# ---- issue 14: seeing a run (dashboard, runs delete, compare) ----


@cli.command("dashboard")
@click.option("--store", "store", default=None, metavar="URL", help="Results store (read, never written).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; any but the loopback one needs a token (generated if not given).")
@click.option("--port", type=click.IntRange(0, 65535), default=8050, show_default=True, help="Port.")
@click.option("--token", default=None, metavar="TOKEN", envvar="PERFTUNE_DASHBOARD_TOKEN",
              help="Require this token on every request (default: none on 127.0.0.1, generated elsewhere).")
@click.pass_context
def dashboard_cmd(ctx: click.Context, store: str | None, host: str, port: int, token: str | None) -> None:
    """Serve a live, read-only web view of the store: runs, one run, and runs compared.

    New trials appear without a reload. Needs the dashboard extra: pip install 'perftune[dashboard]'.

    \b
    Example:
      perftune dashboard --store perftune.db       # then open http://127.0.0.1:8050/
    """
    from perftune.dashboard import serve

    serve(_open(ctx, store, read_only=True), host=host, port=port, token=token,
          echo=lambda line: click.echo(line, err=True))


@runs_cmd.command("delete")
@click.argument("run")
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def runs_delete_cmd(ctx: click.Context, run: str, store: str | None, yes: bool) -> None:
    """Delete RUN (name, id or 'latest') with its trials, samples and checkpoint.

    Asks first when the input is a terminal; elsewhere --yes is required. A run that a live driver is
    driving is refused.
    """
    st = _open(ctx, store or ctx.obj.get("runs_store"))
    info = st.get_run(run)
    n = st.count(info.id)
    what = f"run {info.name!r} (id {info.id}, {n} trials) from {st.location}"
    if not yes:
        if not sys.stdin.isatty():
            raise PerftuneError(f"runs delete: would delete {what}; pass --yes to confirm")
        if not click.confirm(f"delete {what}?", default=False, err=True):
            click.echo("nothing deleted", err=True)
            return
    st.delete_run(info.id)
    click.echo(f"deleted {what}")


@cli.command("compare")
@click.argument("runs", nargs=-1, required=True)
@click.option("--store", "store", default=None, metavar="URL", help="Results store.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_context
def compare_cmd(ctx: click.Context, runs: tuple[str, ...], store: str | None, as_json: bool) -> None:
    """Compare two or more runs of the same space: best so far along the way, and the final bests.

    The first run is the reference: each other run's best is compared with its best, a speedup with
    a 95% confidence interval from their samples (the report's single definition of improvement).
    Runs that optimise different things (another goal, metric or set of objectives) are refused.

    \b
    Example:
      perftune compare tune-a tune-b
    """
    from perftune.report import compare_view, value_text

    st = _open(ctx, store, read_only=True)
    if len(runs) < 2:
        raise PerftuneError("compare: give two or more runs")
    view = compare_view(st, list(runs))
    rows = _compare_rows(st, view)
    if as_json:
        _emit_json({"goal": view["goal"], "metric": view["metric"], "unit": view["unit"], "runs": rows})
        return
    from rich.table import Column, Table

    marks = sorted({m for r in rows for m in r["best_at"]}, key=int)
    widest = max(len(_printable(r["name"])) for r in rows)
    unit = view["unit"]
    title = (f"goal: {view['goal']}imise {view['metric'] or 'the value'}" + (f" ({unit})" if unit else ""))
    table = Table(Column("run", min_width=widest), "status", "trials", "best",
                  Column("vs the first's best", min_width=20),
                  *[f"best at {m}" for m in marks], title=_text(title))
    for r in rows:
        imp = r["improvement_over_first"]
        status = f"{r['status']} (no driver)" if r["driver_gone"] else str(r["status"])
        table.add_row(_text(r["name"]), _text(status), str(r["n_trials"]), value_text(r["best"], unit),
                      "(reference)" if r is rows[0] else "-" if imp is None else
                      (_factor(imp, "estimate") + ("" if not imp["interval"] else
                                                   f" ({_factor(imp, 'low')} to {_factor(imp, 'high')})")),
                      *[value_text(r["best_at"].get(m), unit) for m in marks])
    _console().print(table)
    for r in rows[1:]:
        if r["improvement_over_first"] is not None:
            click.echo(_printable(f"{r['name']}: {r['improvement_over_first']['text']}"))


def _compare_rows(st: Any, view: dict[str, Any]) -> list[dict[str, Any]]:
    """Per run: the best so far at a few trial counts, and its best against the first run's best."""
    import bisect
    import dataclasses

    from perftune.report import improvement_of

    longest = max(r["n_trials"] for r in view["runs"])
    marks = [m for m in (10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 100_000) if m < longest][-3:]
    marks = sorted(set(marks) | {r["n_trials"] for r in view["runs"]})
    bests = [st.best(r["run"]["id"]) for r in view["runs"]]
    rows = []
    for r, best in zip(view["runs"], bests, strict=True):
        # best_trial/best_value: the steps of the best-so-far curve (and its end at the last trial).
        steps, values = r["best_trial"], r["best_value"]
        best_at: dict[str, float | None] = {}
        for m in marks:
            k = bisect.bisect_right(steps, m - 1)
            best_at[str(m)] = values[k - 1] if k and m <= r["n_trials"] else None
        imp = None
        if best is not None and bests[0] is not None and r is not view["runs"][0]:
            found = improvement_of(best, bests[0], goal=view["goal"],
                                   baseline=f"the best of {view['runs'][0]['run']['name']}")
            # Trial ids of two runs may coincide: the other run's best is never "the baseline itself".
            imp = None if found is None else dataclasses.replace(found, is_baseline=False).to_json()
        rows.append({"name": r["run"]["name"], "id": r["run"]["id"], "status": r["run"]["status"],
                     "driver_gone": r["run"]["driver_gone"],
                     "n_trials": r["n_trials"], "best": r["run"]["best"], "best_at": best_at,
                     "improvement_over_first": imp})
    return rows


def _progress_settings(as_json: bool, quiet: bool, every_s: float | None) -> Any:
    """What a long command reports on stderr while it runs: nothing with --quiet or --json (whose reader
    is a program), else one line rewritten in a terminal, or a plain line every S seconds elsewhere."""
    from perftune.drive import ProgressSettings

    if quiet or as_json:
        return None
    return ProgressSettings(every_s=10.0 if every_s is None else every_s)


def _current_progress() -> Any:
    ctx = click.get_current_context(silent=True)
    return (ctx.obj or {}).get("progress") or False if ctx is not None else False


class _FlagsProgress:
    """``perftune flags``'s progress (its search reports through ``on_trial``): the driver's progress line,
    with the best as a speedup over -O3, and the reduction after the search said as such."""

    def __init__(self, line: Any) -> None:
        self._line = line

    def __call__(self, n_trials: int, speedup: float | None) -> None:
        if self._line is not None:
            self._line.update(n_trials, best=None if speedup is None else f"{speedup:.3f}x over -O3",
                              failures=None)

    def close(self) -> None:
        if self._line is not None:
            self._line.close()


class _AdaptProgress:
    """``perftune adapt``'s progress, from ``tune_inputs``' ``on_progress``: one line for the landmark
    searches (trials of their budget, the landmark being tuned and its best), then one for timing every
    landmark on every input (inputs of the training set)."""

    def __init__(self, settings: Any, budget: Any) -> None:
        from perftune.drive import Budget

        self._settings = settings
        limit = Budget.coerce(budget) if budget is not None else None
        self._seconds = None if limit is None else limit.seconds
        self._line: Any = None
        self._inputs: Any = None
        self._phase = ""
        self._landmark = (0, 0)

    def _start(self, phase: str, total: int | None) -> Any:
        from perftune.drive import ProgressLine

        if self._phase != phase:
            # The searches end for good when the inputs are timed; the inputs' counter runs across the
            # tables before and after the searches, so its line stays open (its end state is printed
            # at close, even when the last table took less than one period).
            if self._line is not None and self._phase == "trial":
                self._line.close()
            self._phase = phase
            if phase == "trial":
                self._line = ProgressLine(evals=total, seconds=self._seconds, settings=self._settings,
                                          label="perftune adapt: landmark searches")
            else:
                if self._inputs is None:
                    self._inputs = ProgressLine(evals=total, settings=self._settings, unit="inputs",
                                                show_best=False,
                                                label="perftune adapt: every landmark on every input")
                self._line = self._inputs
        return self._line

    def __call__(self, event: str, done: int, total: int | None, best: float | None) -> None:
        if self._settings is None:
            return
        if event == "landmark":
            self._landmark = (done, total or 0)
            return
        line = self._start(event, total)
        k, n = self._landmark
        # The best of the search under way: each landmark's search has its own objective (its inputs).
        shown = None if best is None else f"{best:.4g} (landmark {min(k + 1, n)} of {n})"
        line.update(done, best=shown, failures=None)

    def close(self) -> None:
        for line in (self._line, self._inputs):
            if line is not None:
                line.close()


def _flags_progress(budget: Any, settings: Any) -> _FlagsProgress:
    from perftune.drive import ProgressLine, parse_budget

    if settings is None:
        return _FlagsProgress(None)
    limit = parse_budget(list(budget) if isinstance(budget, tuple | list) else [budget])
    return _FlagsProgress(ProgressLine(evals=limit.evals, seconds=limit.seconds, settings=settings,
                                       label="perftune flags"))
