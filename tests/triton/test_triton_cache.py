"""The persistent kernel cache: keys, the file format, neighbours, several writers."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from perftune.triton import CACHE_ENV_VAR, KernelCache, TuningKey, default_cache_dir


def _key(
    m: int = 16, *, device: str = "NVIDIA H200", dtypes: tuple[str, ...] = ("torch.bfloat16",)
) -> TuningKey:
    return TuningKey("matmul", "hash1", {"M": m, "N": 4096}, dtypes, device, "3.6.0")


def test_file_name_depends_on_every_part_of_the_key() -> None:
    names = {
        _key().file_name(),
        _key(64).file_name(),
        _key(device="NVIDIA A100").file_name(),
        _key(dtypes=("torch.float16",)).file_name(),
        TuningKey(
            "matmul", "hash2", {"M": 16, "N": 4096}, ("torch.bfloat16",), "NVIDIA H200", "3.6.0"
        ).file_name(),
        TuningKey(
            "matmul", "hash1", {"M": 16, "N": 4096}, ("torch.bfloat16",), "NVIDIA H200", "3.5.0"
        ).file_name(),
    }
    assert len(names) == 6
    assert _key().family() == _key(64).family() != _key(device="NVIDIA A100").family()


def test_entry_round_trips_through_the_documented_file_format(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    with cache.update(_key()) as entry:
        entry.results['{"B":1}'] = {"config": {"B": 1}, "status": "ok", "time_ms": 0.5, "reason": ""}
        entry.results['{"B":2}'] = {
            "config": {"B": 2},
            "status": "timeout",
            "time_ms": None,
            "reason": "timeout: the first launch took more than 10 s",
        }
        entry.considered |= {'{"B":1}', '{"B":2}'}
        entry.best = '{"B":1}'
    raw = json.loads((tmp_path / _key().file_name()).read_text())
    assert raw["format"] == 1 and raw["key"] == {"M": 16, "N": 4096} and raw["device"] == "NVIDIA H200"
    assert raw["best"] == '{"B":1}' and raw["considered"] == ['{"B":1}', '{"B":2}']
    loaded = cache.load(_key())
    assert loaded is not None and loaded.ok_times() == {'{"B":1}': 0.5}


def test_torn_or_foreign_files_count_as_absent(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    (tmp_path / _key().file_name()).write_text('{"format": 1, "best"')
    assert cache.load(_key()) is None
    (tmp_path / _key().file_name()).write_text('{"format": 99}')
    assert cache.load(_key()) is None


def test_neighbours_are_other_keys_of_the_same_family_nearest_first(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    for m in (16, 256, 32):
        with cache.update(_key(m)) as entry:
            entry.best = "x"
    with cache.update(_key(32, device="NVIDIA A100")) as entry:
        entry.best = "x"
    found = cache.neighbours(_key(64))
    assert [e.key.key["M"] for e in found] == [32, 16, 256]
    assert all(e.key.device == "NVIDIA H200" for e in found)
    assert [e.key.key["M"] for e in cache.neighbours(_key(16))] == [32, 256]


def _writer(folder: str, start: int) -> None:
    cache = KernelCache(folder)
    for i in range(start, start + 20):
        with cache.update(_key()) as entry:
            entry.results[str(i)] = {"config": {"i": i}, "status": "ok", "time_ms": float(i)}


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s)) for s in (0, 100)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    entry = KernelCache(tmp_path).load(_key())
    assert entry is not None and len(entry.results) == 40


def test_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "k"))
    assert default_cache_dir() == tmp_path / "k"
    assert KernelCache().folder == tmp_path / "k"
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert KernelCache().folder == tmp_path / "xdg" / "perftune" / "triton"
