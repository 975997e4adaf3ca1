"""Shared fixtures of the test suite.

``postgres_url`` starts a throwaway PostgreSQL server (``initdb`` in a temporary folder, a free port,
trust authentication on 127.0.0.1 only) once per session and stops it at the end. Tests that use it
are marked ``postgres`` automatically. They are skipped, with the reason, only when the PostgreSQL
binaries or psycopg2 are missing (Debian: ``apt-get install postgresql``; ``pip install psycopg2-binary``).
When the suite runs as root, the server runs as the unprivileged ``postgres`` (or ``nobody``) user,
because PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_PG_TOOLS = ("initdb", "pg_ctl", "postgres")
_PG_SUPERUSER = "perftune"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if ("postgres_url" in names or "fresh_postgres_url" in names) and not item.get_closest_marker(
            "postgres"
        ):
            item.add_marker(pytest.mark.postgres)


def _pg_bindir() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres (newest version wins), or None."""
    candidates = [Path("/usr/local/bin")]
    candidates += sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if all(os.access(folder / tool, os.X_OK) for tool in _PG_TOOLS):
            return folder
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Server:
    bindir: Path
    root: Path
    port: int
    run_as: dict[str, Any]

    @property
    def data(self) -> Path:
        return self.root / "data"

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
            env=_server_env(),
            **self.run_as,
        )


def _server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    env["LANG"] = "C"
    return env


def _unprivileged_user() -> pwd.struct_passwd | None:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL (``postgresql://perftune@127.0.0.1:PORT/postgres``) of a throwaway PostgreSQL server."""
    pytest.importorskip("psycopg2", reason="psycopg2 is not installed (pip install 'perftune[postgres]')")
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL binaries (initdb, pg_ctl, postgres) not found in /usr/local/bin, "
            "/usr/lib/postgresql/*/bin or PATH: install Debian's postgresql package"
        )
    root = Path(tempfile.mkdtemp(prefix="perftune-pg-"))
    run_as: dict[str, Any] = {}
    if os.geteuid() == 0:
        user = _unprivileged_user()
        if user is None:
            shutil.rmtree(root, ignore_errors=True)
            pytest.skip("running as root and no unprivileged 'postgres' or 'nobody' user to run PostgreSQL")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    server = _Server(bindir, root, _free_port(), run_as)
    try:
        subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(server.data),
                "-U",
                _PG_SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],  # fmt: skip
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env=_server_env(),
            **run_as,
        )
        # Durability is pointless for a throwaway server; these settings make the tests fast.
        options = (
            f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        server.pg_ctl("-l", str(root / "server.log"), "-w", "-t", "60", "-o", options, "start")
    except subprocess.CalledProcessError as exc:
        log = root / "server.log"
        detail = (exc.stderr or exc.stdout or "").strip()
        if log.exists():
            detail += "\n" + log.read_text()[-2000:]
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start the throwaway PostgreSQL server: {detail}")
    try:
        yield f"postgresql://{_PG_SUPERUSER}@127.0.0.1:{server.port}/postgres"
    finally:
        server.pg_ctl("-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """URL of a new, empty schema on the throwaway server (first on the search path), dropped after the test.

    A schema is as isolated as a database for perftune and is created in milliseconds.
    """
    import psycopg2

    name = f"t_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(postgres_url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE SCHEMA {name}")
        yield f"{postgres_url}?options=-csearch_path%3D{name}"
        with conn.cursor() as cur:
            cur.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    finally:
        conn.close()


@pytest.fixture
def public_tmp_path() -> Iterator[Path]:
    """A temporary folder the sandbox user can read (pytest's own are private to root).

    Candidates run as an unprivileged user when the tests run as root, so task folders must be
    reachable by it.
    """
    path = Path(tempfile.mkdtemp(prefix="perftune-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
