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


def test_the_win_counts_the_docs_quote_are_those_of_the_default_rule() -> None:
    import re

    from perftune.measure import Decision
    from perftune.online import PromotionRule

    text = (Path(__file__).resolve().parents[2] / "docs" / "online.md").read_text(encoding="utf-8")
    (sentence,) = re.findall(r"With the defaults a candidate needs[^.]*\.\.\.", text)
    quoted = [(int(w), int(n)) for w, n in re.findall(r"(\d+) straight wins in (\d+) races", sentence)]
    quoted += [(int(w), int(n)) for w, n in re.findall(r"(\d+)\s+of\s+(\d+)", sentence)]
    assert len(quoted) >= 4
    rule = PromotionRule()
    for wins, races in quoted:  # the fewest wins that promote after that many races
        assert rule.decide(wins, races) is Decision.BETTER, (wins, races)
        assert rule.decide(wins - 1, races) is not Decision.BETTER, (wins, races)
