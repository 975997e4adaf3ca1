"""The dashboard's Starlette app: pages, static assets and a read-only JSON API over the store."""

from __future__ import annotations

import hmac
import html
import ipaddress
import secrets
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from perftune.errors import PerftuneError, StoreError

if TYPE_CHECKING:
    import socket

__all__ = ["DEFAULT_PORT", "create_app", "is_loopback", "serve"]

DEFAULT_PORT = 8050
_EXTRA_HINT = "pip install 'perftune[dashboard]'"
_READ_METHODS = ("GET", "HEAD")
_COOKIE = "perftune_token"
# The names a loopback dashboard answers to: any other Host header is a page of another site that reached
# 127.0.0.1 through its own DNS name (DNS rebinding), and must not read the store.
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
_PAGE_LIMIT_MAX = 500
# Past this a trial offset would overflow the database's 64-bit integers (and no run has that many trials).
_OFFSET_MAX = 2**62
_WARM_RUNS = 5
# The policy of every response that sets none of its own (JSON, assets, error pages): nothing runs.
_DEFAULT_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
# What follows /api/runs/RUN/ (nothing: the run's views).
_RUN_RESOURCES = ("version", "trials", "parameters", "pareto")


def _split_refs(query_string: bytes, key: str = "runs") -> list[str]:
    """The runs of ``?runs=a,b`` split at the commas of the URL as sent, then decoded: a name holding a
    comma or a slash is sent encoded (``%2C``, ``%2F``), so it stays one name.

    Example:
        >>> _split_refs(b"runs=a%2Fb%2Cc,beta&token=x")
        ['a/b,c', 'beta']
    """
    refs: list[str] = []
    for pair in query_string.decode("latin-1").split("&"):
        name, _, value = pair.partition("=")
        if urllib.parse.unquote_plus(name) == key:
            refs += [urllib.parse.unquote_plus(part, encoding="utf-8") for part in value.split(",") if part]
    return refs


def _run_path(scope: Any) -> tuple[str, str] | None:
    """``(run, resource)`` of ``/api/runs/RUN[/RESOURCE]``, or None for another path.

    Read from the path as it was sent (``raw_path``), where a run name holding ``/`` is one segment
    (``%2F``); the decoded path would split it.

    Example:
        >>> _run_path({"raw_path": b"/api/runs/a%2Fb/trials", "path": "/api/runs/a/b/trials"})
        ('a/b', 'trials')
    """
    raw = scope.get("raw_path")
    if raw:
        segments = raw.decode("latin-1").split("?", 1)[0].split("/")
        if len(segments) not in (4, 5) or segments[:3] != ["", "api", "runs"]:
            return None
        ref = urllib.parse.unquote(segments[3], encoding="utf-8")
        resource = segments[4] if len(segments) == 5 else ""
    else:  # a server that gives no raw path: the last segment, when it names a resource, is one
        path = str(scope.get("path", ""))
        if not path.startswith("/api/runs/"):
            return None
        rest = path[len("/api/runs/"):]
        ref, _, resource = rest.rpartition("/")
        if resource not in _RUN_RESOURCES:
            ref, resource = rest, ""
    if not ref or resource not in ("", *_RUN_RESOURCES):
        return None
    return ref, resource


def _starlette() -> Any:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise PerftuneError(f"the dashboard needs starlette and uvicorn: {_EXTRA_HINT}") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, ``localhost``).

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
        (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The host of a Host header, without its port, lower case.

    Example:
        >>> _host_name("LocalHost:8050"), _host_name("[::1]:8050"), _host_name("127.0.0.1")
        ('localhost', '[::1]', '127.0.0.1')
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[:end + 1] if end >= 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _host_allowed(value: str | None, server: Any) -> bool:
    """Whether a Host header names this machine's loopback (or the address the server is bound to)."""
    if not value:
        return False
    name = _host_name(value)
    allowed = set(_LOOPBACK_NAMES)
    if server and server[0]:
        bound = str(server[0]).lower()
        allowed |= {bound, f"[{bound}]"}
    return name in allowed


def _cookie_name(scope: Any) -> str:
    """The token's cookie, one per port: a browser sends a host's cookies to every port of it, so a
    shared name would hand one dashboard's token to (or be overwritten by) another on the same host."""
    server = scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] else None
    return f"{_COOKIE}_{port}" if port is not None else _COOKIE


