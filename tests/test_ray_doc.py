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
