"""Reports of stored runs: a self-contained HTML page, with plots when Plotly is installed.

The report is the dashboard's run page in one offline file: the same view data (:func:`run_view`,
:func:`trials_view`, :func:`parameter_view`) drawn by the same script with Plotly, whose plotly.js is
inlined. The core install writes the page with its tables (every new best, techniques, failures by
reason, the best configuration); the interactive plots need the ``plot`` extra
(``pip install 'perftune[plot]'``). plotly is imported only when a page is written.

Example:
    >>> from perftune.store import open_store
    >>> from perftune.report import write_html
    >>> write_html(open_store("perftune.db"), "latest", "report.html")  # doctest: +SKIP

From the command line: ``perftune report latest -o report.html``. The improvement every view prints
is :class:`Improvement` (one definition: the speedup with a confidence interval).
"""

from __future__ import annotations

from perftune.report._html import (
    credit_history,
    failure_counts,
    plots_available,
    report_file_name,
    write_html,
)
from perftune.report._improvement import (
    FinalAnswer,
    Improvement,
    answer_of,
    answer_value,
    final_answer,
    format_factor,
    improvement_of,
    infeasible,
    record_final_answer,
    trial_speedup,
)
from perftune.report._page import asset_version, page_html, plotly_js, view_asset, view_json
from perftune.report._views import (
    FAILURE_KEY_CHARS,
    IMPORTANCE_METHOD,
    METRIC_UNITS,
    check_comparable,
    compare_view,
    driver_gone,
    failure_key,
    failure_label,
    flag_groups,
    metric_unit,
    parameter_view,
    pareto_view,
    report_trials,
    run_view,
    runs_view,
    trials_view,
    value_text,
    with_failed_default,
)

__all__ = [
    "FAILURE_KEY_CHARS",
    "IMPORTANCE_METHOD",
    "METRIC_UNITS",
    "FinalAnswer",
    "Improvement",
    "answer_of",
    "answer_value",
    "asset_version",
    "check_comparable",
    "compare_view",
    "credit_history",
    "driver_gone",
    "failure_counts",
    "failure_key",
    "failure_label",
    "flag_groups",
    "final_answer",
    "format_factor",
    "improvement_of",
    "infeasible",
    "metric_unit",
    "page_html",
    "parameter_view",
    "pareto_view",
    "plotly_js",
    "plots_available",
    "record_final_answer",
    "report_file_name",
    "report_trials",
    "run_view",
    "runs_view",
    "trial_speedup",
    "trials_view",
    "value_text",
    "view_asset",
    "view_json",
    "with_failed_default",
    "write_html",
]
