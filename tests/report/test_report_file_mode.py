"""`perftune report` and `perftune export` write what the store holds: readable by its owner only where the
store is (a new SQLite store is 0600: evaluations may run as another user and must not read the results)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.space import Config
from perftune.store import open_store
from perftune.trial import Status, Trial


@pytest.fixture
def umask_022() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _store(path: Path) -> str:
    with open_store(f"sqlite:///{path}") as store:
        run = store.create_run("r", None, {}, "min", None)
        store.add_trial(run.id, Trial(0, Config({"x": 0}), Status.OK, value=1.0, loss=1.0, samples=[1.0],
                                      technique="default"))
    return f"sqlite:///{path}"


def _written_modes(db: str, folder: Path) -> list[int]:
    runner = CliRunner()
    outputs = [folder / "report.html", folder / "out.csv", folder / "out.json", folder / "out.kt.json"]
    exports = (["export", "r", "-o", str(o)] for o in outputs[1:])
    for args in (["report", "r", "-o", str(outputs[0])], *exports):
        done = runner.invoke(cli, ["--store", db, *args], catch_exceptions=False)
        assert done.exit_code == 0, done.output
    return [stat.S_IMODE(o.stat().st_mode) for o in outputs]


def test_a_private_store_gives_private_reports_and_exports(tmp_path: Path, umask_022: None) -> None:
    db = _store(tmp_path / "s.db")
    assert stat.S_IMODE((tmp_path / "s.db").stat().st_mode) == 0o600
    assert _written_modes(db, tmp_path) == [0o600] * 4
    assert os.umask(0o022) == 0o022  # the command gave the umask back


def test_a_store_others_may_read_leaves_the_umasks_mode(tmp_path: Path, umask_022: None) -> None:
    db = _store(tmp_path / "s.db")
    (tmp_path / "s.db").chmod(0o644)
    assert _written_modes(db, tmp_path) == [0o644] * 4