class _Cache:
    """Views keyed by what changes them (the run's trial count and status): a finished run is read once."""

    def __init__(self, size: int = 64) -> None:
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._making: dict[tuple[Any, ...], threading.Lock] = {}
        self._size = size

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            # One computation per key: a second request for it (or the warm-up) waits for the first.
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            value = make()
            with self._lock:
                self._items[key] = value
                self._making.pop(key, None)
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        return value

    def peek(self, key: tuple[Any, ...]) -> Any:
        """The cached value of ``key``, or None."""
        with self._lock:
            return self._items.get(key)


def create_app(store: Any, *, token: str | None = None) -> Any:
    """The dashboard as an ASGI app (Starlette), reading ``store`` (a Store or a URL) and never writing.

    Args:
        store: An open :class:`perftune.store.Store`, or a store URL/path to open (it must exist).
        token: When given, every request must carry it: ``?token=...`` once (it is then kept in a
            cookie named for the port), or an ``Authorization: Bearer ...`` header; anything else gets
            403. Without one, only requests whose Host header names the loopback (``127.0.0.1``,
            ``localhost``, ``[::1]``) or the address served are answered; any other gets 421 (DNS
            rebinding: another site's page must not read the store).

    A store given as a URL is opened read-only: nothing is written to it, not even a schema upgrade.

    Raises:
        PerftuneError: starlette is not installed (names the extra), or the store cannot be opened.
    """
    _starlette()
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send

    from perftune import report
    from perftune.report._page import DASHBOARD_CSP
    from perftune.report._views import COMPARE_MAX_RUNS, check_comparable
    from perftune.store import TRIAL_ORDERS

    if isinstance(store, str) or store is None:
        from perftune.store import open_store

        # Read-only: the dashboard never writes, not even a schema upgrade (an older store is refused).
        store = open_store(store, must_exist=True, read_only=True)
    st = store
    cache = _Cache()

    def gone(info: Any) -> bool:
        """Whether the run says running but its driver is gone (a damaged lease: the run's view says so)."""
        try:
            return report.driver_gone(st, info)
        except StoreError:
            return False

    def version_key(ref: str) -> tuple[int, int, str, Any, bool]:
        info = st.get_run(ref)
        # A driver that dies changes no trial count: its run's views must be read again all the same.
        return info.id, st.count(info.id), info.status, info.finished_at, gone(info)

    def json_response(payload: Any, status_code: int = 200) -> Response:
        return Response(report.view_json(payload), status_code=status_code, media_type="application/json",
                        headers={"Cache-Control": "no-store"})

    def api(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                return json_response(fn(request))
            except StoreError as error:
                return json_response({"error": str(error)}, 404)
            except (PerftuneError, ValueError) as error:
                return json_response({"error": str(error)}, 400)
        return endpoint

    def page(kind: str, title: str, request: Request, **config: Any) -> Response:
        nav = "<a href='.'>runs</a>"
        body = "<p class='muted'>loading...</p><noscript>The dashboard needs JavaScript.</noscript>"
        # A nonce of this response allows the page's own inline script, and only it (DASHBOARD_CSP).
        nonce = secrets.token_urlsafe(18)
        text = report.page_html(kind, title=title, config={"mode": "live", **config}, inline=False, body=body,
                                nav=nav, nonce=nonce)
        return HTMLResponse(text, headers={"Cache-Control": "no-store",
                                           "Content-Security-Policy": DASHBOARD_CSP.format(nonce=nonce)})

    def runs_page(request: Request) -> Response:
        return page("runs", f"perftune runs: {st.location}", request)

    def run_page(request: Request) -> Response:
        ref = request.path_params["ref"]
        try:
            info = st.get_run(ref)
        except StoreError as error:
            return HTMLResponse(f"<!doctype html><title>no such run</title><p>{html.escape(str(error))}</p>"
                                "<p><a href='/'>all runs</a></p>", status_code=404)
        # The page asks the API for the run by its id: a name may hold any character ("/", ",").
        return page("run", f"perftune run {info.name}", request, run=info.name, run_id=info.id)

    def compare_page(request: Request) -> Response:
        refs = list(dict.fromkeys(_split_refs(request.scope.get("query_string", b""))))
        if len(refs) > COMPARE_MAX_RUNS:
            return HTMLResponse(f"<!doctype html><p>compare: at most {COMPARE_MAX_RUNS} runs at a time "
                                f"({len(refs)} given)</p>", status_code=400)
        try:
            infos = [st.get_run(r) for r in refs]
        except StoreError as error:
            return HTMLResponse(f"<!doctype html><p>{html.escape(str(error))}</p>", status_code=404)
        try:
            # What `perftune compare` refuses (other spaces, other goals or metrics) is refused here too,
            # with the same line.
            check_comparable(list({i.id: i for i in infos}.values()))
        except PerftuneError as error:
            return HTMLResponse(f"<!doctype html><p>{html.escape(str(error))}</p>", status_code=400)
        names = [i.name for i in infos]
        return page("compare", "perftune compare: " + " vs ".join(names), request, runs=names,
                    run_ids=[i.id for i in infos])

    def static(name: str, media_type: str, read: Callable[[], str]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            # The pages link each asset with its hash (``?v=``): that URL never changes content, so the
            # browser keeps it without asking again and reuses the code it compiled from it.
            current = request.query_params.get("v") == report.asset_version(name)
            cache_control = "public, max-age=31536000, immutable" if current else "no-cache"
            return Response(read(), media_type=media_type, headers={"Cache-Control": cache_control})
        return endpoint

    def api_runs(request: Request) -> Any:
        # Keyed by every run's (count, status): polling a quiet store costs a count per run.
        infos = st.list_runs()
        key = ("runs", *[(i.id, i.status, i.finished_at, st.count(i.id), gone(i)) for i in infos])
        return {"runs": cache.get(key, lambda: report.runs_view(st)), "store": st.location}

    def api_run(request: Request, ref: str) -> Any:
        key = version_key(ref)
        return cache.get(("run", *key), lambda: report.run_view(st, key[0]))

    def api_version(request: Request, ref: str) -> Any:
        _, n, status, finished, driver_gone = version_key(ref)
        return {"n_trials": n, "status": status, "finished_at": finished, "driver_gone": driver_gone}

    def api_trials(request: Request, ref: str) -> Any:
        q = request.query_params
        try:
            offset = max(0, int(q.get("offset", 0)))
            limit = min(_PAGE_LIMIT_MAX, max(1, int(q.get("limit", 50))))
        except ValueError:
            raise PerftuneError("offset and limit must be integers") from None
        if offset >= _OFFSET_MAX:
            raise PerftuneError(f"offset must be below {_OFFSET_MAX}")
        if q.get("sort", "trial") not in TRIAL_ORDERS:
            raise PerftuneError(f"cannot sort trials by {q.get('sort')!r}: "
                                f"use one of {', '.join(TRIAL_ORDERS)}")
        filters = {"status": q.get("status") or None, "technique": q.get("technique") or None,
                   "text": q.get("text") or None}
        version = version_key(ref)
        key = ("count", *version, *filters.values())
        total = cache.peek(key)
        view = report.trials_view(st, version[0], offset=offset, limit=limit,
                                  sort=q.get("sort", "trial"),
                                  descending=q.get("descending") in ("1", "true"),
                                  total=total, after=q.get("after") or None, before=q.get("before") or None,
                                  **filters)
        if total is None:
            cache.get(key, lambda: view["total"])
        return view

    def api_parameters(request: Request, ref: str) -> Any:
        key = version_key(ref)
        return cache.get(("params", *key), lambda: report.parameter_view(st, key[0]))

    def api_pareto(request: Request, ref: str) -> Any:
        key = version_key(ref)
        return {"pareto": cache.get(("pareto", *key), lambda: report.pareto_view(st, key[0]))}

    run_resources: dict[str, Callable[[Request, str], Any]] = {
        "": api_run, "version": api_version, "trials": api_trials, "parameters": api_parameters,
        "pareto": api_pareto}

    def api_run_resource(request: Request) -> Any:
        # One route for /api/runs/RUN[/RESOURCE], split on the path as sent: RUN may hold "/" (as %2F).
        found = _run_path(request.scope)
        if found is None:
            raise StoreError(f"no such API path: {request.url.path}")
        ref, resource = found
        return run_resources[resource](request, ref)

    def api_compare(request: Request) -> Any:
        return report.compare_view(st, _split_refs(request.scope.get("query_string", b"")))

    class ReadOnly:
        """Refuses every method but GET and HEAD, and (with a token) every request without it."""

        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await self.app(scope, receive, send)
                return
            request = Request(scope)
            if token is None and not _host_allowed(request.headers.get("host"), scope.get("server")):
                # Without a token (a loopback dashboard), only this machine's own names are served: another
                # name is another site's page that rebinds its DNS name to 127.0.0.1 to read the store.
                response: Response = PlainTextResponse(
                    "the perftune dashboard answers only to 127.0.0.1, localhost or [::1] "
                    "(a Host header naming another site is refused)\n", status_code=421)
                await response(scope, receive, send)
                return
            if request.method not in _READ_METHODS:
                response = PlainTextResponse(
                    "the perftune dashboard is read-only: only GET and HEAD are served\n", status_code=405,
                    headers={"Allow": ", ".join(_READ_METHODS)})
                await response(scope, receive, send)
                return
            if token is not None:
                cookie_name = _cookie_name(scope)
                given = (request.query_params.get("token") or request.cookies.get(cookie_name)
                         or request.headers.get("authorization", "").removeprefix("Bearer "))
                if not given or not hmac.compare_digest(given.encode(), token.encode()):
                    response = PlainTextResponse("a token is needed: open the URL that `perftune dashboard` "
                                                 "printed\n", status_code=403)
                    await response(scope, receive, send)
                    return
                if request.query_params.get("token"):
                    async def send_with_cookie(message: Any) -> None:
                        if message["type"] == "http.response.start":
                            cookie = f"{cookie_name}={token}; Path=/; HttpOnly; SameSite=Strict"
                            message["headers"] = [*message.get("headers", []),
                                                  (b"set-cookie", cookie.encode())]
                        await send(message)
                    await self.app(scope, receive, send_with_cookie)
                    return
            await self.app(scope, receive, send)

    class Headers:
        """No framing by other sites, no type sniffing, and a Content-Security-Policy on every response (the
        pages set their own, DASHBOARD_CSP)."""

        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            async def wrapped(message: Any) -> None:
                if message["type"] == "http.response.start":
                    headers = list(message.get("headers", []))
                    if not any(name.lower() == b"content-security-policy" for name, _ in headers):
                        headers.append((b"content-security-policy", _DEFAULT_CSP))
                    message["headers"] = [*headers, (b"x-frame-options", b"DENY"),
                                          (b"x-content-type-options", b"nosniff")]
                await send(message)
            await self.app(scope, receive, wrapped if scope["type"] == "http" else send)

    routes = [
        Route("/", runs_page),
        Route("/runs/{ref:path}", run_page),
        Route("/compare", compare_page),
        Route("/static/plotly.min.js", static("plotly.min.js", "text/javascript", report.plotly_js)),
        Route("/static/views.js", static("views.js", "text/javascript",
                                         lambda: report.view_asset("views.js"))),
        Route("/static/views.css", static("views.css", "text/css", lambda: report.view_asset("views.css"))),
        Route("/api/runs", api(api_runs)),
        Route("/api/compare", api(api_compare)),
        Route("/api/runs/{rest:path}", api(api_run_resource)),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(Headers), Middleware(ReadOnly)])
    def warm_up() -> None:
        # The views of the newest runs are read once now, in the background: the first visit of a run of
        # 100,000 trials then costs a lookup, not seconds. scikit-learn's first import (seconds) too.
        try:
            api_runs(None)  # type: ignore[arg-type]
            for info in st.list_runs()[::-1][:_WARM_RUNS]:
                key = version_key(str(info.id))
                cache.get(("run", *key), lambda k=key: report.run_view(st, k[0]))  # type: ignore[misc]
            _preload_model()
        except Exception:  # noqa: BLE001 (a warm-up that fails leaves the requests to do the work)
            pass

    threading.Thread(target=warm_up, name="perftune-dashboard-warm-up", daemon=True).start()
    app.state.store = st
    return app


def _preload_model() -> None:
    import sklearn.ensemble  # noqa: F401
    import sklearn.inspection  # noqa: F401


def serve(store: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
          echo: Callable[[str], None] | None = None) -> None:
    """Serve the dashboard until Ctrl-C.

    On an address other than the loopback one, a token is required: ``token``, or one generated here
    and printed in the URL.

    Raises:
        PerftuneError: starlette/uvicorn missing, the store cannot be opened, or the port is taken.
    """
    _starlette()
    import uvicorn

    echo = echo if echo is not None else print
    if token is not None and not token.strip():
        raise PerftuneError("dashboard: --token must not be empty")
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(18)
    # Bound here and handed to uvicorn: the URL names the port the server listens on (--port 0 asks the
    # system for a free one), and a port that is taken is one clear line (uvicorn would log and exit 3).
    sock = _bind(host, port)
    try:
        app = create_app(store, token=token)
        port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
        echo(f"perftune dashboard of {app.state.store.location}: {url}")
        echo("read-only; Ctrl-C stops it" + ("" if token is None else "; the token is needed for every page"))
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``; PerftuneError, one line, when it cannot be."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise PerftuneError(f"dashboard: --host {host}: {error.strerror or error}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise PerftuneError(f"dashboard: cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock
