from __future__ import annotations

import sys
from pathlib import Path

import pytest

from perftune.targets.choice import ChoicesFile, use_choices

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "choice"


@pytest.fixture
def examples_path(monkeypatch):
    """Make examples/choice importable (sort, poisson, kmeans, matmul)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield EXAMPLES
    for name in ("sort", "poisson", "kmeans", "matmul"):
        sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def _empty_choices(tmp_path, monkeypatch):
    """Every test starts with an empty, known tuned-choices file (so no fallback warning)."""
    path = tmp_path / "empty-choices.json"
    ChoicesFile().write(path)
    monkeypatch.setenv("PERFTUNE_CHOICES", str(path))
    use_choices(strict=True)
    yield path
    use_choices(ChoicesFile())
