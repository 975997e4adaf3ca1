"""The HTML shell of every view: the dashboard's pages (assets served) and the report (assets inlined).

Both load the same two assets, ``_assets/views.js`` and ``_assets/views.css``, and Plotly's own
plotly.js from the ``plotly`` Python package, so that nothing is ever fetched from another host. Until
plotly.js has run, ``views.js`` draws each line or scatter plot as a static SVG of its own, which
Plotly's interactive plot then replaces.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from functools import cache
from importlib.resources import files
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["asset_version", "page_html", "plotly_js", "view_asset", "view_json"]

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


@cache
def asset_version(name: str) -> str:
    """A short hash of a served asset (``plotly.min.js``, ``views.js``, ``views.css``), for its URL.

    The dashboard links ``static/NAME?v=HASH`` and serves it as immutable: a browser that has it never asks
    again, and its compiled code (V8's code cache) is reused; a new version is a new URL.

    Raises:
        PerftuneError: ``plotly.min.js`` without plotly installed (names the extra).
    """
    text = plotly_js() if name == "plotly.min.js" else view_asset(name)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _static(name: str) -> str:
    return f"static/{name}?v={asset_version(name)}"


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
    if inline:
        cfg = view_json({"page": page, **config})
        head = f"<style>{view_asset('views.css')}</style>"
        # views.js first: it draws the tables and static SVG plots, and Plotly's plots replace those once
        # the inlined plotly.js (4.8 MB to compile) has run.
        scripts = (f"<script>window.PERFTUNE={cfg};</script>\n<script>{view_asset('views.js')}</script>\n"
                   f"<script>{plotly_js()}</script>")
    else:
        # plotly.js is 4.8 MB of script: compiling it takes longer than reading a run of 100,000 trials. It
        # is loaded asynchronously, so that the tables are drawn while it is compiled and the plots follow;
        # the runs page, which draws none, loads it once it is drawn (for the run pages opened next).
        plotly = _static("plotly.min.js")
        cfg = view_json({"page": page, "plotly_src": plotly, **config})
        head = f'<base href="/"><link rel="stylesheet" href="{_static("views.css")}">'
        # views.js inserts plotly.js once its own requests have left (compiling it holds the main thread);
        # the preload starts the download at once.
        scripts = f'<script>window.PERFTUNE={cfg};</script>\n<script src="{_static("views.js")}"></script>'
        if page != "runs":
            head += f'<link rel="preload" as="script" href="{plotly}">'
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            # No favicon request: a dashboard page logs no 404, and a report makes no request at all.
            f"<link rel='icon' href='data:,'><title>{html.escape(title)}</title>{head}</head><body>"
            f"<header><h1>{html.escape(title)}</h1>{nav}</header><main><div id='content'>{body}</div></main>"
            f"{scripts}</body></html>")
