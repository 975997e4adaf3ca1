"""Conformance suites that every technique, evaluator and store must pass (they need pytest).

* :mod:`perftune.testing.techniques`: ``TechniqueConformance`` and the ``AskTellLoop`` mini-driver.
* :mod:`perftune.testing.stores`: the results-store suite.
* :mod:`perftune.testing.targets`: ``TargetConformance``, run over every registered target's example.

Import the submodule you need; this package imports nothing itself, so that importing it never pulls
in pytest.
"""

from __future__ import annotations

__all__: list[str] = []
