"""Package hygiene: curated __all__ lists, lazy heavy imports, the documented entry points."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import perftune

PUBLIC_PACKAGES = ["perftune", "perftune.space", "perftune.search", "perftune.drive", "perftune.store",
                   "perftune.measure", "perftune.testing", "perftune.choice", "perftune.targets.choice"]


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_all_names_exist_and_public_names_are_listed(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    for item in module.__all__:
        assert hasattr(module, item), f"{name}.__all__ lists {item!r}, which does not exist"
    defined_here = {k for k, v in vars(module).items()
                    if not k.startswith("_") and getattr(v, "__module__", "").startswith(name + "._")}
    missing = defined_here - set(module.__all__)
    assert not missing, f"{name}: public names missing from __all__: {sorted(missing)}"


def test_importing_perftune_is_light():
    code = "import sys, perftune; print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in " \
           "('numpy', 'sqlalchemy', 'sklearn', 'scipy', 'dask', 'distributed', 'gymnasium', " \
           "'matplotlib', 'rich'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"import perftune pulled in heavy modules: {out}"


def test_every_module_imports():
    failures = []
    for info in pkgutil.walk_packages(perftune.__path__, "perftune."):
        if info.name == "perftune.gym" or info.name.endswith("__main__"):
            continue  # perftune.gym registers environments on import (documented exception)
        try:
            importlib.import_module(info.name)
        except ImportError as error:  # an optional extra that is not installed is fine; nothing else
            if "No module named" not in str(error) or "perftune" in str(error):
                failures.append(f"{info.name}: {error}")
    assert not failures, failures


def test_lazy_top_level_api():
    assert perftune.tune is perftune.drive.tune
    assert perftune.Budget(evals=3).evals == 3
    with pytest.raises(AttributeError):
        perftune.no_such_thing  # noqa: B018


def test_subpackages_are_attributes_after_a_bare_import():
    # The docs write `perftune.drive.ASHA(...)`, `perftune.drive.WarmStart(...)` after `import perftune`.
    code = ("import perftune; p = perftune.drive.ASHA(max_steps=27); s = perftune.space.Int(0, 3); "
            "print(type(p).__name__, type(s).__name__, perftune.store.Store.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ASHA", "Int", "Store"], out.stderr
