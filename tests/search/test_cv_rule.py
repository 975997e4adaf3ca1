"""The cross-validation rule of benchmarks/cv.py, which decides every change of the default search.

A variant replaces the default only if it is no worse than the default by more than 1% on each of the
five kernel families at every budget, and better overall; runs are read from ``quality_raw/``.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture(scope="module")
def cv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cv_benchmark", BENCHMARKS / "cv.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    # cv.py puts benchmarks/ on the path to import quality.py; take it off again, so that the scripts
    # there (space.py, noise.py, ...) cannot shadow anything another test imports.
    before = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        if str(BENCHMARKS) not in before:
            sys.path[:] = [p for p in sys.path if p != str(BENCHMARKS)]
    return module


class _Table:
    """A problem scored like the replayed spaces: best found / optimum (optimum 1.0)."""

    def score(self, best: float | None) -> float:
        return float("inf") if best is None else best


def _write(raw: Path, name: str, tool: str, finals: list[float]) -> None:
    """One run per seed whose best is 2.0 until measurement 24, then ``final`` (so @25..@200 = final)."""
    folder = raw / name
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / f"{tool.replace(':', '_')}.jsonl.gz", "wt") as f:
        for seed, final in enumerate(finals):
            values = [2.0] * 24 + [final] * 176
            f.write(json.dumps({"problem": name, "tool": tool, "seed": seed, "values": values}) + "\n")


@pytest.fixture
def raw(cv: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cv.quality, "RAW", tmp_path)
    return tmp_path


def _spaces(cv: ModuleType) -> list[str]:
    return [name for _, names in cv.FAMILIES for name in names]


def _judge(cv: ModuleType, raw: Path, variant_final: dict[str, float], base_final: float = 1.10) -> Any:
    problems = {name: _Table() for name in _spaces(cv)}
    for name in _spaces(cv):
        _write(raw, name, "perftune", [base_final] * 5)
        if name in variant_final:
            _write(raw, name, "perftune-exp:v:V", [variant_final[name]] * 5)
    return cv.compare("perftune-exp:v:V", set(range(5)), problems)


def test_a_variant_no_worse_anywhere_and_better_overall_is_adopted(cv: ModuleType, raw: Path) -> None:
    finals = dict.fromkeys(_spaces(cv), 1.10)
    finals["gemm.RTX_Titan"] = 1.02  # better on one space, the same elsewhere
    result = _judge(cv, raw, finals)
    assert result["verdict"] == "adopt"
    assert result["overall"]["variant"] < result["overall"]["default"]


def test_a_variant_that_wins_on_one_family_and_loses_on_another_is_rejected(
    cv: ModuleType, raw: Path
) -> None:
    finals = dict.fromkeys(_spaces(cv), 1.00)  # much better everywhere ...
    for name in ("pnpoly.RTX_3060_laptop", "pnpoly.RTX_Titan"):
        finals[name] = 1.13  # ... except pnpoly, 2.7% worse
    result = _judge(cv, raw, finals)
    assert result["verdict"] == "rejected"
    assert "pnpoly (KT) @25" in result["reason"]
    assert "gemm" not in result["reason"]


def test_within_one_percent_is_no_worse_but_the_same_is_not_better(cv: ModuleType, raw: Path) -> None:
    within = dict.fromkeys(_spaces(cv), 1.10)
    within["convolution.A4000"] = 1.10 * 1.009  # worse by 0.9%: tolerated, but nothing is better
    result = _judge(cv, raw, within)
    assert result["verdict"] == "rejected"
    assert "not better overall" in result["reason"]


def test_a_variant_without_runs_on_a_family_is_not_judged(cv: ModuleType, raw: Path) -> None:
    finals = {name: 1.0 for name in _spaces(cv) if not name.startswith("dedispersion")}
    result = _judge(cv, raw, finals)
    assert result["verdict"] == "not judged"
    assert "dedispersion.A4000" in result["reason"]
    assert result["families"]["dedispersion (T4)"] is None
