"""The HTML shell of every view: the dashboard's pages (assets served) and the report (assets inlined).

Both load the same two assets, ``_assets/views.js`` and ``_assets/views.css``, and Plotly's own
plotly.js from the ``plotly`` Python package, so that nothing is ever fetched from another host. Until
plotly.js has run, ``views.js`` draws each line or scatter plot as a static SVG of its own, which
Plotly's interactive plot then replaces.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from functools import cache
from importlib.resources import files
from typing import Any

from perftune.errors import PerftuneError

__all__ = ["DASHBOARD_CSP", "REPORT_CSP_NO_SCRIPT", "asset_version", "csp_meta", "page_html", "plotly_js",
           "view_asset", "view_json"]

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
    # "</script>" or "<!--" inside a string must not end the script element. json.dumps escapes every
    # non-ASCII character (U+2028 and U+2029 too, line ends to older JavaScript): replaced here as well, in
    # case that ever changes.
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


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


# The pages' Content-Security-Policy: their scripts are perftune's own (views.js, plotly.js, the inline
# ``window.PERFTUNE`` data, allowed by its hash in the report and by a per-response nonce in the dashboard),
# so that markup that reached the page from the store (an event handler, a <script>) never runs. Plotly
# needs inline styles (it sets them on its elements) and 'unsafe-eval' (its parallel coordinates compile
# their WebGL code with Function: without it they are silently not drawn); neither lets markup run script.
_CSP_COMMON = ("object-src 'none'; base-uri 'self'; form-action 'none'; style-src 'self' 'unsafe-inline'; "
               "img-src 'self' data: blob:; font-src 'self' data:")
#: The dashboard's pages (``{nonce}``: the response's nonce); also sent with frame-ancestors 'none'.
DASHBOARD_CSP = ("default-src 'self'; script-src 'self' 'nonce-{nonce}' 'unsafe-eval'; connect-src 'self'; "
                 + _CSP_COMMON + "; frame-ancestors 'none'")
#: A report without scripts (no plotly): no script at all, and no request.
REPORT_CSP_NO_SCRIPT = ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; "
                        "form-action 'none'; style-src 'unsafe-inline'; img-src data:")


def _script_hash(text: str) -> str:
    """The CSP source of an inline script of this text (the browser hashes it with its line ends as LF)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


@cache
def _asset_hash(name: str) -> str:
    return _script_hash(plotly_js() if name == "plotly.min.js" else view_asset(name))


def _report_csp(config_script: str) -> str:
    """The report's policy: its three inline scripts by hash, and no request at all (default-src 'none')."""
    hashes = " ".join([_script_hash(config_script), _asset_hash("views.js"), _asset_hash("plotly.min.js")])
    return (f"default-src 'none'; script-src {hashes} 'unsafe-eval'; object-src 'none'; base-uri 'none'; "
            "form-action 'none'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:")


def csp_meta(policy: str) -> str:
    """A ``<meta>`` element that applies ``policy`` to the page (a file has no HTTP headers)."""
    return f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">'


def _static(name: str) -> str:
    return f"static/{name}?v={asset_version(name)}"


def page_html(page: str, *, title: str, config: dict[str, Any], inline: bool, body: str = "",
              nav: str = "", nonce: str | None = None, footer: str = "") -> str:
    """A whole page: header, the fallback ``body`` (replaced by the script), the assets and ``config``.

    Args:
        page: ``"runs"``, ``"run"`` or ``"compare"``.
        title: The page title.
        config: ``window.PERFTUNE`` (mode, page, run, data) for ``views.js``.
        inline: Inline the assets (the self-contained report) instead of linking the served ones.
        body: HTML shown until (or without) the script.
        nav: Extra links for the header.
        nonce: The dashboard's per-response CSP nonce, put on its inline script (see :data:`DASHBOARD_CSP`).
        footer: HTML after the content (not replaced by the script).

    The report (``inline``) carries its Content-Security-Policy in a ``<meta>`` element: its inline scripts
    are allowed by their hashes, and nothing else runs or is fetched.
    """
    if inline:
        config_script = f"window.PERFTUNE={view_json({'page': page, **config})};"
        head = f"{csp_meta(_report_csp(config_script))}<style>{view_asset('views.css')}</style>"
        # views.js first: it draws the tables and static SVG plots, and Plotly's plots replace those once
        # the inlined plotly.js (4.8 MB to compile) has run.
        scripts = (f"<script>{config_script}</script>\n<script>{view_asset('views.js')}</script>\n"
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
        attr = "" if nonce is None else f' nonce="{html.escape(nonce)}"'
        scripts = (f'<script{attr}>window.PERFTUNE={cfg};</script>\n'
                   f'<script src="{_static("views.js")}"{attr}></script>')
        if page != "runs":
            head += f'<link rel="preload" as="script" href="{plotly}">'
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            # No favicon request: a dashboard page logs no 404, and a report makes no request at all.
            f"<link rel='icon' href='data:,'><title>{html.escape(title)}</title>{head}</head><body>"
            f"<header><h1>{html.escape(title)}</h1>{nav}</header><main><div id='content'>{body}</div></main>"
            f"{footer}{scripts}</body></html>")
