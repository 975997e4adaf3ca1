"""Helpers (and fixtures, see conftest.py) of the acceptance tests of issues [1] and [3].

World-readable task folders, a recorder of measurements, and the real CLI.

Candidates of task files run as an unprivileged user (``nobody``) when the tests run as root, so
every task folder here is world-readable and files that candidates write go to a world-writable folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PERFTUNE = [sys.executable, "-m", "perftune"]

# A task whose candidates print a value; the optimum is x = 3, y = 0.
SQUARE = textwrap.dedent("""
    name = "square"
    [space]
    x = { type = "int", min = -20, max = 20, default = 0 }
    y = { type = "float", min = 0.0, max = 1.0, default = 0.5 }
    [run]
    command = ["python3", "-c", "print('value', ({x} - 3) ** 2 + {y})"]
    timeout_s = 20
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([-0-9.e]+)'
    goal = "min"
    [timing]
    repeats = 1
    warmup_runs = 0
""")

# The same objective, but every measurement first reports its configuration to a TCP recorder of the
# test (candidates cannot write outside their scratch folder) and sleeps SLEEP seconds, so that runs can
# be interrupted and measurements counted.
LOGGED = textwrap.dedent("""
    name = "logged"
    [space]
    x = { type = "int", min = -20, max = 20, default = 0 }
    y = { type = "int", min = 0, max = 9, default = 5 }
    [run]
    command = ["python3", "-c", "{program}"]
    timeout_s = 30
    [objective]
    metric = "stdout_regex"
    pattern = 'value ([-0-9.e]+)'
    goal = "min"
    [timing]
    repeats = 1
    warmup_runs = 0
    [sandbox]
    network = true
""").replace(
    "{program}",
    "import socket, time; s = socket.create_connection(('127.0.0.1', {port})); s.sendall(b'{x} {y}\\\\n'); "
    "s.close(); time.sleep({sleep}); print('value', ({x} - 3) ** 2 + {y})",
)


class Recorder:
    """A TCP server collecting the configurations that candidates of LOGGED report."""

    def __init__(self) -> None:
        import socketserver
        import threading

        lines: list[str] = []
        lock = threading.Lock()

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                data = self.rfile.read().decode()
                with lock:
                    lines.extend(line for line in data.splitlines() if line.strip())

        self.lines = lines
        self._lock = lock
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def measured(self) -> list[tuple[int, ...]]:
        """Configurations measured so far, in arrival order."""
        with self._lock:
            return [tuple(int(v) for v in line.split()) for line in self.lines]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.close()


@pytest.fixture
def task_dir() -> Iterator[Path]:
    """A world-readable (and world-writable, for logs) folder under /tmp, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="perftune-acceptance-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def write_task(folder: Path, text: str = SQUARE, name: str = "task.toml", **subs: Any) -> Path:
    for key, value in subs.items():
        text = text.replace("{" + key + "}", str(value))
    path = folder / name
    path.write_text(text)
    path.chmod(0o644)
    return path


def logged_task(folder: Path, recorder: Recorder, sleep: float = 0.0) -> Path:
    """The LOGGED task, reporting to ``recorder``."""
    return write_task(folder, LOGGED, port=recorder.port, sleep=sleep)


def perftune(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 240,
    subprocess_: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the ``perftune`` command: in this process through click's runner (fast), or with
    ``subprocess_=True`` as a real subprocess (for what only a process shows: tracebacks, signals)."""
    if subprocess_:
        full_env = dict(os.environ)
        full_env.pop("PERFTUNE_STORE", None)
        full_env.update(env or {})
        return subprocess.run(
            [*PERFTUNE, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
        )
    from click.testing import CliRunner

    from perftune.cli import cli

    runner_env: dict[str, str | None] = {"PERFTUNE_STORE": None, "COLUMNS": "200"}
    runner_env.update(env or {})
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner(env=runner_env).invoke(cli, list(args), prog_name="perftune")
    finally:
        os.chdir(old)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(result.exception)
        )
    return subprocess.CompletedProcess(["perftune", *args], result.exit_code, result.stdout, stderr)


def perftune_json(*args: str, **kw: Any) -> dict[str, Any]:
    proc = perftune(*args, **kw)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert the command failed with exit code 2 and one ``perftune: error:`` line; return it."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perftune: error:"), proc.stderr
    return lines[0]
