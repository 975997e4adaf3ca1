"""What machine and software a run was measured on, recorded with every run.

The machine and compiler probes are cached per process (creating many runs costs one
``gcc --version``); the git state is read each time, since it changes while a session goes on.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["capture_environment"]

_PROBE_TIMEOUT_S = 5.0


def _first_line(cmd: list[str], cwd: str | None = None) -> str | None:
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0].strip() if lines else None


@functools.cache
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


@functools.cache
def _compiler_version(name: str) -> str | None:
    return _first_line([name, "--version"])


def _git_state(cwd: str) -> tuple[str, bool] | None:
    commit = _first_line(["git", "rev-parse", "HEAD"], cwd=cwd)
    if commit is None:
        return None
    status = _first_line(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd)
    return commit, status is not None and status != ""


def capture_environment(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Describe this machine, its compilers and the git commit of ``cwd`` (default: the current folder).

    Keys that cannot be found (no gcc, not a git checkout) are left out.

    Example:
        >>> env = capture_environment()
        >>> sorted(k for k in env if k in ("cpu_count", "python"))
        ['cpu_count', 'python']
    """
    env: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "python": platform.python_version(),
    }
    for compiler in ("gcc", "clang"):
        version = _compiler_version(compiler)
        if version is not None:
            env[compiler] = version
    git = _git_state(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    if git is not None:
        env["git_commit"], env["git_dirty"] = git
    return env
