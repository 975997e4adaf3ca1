"""The version has one home, `perftune._version`, that lower layers import without the facade."""

from __future__ import annotations

import ast
from pathlib import Path

import perftune
import perftune._version

FACADE_ONLY = set(perftune.__all__) - {"PerftuneError", "Status", "Trial"}  # the rest live below the facade


def test_facade_reexports_the_version():
    assert perftune.__version__ == perftune._version.__version__


def test_no_module_takes_the_version_or_the_driver_from_the_facade():
    # `perftune/__init__.py` lazily imports the driver, so `from perftune import __version__` in the store
    # makes the store depend on the layer above it; subpackages (`from perftune import search`) are fine.
    root = Path(perftune.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path == root / "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "perftune" and node.level == 0:
                names = [a.name for a in node.names if a.name in FACADE_ONLY]
                offenders += [f"{path.relative_to(root)}: {name}" for name in names]
    assert not offenders, f"modules importing from the package facade: {offenders}"
