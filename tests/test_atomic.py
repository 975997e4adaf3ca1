"""write_text_atomic: the one way a small state file is replaced (perftune._atomic)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from perftune._atomic import write_text_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_replaces_the_content_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    assert write_text_atomic(target, '{"new": true}') == target
    assert target.read_text() == '{"new": true}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_mode_follows_the_umask_like_a_plain_open(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        plain = tmp_path / "plain.json"
        plain.write_text("x")
        atomic = write_text_atomic(tmp_path / "atomic.json", "x")
    finally:
        os.umask(old)
    assert _mode(atomic) == _mode(plain) == 0o666 & ~umask


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "bad \udcff surrogate")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_missing_folder_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_text_atomic(tmp_path / "absent" / "state.json", "x")
