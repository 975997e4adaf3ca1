"""Fixes from the search-side review (/tmp/review_search/report.md): a plug-in's ``_propose`` may return a
plain dict, and the README names the conformance suite where it lives."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

import perftune
from perftune.search import BaseTechnique, create, register
from perftune.search import _registry as registry
from perftune.space import Config, Int, Space
from perftune.testing.techniques import AskTellLoop

ROOT = Path(__file__).parents[2]


class DictWalk(BaseTechnique):
    """Returns plain dicts, valid ones, as docs/extending.md allows."""

    name: ClassVar[str] = "test-dict-walk"

    @dataclass(frozen=True)
    class Settings:
        pass

    def _propose(self) -> Any:
        return {"x": int(self.rng.integers(0, 41))}


class DictOutOfRange(DictWalk):
    """Returns plain dicts outside the range (repaired by the base class)."""

    name: ClassVar[str] = "test-dict-out-of-range"

    def _propose(self) -> Any:
        return {"x": int(self.rng.integers(50, 60))}


@pytest.fixture(autouse=True)
def _registered():  # type: ignore[no-untyped-def]
    for cls in (DictWalk, DictOutOfRange):
        register(cls)
    yield
    for cls in (DictWalk, DictOutOfRange):
        registry._registered.pop(cls.name, None)


@pytest.mark.parametrize("name", ["test-dict-walk", "test-dict-out-of-range"])
def test_a_technique_proposing_plain_dicts_runs(name: str) -> None:
    space = Space({"x": Int(0, 40)})
    result = perftune.tune(lambda c: float(c["x"]), space, budget=10, seed=0, technique=name)
    assert len(result.trials) == 10
    assert all(type(t.config) is Config for t in result.trials)


def test_plain_dicts_come_back_as_configs_without_errors() -> None:
    technique = create("test-dict-walk", Space({"x": Int(0, 40)}), seed=1)
    loop = AskTellLoop(technique, lambda c: float(c["x"]), batch=3)
    loop.run(20)
    assert loop.invalid == [] and all(type(c) is Config for c in loop.proposals)
    assert technique.n_errors == 0, technique.last_error


def test_a_proposal_that_is_no_mapping_is_an_internal_error_not_a_crash() -> None:
    class Broken(DictWalk):
        name: ClassVar[str] = "test-broken"

        def _propose(self) -> Any:
            return 42

    technique = Broken(Space({"x": Int(0, 40)}), seed=0)
    got = technique.ask(2)
    assert len(got) == 2 and technique.n_errors >= 1  # fell back to random proposals


def test_the_readme_names_importable_testing_and_search_objects() -> None:
    readme = (ROOT / "README.md").read_text()
    names = set(re.findall(r"`(perftune\.(?:testing|search)(?:\.\w+)+)`", readme))
    assert "perftune.testing.techniques.TechniqueConformance" in names
    for dotted in sorted(names):
        module, _, attr = dotted.rpartition(".")
        try:
            found = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError:
            found = importlib.import_module(dotted)
        assert found is not None, dotted
