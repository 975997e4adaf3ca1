"""docs/ray.md: its port of a Ray Tune script runs as printed, and the names its table gives exist."""

from __future__ import annotations

import re
from pathlib import Path

import perftune

PAGE = Path(__file__).resolve().parents[1] / "docs" / "ray.md"


def test_the_ported_script_runs_as_printed() -> None:
    (block,) = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(), flags=re.S | re.M)
    namespace: dict = {}
    exec(compile(block, str(PAGE), "exec"), namespace)
    result = namespace["result"]
    assert len(result.trials) == 50 and namespace["best"] == result.best.config
    assert result.best.config["act"] == "relu" and result.best.config["layers"] == 1


def test_the_names_in_the_table_exist() -> None:
    import perftune.space as space
    from perftune.store import Store

    for name in ("Float", "LogFloat", "Int", "LogInt", "Pow2", "Choice", "Ordinal"):
        assert hasattr(space, name), name
    assert callable(perftune.drive.ASHA) and callable(perftune.Pruned)
    assert hasattr(perftune.Tuner, "stop") and hasattr(Store, "to_dataframe")


def test_what_the_page_says_of_failed_runs_and_a_missing_metric() -> None:
    import warnings

    import pytest

    from perftune.errors import PerftuneError, RunWarning
    from perftune.space import Int, Space

    page = " ".join(PAGE.read_text().split())
    assert "A run whose every trial failed ends with one `RunWarning`" in page
    assert "`tune()` stops with one `PerftuneError` naming the metrics they have" in page
    space = Space({"layers": Int(1, 4)})

    def broken(config: dict) -> float:
        raise ValueError("boom")

    with pytest.warns(RunWarning, match="every trial failed"):
        perftune.tune(broken, space, budget=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunWarning)  # no RunWarning: one error
        missing = r"has no numeric metric 'los' \(has: loss\); did you mean 'loss'"
        with pytest.raises(PerftuneError, match=missing):
            perftune.tune(lambda c: {"loss": 1.0}, space, metric="los", budget=5)
