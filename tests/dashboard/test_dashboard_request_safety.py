"""The dashboard against requests a browser of another site, or a hand-made URL, may send: a Host header of
another name (DNS rebinding) is refused, the token's cookie is the port's own, bad numbers and cursors are
one-line 400s, a compare is capped and reads each run once, a damaged run does not empty the runs page, and
``create_app`` writes nothing to the store it opens."""

from __future__ import annotations

import hashlib
import http.client
import json
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.space import Config, Int, Space
from perftune.store import open_store

pytest.importorskip("starlette")

SPACE = Space({"x": Int(0, 20)})


def _objective(config: Config) -> float:
    return float((config["x"] - 7) ** 2 + 1)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("safety") / "runs.db")
    perftune.tune(_objective, SPACE, budget=12, seed=1, store=path, name="alpha")
    perftune.tune(_objective, SPACE, budget=10, seed=2, store=path, name="beta")
    return path


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _port(dash: Any) -> int:
    return int(urllib.parse.urlsplit(dash.url).port or 0)


def test_a_loopback_dashboard_answers_only_to_loopback_names(store_path: str, start: Any) -> None:
    dash = start(store_path)
    port = _port(dash)
    for host in (f"127.0.0.1:{port}", "127.0.0.1", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
        status, _, body = _get(port, "/api/runs", {"Host": host})
        assert status == 200, (host, body)
        assert [r["name"] for r in json.loads(body)["runs"]] == ["alpha", "beta"]
    # A page of another site that rebound its own name to 127.0.0.1 sends that name: it reads nothing.
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.attacker.example:{port}",
                 f"localhost.attacker.example:{port}"):
        for path in ("/api/runs", "/runs/alpha", "/", "/api/runs/alpha/trials"):
            status, _, body = _get(port, path, {"Host": host})
            assert status == 421, (host, path, status)
            text = body.decode()
            assert text.count("\n") == 1 and "answers only to 127.0.0.1, localhost or [::1]" in text
            assert "alpha" not in text


def test_the_token_cookie_is_named_for_the_port(store_path: str, start: Any) -> None:
    dash = start(store_path, "--token", "s3cret")
    port = _port(dash)
    status, headers, _ = _get(port, "/?token=s3cret")
    assert status == 200
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"perftune_token_{port}=s3cret;"), cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # The cookie of this port lets the page in; one of the same name for another port does not.
    assert _get(port, "/api/runs", {"Cookie": f"perftune_token_{port}=s3cret"})[0] == 200
    assert _get(port, "/api/runs", {"Cookie": f"perftune_token_{port + 1}=s3cret"})[0] == 403
    assert _get(port, "/api/runs", {"Cookie": "perftune_token=s3cret"})[0] == 403
    # With a token, a proxy's name is fine: the token is what guards the store.
    assert _get(port, "/api/runs", {"Host": "tuner.example", "Authorization": "Bearer s3cret"})[0] == 200


class _Client:
    """GET requests to a running dashboard: ``.status_code``, ``.text`` and ``.json()`` of each answer."""

    def __init__(self, port: int) -> None:
        self.port = port

    def get(self, path: str) -> Any:
        status, _, body = _get(self.port, path)

        class Answer:
            status_code = status
            text = body.decode()

            def json(self) -> Any:
                return json.loads(body)

        return Answer()


@pytest.fixture(scope="module")
def client(store_path: str, start_for_module: Any) -> Any:
    return _Client(_port(start_for_module(store_path)))


