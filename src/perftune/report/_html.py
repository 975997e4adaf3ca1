"""A self-contained HTML page for one stored run: convergence, technique credits, failures, best."""

from __future__ import annotations

import datetime
import html
import json
import os
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perftune._atomic import write_text_atomic
from perftune.errors import PerftuneError
from perftune.trial import Status, Trial

__all__ = ["credit_history", "failure_counts", "plots_available", "report_file_name", "write_html"]

# What a user without plotly installs to get the plots.
_PLOT_EXTRA_HINT = "pip install 'perftune[plot]'"


def plots_available() -> bool:
    """Whether plotly can be imported, so that :func:`write_html` draws its interactive plots.

    Example:
        >>> isinstance(plots_available(), bool)
        True
    """
    try:
        import plotly  # noqa: F401
    except ImportError:
        return False
    return True


def _loss(trial: Trial, goal: str) -> float | None:
    if trial.loss is not None:
        return trial.loss
    if trial.value is None or trial.status is not Status.OK:
        return None
    return trial.value if goal == "min" else -trial.value


def failure_counts(trials: Sequence[Trial]) -> list[tuple[str, str, int]]:
    """``(status, reason, count)`` for every kind of failed trial, most frequent first (pruned trials,
    stopped early by a fidelity schedule, and cancelled ones, stopped by the run's end, are not failures).

    Example:
        >>> from perftune.space import Config
        >>> failure_counts([Trial(0, Config({"x": 1}), Status.FAILED, reason="boom")])  # doctest: +SKIP
        [('failed', 'boom', 1)]
    """
    from perftune.report._views import failure_key

    counts: Counter[tuple[str, str]] = Counter()
    for t in trials:
        if t.status in (Status.OK, Status.PENDING, Status.PRUNED, Status.CANCELLED):
            continue
        # Grouped as every other view groups them (show, the run page): by failure_key.
        counts[(t.status.value, failure_key(t.reason) or t.status.value)] += 1
    return [(s, r, n) for (s, r), n in counts.most_common()]


def credit_history(trials: Sequence[Trial], goal: str = "min") -> dict[str, list[float]]:
    """Credit of each technique after each trial: its share of the improvements of the best so far.

    A trial that improves on the best value so far credits its technique with the relative
    improvement ``(old - new) / |old|`` (the first success improves on nothing and earns nothing).
    The curve of a technique is its cumulative credit divided by the total, so the curves show who
    found the progress, and when.
    """
    ordered = sorted(trials, key=lambda t: t.id)
    names = sorted({t.technique or "?" for t in ordered})
    cum = dict.fromkeys(names, 0.0)
    out: dict[str, list[float]] = {n: [] for n in names}
    best: float | None = None
    for t in ordered:
        loss = _loss(t, goal)
        if loss is not None and (best is None or loss < best):
            if best is not None:
                cum[t.technique or "?"] += (best - loss) / max(abs(best), 1e-300)
            best = loss
        total = sum(cum.values())
        for n in names:
            out[n].append(cum[n] / total if total > 0 else 0.0)
    return out


def _text(v: Any) -> str:
    """Any value as HTML text: everything this page shows comes from the store, and is escaped."""
    return html.escape(str(v))


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return html.escape(json.dumps(v, default=str) if not isinstance(v, str) else v)


def _improvements_table(conv: dict[str, Any]) -> str:
    """The trials that improved the best so far: the convergence curve as a table."""
    # The curve's last point repeats the best at the last trial (to draw the line to the end).
    steps = list(zip(conv["best_trial"], conv["best_value"], conv["best_technique"], strict=False))
    rows = [f"<tr><td>{_text(i)}</td><td>{_value(v)}</td><td>{_text(t)}</td></tr>" for i, v, t in steps]
    return ("<table><tr><th>trial</th><th>new best</th><th>technique</th></tr>" + "".join(rows)
            + "</table>")


def _no_plot(what: str, plotly_missing: bool) -> str:
    if not plotly_missing:
        return ""  # plots=False: left out on purpose, nothing to explain
    return (f"<p class='muted'>No {html.escape(what)} plot: plotly is not installed "
            f"({html.escape(_PLOT_EXTRA_HINT)}).</p>")


