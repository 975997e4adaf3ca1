"""Every registered technique passes the conformance suite of perftune.testing."""

from __future__ import annotations

import pytest

from perftune.search import names
from perftune.testing.techniques import TechniqueConformance


class TestEveryTechnique(TechniqueConformance):
    @pytest.fixture(params=names())
    def conformance_technique(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)
