"""``perftune dashboard --port 0``: the printed URL names the port the server listens on."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.space import Int, Space
from perftune.store import open_store

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")


def test_port_0_prints_the_port_the_server_listens_on(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.dashboard._app import serve

    db = str(tmp_path / "d.db")
    perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 5)}), budget=2, seed=0, store=db, name="d")
    servers: list[Any] = []

    class Recorded(uvicorn.Server):  # type: ignore[misc, name-defined]
        def __init__(self, config: Any) -> None:
            super().__init__(config)
            servers.append(self)

    monkeypatch.setattr(uvicorn, "Server", Recorded)
    lines: list[str] = []
    store = open_store(db, read_only=True)
    thread = threading.Thread(target=serve, args=(store,),
                              kwargs={"port": 0, "echo": lines.append}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not (servers and servers[0].started) and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert servers and servers[0].started, lines
        url = re.search(r"http://127\.0\.0\.1:(\d+)/", lines[0])
        assert url is not None and url.group(1) != "0", lines  # before: http://127.0.0.1:0/
        with urllib.request.urlopen(f"{url.group(0)}api/runs", timeout=30) as response:
            assert response.status == 200 and b'"d"' in response.read()
    finally:
        if servers:
            servers[0].should_exit = True
        thread.join(timeout=30)
    assert not thread.is_alive()
    store.close()
