"""Opening stores: URLs, defaults, bad input (one line, nothing written), SQLite settings, migrations list."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from perftune.errors import StoreError
from perftune.store import SCHEMA_VERSION, capture_environment, migrations, open_store
from perftune.store._sqlite import SQLITE_WAL_AUTOCHECKPOINT_PAGES


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://user@localhost/db", "unsupported store URL scheme 'mysql'"),
        ("oracle+cx://u@h/db", "unsupported store URL scheme"),
        ("postgresql://user@localhost", "names no database"),
        ("postgresql+asyncpg://user@localhost/db", "unsupported PostgreSQL driver 'asyncpg'"),
        ("sqlite+aiosqlite:///x.db", "unsupported SQLite driver"),
        ("://nothing", "malformed store URL"),
        ("sqlite:x.db", "malformed store URL"),
        ("   ", "empty store URL"),
    ],
)
def test_bad_urls_are_one_line_and_write_nothing(
    url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=message) as info:
        open_store(url)
    assert "\n" not in str(info.value)
    assert _files(tmp_path) == []


def test_missing_folder_and_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "no" / "such" / "x.db")
    with pytest.raises(StoreError, match="is a directory"):
        open_store(f"sqlite:///{tmp_path}")
    assert _files(tmp_path) == []


def test_must_exist(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        open_store(tmp_path / "x.db", must_exist=True)
    assert _files(tmp_path) == []
    open_store(tmp_path / "x.db").close()
    open_store(tmp_path / "x.db", must_exist=True).close()


def test_unreachable_postgres_is_one_line() -> None:
    pytest.importorskip("psycopg2")
    with pytest.raises(StoreError, match="cannot open") as info:
        open_store("postgresql://nobody:secret@127.0.0.1:1/perftune")
    text = str(info.value)
    assert "\n" not in text and "secret" not in text and "127.0.0.1" in text


def test_not_a_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("just some text, long enough to look like a header of something else\n" * 20)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"is not a perftune store \(not a SQLite database\)") as info:
        open_store(path)
    assert "\n" not in str(info.value)
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["notes.db"]


def test_default_is_perftune_db_in_cwd_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFTUNE_STORE", raising=False)
    with open_store(None) as store:
        store.create_run("here", None, {}, "min", None)
        assert store.dialect == "sqlite"
    assert (tmp_path / "perftune.db").exists()
    monkeypatch.setenv("PERFTUNE_STORE", f"sqlite:///{tmp_path / 'from-env.db'}")
    with open_store(None) as store:
        assert store.list_runs() == []
    assert (tmp_path / "from-env.db").exists()
    with open_store("perftune.db") as store:  # a bare path is a SQLite file
        assert [r.name for r in store.list_runs()] == ["here"]


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    open_store(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with open_store(path) as store:  # the store's own connection checkpoints less often than SQLite's
        raw = store._dialect.dbapi_connection
        assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == SQLITE_WAL_AUTOCHECKPOINT_PAGES
        assert raw.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_migrations_are_contiguous() -> None:
    assert [m.version for m in migrations] == list(range(1, SCHEMA_VERSION + 1))
    assert all(m.description for m in migrations)


def test_environment_records_machine_and_git_commit(tmp_path: Path) -> None:
    env = capture_environment(tmp_path)
    assert env["cpu_count"] >= 1 and env["python"].count(".") == 2
    assert "git_commit" not in env
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    try:
        subprocess.run([*git, "init", "-q"], check=True)
        (tmp_path / "f").write_text("x")
        subprocess.run([*git, "add", "f"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not usable here")
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    sub = tmp_path / "sub"
    sub.mkdir()
    env = capture_environment(sub)
    assert env["git_commit"] == head and env["git_dirty"] is False
    (tmp_path / "f").write_text("changed")
    assert capture_environment(sub)["git_dirty"] is True


def test_run_records_environment_overrides(tmp_path: Path) -> None:
    with open_store(tmp_path / "s.db") as store:
        run = store.create_run("r", None, {}, "min", None, environment={"git_commit": "abc", "gpu": "none"})
        assert run.environment["git_commit"] == "abc" and run.environment["gpu"] == "none"
        assert "cpu_model" in run.environment


def test_public_names_are_complete() -> None:
    import perftune.store as store_module

    public = {n for n in vars(store_module) if not n.startswith("_")} - {"annotations"}
    assert set(store_module.__all__) == public
    assert all(getattr(store_module, n) is not None for n in store_module.__all__)


def test_a_store_on_a_read_only_file_system_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first error (the file cannot be created) is the message; removing the leftovers, which fails
    # the same way there, used to raise a second traceback over it.
    import errno
    import os

    def read_only(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "open", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(StoreError, match="cannot create store .*: Read-only file system") as info:
        open_store(str(tmp_path / "s.db"))
    assert "\n" not in str(info.value)


def test_a_store_on_a_read_only_mount_is_read_without_its_log_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An archive or a snapshot: WAL mode would need -wal and -shm files beside the store, so read-only
    # commands open it immutable (the file and its folder cannot be written: a read-only file system).
    import os

    from perftune.space import Config
    from perftune.trial import Status, Trial

    db = tmp_path / "archive.db"
    with open_store(str(db)) as store:
        run = store.create_run("kept", None)
        store.add_trial(run.id, Trial(id=0, config=Config({"x": 1}), status=Status.OK, value=2.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive.db"]
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode & os.W_OK else real(p, mode, **kw))
    with open_store(str(db), must_exist=True) as store:
        assert [r.name for r in store.list_runs()] == ["kept"] and store.count(store.get_run("kept").id) == 1
        with pytest.raises(StoreError, match="readonly database"):
            store.create_run("new", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive.db"]


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql ://tuner:S3cretPW@db.example/perftune", "malformed store URL 'postgresql ://tuner:***@db"),
    ("postgresql://tuner:S3cretPW@db.example:54x2/perftune", "its port is not a number"),
    ("postgresql://tuner:p@ss:w/rd#S3cretPW@db.example/perftune", "must be percent-encoded: @ is %40"),
])
def test_a_malformed_postgresql_url_is_one_line_without_its_password(url: str, message: str) -> None:
    # The message quoted the URL whole (a password from a private --store @FILE too), and a port that
    # is not a number was a ValueError traceback.
    with pytest.raises(StoreError) as caught:
        open_store(url)
    text = str(caught.value)
    assert message in text and "S3cretPW" not in text and "\n" not in text
