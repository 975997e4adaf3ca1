"""Store hygiene: what is a store (empty and foreign files are refused, never initialised), the mode of a
new store file, URLs from files and the environment, passwords on the command line, drivers."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from perftune.errors import StoreError
from perftune.store import open_store

PERFTUNE = [sys.executable, "-m", "perftune"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "PERFTUNE_STORE"}
    full.update(env or {})
    return subprocess.run([*PERFTUNE, *args], capture_output=True, text=True, env=full, timeout=120)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("perftune: error:"), proc.stderr
    return lines[0]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ---------------------------------------------------------------- what is a store


def test_a_zero_byte_file_is_refused_not_initialised(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    path.touch()
    line = _one_line(_cli("runs", "--store", str(path)))
    assert line == f"perftune: error: {str(path)!r} is not a perftune store (an empty file); " \
                   "give a new path to create a store"
    for must_exist in (False, True):
        with pytest.raises(StoreError, match="is not a perftune store"):
            open_store(path, must_exist=must_exist)
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.db"]  # no -wal, no -shm


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    line = _one_line(_cli("--store", f"sqlite:///{path}", "runs"))
    assert line.endswith("'" + str(path) + "' is not a perftune store (not a SQLite database)"), line
    assert path.read_text() == "my notes\n"


def test_an_empty_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # a valid database without tables
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"is not a perftune store \(an empty SQLite database\)"):
        open_store(path)
    assert path.read_bytes() == before


def test_only_a_path_that_does_not_exist_is_created(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    with open_store(path) as store:
        store.create_run("r", None, {}, "min", None)
    with open_store(path) as store:  # and opened again as what it is
        assert [r.name for r in store.list_runs()] == ["r"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


# ---------------------------------------------------------------- permissions


def test_a_new_store_and_its_wal_and_shm_are_private(tmp_path: Path) -> None:
    path = tmp_path / "private.db"
    old = os.umask(0)  # even with a permissive umask
    try:
        store = open_store(path)
        store.create_run("r", None, {}, "min", None)
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert wal.exists() and shm.exists()  # open in WAL mode
        assert (_mode(path), _mode(wal), _mode(shm)) == (0o600, 0o600, 0o600)
        store.close()
    finally:
        os.umask(old)


def test_a_candidate_user_cannot_read_a_new_store(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    tmp_path.chmod(0o755)
    path = tmp_path / "store.db"
    open_store(path).close()
    proc = subprocess.run(["cat", str(path)], capture_output=True, user=nobody.pw_uid, group=nobody.pw_gid,
                          extra_groups=[], timeout=60)
    assert proc.returncode != 0 and b"Permission denied" in proc.stderr


def test_an_existing_store_readable_by_others_is_warned_about_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(path).close()
    assert _one_line_ok(_cli("runs", "--store", str(path))) == []  # private: nothing to say
    path.chmod(0o644)  # as older perftune created it
    proc = _cli("runs", "--store", str(path))
    assert proc.returncode == 0, proc.stderr
    assert _one_line_ok(proc) == [f"perftune: warning: store {str(path)!r} can be read by other users "
                                  f"(mode 0644), evaluated programs included: chmod 600 {str(path)!r}"]
    assert _mode(path) == 0o644  # a warning, not a change behind the user's back


def _one_line_ok(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.strip()]


# ---------------------------------------------------------------- where the URL comes from


def test_store_url_from_a_file(tmp_path: Path) -> None:
    db = tmp_path / "from-file.db"
    url_file = tmp_path / "store-url"
    url_file.write_text(f"sqlite:///{db}\n# anything after the first line is ignored\n")
    with open_store(f"@{url_file}") as store:
        store.create_run("via-file", None, {}, "min", None)
    assert db.exists()
    proc = _cli("runs", "--store", f"@{url_file}", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "via-file" in proc.stdout
    proc = _cli("runs", "--json", env={"PERFTUNE_STORE": f"@{url_file}"})  # the variable may name a file
    assert proc.returncode == 0 and "via-file" in proc.stdout, proc.stderr


def test_store_url_file_mistakes_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert "No such file or directory" in _one_line(_cli("runs", "--store", f"@{missing}"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    line = _one_line(_cli("runs", "--store", f"@{empty}"))
    assert "is empty: write the store URL on its first line" in line


def test_store_url_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with open_store(db) as store:
        store.create_run("via-env", None, {}, "min", None)
    proc = _cli("runs", "--json", env={"PERFTUNE_STORE": f"sqlite:///{db}"})
    assert proc.returncode == 0 and "via-env" in proc.stdout, proc.stderr


# ---------------------------------------------------------------- passwords and drivers


def test_a_password_on_the_command_line_is_warned_about(tmp_path: Path) -> None:
    pytest.importorskip("psycopg2")
    url = "postgresql://tuner:hunter2@127.0.0.1:1/perftune"  # nothing listens on port 1
    proc = _cli("runs", "--store", url)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 2, proc.stderr
    warning, error = lines
    assert warning.startswith("perftune: warning: the password of store postgresql://tuner:***@127.0.0.1:1")
    assert "other processes can read it" in warning
    assert "$PERFTUNE_STORE" in warning and "--store @FILE" in warning
    assert error.startswith("perftune: error: store postgresql+psycopg2://tuner:***@127.0.0.1:1/perftune: "
                            "cannot open")
    assert "hunter2" not in proc.stderr + proc.stdout


def test_a_password_from_the_environment_or_a_file_is_not_warned_about(tmp_path: Path) -> None:
    pytest.importorskip("psycopg2")
    url = "postgresql://tuner:hunter2@127.0.0.1:1/perftune"
    url_file = tmp_path / "url"
    url_file.write_text(url)
    for proc in (_cli("runs", env={"PERFTUNE_STORE": url}), _cli("runs", "--store", f"@{url_file}")):
        assert "cannot open" in _one_line(proc)  # the error only: no warning
        assert "hunter2" not in proc.stderr


def test_postgresql_driver_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.store._url import resolve_url

    assert resolve_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    assert resolve_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+psycopg2"
    assert resolve_url("postgres://u@h/db").drivername.startswith("postgresql+psycopg")
    monkeypatch.setitem(sys.modules, "psycopg2", None)  # psycopg2 missing: plain URLs use psycopg 3
    assert resolve_url("postgresql://u@h/db").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "module", "package"),
    [("postgresql+psycopg://u@127.0.0.1/db", "psycopg", "psycopg[binary]"),
     ("postgresql+psycopg2://u@127.0.0.1/db", "psycopg2", "psycopg2-binary")],
)
def test_a_missing_driver_is_one_line_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, url: str, module: str, package: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(StoreError) as info:
        open_store(url)
    assert str(info.value) == (f"store 'postgresql+{module}://u@127.0.0.1/db' needs {module}: "
                               f"pip install 'perftune[postgres]' (or pip install '{package}')")


@pytest.mark.parametrize("url", ["mysql://u@h/db", "mysql+pymysql://u:pw@h/db", "mssql+pyodbc://h/db"])
def test_other_sqlalchemy_urls_are_refused_saying_what_is_supported(url: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(url)
    text = str(info.value)
    assert "unsupported store URL scheme" in text and "SQLite (sqlite:///PATH)" in text
    assert "PostgreSQL (postgresql://USER@HOST/DB)" in text and "pw" not in text.split("in ")[1]


@pytest.mark.postgres
def test_psycopg3_url_against_a_real_server(fresh_postgres_url: str) -> None:
    pytest.importorskip("psycopg")
    url = "postgresql+psycopg://" + fresh_postgres_url.removeprefix("postgresql://")
    with open_store(url) as store:
        run = store.create_run("pg3", None, {}, "min", None)
        lease = store.acquire_lease(run.id)
        assert store.url.startswith("postgresql+psycopg://")
    proc = _cli("runs", "--store", url, "--json")
    assert proc.returncode == 0 and "pg3" in proc.stdout, proc.stderr
    with open_store(url) as store:
        assert store.get_lease(run.id) == lease


def test_the_warning_is_about_the_url_on_the_command_line_not_a_word_of_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perftune.store._url import resolve_url

    monkeypatch.setattr(sys, "argv", ["perftune", "show", "x", "--store", "@url-file"])
    resolve_url("postgresql://u:x@db.example/perftune")  # from the file: its password "x" is also an argument
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys, "argv", ["perftune", "runs", "--store=postgresql://u:x@db.example/perftune"])
    resolve_url("postgresql://u:x@db.example/perftune")
    resolve_url("postgresql://u:x@db.example/perftune")  # once per process
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("perftune: warning: the password of store postgresql://u:***@")
