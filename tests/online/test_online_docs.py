"""perftune.online's public classes have docstring examples, and they run."""

from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import perftune.online


def test_every_public_class_has_an_example() -> None:
    missing = [name for name in perftune.online.__all__
               if inspect.isclass(obj := getattr(perftune.online, name))
               and ">>>" not in (obj.__dict__.get("__doc__") or "")]
    assert not missing


def test_docstring_examples_run() -> None:
    root = Path(perftune.online.__file__).parent
    names = ["perftune.online", *(f"perftune.online.{p.stem}" for p in sorted(root.glob("_*.py"))
                                  if p.stem != "__init__")]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    n_examples = 0
    report: list[str] = []
    for name in names:
        for test in doctest.DocTestFinder(exclude_empty=True).find(importlib.import_module(name), name):
            n_examples += len(test.examples)
            runner.run(test, out=report.append)
    assert n_examples >= 10
    assert runner.failures == 0, "".join(report)
