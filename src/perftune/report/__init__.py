"""Reports of stored runs: a self-contained HTML page with plots (matplotlib, imported lazily).

Example:
    >>> from perftune.store import open_store
    >>> from perftune.report import write_html
    >>> write_html(open_store("perftune.db"), "latest", "report.html")  # doctest: +SKIP

From the command line: ``perftune report latest -o report.html``.
"""

from __future__ import annotations

from perftune.report._html import credit_history, failure_counts, write_html

__all__ = ["credit_history", "failure_counts", "write_html"]
