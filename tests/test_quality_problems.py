"""The quality benchmark's own problem reader (benchmarks/peers/_problems.py): Kernel Tuner caches.

The benchmark reads the Kernel Tuner cache files itself (it must not depend on the product's loader),
so its reading of T1 value expressions, failures and gaps is checked here.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"


@pytest.fixture(scope="module")
def problems() -> ModuleType:
    spec = importlib.util.spec_from_file_location("quality_problems", PEERS / "_problems.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[32 * i for i in range(1, 4)]", [32, 64, 96]),
        ("[1] + [2 * i for i in range(1, 4)]", [1, 2, 4, 6]),
        ("[16, 32, 64]", [16, 32, 64]),
        ("[i // 2 - 1 for i in range(2, 7, 2)]", [0, 1, 2]),
        ("[a * b for a in range(1, 3) for b in [10, 100]]", [10, 100, 20, 200]),
        ("[1 / 2, -3]", [0.5, -3]),
        ("['a', 'b']", ["a", "b"]),
    ],
)
def test_t1_values_evaluates_list_expressions(problems: ModuleType, text: str,
                                              expected: list[object]) -> None:
    assert problems.t1_values(text) == expected


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "[x for x in range(3) if x]", "(1).real", "open('f')",
     "[i for i in j]", "[range(1.5)]", "lambda: 1", "{1: 2}", "[True]"],
)
def test_t1_values_refuses_anything_else(problems: ModuleType, text: str) -> None:
    with pytest.raises(ValueError):
        problems.t1_values(text)


def _write_space(hub: Path) -> None:
    t1 = {"ConfigurationSpace": {
        "TuningParameters": [
            {"Name": "bx", "Type": "int", "Values": "[32 * i for i in range(1, 4)]"},
            {"Name": "t", "Type": "int", "Values": "[1] + [2 * i for i in range(1, 3)]"},
        ],
        "Conditions": [{"Expression": "bx * t <= 192", "Parameters": ["bx", "t"]}],
    }}
    (hub / "toy.T1.json").write_text(json.dumps(t1))
    cache = {
        "32,1": {"bx": 32, "t": 1, "time": 3.0},
        "64,2": {"bx": 64, "t": 2, "time": 1.5},
        "96,2": {"bx": 96, "t": 2, "time": "CompilationFailedConfig"},
        "32,4": {"bx": 32, "t": 4, "time": "RuntimeFailedConfig"},
    }
    doc = {"device_name": "Toy GPU", "kernel_name": "toy", "problem_size": [1],
           "tune_params_keys": ["bx", "t"], "tune_params": {"bx": [32, 64, 96], "t": [1, 2, 4]},
           "cache": cache}
    with gzip.open(hub / "toy.GPU.kt.json.gz", "wt") as f:
        json.dump(doc, f)


def test_kt_cache_failures_and_gaps_are_failures(problems: ModuleType, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _write_space(tmp_path)
    monkeypatch.setattr(problems, "HUB", tmp_path)
    p = problems.make_problem({"kind": "table", "format": "kt", "bench": "toy", "device": "GPU"})
    assert p.name == "toy.GPU"
    assert [q.values for q in p.params] == [[32, 64, 96], [1, 2, 4]]
    assert p.optimum == 1.5
    assert p.measure({"bx": 64, "t": 2}) == 1.5
    assert p.measure({"bx": 96, "t": 2}) is None  # CompilationFailedConfig
    assert p.measure({"bx": 32, "t": 4}) is None  # RuntimeFailedConfig
    assert p.measure({"bx": 64, "t": 1}) is None  # valid but not in the cache: a failure, like a T4 gap
    assert not p.is_valid({"bx": 96, "t": 4})  # the T1 restriction
    assert len(p.valid_keys()) == 7
    assert problems.make_problem(p.spec()).name == p.name


def test_ledger_caps_proposals_at_50_per_budget_unit(problems: ModuleType, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _write_space(tmp_path)
    monkeypatch.setattr(problems, "HUB", tmp_path)
    p = problems.make_problem({"kind": "table", "format": "kt", "bench": "toy", "device": "GPU"})
    ledger = problems.Ledger(p, budget=2)
    assert ledger.evaluate({"bx": 32, "t": 1}) == ("ok", 3.0)
    with pytest.raises(problems.BudgetSpent):
        while True:
            ledger.evaluate({"bx": 32, "t": 1})  # a repeat: answered, not counted
    assert ledger.n_asked == 100 and ledger.stalled and len(ledger.values) == 1
