"""Replay review fixes: a cache's objective direction, duplicate records, malformed values named, T1
Conditions bounded in work, list Values refused, and Kernel Tuner times written in milliseconds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import perftune
from perftune.errors import PerftuneError
from perftune.space import Config, Int, Space
from perftune.targets import replay
from perftune.targets.replay._target import ReplayTarget
from perftune.trial import Status, Trial

ROOT = Path(__file__).resolve().parents[3]
HUB = ROOT / "data" / "benchmark_hub"


def _t1(tmp_path: Path, values: Any = "[1, 2, 3]", conditions: list | None = None) -> Path:
    doc = {"ConfigurationSpace": {"TuningParameters": [{"Name": "x", "Type": "int", "Values": values}],
                                  "Conditions": conditions or []}}
    path = tmp_path / "x.T1.json"
    path.write_text(json.dumps(doc))
    return path


def _kt(tmp_path: Path, cache: dict, objective: str = "time", name: str = "x.dev.kt.json") -> Path:
    doc = {"tune_params_keys": ["x"], "tune_params": {"x": [1, 2, 3]}, "objective": objective, "cache": cache}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _one_line(error: BaseException, *parts: str) -> None:
    text = str(error)
    assert "\n" not in text, text
    for part in parts:
        assert part in text, text


# -- M6: the objective's direction ----------------------------------------------------------------------


def test_a_throughput_cache_is_maximised(tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress((HUB / "pnpoly.RTX_Titan.kt.json.gz").read_bytes()))
    doc["objective"] = "GFLOP/s"  # as Kernel Tuner writes it when tuning with objective="GFLOP/s"
    for entry in doc["cache"].values():
        t = entry["time"]
        entry["GFLOP/s"] = 100.0 / t if isinstance(t, int | float) else t
    path = tmp_path / "gflops.kt.json"
    path.write_text(json.dumps(doc))
    problem = replay.load_kt(HUB / "pnpoly.T1.json", path)
    fastest = min((e for e in doc["cache"].values() if isinstance(e["time"], float)), key=lambda e: e["time"])
    assert problem.goal == "max" and problem.objective_name == "GFLOP/s"
    assert problem.optimum == fastest["GFLOP/s"] == max(problem.values())
    assert problem.objective.lookup(problem.best_config).metrics["time"] == fastest["time"]
    assert ReplayTarget(problem).goal == "max"
    # Passing the goal on tunes towards the fastest kernel.
    result = perftune.tune(problem.objective, problem.space, budget=30, seed=0, goal=problem.goal)
    assert result.best is not None and result.best.value == max(t.value for t in result.trials if t.value)


def test_an_objective_of_unknown_direction_needs_a_goal(tmp_path: Path) -> None:
    cache = {"1": {"x": 1, "time": 1.0, "score": 5.0}, "2": {"x": 2, "time": 2.0, "score": 7.0}}
    path = _kt(tmp_path, cache, objective="score")
    with pytest.raises(PerftuneError) as info:
        replay.load_kt(_t1(tmp_path), path)
    _one_line(info.value, "x.dev.kt.json", "'score'", "goal='min' or goal='max'")
    assert replay.load_kt(_t1(tmp_path), path, goal="max").best_config == {"x": 2}
    assert replay.load_kt(_t1(tmp_path), path, goal="min").best_config == {"x": 1}
    timed = replay.load_kt(_t1(tmp_path), path, objective="time")
    assert timed.goal == "min" and timed.optimum == 1.0
    with pytest.raises(PerftuneError, match="goal must be 'min' or 'max'"):
        replay.load_kt(_t1(tmp_path), path, goal="up")


# -- L6: a configuration recorded twice -----------------------------------------------------------------


def _t4(tmp_path: Path, records: list[tuple[int, Any, bool]]) -> Path:
    results = [{"configuration": {"x": x}, "invalidity": "correct" if ok else "runtime",
                "measurements": [{"name": "time", "value": v}], "objectives": ["time"]}
               for x, v, ok in records]
    path = tmp_path / "x.dev.T4.json"
    path.write_text(json.dumps({"results": results}))
    return path


@pytest.mark.parametrize(
    ("records", "x1", "optimum"),
    [
        ([(1, 0.5, True), (2, 2.0, True), (1, "RuntimeFailedConfig", False)], 0.5, 0.5),  # success wins
        ([(1, "RuntimeFailedConfig", False), (2, 2.0, True), (1, 0.5, True)], 0.5, 0.5),  # success wins
        ([(1, 0.9, True), (2, 2.0, True), (1, 0.5, True)], 0.9, 0.9),  # the first success stays
    ],
)
def test_the_optimum_is_what_replaying_its_configuration_gives(
    tmp_path: Path, records: list, x1: float, optimum: float
) -> None:
    problem = replay.load(_t1(tmp_path), _t4(tmp_path, records))
    assert problem.objective(Config({"x": 1})) == x1
    assert problem.optimum == optimum and problem.objective(problem.best_config) == problem.optimum


# -- L7: malformed values -------------------------------------------------------------------------------


def test_a_negative_time_is_refused(tmp_path: Path) -> None:
    cache = {"1": {"x": 1, "time": -5.0}, "2": {"x": 2, "time": 2.0}}
    with pytest.raises(PerftuneError) as info:
        replay.load_kt(_t1(tmp_path), _kt(tmp_path, cache))
    _one_line(info.value, "x.dev.kt.json", "cache entry '1'", "time -5.0 is negative")
    with pytest.raises(PerftuneError) as info:
        replay.load(_t1(tmp_path), _t4(tmp_path, [(1, -5.0, True), (2, 2.0, True)]))
    _one_line(info.value, "x.dev.T4.json: results[0]", "time -5.0 is negative")


def test_a_value_of_another_type_is_named_not_counted_outside(tmp_path: Path) -> None:
    cache = {"1": {"x": 1, "time": 1.0}, "2": {"x": "2", "time": 2.0}}
    with pytest.raises(PerftuneError) as info:
        replay.load_kt(_t1(tmp_path), _kt(tmp_path, cache))
    _one_line(info.value, "cache entry '2'", "parameter 'x' is '2' (a str)",
              "x.T1.json gives it number values")
    # A value of the right type outside the T1 values is still outside, as before.
    outside = replay.load_kt(_t1(tmp_path), _kt(tmp_path, {**cache, "2": {"x": 7, "time": 2.0}}))
    assert outside.n_outside == 1


def test_list_values_are_refused_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(PerftuneError) as info:
        replay.space_from_t1(json.loads(_t1(tmp_path, "[[1, 2], [3, 4]]").read_text()), where="x.T1.json")
    _one_line(info.value, "x.T1.json: parameter 'x': Values[0] is the list [1, 2]", "a number, a string")


# -- M4: T1 Conditions bounded ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("x not in (" + ",".join(["(x,)*10000"] * 20) + ")", "units of work per configuration"),
        ("x in (" + ",".join(["(0,)*10000"] * 200) + ")", "constant parts build more than"),
    ],
)
def test_a_hostile_condition_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, condition: str, message: str
) -> None:
    t1 = _t1(tmp_path, conditions=[{"Expression": "x > 0"}, {"Expression": condition}])
    with pytest.raises(PerftuneError) as info:
        replay.load_kt(t1, _kt(tmp_path, {"1": {"x": 1, "time": 1.0}}))
    _one_line(info.value, "x.T1.json: Conditions[1]: ", message)
    assert len(str(info.value)) < 600


def test_the_hub_conditions_are_far_below_the_bound() -> None:
    for t1 in sorted(HUB.glob("*.T1.json")):
        space = replay.space_from_t1(json.loads(t1.read_text()), where=str(t1))
        assert all(c.work < 100 for c in space._constraint_sources)


# -- Kernel Tuner times in milliseconds --------------------------------------------------------------------


def _trials(values: list[float]) -> list[Trial]:
    return [Trial(i, Config({"x": i + 1}), Status.OK, value=v, samples=[v, v]) for i, v in enumerate(values)]


def test_export_writes_kernel_tuner_milliseconds(tmp_path: Path) -> None:
    space = Space({"x": Int(1, 3)})
    doc = replay.kt_cache_document(_trials([0.002, 0.001]), space=space, time_unit="s")
    entry = doc["cache"]["2"]
    assert entry["time"] == 1.0 and entry["times"] == [1.0, 1.0] and entry["benchmark_time"] == 2.0
    same = replay.kt_cache_document(_trials([0.002, 0.001]), space=space)  # default: already ms
    assert same["cache"]["2"]["time"] == 0.001
    with pytest.raises(PerftuneError, match="time_unit must be one of"):
        replay.kt_cache_document(_trials([1.0]), time_unit="minutes")


def test_a_run_timed_in_seconds_exports_as_milliseconds_and_loads_back(tmp_path: Path) -> None:
    space = Space({"x": Int(1, 3)})
    db = tmp_path / "runs.db"

    def wall(config: Config) -> dict[str, float]:
        return {"wall_time": 0.001 * config["x"]}  # seconds, as the command target reports

    perftune.tune(wall, space, budget=3, seed=0, store=str(db), name="cmd", metric="wall_time")
    out = replay.export_run_kt(str(db), "cmd", tmp_path / "cmd.dev.kt.json")
    doc = json.loads(out.read_text())
    assert sorted(e["time"] for e in doc["cache"].values()) == pytest.approx([1.0, 2.0, 3.0])
    problem = replay.load_kt(_t1(tmp_path), out)
    assert problem.optimum == pytest.approx(1.0) and problem.best_config == {"x": 1}
    # A replayed cache's run is in milliseconds already: written as it is.
    again = replay.export_run_kt(str(db), "cmd", tmp_path / "as_is.kt.json", time_unit="ms")
    assert sorted(e["time"] for e in json.loads(again.read_text())["cache"].values()) == pytest.approx(
        [0.001, 0.002, 0.003])
