"""Every registered target passes the target conformance suite on its own example."""

from __future__ import annotations

import pytest

from perftune.targets import names
from perftune.testing.targets import TargetConformance


class TestEveryTarget(TargetConformance):
    @pytest.fixture(params=names())
    def conformance_kind(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)
