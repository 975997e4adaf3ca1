"""Reports of stored runs: a self-contained HTML page, with plots when matplotlib is installed.

The core install writes the page with its tables (every new best, techniques, failures by reason,
the best configuration); the plots need the ``plot`` extra (``pip install 'perftune[plot]'``).
matplotlib is imported only when a plot is drawn, so importing this package never needs it.

Example:
    >>> from perftune.store import open_store
    >>> from perftune.report import write_html
    >>> write_html(open_store("perftune.db"), "latest", "report.html")  # doctest: +SKIP

From the command line: ``perftune report latest -o report.html``. The improvement every view prints
is :class:`Improvement` (one definition: the speedup with a confidence interval).
"""

from __future__ import annotations

from perftune.report._html import credit_history, failure_counts, plots_available, write_html
from perftune.report._improvement import (
    FinalAnswer,
    Improvement,
    answer_of,
    final_answer,
    improvement_of,
    record_final_answer,
    trial_speedup,
)

__all__ = [
    "FinalAnswer",
    "Improvement",
    "answer_of",
    "credit_history",
    "failure_counts",
    "final_answer",
    "improvement_of",
    "plots_available",
    "record_final_answer",
    "trial_speedup",
    "write_html",
]
