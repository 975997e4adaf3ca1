"""Lint checks that run in CI: ruff, mypy --strict, and docstring examples.

DESIGN.md asks for type hints everywhere, ruff, mypy strict on the core packages and a Google-style
docstring with a short example on every public class. These tests keep that true for the driver
(``perftune.drive``), the store (``perftune.store``) and the CLI (ruff only: it is checked with plain
mypy by ``make lint``). ruff and mypy come with the ``test`` extra; without them the tests are skipped
with the reason. The mypy run takes tens of seconds from a cold cache, so it is marked slow.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import io
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF_PATHS = ["src/perftune/space", "src/perftune/search", "src/perftune/drive", "src/perftune/store", "src/perftune/cli.py"]
MYPY_STRICT_PATHS = ["src/perftune/space", "src/perftune/search", "src/perftune/drive", "src/perftune/store"]
DOCUMENTED_PACKAGES = ["perftune.drive", "perftune.store"]


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout_s)


def test_ruff_is_clean() -> None:
    _require("ruff")
    # --no-cache: other processes may be writing .ruff_cache at the same time.
    done = _run(["ruff", "check", "--no-cache", *RUFF_PATHS], timeout_s=120)
    assert done.returncode == 0, f"ruff check {' '.join(RUFF_PATHS)}:\n{done.stdout}{done.stderr}"


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    _require("mypy")
    # Settings come from [tool.mypy] in pyproject.toml; the cache is mypy's usual .mypy_cache.
    done = _run(["mypy", "--strict", *MYPY_STRICT_PATHS], timeout_s=240)
    assert done.returncode == 0, f"mypy --strict {' '.join(MYPY_STRICT_PATHS)}:\n{done.stdout}{done.stderr}"


def _public_classes(package: str) -> list[tuple[str, type]]:
    module = importlib.import_module(package)
    return [(f"{package}.{name}", obj) for name in module.__all__
            if inspect.isclass(obj := getattr(module, name))]


@pytest.mark.parametrize("package", DOCUMENTED_PACKAGES)
def test_every_public_class_has_a_docstring_with_an_example(package: str) -> None:
    missing = []
    for name, cls in _public_classes(package):
        doc = cls.__dict__.get("__doc__") or ""
        if "Example:" not in doc or ">>>" not in doc:
            missing.append(name)
    assert not missing, f"public classes without a docstring example (Example: with >>>): {missing}"


def _modules_of(package: str) -> list[str]:
    module = importlib.import_module(package)
    names = [package]
    for path in sorted(Path(module.__file__ or "").parent.glob("_*.py")):
        if path.stem != "__init__":
            names.append(f"{package}.{path.stem}")
    return names


@pytest.mark.parametrize("package", DOCUMENTED_PACKAGES)
def test_docstring_examples_run(package: str) -> None:
    finder = doctest.DocTestFinder(exclude_empty=True)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    n_examples = 0
    for name in _modules_of(package):
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.filename and not test.filename.startswith(str(Path(module.__file__ or "").parent)):
                continue  # re-exported from elsewhere
            n_examples += len(test.examples)
            runner.run(test, out=out.write)
    assert n_examples > 0, f"{package}: no docstring examples found"
    failed = runner.failures
    assert failed == 0, f"{package}: {failed} docstring example(s) failed:\n{out.getvalue()}"
