"""PerftuneSampler against Optuna's own sampler test suites (``optuna.testing.pytest_samplers``).

Optuna ships the test cases its built-in samplers pass: values inside every distribution and of the
right Python type, NaN objectives, partially fixed parameters, single-valued distributions, conditional
and dynamic-range objectives, relative sampling of numerical, categorical and mixed spaces (with
``n_jobs=2`` too), and independent sampling in multi-objective studies. Each class below inherits one
suite and only says how to build the sampler.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

optuna = pytest.importorskip("optuna")  # installed by the test extra; see docs/optuna.md

from optuna.samplers import BaseSampler  # noqa: E402
from optuna.testing.pytest_samplers import (  # noqa: E402
    BasicSamplerTestCase,
    MultiObjectiveSamplerTestCase,
    RelativeSamplerTestCase,
)

from perftune.integration.optuna import PerftuneSampler  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


class _Seeded:
    @pytest.fixture
    def sampler(self) -> Callable[[], BaseSampler]:
        return lambda: PerftuneSampler(seed=0)


class TestBasic(_Seeded, BasicSamplerTestCase):
    pass


class TestRelative(_Seeded, RelativeSamplerTestCase):
    pass


class TestMultiObjective(_Seeded, MultiObjectiveSamplerTestCase):
    pass


class TestUnseeded(BasicSamplerTestCase):
    @pytest.fixture
    def sampler(self) -> Callable[[], BaseSampler]:
        return lambda: PerftuneSampler()
