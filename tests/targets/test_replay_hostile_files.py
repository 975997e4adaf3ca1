"""Hostile T1 / T4 / Kernel Tuner files: one line naming the file and the problem, checked at load time.

Files received from others are untrusted: a gzip bomb, JSON nested 100,000 deep, values that cannot be
hashed, members of the wrong type, integers beyond any float, NaN values, conditions that would never
finish. None may give a traceback, hang, or get past loading to crash the run later.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from perftune.errors import PerftuneError
from perftune.space import Space
from perftune.targets import replay

HUB = Path(__file__).resolve().parents[2] / "data" / "benchmark_hub"

T1: dict[str, Any] = {"ConfigurationSpace": {"TuningParameters": [
    {"Name": "bx", "Type": "int", "Values": "[1, 2, 4, 8]", "Default": 1},
    {"Name": "t", "Type": "int", "Values": "[1, 2, 3]", "Default": 1}], "Conditions": []}}


def _t1(tmp_path: Path, *, values: Any = "[1, 2, 4, 8]", conditions: Any = (), doc: Any = None,
        text: str | None = None) -> Path:
    if doc is None:
        doc = json.loads(json.dumps(T1))
        doc["ConfigurationSpace"]["TuningParameters"][0]["Values"] = values
        cs = doc["ConfigurationSpace"]
        cs["Conditions"] = list(conditions) if isinstance(conditions, tuple) else conditions
    path = tmp_path / "k.T1.json"
    path.write_text(text if text is not None else json.dumps(doc))
    return path


def _t4_rows() -> list[dict[str, Any]]:
    return [{"configuration": {"bx": b, "t": t}, "invalidity": "correct", "objectives": ["time"],
             "measurements": [{"name": "time", "unit": "ms", "value": float(b + t)}]}
            for b in (1, 2, 4, 8) for t in (1, 2, 3)]


def _kt_doc() -> dict[str, Any]:
    cache = {f"{b},{t}": {"bx": b, "t": t, "time": float(b + t)} for b in (1, 2, 4, 8) for t in (1, 2, 3)}
    return {"tune_params_keys": ["bx", "t"], "tune_params": {"bx": [1, 2, 4, 8], "t": [1, 2, 3]},
            "objective": "time", "cache": cache}


def _write(path: Path, doc: Any = None, *, text: str | None = None) -> Path:
    data = text if text is not None else json.dumps(doc)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data)
    return path


def _one_line(error: pytest.ExceptionInfo[PerftuneError], *parts: str) -> str:
    message = str(error.value)
    assert "\n" not in message
    assert len(message) < 600
    for part in parts:
        assert part in message, message
    return message


def _load_t4(tmp_path: Path, rows: Any = None, *, t1: Path | None = None,
             **extra: Any) -> replay.ReplayProblem:
    doc = {"schema_version": "1.0.0", "results": _t4_rows() if rows is None else rows, **extra}
    return replay.load(t1 or _t1(tmp_path), _write(tmp_path / "r.T4.json", doc))


# -- the legit files still load -----------------------------------------------------------------------


def test_the_benchmark_hub_t1_files_still_load() -> None:
    t1_files = sorted(HUB.glob("*.T1.json"))
    assert len(t1_files) == 5
    for path in t1_files:
        space = replay.space_from_t1(replay.read_json(path, "T1"), where=str(path))
        assert isinstance(space, Space) and space.names
    pnpoly = replay.space_from_t1(replay.read_json(HUB / "pnpoly.T1.json", "T1"))
    assert pnpoly.params["block_size_x"].values() == [32 * i for i in range(1, 32)]


def test_a_small_clean_t4_file_loads(tmp_path: Path) -> None:
    problem = _load_t4(tmp_path)
    assert problem.optimum == 2.0 and problem.n_results == 12


# -- size caps: gzip bombs and huge plain files ------------------------------------------------------


def _bomb(path: Path, n_mib: int, doc: Any) -> Path:
    # Valid JSON that expands to n_mib MiB of whitespace: a few KiB on disk.
    text = json.dumps(doc)
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(text[:-1].encode())
        block = b" " * (1024 * 1024)
        for _ in range(n_mib):
            f.write(block)
        f.write(text[-1:].encode())
    return path


def test_a_gzip_bomb_t4_file_is_refused_while_streaming(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "2")
    t4 = _bomb(tmp_path / "bomb.T4.json.gz", 64, {"results": _t4_rows()})
    assert t4.stat().st_size < 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(PerftuneError) as error:
            replay.load(_t1(tmp_path), t4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _one_line(error, "bomb.T4.json.gz", "larger than 2 MiB once decompressed", "PERFTUNE_INPUT_MAX_MB")
    assert peak < 16 * 1024 * 1024  # never holds the 64 MiB it would expand to


def test_a_gzip_bomb_kernel_tuner_cache_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "1")
    kt = _bomb(tmp_path / "bomb.kt.json.gz", 8, _kt_doc())
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path), kt)
    _one_line(error, "bomb.kt.json.gz", "larger than 1 MiB once decompressed")


def test_a_plain_file_larger_than_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "0.5")
    big = _write(tmp_path / "big.T1.json", text=json.dumps(T1) + " " * (1024 * 1024))
    with pytest.raises(PerftuneError) as error:
        replay.load(big, _write(tmp_path / "r.T4.json", {"results": _t4_rows()}))
    _one_line(error, "big.T1.json", "larger than 0.5 MiB", "PERFTUNE_INPUT_MAX_MB")


def test_the_cap_can_be_raised_and_must_be_a_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kt = _bomb(tmp_path / "big.kt.json.gz", 3, _kt_doc())
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "4")
    assert replay.load_kt(_t1(tmp_path), kt).optimum == 2.0
    assert replay.input_limit_bytes() == 4 * 1024 * 1024
    monkeypatch.delenv("PERFTUNE_INPUT_MAX_MB")
    assert replay.input_limit_bytes() == 512 * 1024 * 1024  # the documented default
    for bad in ("lots", "-1", "0", "nan", "inf"):
        monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", bad)
        with pytest.raises(PerftuneError) as error:
            replay.load_kt(_t1(tmp_path), kt)
        _one_line(error, "PERFTUNE_INPUT_MAX_MB", "expected a positive number")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "r.T4.json"
    os.mkfifo(fifo)
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path), fifo)
    _one_line(error, "r.T4.json", "not a regular file")


# -- deeply nested JSON -------------------------------------------------------------------------------


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_t1_t4_and_kernel_tuner_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path, text=DEEP), _write(tmp_path / "r.T4.json", {"results": _t4_rows()}))
    _one_line(error, "k.T1.json", "nested too deeply")
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path), _write(tmp_path / "deep.T4.json.gz", text=DEEP))
    _one_line(error, "deep.T4.json.gz", "nested too deeply")
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path), _write(tmp_path / "deep.kt.json", text=DEEP))
    _one_line(error, "deep.kt.json", "nested too deeply")
    # An interrupted cache is closed and parsed again: that second parse is bounded too.
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path), _write(tmp_path / "trunc.kt.json", text='{"cache": ' + "[" * 100_000))
    _one_line(error, "trunc.kt.json", "nested too deeply")


def test_deeply_nested_values_inside_a_t1_string_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PerftuneError) as error:
        replay.space_from_t1(json.loads(_t1(tmp_path, values=DEEP).read_text()), where="k.T1.json")
    _one_line(error, "k.T1.json", "'bx'", "nested too deeply")


# -- T1: values that cannot be hashed, wrong types, huge integers, NaN ---------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([{"a": 1}, {"b": 2}], "Values[0]: a JSON object is not a parameter value"),
        ([[{"a": 1}]], "Values[0]: a JSON object is not a parameter value"),
        ([[[[[[1]]]]]], "nested more than 4 levels deep"),
        ([10**400, 1], "Values[0]: integer of 1329 bits is too large"),
        ([2**64, 1], "integer of 65 bits is too large"),
        ("[1, 2, float('nan'), 8]", "Values[2]: nan is not a usable value"),
        ("[1, float('inf')]", "Values[1]: inf is not a usable value"),
        ("[" + "9" * 5000 + "]", "Values is not a usable list"),
        ("[[[k for k in range(100)] for j in range(100)] for i in range(100)]", "more than 100000 values"),
        ("[(-8) ** 0.5, 1]", "complex"),
        (5, "Values must be a non-empty list"),
    ],
)
def test_hostile_t1_values_are_refused_at_load_time(tmp_path: Path, values: Any, message: str) -> None:
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path, values=values), _write(tmp_path / "r.T4.json", {"results": _t4_rows()}))
    _one_line(error, "k.T1.json", "'bx'", message)


def test_two_values_far_apart_do_not_build_the_range_between_them(tmp_path: Path) -> None:
    # Choosing Int for consecutive integers once listed range(lo, hi + 1): 2**62 items here.
    space = replay.space_from_t1(json.loads(_t1(tmp_path, values=[0, 2**62]).read_text()))
    assert space.params["bx"].values() == [0, 2**62]
    assert type(replay.space_from_t1(json.loads(_t1(tmp_path, values=[3, 1, 2]).read_text())).params["bx"]
                ).__name__ == "Int"


def test_nan_in_json_values_is_refused(tmp_path: Path) -> None:
    # json accepts NaN; a NaN parameter value would crash the run at its first checkpoint.
    path = _t1(tmp_path, values=[1, 2])
    path.write_text(path.read_text().replace("[1, 2]", "[1, NaN]"))
    with pytest.raises(PerftuneError) as error:
        replay.load(path, _write(tmp_path / "r.T4.json", {"results": _t4_rows()}))
    _one_line(error, "k.T1.json", "nan is not a usable value")


@pytest.mark.parametrize(
    ("cs", "message"),
    [
        ({"TuningParameters": 5}, "TuningParameters must be a list, not int"),
        ({"TuningParameters": T1["ConfigurationSpace"]["TuningParameters"], "Conditions": 7},
         "Conditions must be a list, not int"),
        ({"TuningParameters": T1["ConfigurationSpace"]["TuningParameters"], "Conditions": "bx > 1"},
         "Conditions must be a list, not str"),
        ([1], "no ConfigurationSpace.TuningParameters"),
    ],
)
def test_t1_members_of_the_wrong_type_are_one_line(tmp_path: Path, cs: Any, message: str) -> None:
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path, doc={"ConfigurationSpace": cs}),
                    _write(tmp_path / "r.T4.json", {"results": _t4_rows()}))
    _one_line(error, "k.T1.json", message)


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("bx < round(1, -10**9)", "ndigits"),
        ("bx < (10**10000)**10000", "4096 bits"),
        ("bx < len('%0500000000d' % 1)", "string formatting"),
        ("bx < 10**10**10", "4096 bits"),
    ],
)
def test_a_condition_that_would_never_finish_is_refused(tmp_path: Path, condition: str, message: str) -> None:
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path, conditions=({"Expression": condition},)),
                       _write(tmp_path / "r.kt.json", _kt_doc()))
    _one_line(error, "k.T1.json", condition, message)


def test_a_bad_default_or_condition_names_the_t1_file(tmp_path: Path) -> None:
    path = _t1(tmp_path, values=[True, False])
    doc = json.loads(path.read_text())
    doc["ConfigurationSpace"]["TuningParameters"][0]["Default"] = 1
    with pytest.raises(PerftuneError) as error:
        replay.space_from_t1(doc, where=str(path))
    _one_line(error, "k.T1.json", "default 1")
    with pytest.raises(PerftuneError) as error:
        replay.space_from_t1(json.loads(_t1(tmp_path, conditions=["zz > 1"]).read_text()), where=str(path))
    _one_line(error, "k.T1.json", "unknown parameter 'zz'")


# -- T4 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [({"metadata": [1, 2]}, "metadata must be an object, not list"),
     ({"metadata": "abc"}, "metadata must be an object, not str")],
)
def test_t4_metadata_of_the_wrong_type_is_one_line(tmp_path: Path, extra: dict, message: str) -> None:
    with pytest.raises(PerftuneError) as error:
        _load_t4(tmp_path, **extra)
    _one_line(error, "r.T4.json", message)


def _row(**change: Any) -> dict[str, Any]:
    row = _t4_rows()[0]
    row.update(change)
    return row


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(objectives=5), "results[1]: objectives must be a list of measurement names"),
        (_row(objectives=[["time"]]), "objectives must be a list of measurement names"),
        (_row(measurements=7), "results[1]: measurements must be a list, not int"),
        (_row(configuration={"bx": [{"a": 1}], "t": 1}), "results[1]: parameter 'bx': a JSON object"),
        (_row(configuration={"bx": 1}), "results[1] lacks parameter 't'"),
        (_row(measurements=[{"name": "time", "value": 10**400}]), "results[1]: 'time': integer of 1329 bits"),
        (_row(measurements=[{"name": "time", "value": 1.0}, {"name": "power", "value": -(10**400)}]),
         "results[1]: measurement 'power': integer of 1329 bits"),
    ],
)
def test_a_malformed_second_t4_row_is_one_line(tmp_path: Path, row: dict, message: str) -> None:
    rows = _t4_rows()
    rows[1] = row
    with pytest.raises(PerftuneError) as error:
        _load_t4(tmp_path, rows)
    _one_line(error, "r.T4.json", message)


def test_a_t4_number_with_too_many_digits_is_one_line(tmp_path: Path) -> None:
    text = json.dumps({"results": _t4_rows()}).replace('"value": 2.0', '"value": 1' + "0" * 5000, 1)
    with pytest.raises(PerftuneError) as error:
        replay.load(_t1(tmp_path), _write(tmp_path / "r.T4.json", text=text))
    _one_line(error, "r.T4.json", "not a valid T4 JSON file")


def test_non_finite_t4_measurements_are_failures_not_crashes(tmp_path: Path) -> None:
    text = json.dumps({"results": _t4_rows()}).replace('"value": 2.0', '"value": NaN', 1)
    problem = replay.load(_t1(tmp_path), _write(tmp_path / "r.T4.json", text=text))
    assert problem.n_failed == 1 and math.isfinite(problem.optimum)


# -- Kernel Tuner caches -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tune_params_keys": [["bx"], "t"]}, "tune_params_keys must be a list of parameter names"),
        ({"cache": {"x": {"bx": {"a": 1}, "t": 1, "time": 1.0}}}, "cache entry 'x': parameter 'bx': a JSON"),
        ({"cache": {"x": {"bx": [{"a": 1}], "t": 1, "time": 1.0}}}, "parameter 'bx': a JSON object"),
        ({"cache": {"x": {"bx": 1, "t": 1, "time": 10**400}}},
         "cache entry 'x': 'time': integer of 1329 bits"),
        ({"cache": {"x": {"bx": 1, "t": 1, "time": 1.0, "power": 10**400}}}, "cache entry 'x': 'power'"),
        ({"cache": {"x": {"bx": 2**70, "t": 1, "time": 1.0}}}, "integer of 71 bits is too large"),
    ],
)
def test_a_malformed_kernel_tuner_cache_is_one_line(tmp_path: Path, change: dict, message: str) -> None:
    doc = {**_kt_doc(), **change}
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path), _write(tmp_path / "r.kt.json", doc))
    _one_line(error, "r.kt.json", message)


def test_deeply_nested_tune_params_keys_are_one_line(tmp_path: Path) -> None:
    text = json.dumps(_kt_doc()).replace('"tune_params_keys": ["bx", "t"]',
                                         '"tune_params_keys": ' + "[" * 900 + "]" * 900)
    with pytest.raises(PerftuneError) as error:
        replay.load_kt(_t1(tmp_path), _write(tmp_path / "r.kt.json", text=text))
    _one_line(error, "r.kt.json", "tune_params_keys must be a list of parameter names")


def test_an_interrupted_kernel_tuner_cache_still_loads(tmp_path: Path) -> None:
    text = json.dumps(_kt_doc())
    cut = text[: text.rindex("}", 0, len(text) - 2) + 1] + ",\n"  # the last entry written, file left open
    problem = replay.load_kt(_t1(tmp_path), _write(tmp_path / "r.kt.json", text=cut))
    assert problem.optimum == 2.0
