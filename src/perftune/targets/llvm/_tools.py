"""Locating LLVM 14 tools and building the step helper on first use."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from perftune.targets.llvm._errors import ToolMissingError

__all__ = ["cache_dir", "find_tool", "helper_binary", "HELPER_SOURCE"]

HELPER_SOURCE = Path(__file__).with_name("_helper.cpp")

_CANDIDATES = {
    "clang": ["clang-14", "/usr/lib/llvm-14/bin/clang"],
    "opt": ["opt-14", "/usr/lib/llvm-14/bin/opt", "opt"],
    "llc": ["llc-14", "/usr/lib/llvm-14/bin/llc", "llc"],
    "llvm-config": ["llvm-config-14", "/usr/lib/llvm-14/bin/llvm-config"],
    "llvm-stress": ["llvm-stress-14", "/usr/lib/llvm-14/bin/llvm-stress"],
    "csmith": ["csmith"],
    "c++": ["clang++-14", "g++", "c++", "clang++"],
}

_HINT = {
    "clang": "install clang-14 (apt-get install clang-14)",
    "opt": "install llvm-14 (apt-get install llvm-14)",
    "llc": "install llvm-14 (apt-get install llvm-14)",
    "llvm-config": "install llvm-14-dev (apt-get install llvm-14-dev)",
    "llvm-stress": "install llvm-14 (apt-get install llvm-14)",
    "csmith": "install csmith and libcsmith-dev (apt-get install csmith libcsmith-dev)",
    "c++": "install a C++ compiler (apt-get install g++ or clang-14)",
}


@functools.cache
def find_tool(name: str) -> str:
    """Absolute path of an LLVM-14-era tool; ``PERFTUNE_<NAME>`` overrides (e.g. ``PERFTUNE_CLANG``).

    Raises:
        ToolMissingError: The tool is not installed.
    """
    override = os.environ.get("PERFTUNE_" + name.upper().replace("-", "_").replace("+", "X"))
    candidates = [override] if override else _CANDIDATES[name]
    for candidate in candidates:
        path = shutil.which(candidate)
        if path:
            return path
    raise ToolMissingError(f"{name}: not found (looked for {', '.join(candidates)}); {_HINT[name]}")


def cache_dir() -> Path:
    """Per-user cache directory (``$XDG_CACHE_HOME/perftune`` or ``~/.cache/perftune``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perftune"


@functools.cache
def helper_binary() -> Path:
    """Path of the compiled step helper, building it on first use (a few seconds, once per user).

    The binary lives in ``~/.cache/perftune/llvm-helper-<hash>/`` where the hash covers the
    source, the LLVM version and the compiler, so an upgrade rebuilds it.

    Raises:
        ToolMissingError: llvm-config-14 or a C++ compiler is missing, or the build failed.
    """
    llvm_config = find_tool("llvm-config")
    cxx = find_tool("c++")
    flags = subprocess.run(
        [llvm_config, "--cxxflags", "--ldflags", "--libs"], capture_output=True, text=True, check=True
    ).stdout.split()
    version = subprocess.run([llvm_config, "--version"], capture_output=True, text=True, check=True).stdout
    digest = hashlib.sha256()
    digest.update(HELPER_SOURCE.read_bytes())
    digest.update(version.encode())
    digest.update(cxx.encode())
    digest.update(" ".join(flags).encode())
    directory = cache_dir() / f"llvm-helper-{digest.hexdigest()[:16]}"
    binary = directory / "helper"
    if binary.exists():
        return binary
    directory.mkdir(parents=True, exist_ok=True)
    # Build under a unique name and rename: concurrent first uses never see a half-written binary.
    fd, tmp = tempfile.mkstemp(prefix="helper.", dir=directory)
    os.close(fd)
    cmd = [cxx, "-O2", str(HELPER_SOURCE), *flags, "-o", tmp]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        os.unlink(tmp)
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ToolMissingError(f"building the LLVM step helper failed ({' '.join(cmd[:2])} ...): {last}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, binary)
    return binary
