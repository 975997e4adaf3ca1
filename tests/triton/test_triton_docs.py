"""perftune.triton's documentation: every public class has a docstring example, and the examples run."""

from __future__ import annotations

import doctest
import importlib
import inspect
import io
from pathlib import Path

import pytest

# "triton.language", not "triton": the tests/triton folder itself is importable as a namespace package
pytest.importorskip("triton.language")

PACKAGE = "perftune.targets.triton"


def test_every_public_class_has_a_docstring_example() -> None:
    module = importlib.import_module(PACKAGE)
    missing = [name for name in module.__all__ if inspect.isclass(obj := getattr(module, name))
               and ("Example:" not in (obj.__dict__.get("__doc__") or "") or ">>>" not in obj.__doc__)]
    assert not missing


def test_docstring_examples_run() -> None:
    folder = Path(importlib.import_module(PACKAGE).__file__ or "").parent
    names = [PACKAGE, "perftune.triton"] + [f"{PACKAGE}.{p.stem}" for p in sorted(folder.glob("_*.py"))
                                           if p.stem != "__init__"]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out = io.StringIO()
    n_examples = 0
    for name in names:
        for test in doctest.DocTestFinder(exclude_empty=True).find(importlib.import_module(name), name):
            n_examples += len(test.examples)
            runner.run(test, out=out.write)
    assert n_examples >= 10
    assert runner.failures == 0, out.getvalue()
