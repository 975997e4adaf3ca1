"""Replay of benchmark-hub T1/T4 data: loading, hidden constraints, and T4 export round trips."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

import perftune
from perftune.errors import PerftuneError, StoreError
from perftune.space import Config, Int, Ordinal, Pow2
from perftune.targets import replay
from perftune.trial import Status

HUB = Path(__file__).resolve().parents[3] / "data" / "benchmark_hub"
CONV_T1 = HUB / "convolution_milo.T1.json"


@pytest.fixture(scope="module")
def conv_a6000() -> replay.ReplayProblem:
    return replay.load(CONV_T1, HUB / "convolution_milo.A6000.T4.json.gz")


def _brute_force(t1_path: Path) -> set[tuple[int, ...]]:
    """Valid configurations by the plain definition (cartesian product filtered by the Conditions)."""
    cs = json.loads(t1_path.read_text())["ConfigurationSpace"]
    names = [p["Name"] for p in cs["TuningParameters"]]
    values = [json.loads(p["Values"]) for p in cs["TuningParameters"]]
    exprs = [c["Expression"] for c in cs["Conditions"]]
    out = set()
    for combo in itertools.product(*values):
        env = dict(zip(names, combo, strict=True))
        if all(eval(e, {"__builtins__": {}}, env) for e in exprs):  # test oracle only
            out.add(combo)
    return out


def test_dev_spaces_are_found_in_the_data_folder() -> None:
    pairs = replay.dev_problem_files(HUB)
    assert [t4.name for _, t4 in pairs] == sorted(
        f"{b}.{d}.T4.json.gz"
        for b in ("convolution_milo", "dedispersion_milo")
        for d in ("A4000", "A6000", "W6600")
    )
    assert (HUB / "LICENSE").read_text().startswith("MIT License")


def test_conditions_become_constraints_that_match_the_t1_definition(conv_a6000: replay.ReplayProblem) -> None:
    space = conv_a6000.space
    expected = _brute_force(CONV_T1)
    enumerated = {tuple(c[n] for n in space.names) for c in space.enumerate()}
    assert enumerated == expected
    assert space.cardinality() == len(expected) == 4362


def test_parameter_types_follow_the_value_lists(conv_a6000: replay.ReplayProblem) -> None:
    p = conv_a6000.space.params
    assert isinstance(p["block_size_y"], Pow2)  # 1, 2, 4, 8, 16
    assert isinstance(p["tile_size_x"], Int)  # 1..4
    assert isinstance(p["block_size_x"], Ordinal)  # 16, 32, ..., 256
    assert p["block_size_x"].values() == list(range(16, 257, 16))
    assert p["block_size_y"].default_value() == 16  # the T1 default


def _t4_results(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["results"]


def test_objective_returns_recorded_times_and_failures(conv_a6000: replay.ReplayProblem) -> None:
    t4 = _t4_results(HUB / "convolution_milo.A6000.T4.json.gz")
    ok = next(r for r in t4 if r["invalidity"] == "correct")
    bad = next(r for r in t4 if r["invalidity"] == "compile")
    assert conv_a6000.objective(Config(ok["configuration"])) == ok["measurements"][0]["value"]
    with pytest.raises(replay.ReplayFailure, match=r"^compile \(CompilationFailedConfig\)"):
        conv_a6000.objective(Config(bad["configuration"]))
    assert conv_a6000.n_failed == sum(r["invalidity"] != "correct" for r in t4)
    successes = [r["measurements"][0]["value"] for r in t4 if r["invalidity"] == "correct"]
    assert conv_a6000.optimum == min(successes)
    assert conv_a6000.objective(conv_a6000.best_config) == conv_a6000.optimum


def _write_small(tmp_path: Path, drop: tuple[int, int] | None = (4, 2)) -> tuple[Path, Path]:
    t1 = {"ConfigurationSpace": {
        "TuningParameters": [
            {"Name": "bx", "Type": "int", "Values": "[1, 2, 4, 8]", "Default": 1},
            {"Name": "algo", "Type": "string", "Values": ["a", "b"], "Default": "b"},
            {"Name": "t", "Type": "int", "Values": "[1, 2, 3]", "Default": 1},
        ],
        "Conditions": [{"Expression": "bx * t <= 16", "Parameters": ["bx", "t"]}],
    }}
    results = []
    for bx, algo, t in itertools.product([1, 2, 4, 8], ["a", "b"], [1, 2, 3]):
        if bx * t > 16 or (drop is not None and (bx, t) == drop and algo == "a"):
            continue
        failed = bx == 8 and t == 2
        results.append({
            "configuration": {"bx": bx, "algo": algo, "t": t},
            "times": {"runtimes": []},
            "invalidity": "runtime" if failed else "correct",
            "correctness": 0 if failed else 1,
            "measurements": [{"name": "time", "value": "RuntimeFailedConfig" if failed else
                              float(abs(bx - 4) + t + (algo == "a")), "unit": "ms"}],
            "objectives": ["time"],
        })
    p1 = tmp_path / "small.T1.json"
    p4 = tmp_path / "small.dev.T4.json"
    p1.write_text(json.dumps(t1))
    p4.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    return p1, p4


def test_missing_configurations_are_hidden_constraints(tmp_path: Path) -> None:
    problem = replay.load(*_write_small(tmp_path))
    assert problem.name == "small.dev"
    missing = Config({"bx": 4, "algo": "a", "t": 2})
    assert problem.space.is_valid(missing)  # declared constraints allow it ...
    with pytest.raises(replay.ReplayFailure, match="missing"):  # ... but it was never measured
        problem.objective(missing)
    with pytest.raises(replay.ReplayFailure, match="^runtime"):
        problem.objective(Config({"bx": 8, "algo": "b", "t": 2}))
    assert problem.optimum == 1.0  # bx=4, algo=b, t=1
    assert problem.space.default() == Config({"bx": 1, "algo": "b", "t": 1})


def test_tuning_a_replayed_space_records_failures_as_failed_trials(tmp_path: Path) -> None:
    problem = replay.load(*_write_small(tmp_path))
    n_valid = problem.space.cardinality()
    result = perftune.tune(problem.objective, problem.space, budget=n_valid, seed=3)
    assert len(result.trials) == n_valid  # every valid configuration, each measured once
    failed = [t for t in result.trials if t.status is Status.FAILED]
    reasons = sorted(t.reason.removeprefix("ReplayFailure: ").split()[0] for t in failed)
    assert reasons == ["missing:", "runtime", "runtime"]
    assert result.best.value == problem.optimum


def test_export_t4_round_trips_through_load(tmp_path: Path) -> None:
    p1, _ = _write_small(tmp_path)
    problem = replay.load(*_write_small(tmp_path))
    result = perftune.tune(problem.objective, problem.space, budget=10, seed=1)
    out = replay.export_t4(result.trials, tmp_path / "run.T4.json.gz", space=problem.space)
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    assert doc["schema_version"] == "1.0.0" and len(doc["results"]) == 10
    kinds = {r["invalidity"] for r in doc["results"]}
    assert kinds <= {"correct", "runtime"}
    # A failure keeps its T4 category through export (the driver prefixes the exception type).
    conv = replay.load(CONV_T1, HUB / "convolution_milo.A6000.T4.json.gz")
    t4 = _t4_results(HUB / "convolution_milo.A6000.T4.json.gz")
    bad = [Config(r["configuration"]) for r in t4 if r["invalidity"] == "compile"][:2]
    run = perftune.tune(conv.objective, conv.space, budget=3, seed=0, seeds=bad)
    exported = replay.t4_document(run.trials, space=conv.space)["results"]
    assert {r["invalidity"] for r in exported if r["configuration"] in [dict(c) for c in bad]} == {"compile"}
    again = replay.load(p1, out)
    assert again.optimum == result.best.value
    for t in result.trials:
        rec = again.objective.lookup(t.config)
        assert rec is not None and rec.value == t.value


def test_export_of_a_stored_run(tmp_path: Path) -> None:
    from perftune.store import open_store

    problem = replay.load(*_write_small(tmp_path))
    db = tmp_path / "runs.db"
    perftune.tune(problem.objective, problem.space, budget=12, seed=2, store=str(db), name="replayed")
    store = open_store(str(db))
    try:
        out = replay.export_run_t4(store, "replayed", tmp_path / "replayed.T4.json")
        doc = json.loads(out.read_text())
        assert doc["metadata"]["run"] == "replayed"
        assert len(doc["results"]) == 12
        failed = [r for r in doc["results"] if r["invalidity"] != "correct"]
        assert all(isinstance(r["measurements"][0]["value"], str) for r in failed)
    finally:
        store.close()
    # A path, as tune(store=...) takes one, works as well (opened for the export, closed after).
    again = replay.export_run_t4(str(db), "replayed", tmp_path / "again.T4.json")
    assert json.loads(again.read_text())["results"] == doc["results"]
    kt = replay.export_run_kt(db, "replayed", tmp_path / "replayed.kt.json")
    assert len(json.loads(kt.read_text())["cache"]) == 12
    with pytest.raises(StoreError, match="no store at"):
        replay.export_run_t4(str(tmp_path / "typo.db"), "replayed", tmp_path / "x.T4.json")


def test_user_mistakes_name_the_file(tmp_path: Path) -> None:
    p1, p4 = _write_small(tmp_path)
    with pytest.raises(PerftuneError, match="nope.T4.json: T4 file not found"):
        replay.load(p1, tmp_path / "nope.T4.json")
    broken = tmp_path / "broken.T4.json"
    broken.write_text("{not json")
    with pytest.raises(PerftuneError, match="broken.T4.json: not a valid T4 JSON file"):
        replay.load(p1, broken)
    doc = json.loads(p4.read_text())
    del doc["results"][0]["configuration"]["t"]
    p4.write_text(json.dumps(doc))
    with pytest.raises(PerftuneError, match=r"results\[0\] lacks parameter 't'"):
        replay.load(p1, p4)
    t1 = json.loads(p1.read_text())
    t1["ConfigurationSpace"]["TuningParameters"][0]["Values"] = "[]"
    p1.write_text(json.dumps(t1))
    with pytest.raises(PerftuneError, match="parameter 'bx': Values must be a non-empty list"):
        replay.load(p1, p4)
