"""A SQLite store shared by several users: its -wal and -shm files never lock its owner out.

A read-only command creates the -wal and -shm files of a WAL-mode store when none exist, with its own
uid and the store's mode, and leaves them; the owner's next write then failed with "attempt to write a
readonly database", naming no file. Readers that would leave such files now read the store file as it
is (immutable), and a writer that finds one it cannot write says which, and what to do, in one line.

The users are arbitrary unprivileged uids (a forked child that drops root), so these run as root only.
"""

from __future__ import annotations

import os
import pickle
import shlex  # noqa: F401 - imported before a child drops root (it cannot read the standard library then)
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from perftune.errors import StoreError
from perftune.store import open_store

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

OWNER = 61_011  # no passwd entry is needed to run as a uid
OTHER = 61_012


def _as_user(uid: int, fn: Callable[[], Any]) -> Any:
    """``fn()`` run in a forked child as ``uid`` (group ``uid``): its value, or its exception re-raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            result: tuple[str, Any] = ("ok", fn())
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the test
            result = ("error", (type(error).__name__, str(error), traceback.format_exc()))
        with os.fdopen(write, "wb") as out:
            pickle.dump(result, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    if kind == "error":
        name, message, where = value
        if name == "StoreError":
            raise StoreError(message)
        raise AssertionError(f"{name} in the child: {message}\n{where}")
    return value


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder both users may write (a team's folder), outside pytest's private tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="perftune-shared-", dir="/tmp"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _store_of(owner: int, folder: Path, mode: int = 0o644) -> Path:
    """A store with one run, owned by ``owner`` with ``mode``, its log folded in: no -wal or -shm left."""
    db = folder / "perftune.db"
    with open_store(db) as st:  # also imports what the children need, before they drop root
        st.create_run("first", None, {}, "min", None)
    with open_store(db, read_only=True) as st:
        st.list_runs()
    for name in ("perftune.db-wal", "perftune.db-shm"):
        (folder / name).unlink(missing_ok=True)
    os.chown(db, owner, owner)
    db.chmod(mode)
    return db


def _side_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(("-wal", "-shm")))


def _run_names(db: Path) -> list[str]:
    with open_store(db, read_only=True) as st:
        return [r.name for r in st.list_runs()]


def _add_run(db: Path, name: str) -> str:
    with open_store(db) as st:
        return st.create_run(name, None, {}, "min", None).name


def test_a_reader_of_another_user_leaves_no_file_its_owner_cannot_write(shared_dir: Path) -> None:
    db = _store_of(OWNER, shared_dir)
    assert _as_user(OTHER, lambda: _run_names(db)) == ["first"]
    assert _side_files(shared_dir) == []  # before: perftune.db-shm and -wal, owned by the reader
    assert _as_user(OWNER, lambda: _add_run(db, "second")) == "second"  # before: a readonly database
    assert _as_user(OTHER, lambda: _run_names(db)) == ["first", "second"]


def test_a_reader_of_another_user_sees_the_trials_of_a_writer_that_has_the_store_open(
        shared_dir: Path) -> None:
    db = _store_of(OWNER, shared_dir)
    # The owner's driver is running: its -wal holds a run the store file does not hold yet.
    with open_store(db) as writer:
        writer.create_run("live", None, {}, "min", None)
        assert {os.stat(shared_dir / n).st_uid for n in _side_files(shared_dir)} == {OWNER}
        assert _as_user(OTHER, lambda: _run_names(db)) == ["first", "live"]
    assert _as_user(OWNER, lambda: _add_run(db, "after")) == "after"


def test_a_store_whose_mode_lets_no_one_write_it_gets_no_read_only_side_files(shared_dir: Path) -> None:
    # The owner made the store read-only (chmod 444) and listed its runs, then made it writable again.
    db = _store_of(OWNER, shared_dir, mode=0o444)
    assert _as_user(OWNER, lambda: _run_names(db)) == ["first"]
    assert _side_files(shared_dir) == []  # before: a 0444 -shm, which failed every later write
    db.chmod(0o600)
    assert _as_user(OWNER, lambda: _add_run(db, "second")) == "second"


def test_a_side_file_the_writer_cannot_write_is_named_in_one_line(shared_dir: Path) -> None:
    db = _store_of(OWNER, shared_dir)
    # What an older perftune's reader left: the index and an empty log, another user's, mode 0640.
    for name in ("perftune.db-shm", "perftune.db-wal"):
        side = shared_dir / name
        side.write_bytes(b"" if name.endswith("-wal") else b"\0" * 32768)
        os.chown(side, OTHER, OTHER)
        side.chmod(0o640)
    with pytest.raises(StoreError) as caught:
        _as_user(OWNER, lambda: _add_run(db, "second"))
    message = str(caught.value)
    assert "\n" not in message
    assert f"'{db}-shm' (owner uid {OTHER}, mode 0640)" in message
    assert f"'{db}-wal' (owner uid {OTHER}, mode 0640)" in message
    assert message.endswith(f"while no one has the store open, rm {db}-wal {db}-shm")
    # Doing what it says is enough.
    (shared_dir / "perftune.db-shm").unlink()
    (shared_dir / "perftune.db-wal").unlink()
    assert _as_user(OWNER, lambda: _add_run(db, "second")) == "second"


def test_a_log_with_writes_in_it_is_copied_not_removed(shared_dir: Path) -> None:
    db = _store_of(OWNER, shared_dir)
    wal = shared_dir / "perftune.db-wal"
    wal.write_bytes(b"frames")
    os.chown(wal, OTHER, OTHER)
    wal.chmod(0o640)
    with pytest.raises(StoreError) as caught:
        _as_user(OWNER, lambda: _add_run(db, "second"))
    assert str(caught.value).endswith(f"cp {wal} {wal}.copy && mv {wal}.copy {wal} "
                                      "(it holds writes not yet in the store file)")
    assert " rm " not in str(caught.value)


def test_root_reading_a_users_store_leaves_files_that_user_owns(shared_dir: Path) -> None:
    db = _store_of(OWNER, shared_dir, mode=0o600)
    assert _run_names(db) == ["first"]
    for name in _side_files(shared_dir):  # SQLite gives them the store file's owner
        info = (shared_dir / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (OWNER, 0o600)
    assert _as_user(OWNER, lambda: _add_run(db, "second")) == "second"


def test_the_mode_warning_names_a_side_file_as_open_as_the_store(
        shared_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from perftune.store import _sqlite

    db = _store_of(os.geteuid(), shared_dir, mode=0o644)  # as an older perftune left it, with its index
    (shared_dir / "perftune.db-shm").write_bytes(b"\0" * 32768)
    (shared_dir / "perftune.db-shm").chmod(0o644)
    monkeypatch.setattr(_sqlite, "_warned_modes", set())
    open_store(db, read_only=True).close()
    assert capsys.readouterr().err.splitlines() == [
        f"perftune: warning: store {str(db)!r} can be read by other users (mode 0644), evaluated programs "
        f"included: chmod 600 {str(db)!r} '{db}-shm'"]
