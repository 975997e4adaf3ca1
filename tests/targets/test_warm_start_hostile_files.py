"""Hostile ``--warm-start`` files (T4 results, Kernel Tuner caches): one line at load time, bounded reads."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from perftune.drive import Prior
from perftune.errors import PerftuneError
from perftune.space import Choice, Int, Space

SPACE = Space({"level": Int(1, 9, default=1), "memlevel": Int(1, 9, default=8),
               "strategy": Choice(["default", "rle"])})


def _rows() -> list[dict[str, Any]]:
    return [{"configuration": {"level": lv, "memlevel": 8, "strategy": "default"}, "invalidity": "correct",
             "objectives": ["time"], "measurements": [{"name": "time", "value": float(10 - lv)}]}
            for lv in range(1, 6)]


def _file(tmp_path: Path, doc: Any = None, *, text: str | None = None, name: str = "w.T4.json") -> Path:
    path = tmp_path / name
    data = text if text is not None else json.dumps(doc)
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(data)
    else:
        path.write_text(data)
    return path


def _refused(path: Path, *parts: str) -> str:
    with pytest.raises(PerftuneError) as error:
        Prior.from_sources([path], SPACE)
    message = str(error.value)
    assert message.startswith("warm_start: ")
    assert "\n" not in message and len(message) < 600
    for part in parts:
        assert part in message, message
    return message


def test_a_clean_t4_file_gives_a_prior(tmp_path: Path) -> None:
    prior = Prior.from_sources([_file(tmp_path, {"results": _rows()})], SPACE)
    assert prior.ranked[0]["level"] == 5


def test_a_gzip_bomb_is_refused_while_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "1")
    text = json.dumps({"results": _rows()})
    path = tmp_path / "bomb.T4.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(text[:-1].encode())
        for _ in range(32):
            f.write(b" " * (1024 * 1024))
        f.write(b"}")
    tracemalloc.start()
    try:
        _refused(path, "bomb.T4.json.gz", "larger than 1 MiB once decompressed", "PERFTUNE_INPUT_MAX_MB")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024


def test_deeply_nested_json_is_one_line(tmp_path: Path) -> None:
    _refused(_file(tmp_path, text="[" * 100_000 + "]" * 100_000), "w.T4.json", "nested too deeply")
    deep_value = _with_row(1, configuration={"level": [[[[[1]]]]], "memlevel": 8, "strategy": "default"})
    _refused(_file(tmp_path, deep_value), "results[1]: parameter 'level': a list nested too deeply")


def test_a_bad_cap_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFTUNE_INPUT_MAX_MB", "many")
    _refused(_file(tmp_path, {"results": _rows()}), "PERFTUNE_INPUT_MAX_MB", "expected a positive number")


def test_a_number_with_too_many_digits_is_one_line(tmp_path: Path) -> None:
    text = json.dumps({"results": _rows()}).replace('"value": 9.0', '"value": 1' + "0" * 5000)
    _refused(_file(tmp_path, text=text), "w.T4.json", "cannot read it", "digits")


def _with_row(i: int, **change: Any) -> dict[str, Any]:
    rows = _rows()
    rows[i].update(change)
    return {"results": rows}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # Only the first row used to be checked: the second one raised KeyError.
        (_with_row(1, configuration={"level": 2}), "results[1] lacks parameter memlevel, strategy"),
        (_with_row(1, objectives=5), "results[1]: objectives must be a list of measurement names"),
        (_with_row(0, measurements=3), "results[0]: measurements must be a list, not int"),
        (_with_row(2, configuration={"level": [{"a": 1}], "memlevel": 8, "strategy": "default"}),
         "results[2]: parameter 'level': a JSON object is not a parameter value"),
        (_with_row(1, configuration={"level": 10**400, "memlevel": 8, "strategy": "default"}),
         "results[1]: parameter 'level': an integer of 1329 bits is not a parameter value"),
    ],
)
def test_a_malformed_t4_row_is_one_line(tmp_path: Path, doc: dict, message: str) -> None:
    _refused(_file(tmp_path, doc), "w.T4.json", message)


def test_a_malformed_kernel_tuner_cache_entry_is_one_line(tmp_path: Path) -> None:
    cache = {f"{lv},8,default": {"level": lv, "memlevel": 8, "strategy": "default", "time": float(lv)}
             for lv in range(1, 4)}
    cache["2,8,default"] = {"level": 2, "strategy": "default", "time": 1.0}
    doc = {"tune_params_keys": ["level", "memlevel", "strategy"], "cache": cache}
    _refused(_file(tmp_path, doc, name="w.kt.json"), "cache entry '2,8,default' lacks parameter memlevel")
    cache["2,8,default"] = {"level": {"x": 1}, "memlevel": 8, "strategy": "default", "time": 1.0}
    _refused(_file(tmp_path, doc, name="w.kt.json"), "parameter 'level': a JSON object")


def test_an_oversized_integer_time_is_left_out_like_a_failure(tmp_path: Path) -> None:
    doc = _with_row(0, measurements=[{"name": "time", "value": 10**400}])
    prior = Prior.from_sources([_file(tmp_path, doc)], SPACE)
    assert [c["level"] for c in prior.ranked] == [5, 4, 3, 2]
