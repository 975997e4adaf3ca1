"""The conformance suite fails for techniques that break the contract (it can fail)."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pytest

from perftune.search import _registry as registry
from perftune.search import register
from perftune.search._base import NoSettings
from perftune.testing.techniques import TechniqueConformance


class Unrepaired:
    """Proposes decoded random vectors without checking validity."""

    name: ClassVar[str] = "test-unrepaired"
    Settings: ClassVar[type] = NoSettings

    def __init__(self, space: Any, *, seed: int | None = None, settings: Any = None) -> None:
        import numpy as np

        self.space = space
        self.rng = np.random.default_rng(seed)

    def ask(self, n: int) -> list[Any]:
        return [self.space.decode(self.rng.random(self.space.n_dims)) for _ in range(n)]

    def tell(self, trials: Any) -> None:
        pass


class Unseeded(Unrepaired):
    """Valid proposals, but from the global random state: not reproducible."""

    name: ClassVar[str] = "test-unseeded"

    def ask(self, n: int) -> list[Any]:
        import numpy as np

        rng = np.random.default_rng(random.randrange(2**32))
        return self.space.sample(rng, n)


class Greedy(Unrepaired):
    """Valid proposals, but more than asked for."""

    name: ClassVar[str] = "test-too-many"

    def ask(self, n: int) -> list[Any]:
        return self.space.sample(self.rng, n + 1)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    for cls in (Unrepaired, Unseeded, Greedy):
        register(cls)
    yield
    for cls in (Unrepaired, Unseeded, Greedy):
        registry._registered.pop(cls.name, None)


suite = TechniqueConformance()


def test_invalid_proposals_are_caught() -> None:
    with pytest.raises(AssertionError, match="invalid proposals"):
        suite.test_proposals_valid_on_mixed_space("test-unrepaired")


def test_irreproducible_proposals_are_caught() -> None:
    with pytest.raises(AssertionError):
        suite.test_same_seed_same_proposals("test-unseeded")


def test_too_many_proposals_are_caught() -> None:
    with pytest.raises(AssertionError, match="more than n"):
        suite.test_proposals_valid_on_mixed_space("test-too-many")
