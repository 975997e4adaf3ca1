"""`perftune runs` lists a damaged run as damaged (it must not hide the others); the commands that only
read write nothing to the store (no schema upgrade)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.space import Config, Int, Space
from perftune.store import open_store
from perftune.trial import Status, Trial

_SPACE = Space({"x": Int(0, 9)})


def _make(path: Path) -> None:
    with open_store(path) as store:
        for name in ("good", "bad", "also-good"):
            run = store.create_run(name, _SPACE, {}, "min", None)
            for i, v in enumerate([3.0, 1.0, 2.0]):
                store.add_trial(run.id, Trial(id=i, config=Config({"x": i}), status=Status.OK, value=v,
                                              loss=v, technique="default" if i == 0 else "random"))


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("damage", [
    "UPDATE runs SET settings = 'not json{' WHERE name = 'bad'",
    "UPDATE runs SET created_at = 1e999 WHERE name = 'bad'",
    "UPDATE trials SET metrics = 'nope' WHERE run_id = 2 AND trial_id = 1",  # its best trial
    "UPDATE trials SET config = 'nope' WHERE run_id = 2 AND trial_id = 0",  # its default trial
])
def test_runs_lists_a_damaged_run_as_damaged_and_the_others_as_before(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.db"
    _make(path)
    con = sqlite3.connect(path)
    con.execute(damage)
    con.commit()
    con.close()
    result = _invoke("--store", str(path), "runs")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    cells = [[c.strip() for c in line.split("\u2502")[1:-1]] for line in result.output.splitlines()]
    rows = {c[1]: " ".join(c) for c in cells if c and c[0] in ("1", "2", "3")}
    assert "damaged" in rows["bad"] and "damaged" not in rows["good"] and "damaged" not in rows["also-good"]
    assert "1" in rows["good"] and "3.000x" in rows["good"]
    assert "run 'bad' (id 2) is damaged" in result.output
    as_json = _invoke("--store", str(path), "runs", "--json")
    assert as_json.exit_code == 0, as_json.output


def test_read_commands_do_not_upgrade_an_older_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(path, _schema_version=1).close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for command in (["runs"], ["show", "latest"], ["export", "latest", "-o", str(tmp_path / "o.csv")],
                    ["report", "latest", "-o", str(tmp_path / "o.html")], ["best", "latest"]):
        result = _invoke("--store", str(path), *command)
        assert result.exit_code == 2, (command, result.output)
        assert "schema v1 is older" in result.output and "upgrades it" in result.output, result.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
