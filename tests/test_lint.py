"""Lint checks that run in CI: ruff, mypy, and docstring examples.

docs/architecture.md asks for type hints everywhere, ruff, mypy strict on the core packages and a
Google-style docstring with a short example on every public class. ruff and mypy run exactly as
``make lint`` runs them, with the settings of pyproject.toml: ruff on src and tests, mypy on
src/perftune, strict on space, search, drive and store (``[tool.mypy]``). Docstring examples are
checked for the driver (``perftune.drive``) and the store (``perftune.store``). ruff and mypy come with
the ``test`` extra; without them the tests are skipped with the reason. The mypy run takes tens of
seconds from a cold cache, so it is marked slow.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import io
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF_PATHS = ["src", "tests"]
MYPY_STRICT_MODULES = ["perftune.space", "perftune.search", "perftune.drive", "perftune.store"]
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


def test_mypy_config_is_strict_on_the_core() -> None:
    # `strict` in a per-module override would apply to every module, so the config sets it for all
    # and takes it back for the layers above; the core must stay out of those overrides.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True and config["files"] == ["src/perftune"]
    relaxed = [pattern for override in config.get("overrides", []) for pattern in override["module"]]
    for module in MYPY_STRICT_MODULES:
        covering = [p for p in relaxed if _relaxes(p, module)]
        assert not covering, f"{module} must stay strict, but overrides relax it: {covering}"


def _relaxes(pattern: str, package: str) -> bool:
    """Whether an override's module pattern (``a.b`` or ``a.b.*``) reaches ``package`` or a module in it."""
    name = pattern.removesuffix(".*")
    inside = name == package or name.startswith(package + ".")
    return inside or (pattern.endswith(".*") and package.startswith(name + "."))


@pytest.mark.parametrize(("pattern", "reaches"), [
    ("perftune", False), ("perftune.targets.*", False), ("perftune.space", True), ("perftune.space.*", True),
    ("perftune.space._params", True), ("perftune.*", True), ("perftune.spaces.*", False),
])
def test_relaxes_reads_override_patterns(pattern: str, reaches: bool) -> None:
    assert _relaxes(pattern, "perftune.space") is reaches


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    _require("mypy")
    # Files and settings come from [tool.mypy] in pyproject.toml, as for `make lint`; the cache is
    # mypy's usual .mypy_cache.
    done = _run(["mypy"], timeout_s=240)
    assert done.returncode == 0, f"mypy (config of pyproject.toml):\n{done.stdout}{done.stderr}"


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
