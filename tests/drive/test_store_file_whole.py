"""When a run ends, its SQLite store's .db file holds every trial by itself: a copy of that one file is
whole (the README says so), for runs of the API as for the CLI's."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import perftune
from perftune.drive import Tuner
from perftune.space import Int, Space

SPACE = Space({"x": Int(0, 99)})


def _trials_in_copy(db: Path, tmp_path: Path) -> int:
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)  # the .db file alone, not its -wal
    with sqlite3.connect(copy) as conn:
        return int(conn.execute("select count(*) from trials").fetchone()[0])


def test_a_copy_of_the_db_file_after_tune_returns_has_every_trial(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    result = perftune.tune(lambda c: c["x"], SPACE, budget=30, seed=0, store=str(db), name="a")
    assert len(result.trials) == 30
    assert _trials_in_copy(db, tmp_path) == 30


def test_a_copy_after_an_ask_tell_run_is_closed_has_every_trial(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    tuner = Tuner(SPACE, seed=1, store=str(db), name="asked")
    for _ in range(12):
        trial = tuner.ask()
        tuner.tell(trial, float(trial.config["x"]))
    tuner.close()
    assert _trials_in_copy(db, tmp_path) == 12
