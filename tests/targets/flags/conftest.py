"""Shared fixtures of the flags target tests: an isolated probe cache and the discovered gcc."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def flags_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point the probe cache at a session-wide temporary directory."""
    root = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(root)
    yield root
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def gcc_info(flags_cache: Path):  # type: ignore[no-untyped-def]
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from perftune.targets.flags import discover

    return discover("gcc")