@pytest.mark.parametrize("path", [
    "/api/runs/1/trials?offset=99999999999999999999",
    "/api/runs/1/trials?after=%5B1,99999999999999999999%5D",
    "/api/runs/1/trials?after=" + "%5B" * 3000,
    "/api/runs/1/trials?sort=value&after=%5B1e999,1%5D",
    "/api/runs/1/trials?sort=value&before=%5BNaN,1%5D",
    "/api/runs/1/trials?after=%5B1," + "9" * 30 + "%5D",
])
def test_bad_numbers_and_cursors_are_one_line_400s(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 400, (path, response.text[:200])
    error = response.json()["error"]
    assert "\n" not in error and ("offset must be below" in error or "is not a page cursor" in error)


def test_a_run_id_past_64_bits_is_no_run(client: Any) -> None:
    for path in ("/api/runs/99999999999999999999999", "/api/runs/99999999999999999999999/trials"):
        response = client.get(path)
        assert response.status_code == 404, response.text[:200]
        assert "no run '99999999999999999999999'" in response.json()["error"]


def test_a_compare_reads_each_run_once_and_is_capped(store_path: str, client: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.report import _views, compare_view

    seen: list[int] = []
    real = _views.run_view

    def counting(store: Any, ref: Any, **kwargs: Any) -> Any:
        seen.append(ref)
        return real(store, ref, **kwargs)

    monkeypatch.setattr(_views, "run_view", counting)
    with open_store(store_path, read_only=True) as store:
        view = compare_view(store, ["alpha", "beta", "1", "2"] * 50)
        assert [r["run"]["name"] for r in view["runs"]] == ["alpha", "beta"]
        assert sorted(seen) == [1, 2]
        seen.clear()
        with pytest.raises(perftune.PerftuneError, match=r"^compare: at most 20 runs at a time \(21 given\)"):
            compare_view(store, [f"run{i}" for i in range(21)])
        assert seen == []
    # Over HTTP: the same names many times are one compare; too many runs is one line.
    response = client.get("/api/compare?runs=" + ",".join(["alpha", "beta", "1", "2"] * 50))
    assert response.status_code == 200, response.text[:200]
    assert [r["run"]["name"] for r in response.json()["runs"]] == ["alpha", "beta"]
    many = client.get("/api/compare?runs=" + ",".join(f"run{i}" for i in range(21)))
    assert many.status_code == 400
    assert many.json()["error"] == "compare: at most 20 runs at a time (21 given)"
    page = client.get("/compare?runs=" + ",".join(f"run{i}" for i in range(21)))
    assert page.status_code == 400 and "at most 20 runs" in page.text


@pytest.mark.parametrize("budget", ["1e999", "NaN", "-1"])
def test_a_run_with_a_damaged_budget_is_listed_with_its_error_and_the_others_as_usual(
        store_path: str, tmp_path: Path, budget: str, start: Any) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(Path(store_path).read_bytes())
    con = sqlite3.connect(path)
    settings = con.execute("SELECT settings FROM runs WHERE name = 'alpha'").fetchone()[0]
    damaged = settings[:-1] + ', "budget": {"evals": ' + budget + "}}"
    con.execute("UPDATE runs SET settings = ? WHERE name = 'alpha'", (damaged,))
    con.commit()
    con.close()
    tc = _Client(_port(start(str(path))))
    response = tc.get("/api/runs")
    assert response.status_code == 200, response.text[:300]
    rows = {r["name"]: r for r in response.json()["runs"]}
    assert "settings.budget.evals: not a finite number" in rows["alpha"]["error"]
    assert "\n" not in rows["alpha"]["error"]
    assert "error" not in rows["beta"] and rows["beta"]["n_trials"] == 10
    one = tc.get("/api/runs/alpha")
    assert one.status_code in (400, 404) and "settings.budget.evals" in one.json()["error"]


def test_create_app_with_a_path_writes_nothing_to_the_store(tmp_path: Path) -> None:
    from perftune.dashboard import create_app
    from perftune.errors import PerftuneError

    old = tmp_path / "old.db"
    with open_store(old, _schema_version=4) as st:
        st.create_run("r", None, {}, "min", None)
    before = hashlib.sha256(old.read_bytes()).hexdigest()
    # An older store is refused, not upgraded (the dashboard only reads).
    with pytest.raises(PerftuneError, match="older"):
        create_app(str(old))
    assert hashlib.sha256(old.read_bytes()).hexdigest() == before
    current = tmp_path / "new.db"
    open_store(current).close()
    app = create_app(str(current))
    try:
        with pytest.raises(PerftuneError, match="opened for reading only"):
            app.state.store.create_run("x", None, {}, "min", None)
    finally:
        app.state.store.close()
