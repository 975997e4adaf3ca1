"""A self-contained HTML page for one stored run: convergence, technique credits, failures, best."""

from __future__ import annotations

import base64
import datetime
import html
import io
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perftune.errors import PerftuneError
from perftune.report._improvement import final_answer
from perftune.trial import Status, Trial

__all__ = ["credit_history", "failure_counts", "plots_available", "write_html"]

_STATUS_COLOURS = {"failed": "#d62728", "timeout": "#ff7f0e", "cancelled": "#7f7f7f"}

# What a user without matplotlib installs to get the plots.
_PLOT_EXTRA_HINT = "pip install 'perftune[plot]'"


def plots_available() -> bool:
    """Whether matplotlib can be imported, so that :func:`write_html` draws its plots.

    Example:
        >>> isinstance(plots_available(), bool)
        True
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PerftuneError(f"the report's plots need matplotlib: {_PLOT_EXTRA_HINT}") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _loss(trial: Trial, goal: str) -> float | None:
    if trial.loss is not None:
        return trial.loss
    if trial.value is None or trial.status is not Status.OK:
        return None
    return trial.value if goal == "min" else -trial.value


def failure_counts(trials: Sequence[Trial]) -> list[tuple[str, str, int]]:
    """``(status, reason, count)`` for every kind of unsuccessful trial, most frequent first.

    Example:
        >>> from perftune.space import Config
        >>> failure_counts([Trial(0, Config({"x": 1}), Status.FAILED, reason="boom")])  # doctest: +SKIP
        [('failed', 'boom', 1)]
    """
    counts: Counter[tuple[str, str]] = Counter()
    for t in trials:
        if t.status in (Status.OK, Status.PENDING):
            continue
        text = (t.reason or "").strip()
        reason = text.splitlines()[0] if text else t.status.value
        counts[(t.status.value, reason[:160])] += 1
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


def _convergence_png(trials: Sequence[Trial], goal: str, title: str) -> str:
    plt = _pyplot()
    ordered = sorted(trials, key=lambda t: t.id)
    fig, ax = plt.subplots(figsize=(8, 4))
    xs_ok = [t.id for t in ordered if t.ok and t.value is not None]
    ys_ok = [t.value for t in ordered if t.ok and t.value is not None]
    ax.scatter(xs_ok, ys_ok, s=10, color="#1f77b4", alpha=0.45, label="measured")
    best_x, best_y = [], []
    best: float | None = None
    for t in ordered:
        if t.ok and t.value is not None:
            better = best is None or (t.value < best if goal == "min" else t.value > best)
            if better:
                best = t.value
        if best is not None:
            best_x.append(t.id)
            best_y.append(best)
    if best_x:
        ax.step(best_x, best_y, where="post", color="black", lw=2, label="best so far")
    finite = [y for y in ys_ok if y is not None and math.isfinite(y)]
    if finite:
        top = max(finite)
        for status, colour in _STATUS_COLOURS.items():
            fx = [t.id for t in ordered if t.status.value == status]
            if fx:
                ax.scatter(fx, [top] * len(fx), marker="x", color=colour, s=18, label=status)
        if min(finite) > 0 and max(finite) / min(finite) > 30:
            ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel("value")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    data = _png(fig)
    plt.close(fig)
    return data


def _credits_png(trials: Sequence[Trial], goal: str) -> str:
    plt = _pyplot()
    ordered = sorted(trials, key=lambda t: t.id)
    hist = credit_history(ordered, goal)
    names = list(hist)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    xs = [t.id for t in ordered]
    for n in names:
        ax1.plot(xs, hist[n], label=n, lw=1.6)
    ax1.set_title("share of the improvements found")
    ax1.set_xlabel("trial")
    ax1.set_ylim(-0.02, 1.02)
    ax1.grid(True, alpha=0.3)
    # Share of proposals per technique in a sliding window: how the ensemble moved its budget.
    window = max(10, len(ordered) // 10)
    shares: dict[str, list[float]] = {n: [] for n in names}
    for i in range(len(ordered)):
        chunk = ordered[max(0, i - window + 1) : i + 1]
        c = Counter(t.technique or "?" for t in chunk)
        for n in names:
            shares[n].append(c[n] / len(chunk))
    if xs:
        ax2.stackplot(xs, [shares[n] for n in names], labels=names, alpha=0.85)
    ax2.set_title(f"share of proposals (window of {window})")
    ax2.set_xlabel("trial")
    ax2.set_ylim(0, 1)
    handles, labels = ax2.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.84, 1))
    data = _png(fig)
    plt.close(fig)
    return data


def _failures_png(failures: list[tuple[str, str, int]]) -> str:
    plt = _pyplot()
    top = failures[:12]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(top) + 1.2))
    labels = [f"{s}: {r[:50]}" for s, r, _ in top][::-1]
    colours = [_STATUS_COLOURS.get(s, "#d62728") for s, _, _ in top][::-1]
    ax.barh(labels, [n for _, _, n in top][::-1], color=colours)
    ax.set_xlabel("trials")
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    data = _png(fig)
    plt.close(fig)
    return data


def _img(data: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return html.escape(json.dumps(v, default=str) if not isinstance(v, str) else v)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;color:#222;
padding:0 1em}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left}
th{background:#f4f4f4} img{max-width:100%} .muted{color:#777} code{background:#f4f4f4;padding:0 .2em}
"""


