"""``perftune dashboard``: a live, read-only web view of a results store.

A Starlette app served by uvicorn (the ``dashboard`` extra: ``pip install 'perftune[dashboard]'``,
imported only when the dashboard starts). Its pages are drawn in the browser by the report's script
(:mod:`perftune.report`) from a read-only JSON API over the store, polled every second, so that new
trials appear without a reload. Every method but GET and HEAD is refused (405); bound to 127.0.0.1 unless
told otherwise, and on any other address only with a token.

Example:
    >>> from perftune.dashboard import create_app
    >>> app = create_app("sqlite://")  # doctest: +SKIP
    >>> serve("perftune.db", host="127.0.0.1", port=8050)  # doctest: +SKIP
"""

from __future__ import annotations

from perftune.dashboard._app import DEFAULT_PORT, create_app, is_loopback, serve

__all__ = ["DEFAULT_PORT", "create_app", "is_loopback", "serve"]
