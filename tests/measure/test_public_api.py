"""What perftune.measure offers targets that run candidates themselves (the command target uses it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perftune.measure import Sandbox, Stage, executable_by, read_for_candidate, size_for_candidate

OTHER_USER = (65534, 65534)  # nobody: owns none of the test's files


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # pytest's own folders sit under a parent that only their owner can enter


def test_executable_by_follows_the_permission_bits_of_every_parent(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    inner = closed / "inner"
    inner.mkdir(mode=0o755)  # reachable only through a parent that the other user cannot enter
    assert executable_by(str(open_dir), *OTHER_USER)
    assert not executable_by(str(closed), *OTHER_USER)
    assert not executable_by(str(inner), *OTHER_USER)
    assert executable_by(str(closed), os.getuid(), os.getgid())  # the owner's bits apply to the owner
    assert not executable_by(str(tmp_path / "missing"), *OTHER_USER)


def test_a_stage_copy_is_reachable_where_the_original_is_not(tmp_path: Path) -> None:
    closed = tmp_path / "private"
    closed.mkdir(mode=0o700)
    (closed / "prog.sh").write_text("echo hi\n")
    root = tmp_path / "stage-root"
    root.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    copy = Stage.create(str(root)).add_tree(str(closed))
    assert not executable_by(str(closed), *OTHER_USER)
    assert executable_by(copy, *OTHER_USER)
    assert Path(copy, "prog.sh").read_text() == "echo hi\n"


def test_files_a_candidate_wrote_are_read_within_its_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "out.bin").write_bytes(b"12345")
    user = Sandbox(drop_user=False).step_user(str(scratch))
    assert user is None  # steps run as perftune's own user: files are read with its rights
    data = read_for_candidate(str(scratch / "out.bin"), scratch=str(scratch), user=user, max_bytes=1 << 20)
    assert data == b"12345"
    assert size_for_candidate(str(scratch / "out.bin"), scratch=str(scratch), user=user) == 5


def test_a_link_out_of_scratch_is_refused(tmp_path: Path) -> None:
    from perftune.measure import CandidateFileError

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    (scratch / "out.txt").symlink_to(secret)
    with pytest.raises(CandidateFileError):
        read_for_candidate(str(scratch / "out.txt"), scratch=str(scratch), user=None, max_bytes=1 << 20)