def _improvements_table(trials: Sequence[Trial], goal: str) -> str:
    """The trials that improved the best so far: the convergence curve as a table."""
    rows = []
    best: float | None = None
    for t in sorted(trials, key=lambda t: t.id):
        loss = _loss(t, goal)
        if loss is not None and (best is None or loss < best):
            best = loss
            rows.append(f"<tr><td>{t.id}</td><td>{_value(t.value)}</td>"
                        f"<td>{html.escape(str(t.technique))}</td></tr>")
    return ("<table><tr><th>trial</th><th>new best</th><th>technique</th></tr>" + "".join(rows)
            + "</table>")


def _no_plot(what: str, matplotlib_missing: bool) -> str:
    if not matplotlib_missing:
        return ""  # plots=False: left out on purpose, nothing to explain
    return (f"<p class='muted'>No {html.escape(what)} plot: matplotlib is not installed "
            f"({html.escape(_PLOT_EXTRA_HINT)}).</p>")


def write_html(store: Any, run: str | int, path: str | os.PathLike[str], *,
               plots: bool | None = None) -> Path:
    """Write a self-contained HTML report of one stored run.

    The page shows the run's summary, the convergence plot (every measured value and the best so
    far, failures marked), the technique credits over time (who found the improvements, and how the
    ensemble shared its proposals), the failures by reason, and the best configuration. The tables
    (every new best, techniques, failures) are always there; the plots need matplotlib (the ``plot``
    extra), and without it the page says so where each plot would be.

    Args:
        store: An open :class:`perftune.store.Store`.
        run: Run name, numeric id or ``"latest"``.
        path: The HTML file to write.
        plots: Draw the plots; ``None`` (the default) draws them when matplotlib is installed.

    Returns:
        The path written.

    Raises:
        PerftuneError: unknown run (from the store), ``plots=True`` without matplotlib, or the file
            cannot be written.

    Example:
        >>> from perftune.store import open_store
        >>> write_html(open_store("perftune.db"), "latest", "report.html")  # doctest: +SKIP
    """
    missing = not plots_available()
    if plots is None:
        plots = not missing
    elif plots and missing:
        _pyplot()  # fails before anything is written, naming the extra to install
    info = store.get_run(run)
    trials = [t for t in store.trials(info.id) if t.status is not Status.PENDING]
    goal = getattr(info, "goal", "min") or "min"
    name = getattr(info, "name", str(info.id))
    best = store.best(info.id)
    failures = failure_counts(trials)
    status_counts = Counter(t.status.value for t in trials)
    created = getattr(info, "created_at", None)
    when = (datetime.datetime.fromtimestamp(created, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
            if created else "?")
    metric = getattr(info, "metric", None)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>"
             f"<title>perftune run {html.escape(name)}</title>",
             f"<style>{_CSS}</style></head><body>",
             f"<h1>perftune run <code>{html.escape(name)}</code></h1>",
             "<table>",
             f"<tr><th>run id</th><td>{info.id}</td></tr>",
             f"<tr><th>status</th><td>{html.escape(str(getattr(info, 'status', '?')))}</td></tr>",
             f"<tr><th>created</th><td>{when}</td></tr>",
             f"<tr><th>goal</th><td>{html.escape(goal)}imise "
             f"{html.escape(metric or 'the objective')}</td></tr>",
             f"<tr><th>trials</th><td>{len(trials)} ("
             + ", ".join(f"{n} {html.escape(s)}" for s, n in sorted(status_counts.items())) + ")</td></tr>"]
    # The recorded final answer has its own line below.
    settings = {k: v for k, v in (getattr(info, "settings", None) or {}).items() if k != "result"}
    if settings:
        parts.append("<tr><th>settings</th><td><code>"
                     + html.escape(json.dumps(settings, default=str, sort_keys=True)) + "</code></td></tr>")
    parts.append("</table>")

    parts.append("<h2>Best configuration</h2>")
    if best is None:
        parts.append("<p>No successful trial.</p>")
    else:
        parts.append(f"<p>value <b>{_value(best.value)}</b> (trial {best.id}, proposed by "
                     f"<code>{html.escape(str(best.technique))}</code>)</p><table><tr><th>parameter</th><th>value</th></tr>")
        for k, v in dict(best.config).items():
            parts.append(f"<tr><td>{html.escape(str(k))}</td><td>{_value(v)}</td></tr>")
        parts.append("</table>")
    # The same final answer and improvement line as `perftune run` and `perftune show` print.
    answer = final_answer(store, info, trials)
    if answer.command_line is not None:
        parts.append(f"<p>final command line: <code>{html.escape(answer.command_line)}</code></p>")
    elif answer.trial is not None and answer.config and (best is None or answer.trial != best.id):
        parts.append(f"<p>final answer: trial {answer.trial}</p>"
                     "<table><tr><th>parameter</th><th>value</th></tr>")
        for k, v in answer.config.items():
            parts.append(f"<tr><td>{html.escape(str(k))}</td><td>{_value(v)}</td></tr>")
        parts.append("</table>")
    for line in answer.lines():
        parts.append(f"<p class='improvement'><b>{html.escape(line)}</b></p>")

    parts.append("<h2>Convergence</h2>")
    if any(t.ok for t in trials):
        if plots:
            parts.append(_img(_convergence_png(trials, goal, f"{name}: value per trial"), "convergence plot"))
        else:
            parts.append(_no_plot("convergence", missing))
        parts.append(_improvements_table(trials, goal))
    else:
        parts.append("<p>No successful trial to plot.</p>")

    parts.append("<h2>Technique credits over time</h2>")
    if trials:
        parts.append(_img(_credits_png(trials, goal), "technique credits") if plots
                     else _no_plot("credits", missing))
        by_tech = Counter(t.technique or "?" for t in trials)
        ok_tech = Counter(t.technique or "?" for t in trials if t.ok)
        hist = credit_history(trials, goal)
        parts.append("<table><tr><th>technique</th><th>trials</th><th>successful</th>"
                     "<th>share of improvements</th></tr>")
        for tech, n in by_tech.most_common():
            share = hist[tech][-1] if hist.get(tech) else 0.0
            parts.append(f"<tr><td>{html.escape(tech)}</td><td>{n}</td><td>{ok_tech[tech]}</td>"
                         f"<td>{share:.0%}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No trials yet.</p>")

    parts.append("<h2>Failures by reason</h2>")
    if failures:
        parts.append(_img(_failures_png(failures), "failures by reason") if plots
                     else _no_plot("failures", missing))
        parts.append("<table><tr><th>status</th><th>reason</th><th>trials</th></tr>")
        for s, r, n in failures:
            parts.append(f"<tr><td>{html.escape(s)}</td><td>{html.escape(r)}</td><td>{n}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>No failed, timed-out or cancelled trial.</p>")

    parts.append(f"<p class='muted'>written by perftune on "
                 f"{datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}</p></body></html>")
    out = Path(path)
    try:
        out.write_text("\n".join(parts), encoding="utf-8")
    except OSError as e:
        raise PerftuneError(f"{out}: cannot write the report ({e.strerror or e})") from None
    return out