def _when(t: float | None) -> str:
    if not t:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(t, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return _text(t)  # not a time (a damaged store): shown as it is


def _best_html(best: dict[str, Any] | None, unit: str | None = None) -> list[str]:
    if best is None:
        return ["<p>No successful trial.</p>"]
    shown = _value(best["value"]) + (f" {_text(unit)}" if unit else "")
    parts = [f"<p>value <b>{shown}</b> (trial {_text(best['trial'])}, proposed by "
             f"<code>{html.escape(str(best['technique']))}</code>)</p>"]
    parts += [f"<p class='improvement'><b>{html.escape(line)}</b></p>" for line in best["lines"]]
    if best["command_line"]:
        parts.append(f"<p>command line:</p><code class='cmd'>{html.escape(best['command_line'])}</code>")
    params = []
    if best["only_differing"]:
        params.append(f"<p class='muted'>{_text(best['n_differing'])} of {_text(best['n_params'])} "
                      "parameters differ from the default (the others are at their default):</p>")
    for group, items in best["groups"].items():
        params.append(f"<div class='group'>{_text(group)} ({len(items)})</div><div class='grid'>")
        params += [f"<div><code>{html.escape(str(k))}</code> = {_value(v)}</div>" for k, v, _ in items]
        params.append("</div>")
    if best["final_flags"] is None:
        return parts + params
    parts.append(f"<p>{_text(best['n_final_flags'])} options besides the sources:</p>")
    for group, flags in best["final_flags"].items():
        parts.append(f"<div class='flags'><b>{html.escape(group)} ({len(flags)}):</b> "
                     f"<code>{html.escape(' '.join(flags))}</code></div>")
    return [*parts, f"<details><summary>the best trial of the search (trial {_text(best['trial'])}): "
            f"{_text(best['n_differing'])} of {_text(best['n_params'])} parameters differ from the default"
            "</summary>",
            *params, "</details>"]


def _fallback_body(view: dict[str, Any], plots: bool, missing: bool) -> str:
    """The page without its script: every table of the views (what a reader without JavaScript sees)."""
    run = view["run"]
    conv = view["convergence"]
    counts = Counter({"ok": conv["n_points"]})
    for status, f in conv["failed"].items():
        counts[status] += len(f["trial"])
    parts = ["<table id='run-summary'>",
             f"<tr><th>run</th><td>{_text(run['name'])} (id {_text(run['id'])})</td></tr>",
             f"<tr><th>status</th><td>{html.escape(str(run['status']))}"
             f"{' (no driver)' if run.get('driver_gone') else ''}</td></tr>",
             f"<tr><th>kind</th><td>{_text(run['kind'])}</td></tr>",
             f"<tr><th>created</th><td>{_when(run['started_at'])}</td></tr>",
             f"<tr><th>finished</th><td>{_when(run['finished_at'])}</td></tr>",
             f"<tr><th>machine</th><td>{html.escape(str(run['machine'] or '-'))}</td></tr>",
             f"<tr><th>goal</th><td>{html.escape(str(run['goal']))}imise "
             f"{_text(run['metric'] or 'the objective')}"
             f"{' (' + _text(run['unit']) + ')' if run.get('unit') else ''}</td></tr>",
             f"<tr><th>trials</th><td>{_text(view['n_trials'])} ("
             + ", ".join(f"{_text(n)} {_text(s)}" for s, n in sorted(counts.items()) if n) + ")</td></tr>"]
    if run["settings"]:
        settings = json.dumps(run["settings"], default=str, sort_keys=True)
        parts.append(f"<tr><th>settings</th><td><code>{html.escape(settings)}</code></td></tr>")
    parts.append("</table><h2>Best configuration</h2>")
    parts += _best_html(view["best"], run.get("unit"))
    parts.append("<h2>Convergence</h2>")
    if conv["n_points"]:
        if not plots:
            parts.append(_no_plot("convergence", missing))
        parts.append(_improvements_table(conv))
    else:
        parts.append("<p>No successful trial to plot.</p>")
    parts.append("<h2>Technique credits over time</h2>")
    if view["techniques"]:
        if not plots:
            parts.append(_no_plot("credits", missing))
        parts.append("<table><tr><th>technique</th><th>trials</th><th>successful</th>"
                     "<th>share of improvements</th></tr>")
        parts += [f"<tr><td>{_text(t['technique'])}</td><td>{_text(t['trials'])}</td>"
                  f"<td>{_text(t['ok'])}</td><td>{t['credit']:.0%}</td></tr>" for t in view["techniques"]]
        parts.append("</table>")
    else:
        parts.append("<p>No trials yet.</p>")
    parts.append("<h2>Failures by reason</h2>")
    if view.get("pruned"):
        parts.append(f"<p>{_text(view['pruned'])} trials pruned early by the fidelity schedule (not "
                     "failures).</p>")
    if view.get("cancelled"):
        parts.append(f"<p>{_text(view['cancelled'])} trials cancelled by the run's end (a time budget, "
                     "an interrupt; not failures).</p>")
    if view["failures"]:
        if not plots:
            parts.append(_no_plot("failures", missing))
        parts.append("<table><tr><th>status</th><th>reason</th><th>trials</th></tr>")
        parts += [f"<tr><td>{_text(f['status'])}</td><td>{_text(f['label'])}</td>"
                  f"<td>{_text(f['count'])}</td></tr>" for f in view["failures"]]
        parts.append("</table>")
    else:
        parts.append("<p>No failed or timed-out trial.</p>")
    return "\n".join(parts)


#: The report inlines at most this many trials for its table (the dashboard pages through any number).
REPORT_MAX_TRIALS = 5000


# The characters a run's name keeps in a report's default file name; any other becomes "_".
_NAME_PUNCTUATION = frozenset("-_.,+@=")
_NAME_MAX_BYTES = 120


def report_file_name(name: str, run_id: int) -> str:
    """The default file name of a run's report, ``report-NAME.html``, with NAME made safe for a file name.

    The run's name comes from the store, which whoever wrote it chose: a ``/`` (another folder), a leading
    dot, control and format characters (a terminal's escape sequences, right-to-left overrides), spaces and
    any other punctuation become ``_``; a long name is cut. A name that had to change gets the run's id
    (``report-a_b-7.html`` for run 7, ``a/b``), so that two runs never share a file.

    Example:
        >>> report_file_name("tune-gemm", 3), report_file_name("../x", 4), report_file_name("a/b", 7)
        ('report-tune-gemm.html', 'report-_x-4.html', 'report-a_b-7.html')
    """
    text = str(name)
    safe = "".join(ch if (ch.isalnum() and unicodedata.category(ch)[0] in "LN") or ch in _NAME_PUNCTUATION
                   else "_" for ch in text)
    safe = safe.lstrip(".")
    safe = safe.encode("utf-8")[:_NAME_MAX_BYTES].decode("utf-8", errors="ignore")
    if not safe.strip("_"):
        return f"report-run-{int(run_id)}.html"
    return f"report-{safe}.html" if safe == text else f"report-{safe}-{int(run_id)}.html"


def _write_page(path: str | os.PathLike[str], page: str, *, follow_symlinks: bool) -> Path:
    """Write ``page`` to ``path`` atomically: a file of its own, renamed over ``path`` (never written through
    a hard link, never half written). A symbolic link at ``path`` is followed (the file it points to is
    replaced) only with ``follow_symlinks``; otherwise it is refused: the rename would replace the link,
    never what it points to, even if the link appears after this check."""
    out = Path(path)
    target = out
    if out.is_symlink():
        if not follow_symlinks:
            raise PerftuneError(f"{out} is a symbolic link: a report is not written through a link to a file "
                                "it did not name (remove the link, or name the file: -o FILE)")
        target = Path(os.path.realpath(out))
    try:
        write_text_atomic(target, page)
    except OSError as e:
        raise PerftuneError(f"{out}: cannot write the report ({e.strerror or e})") from None
    return out


def write_html(store: Any, run: str | int, path: str | os.PathLike[str], *,
               plots: bool | None = None, follow_symlinks: bool = True) -> Path:
    """Write a self-contained HTML report of one stored run: the dashboard's run page, offline.

    The page holds the same views as ``perftune dashboard``'s run page, drawn by the same script from
    the same data: the best configuration (for a large space such as a flags run, only the parameters
    that differ from the default, grouped) with its command line and the improvement with its
    confidence interval; the convergence (every trial and the best so far, by trial or by time); the
    trial table (sortable, filterable, paginated: every trial of a run of up to
    :data:`REPORT_MAX_TRIALS`; of a larger one, the first ones and always the best, with a line beside the
    table saying so); parameter importance, parallel coordinates and
    slice plots; the technique credits over time; the failures by reason. plotly.js and the data are
    inlined: the file makes no request when opened. Without plotly (the ``plot`` extra) the page has
    the tables and says where each plot would be.

    Args:
        store: An open :class:`perftune.store.Store`.
        run: Run name, numeric id or ``"latest"``.
        path: The HTML file to write.
        plots: Draw the interactive plots; ``None`` (the default) draws them when plotly is installed.
        follow_symlinks: When ``path`` is a symbolic link, replace the file it points to; when False the
            link is refused (``perftune report`` does so for its default file name, which comes from the
            store). The file is written atomically either way (a new file renamed over the old one).

    Everything the page shows comes from the store and is escaped; the page carries a
    Content-Security-Policy (``<meta>``) that runs its own scripts only and makes no request.

    Returns:
        The path written.

    Raises:
        PerftuneError: unknown run (from the store), a trial id that is not an integer (a damaged store),
            ``plots=True`` without plotly, the file cannot be written, a symbolic link without
            ``follow_symlinks``, or ``path`` is the store's own file (its database, -wal or -shm file,
            through a link too).

    Example:
        >>> from perftune.store import open_store
        >>> write_html(open_store("perftune.db"), "latest", "report.html")  # doctest: +SKIP
    """
    from perftune.report._page import REPORT_CSP_NO_SCRIPT, csp_meta, page_html, plotly_js, view_asset
    from perftune.report._views import parameter_view, pareto_view, report_trials, run_view

    missing = not plots_available()
    if plots is None:
        plots = not missing
    elif plots and missing:
        plotly_js()  # fails before anything is written, naming the extra to install
    info = store.get_run(run)
    owns = getattr(store, "owns_path", None)
    if owns is not None and owns(path):
        raise PerftuneError(f"{os.fspath(path)} is the store's own file ({store.location}): a report never "
                            "replaces the store it reads; name another file")
    view = run_view(store, info.id)
    body = _fallback_body(view, plots, missing)
    title = f"perftune run {info.name}"
    footer = (f"<p class='muted' style='text-align:center'>written by perftune on "
              f"{datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}</p>")
    if plots:
        pareto = pareto_view(store, info.id)
        # The run's own table, not a dashboard page: up to REPORT_MAX_TRIALS rows, the best always among them.
        front = [] if pareto is None else pareto["front"]["trial"]
        trials = report_trials(store, info.id, limit=REPORT_MAX_TRIALS, keep=front)
        data = {"run": view, "params": parameter_view(store, info.id), "pareto": pareto,
                "trials": trials["rows"], "n_trials_inlined": len(trials["rows"]),
                "trials_note": trials["note"]}
        page = page_html("run", title=title, config={"mode": "static", "run": info.name, "data": data},
                         inline=True, body=body, footer=footer)
    else:
        page = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                f"{csp_meta(REPORT_CSP_NO_SCRIPT)}<link rel='icon' href='data:,'>"
                f"<title>{html.escape(title)}</title><style>{view_asset('views.css')}</style></head><body>"
                f"<header><h1>{html.escape(title)}</h1></header><main>{body}</main>{footer}</body></html>")
    return _write_page(path, page, follow_symlinks=follow_symlinks)
