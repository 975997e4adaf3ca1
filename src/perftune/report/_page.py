"""The HTML shell of every view: the dashboard's pages (assets served) and the report (assets inlined).

Both load the same two assets, ``_assets/views.js`` and ``_assets/views.css``, and Plotly's own
plotly.js from the ``plotly`` Python package, so that nothing is ever fetched from another host.
"""

from __future__ import annotations

import html
import json
import math
from functools import cache
from importlib.resources import files
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["page_html", "plotly_js", "view_asset", "view_json"]

_EXTRA_HINT = "pip install 'perftune[plot]'"


def view_json(obj: Any) -> str:
    """JSON with non-finite numbers as null (JSON has no NaN), safe to inline in a ``<script>``."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    try:  # the common case, fast: nothing to clean (a run of 100,000 trials is megabytes of numbers)
        text = json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(clean(obj), separators=(",", ":"), default=str, allow_nan=False)
    # "</script>" or "<!--" inside a string must not end the script element.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def view_asset(name: str) -> str:
    """One of the views' own assets (``views.js``, ``views.css``) as text."""
    return (files("perftune.report") / "_assets" / name).read_text(encoding="utf-8")


@cache
def plotly_js() -> str:
    """plotly.js as shipped inside the ``plotly`` Python package (no CDN, works offline).

    Raises:
        PerftuneError: plotly is not installed (names the extra).
    """
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise PerftuneError(f"the interactive plots need plotly: {_EXTRA_HINT}") from None
    return str(get_plotlyjs())


def page_html(page: str, *, title: str, config: dict[str, Any], inline: bool, body: str = "",
              nav: str = "") -> str:
    """A whole page: header, the fallback ``body`` (replaced by the script), the assets and ``config``.

    Args:
        page: ``"runs"``, ``"run"`` or ``"compare"``.
        title: The page title.
        config: ``window.PERFTUNE`` (mode, page, run, data) for ``views.js``.
        inline: Inline the assets (the self-contained report) instead of linking the served ones.
        body: HTML shown until (or without) the script.
        nav: Extra links for the header.
    """
    cfg = view_json({"page": page, **config})
    if inline:
        head = f"<style>{view_asset('views.css')}</style>"
        scripts = (f"<script>{plotly_js()}</script>\n<script>window.PERFTUNE={cfg};</script>\n"
                   f"<script>{view_asset('views.js')}</script>")
    else:
        head = '<base href="/"><link rel="stylesheet" href="static/views.css">'
        scripts = (f'<script src="static/plotly.min.js"></script>\n<script>window.PERFTUNE={cfg};</script>\n'
                   '<script src="static/views.js"></script>')
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            # No favicon request: a dashboard page logs no 404, and a report makes no request at all.
            f"<link rel='icon' href='data:,'><title>{html.escape(title)}</title>{head}</head><body>"
            f"<header><h1>{html.escape(title)}</h1>{nav}</header><main><div id='content'>{body}</div></main>"
            f"{scripts}</body></html>")
