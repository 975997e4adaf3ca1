"""A store is input from whoever could write it: crafted SQLite files, damaged rows and checkpoints.

Each store is built by perftune, then changed with sqlite3 the way a hostile or broken writer could:
a view or trigger in the schema, a FIFO in the store's place, a column holding what perftune never
writes there, a checkpoint with counters out of range. Every case must be one line (a StoreError), and a
damaged run or trial must not keep the others from being listed or the damaged one from being deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from perftune import Tuner
from perftune.cli import cli
from perftune.drive._checkpoint import CheckpointError
from perftune.errors import StoreError
from perftune.space import Config, Int, Space
from perftune.store import StoreDamageError, open_store
from perftune.trial import Status, Trial

_SPACE = Space({"x": Int(0, 9), "y": Int(0, 9)})


def _make_store(path: Path, runs: tuple[str, ...] = ("good", "bad")) -> None:
    """A store of runs with four trials each (trial 2 the best), samples and metrics."""
    with open_store(path) as store:
        for name in runs:
            run = store.create_run(name, _SPACE, {"budget": 4}, "min", None)
            for i, value in enumerate([5.0, 4.0, 1.0, 3.0]):
                store.add_trial(run.id, Trial(
                    id=i, config=Config({"x": i, "y": 9 - i}), status=Status.OK, value=value, loss=value,
                    metrics={"value": value, "wall": value + 1}, samples=[value, value], technique="random",
                    started_at=1_700_000_000.0 + i, finished_at=1_700_000_001.0 + i,
                    intermediate={1: value * 2}))


def _sql(path: Path, *statements: str, params: tuple[Any, ...] = ()) -> None:
    con = sqlite3.connect(path)
    try:
        for statement in statements:
            con.execute(statement, params) if params else con.execute(statement)
        con.commit()
    finally:
        con.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    return text


# ------------------------------------------------------------------ the schema


_ENDLESS_VIEW = ("CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                 "SELECT r.* FROM runs_real r, (SELECT count(*) FROM c)")


@pytest.mark.parametrize("read_only", [False, True])
def test_a_view_in_place_of_a_table_is_refused_before_any_query_runs(tmp_path: Path, read_only: bool) -> None:
    # Reading the runs through this view never ends, inside SQLite (no Ctrl-C): the store must be refused
    # from its schema alone, at open, before any of its tables is read.
    path = tmp_path / "view.db"
    _make_store(path)
    _sql(path, "ALTER TABLE runs RENAME TO runs_real", _ENDLESS_VIEW)
    before = _digest(path)
    with pytest.raises(StoreError, match=r"refused: it holds view 'runs'") as info:
        open_store(path, must_exist=True, read_only=read_only)
    _one_line(info.value)
    assert _digest(path) == before


def test_any_view_is_refused_not_only_one_named_like_a_table(tmp_path: Path) -> None:
    path = tmp_path / "view.db"
    _make_store(path)
    _sql(path, "CREATE VIEW best AS SELECT * FROM trials")
    with pytest.raises(StoreError, match=r"it holds view 'best'"):
        open_store(path)


def test_a_trigger_is_refused_and_never_fires(tmp_path: Path) -> None:
    path = tmp_path / "trigger.db"
    _make_store(path)
    _sql(path, "CREATE TRIGGER t AFTER INSERT ON trials BEGIN DELETE FROM samples; "
               "UPDATE runs SET name = 'pwned'; END")
    before = _digest(path)
    for read_only in (False, True):
        with pytest.raises(StoreError, match=r"it holds trigger 't', which perftune never creates") as info:
            open_store(path, read_only=read_only)
        _one_line(info.value)
    assert _digest(path) == before
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 16
    assert sorted(r[0] for r in con.execute("SELECT name FROM runs")) == ["bad", "good"]
    con.close()


def test_a_virtual_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "virtual.db"
    _make_store(path)
    try:
        _sql(path, "CREATE VIRTUAL TABLE notes USING rtree(id, lo, hi)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no rtree module")
    with pytest.raises(StoreError, match=r"it holds virtual table 'notes'"):
        open_store(path)


def test_a_store_perftune_built_holds_no_view_or_trigger(tmp_path: Path) -> None:
    # What the check refuses, perftune never creates: a store it built (and upgraded) opens.
    path = tmp_path / "old.db"
    open_store(path, _schema_version=1).close()
    with open_store(path) as store:
        store.create_run("r", _SPACE)
    con = sqlite3.connect(path)
    kinds = con.execute("SELECT DISTINCT type FROM sqlite_master").fetchall()
    assert sorted(k for (k,) in kinds) == ["index", "table"]
    con.close()


def test_a_long_statement_ends_at_ctrl_c(tmp_path: Path) -> None:
    # SQLite runs a statement in C, where Python's signal handlers cannot run: without the progress
    # handler, Ctrl-C (and the CLI's SIGTERM, which raises KeyboardInterrupt) waits for the statement.
    # A watchdog ends the statement after 20 s anyway, so that a failing run of this test ends too.
    with open_store(tmp_path / "s.db") as store:
        connections: list[Any] = []

        def endless(conn: Any) -> Any:
            connections.append(conn.connection.dbapi_connection)
            return conn.exec_driver_sql("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                        "SELECT count(*) FROM c").all()

        watchdog = threading.Timer(20.0, lambda: [c.interrupt() for c in connections])
        ctrl_c = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        watchdog.start()
        ctrl_c.start()
        started = time.monotonic()
        try:
            with pytest.raises(KeyboardInterrupt):
                store._run(endless, "cannot count", write=False)
        finally:
            elapsed = time.monotonic() - started
            ctrl_c.cancel()
            watchdog.cancel()
            signal.signal(signal.SIGINT, previous)
        assert elapsed < 10.0, f"the statement ran {elapsed:.1f} s after Ctrl-C"
        assert len(store.list_runs()) == 0  # the store is still usable


# ------------------------------------------------------------------ the file itself


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_the_store_s_place_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    code = ("import sys\nfrom perftune.store import open_store\nfrom perftune.errors import StoreError\n"
            "for kw in ({}, {'must_exist': True}, {'read_only': True}):\n"
            "    try:\n        open_store(sys.argv[1], **kw)\n"
            "    except StoreError as e:\n        print(e)\n")
    # Opening a FIFO for reading blocks until a writer comes: run it apart, with a time limit.
    done = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert lines == [f"store {str(fifo)!r} is a FIFO, not a SQLite file"] * 3, done


# ------------------------------------------------------------------ read-only opening


def test_a_read_only_open_writes_nothing_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    before = _digest(path)
    with open_store(path, read_only=True) as store:
        assert [r.name for r in store.list_runs()] == ["good", "bad"]
        assert len(store.trials(store.get_run("good").id)) == 4
        with pytest.raises(StoreError, match="opened for reading only"):
            store.create_run("new", _SPACE)
        with pytest.raises(StoreError, match="opened for reading only"):
            store.add_trial(1, Trial(id=9, config=Config({"x": 1, "y": 1}), status=Status.FAILED))
    assert _digest(path) == before
    with pytest.raises(StoreError, match="no store at"):
        open_store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_reading_an_older_schema_read_only_says_it_needs_an_upgrade_writing_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(path, _schema_version=1).close()
    before = _digest(path)
    expected = r"schema v1 is older .* a command that writes .* upgrades it"
    with pytest.raises(StoreError, match=expected) as info:
        open_store(path, read_only=True)
    _one_line(info.value)
    assert _digest(path) == before
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    con.close()


# ------------------------------------------------------------------ damaged runs


_RUN_DAMAGE = {
    "settings_garbage": ("UPDATE runs SET settings = 'not json{' WHERE name = 'bad'",
                         "settings: not valid JSON"),
    "settings_list": ("UPDATE runs SET settings = '[1,2,3]' WHERE name = 'bad'",
                      "settings: not a JSON object"),
    "settings_deep": ("UPDATE runs SET settings = '" + "[" * 100_000 + "]" * 100_000 + "' WHERE name = 'bad'",
                      "settings: JSON nested too deeply"),
    "space_garbage": ("UPDATE runs SET space = '{{{' WHERE name = 'bad'", "space: not valid JSON"),
    "environment_garbage": ("UPDATE runs SET environment = '[[[' WHERE name = 'bad'",
                            "environment: not valid"),
    "created_text": ("UPDATE runs SET created_at = 'yesterday' WHERE name = 'bad'", "created_at: not a time"),
    "created_infinite": ("UPDATE runs SET created_at = 1e999 WHERE name = 'bad'", "created_at: not a time"),
    "created_huge": ("UPDATE runs SET created_at = 1e300 WHERE name = 'bad'", "created_at: not a time"),
    "finished_text": ("UPDATE runs SET finished_at = 'later' WHERE name = 'bad'", "finished_at: not a time"),
    "goal": ("UPDATE runs SET goal = 'sideways' WHERE name = 'bad'", "goal: not 'min' or 'max'"),
    "metric_blob": ("UPDATE runs SET metric = x'00ff' WHERE name = 'bad'", "metric: not text"),
}


@pytest.mark.parametrize("case", sorted(_RUN_DAMAGE))
def test_a_damaged_run_is_listed_as_damaged_refused_when_read_and_can_be_deleted(tmp_path: Path,
                                                                               case: str) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    statement, field = _RUN_DAMAGE[case]
    _sql(path, statement)
    with open_store(path) as store:
        runs = store.list_runs()
        assert [r.name for r in runs] == ["good", "bad"]  # nothing dropped, nothing raised
        good, bad = runs
        assert good.damaged is None and good.settings == {"budget": 4} and good.space is not None
        assert bad.damaged is not None and field in bad.damaged, bad.damaged
        assert "\n" not in bad.damaged
        assert isinstance(bad.created_at, float) and isinstance(bad.settings, dict)
        assert "damaged" not in good.to_dict() and bad.to_dict()["damaged"] == bad.damaged
        assert store.get_run("bad").damaged == bad.damaged  # get_run works (runs delete needs it)
        # Whatever reads the run's contents refuses it with one line naming it and the column.
        readers = [lambda: store.trials(bad.id), lambda: store.best(bad.id), lambda: store.history(bad.id),
                   lambda: store.trial_page(bad.id), lambda: store.trial_keyset_page(bad.id),
                   lambda: store.trial_summaries(bad.id),
                   lambda: store.export(bad.id, "json", tmp_path / "o"),
                   lambda: store.require_intact(bad)]
        for read in readers:
            expected = rf"run 'bad' \(id {bad.id}\) is damaged: .*{field}"
            with pytest.raises(StoreDamageError, match=expected) as info:
                read()
            _one_line(info.value)
            assert info.value.run_id == bad.id and info.value.run_name == "bad"
        assert not (tmp_path / "o").exists()
        # The sound run is read as before.
        assert [t.value for t in store.trials(good.id)] == [5.0, 4.0, 1.0, 3.0]
        assert store.best(good.id).id == 2  # type: ignore[union-attr]
        store.delete_run(bad.id)
        assert [r.name for r in store.list_runs()] == ["good"]
        assert store.count(good.id) == 4


def test_damaged_settings_are_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    _sql(path, "UPDATE runs SET settings = 'not json{' WHERE name = 'bad'")
    with open_store(path) as store:
        bad = store.get_run("bad")
        expected = r"run 'bad' \(id 2\) is damaged: settings: not valid JSON"
        with pytest.raises(StoreDamageError, match=expected):
            store.record_result(bad.id, {"trial": 1})
    con = sqlite3.connect(path)
    assert con.execute("SELECT settings FROM runs WHERE name = 'bad'").fetchone() == ("not json{",)
    con.close()


# ------------------------------------------------------------------ damaged trials


_TRIAL_DAMAGE = {
    "status": ("UPDATE trials SET status = 'weird'", "status: not a trial status"),
    "value_text": ("UPDATE trials SET value = 'abc', loss = 'abc'", "value: not a number"),
    "metrics_garbage": ("UPDATE trials SET metrics = 'nope'", "metrics: not valid JSON"),
    "metrics_deep": ("UPDATE trials SET metrics = '" + '{"a":' * 50_000 + "1" + "}" * 50_000 + "'",
                     "metrics: JSON nested too deeply"),
    "metrics_text_value": ("""UPDATE trials SET metrics = '{"wall":"fast"}'""",
                           "metrics: metric 'wall' is not a number"),
    "intermediate_key": ("""UPDATE trials SET intermediate = '{"x": 1}'""", "intermediate: step 'x'"),
    "intermediate_garbage": ("UPDATE trials SET intermediate = 'nope'", "intermediate: not valid JSON"),
    "config_garbage": ("UPDATE trials SET config = 'nope'", "config: "),
    "config_list": ("UPDATE trials SET config = '[1,2]'", "config: "),
    "config_deep": ("UPDATE trials SET config = '" + "[" * 100_000 + "]" * 100_000 + "'",
                    "config: JSON nested too deeply"),
    "started_text": ("UPDATE trials SET started_at = 'now'", "started_at: not a time"),
    "finished_infinite": ("UPDATE trials SET finished_at = 9e999", "finished_at: not a time"),
    "technique_blob": ("UPDATE trials SET technique = x'00'", "technique: not text"),
    "sample_text": ("UPDATE samples SET value = 'x'", "samples.value: sample 0 is not a number"),
    "trial_id_text": ("UPDATE trials SET trial_id = 'two'", "trial_id: not an integer"),
}


@pytest.mark.parametrize("case", sorted(_TRIAL_DAMAGE))
def test_a_damaged_trial_names_its_run_trial_and_column_and_blocks_nothing_else(tmp_path: Path,
                                                                               case: str) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    statement, field = _TRIAL_DAMAGE[case]
    _sql(path, statement + " WHERE run_id = 2 AND trial_id = 2")  # trial 2 of run 'bad' (its best)
    trial = "'two'" if case == "trial_id_text" else "2"
    expected = rf"run 'bad' \(id 2\), trial {trial} is damaged: {field}"
    with open_store(path) as store:
        assert [(r.name, r.damaged) for r in store.list_runs()] == [("good", None), ("bad", None)]
        readers = [lambda: store.trials(2), lambda: store.export(2, "csv", tmp_path / "o"),
                   lambda: store.trial_page(2, limit=None), lambda: store.trial_keyset_page(2, limit=10)]
        if case not in ("status", "value_text"):
            # best() reads the one row that the database finds best: one whose status is not 'ok', or whose
            # loss is not a number, is not that row (show and export, which read them all, refuse the run).
            readers += [lambda: store.best(2)]
        if case in ("status", "value_text", "started_text", "finished_infinite", "technique_blob",
                    "trial_id_text"):
            readers += [lambda: store.trial_summaries(2)]
        if case in ("status", "value_text", "trial_id_text"):
            readers += [lambda: store.history(2)]
        if case == "trial_id_text":
            readers += [lambda: store.stored_ids(2)]
        for read in readers:
            with pytest.raises(StoreDamageError, match=expected) as info:
                read()
            _one_line(info.value)
            assert info.value.run_name == "bad" and info.value.field == field.split(":")[0]
        assert not (tmp_path / "o").exists()
        # The other run, and the sound trials of this one, read as before.
        assert [t.value for t in store.trials(1)] == [5.0, 4.0, 1.0, 3.0]
        _, page = store.trial_page(2, trial_ids=[0, 1, 3])
        assert [t.id for t in page] == [0, 1, 3] and page[0].samples == [5.0, 5.0]
        assert store.count(2) == 4
        store.delete_run(2)
        assert [r.name for r in store.list_runs()] == ["good"]


def test_a_damaged_lease_does_not_keep_its_run_from_being_deleted(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    with open_store(path) as store:
        store.acquire_lease(2)
    _sql(path, "UPDATE leases SET heartbeat_at = 'soon', pid = 'me' WHERE run_id = 2")
    with open_store(path) as store:
        with pytest.raises(StoreDamageError, match=r"run 'bad' \(id 2\), its lease is damaged: leases\.pid"):
            store.get_lease(2)
        store.delete_run(2)
        assert [r.name for r in store.list_runs()] == ["good"]


def test_a_checkpoint_stored_as_text_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    with open_store(path) as store:
        store.save_checkpoint(2, 4, b"{}")
    _sql(path, "UPDATE checkpoints SET blob = 'text' WHERE run_id = 2")
    expected = r"run 'bad' \(id 2\), its checkpoint is damaged: checkpoints\.blob: not a blob"
    with open_store(path) as store, pytest.raises(StoreDamageError, match=expected):
        store.load_checkpoint(2)


# ------------------------------------------------------------------ the commands


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("case", ["settings_garbage", "created_infinite"])
def test_show_export_and_report_of_a_damaged_run_are_one_line_and_delete_removes_it(tmp_path: Path,
                                                                                   case: str) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    _sql(path, _RUN_DAMAGE[case][0])
    field = _RUN_DAMAGE[case][1].split(":")[0]
    for command in (["show", "bad"], ["best", "bad"], ["export", "bad", "-o", str(tmp_path / "o.csv")],
                    ["export", "bad", "-o", str(tmp_path / "o.json")],
                    ["export", "bad", "-o", str(tmp_path / "o.kt.json")],
                    ["report", "bad", "-o", str(tmp_path / "o.html")]):
        result = _invoke("--store", str(path), *command)
        assert result.exit_code == 2, (command, result.output)
        lines = result.output.strip().splitlines()
        expected = f"run 'bad' (id 2) is damaged: {field}"
        assert len(lines) == 1 and expected in lines[0], (command, result.output)
    assert not list(tmp_path.glob("o.*"))  # nothing written
    result = _invoke("--store", str(path), "runs", "delete", "bad", "--yes")
    assert result.exit_code == 0 and "deleted run 'bad' (id 2, 4 trials)" in result.output, result.output
    result = _invoke("--store", str(path), "show", "good")
    assert result.exit_code == 0 and "best: 1 (trial 2)" in result.output, result.output


def test_show_and_export_of_a_damaged_trial_name_the_run_trial_and_column(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _make_store(path)
    _sql(path, "UPDATE trials SET status = 'weird' WHERE run_id = 2 AND trial_id = 3")
    for command in (["show", "bad"], ["export", "bad", "-o", str(tmp_path / "o.json")],
                    ["export", "bad", "-o", str(tmp_path / "o.kt.json")],
                    ["report", "bad", "-o", str(tmp_path / "o.html")]):
        result = _invoke("--store", str(path), *command)
        assert result.exit_code == 2, (command, result.output)
        lines = result.output.strip().splitlines()
        expected = "run 'bad' (id 2), trial 3 is damaged: status: not a trial status ('weird'"
        assert len(lines) == 1 and expected in lines[0], (command, result.output)
    result = _invoke("--store", str(path), "runs", "delete", "2", "--yes")
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ checkpoints


def _objective(config: Config) -> float:
    return float((config["x"] - 3) ** 2 + config["y"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"lag": -1}, r"driver\.lag: expected an integer from 0 to \d+, got -1"),
        ({"lag": "2"}, r"driver\.lag: expected an integer"),
        ({"next_id": -100}, r"driver\.next_id: expected an integer from 0 to \d+, got -100"),
        ({"next_id": True}, r"driver\.next_id: expected an integer"),
        ({"applied_upto": 10**9}, r"driver\.applied_upto: expected an integer from 0 to 6, got 1000000000"),
        ({"n_since_best": -3}, r"driver\.n_since_best"),
        ({"default_id": 6}, r"driver\.default_id: expected an integer from 0 to 5, got 6"),
        ({"default_id": "z"}, r"driver\.default_id"),
        ({"goal": "sideways"}, r"driver\.goal: expected 'min' or 'max'"),
        ({"seed": 1.5}, r"driver\.seed: expected an integer or null"),
        ({"fingerprint": "00"}, r"driver\.fingerprint: it was written for another search space"),
        ({"technique_name": 5}, r"driver\.technique_name: expected a non-empty string"),
        ({"pending": [[6, None, "random"]]},
         r"driver\.pending: ticket 6 is not one issued before driver\.next_id \(6\)"),
        ({"pending": [[-1, None, "random"]]}, r"driver\.pending: ticket -1"),
        ({"queue": "abc"}, r"driver\.queue: expected a list of \[configuration, origin\] pairs"),
    ],
)
def test_a_checkpoint_field_out_of_range_is_refused_in_one_line(tmp_path: Path, edit: dict[str, Any],
                                                                message: str) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_SPACE, seed=1, store=url, name="ck", checkpoint_every=1).run(_objective, 6)
    with open_store(url) as store:
        run = store.get_run("ck")
        n_trials, blob = store.load_checkpoint(run.id)  # type: ignore[misc]
        document = json.loads(blob)
        driver = document["state"]["driver"]
        assert driver["next_id"] == 6 and driver["lag"] >= 0  # what the edits are measured against
        if "pending" in edit:
            # A configuration encoded as the checkpoint encodes them (an index into its configs).
            edit = {"pending": [[t, {"$config": 0}, origin] for t, _, origin in edit["pending"]]}
            document["configs"] = document["configs"] or [{"x": 1, "y": 1}]
        driver.update(edit)
        store.save_checkpoint(run.id, n_trials, json.dumps(document).encode())
        expected = rf"^resume: the checkpoint of run 'ck' is corrupt: {message}"
        with pytest.raises(CheckpointError, match=expected) as info:
            Tuner.resume("ck", store)
        _one_line(info.value)
        assert store.get_lease(run.id) is None  # given back
        assert store.count(run.id) == 6  # nothing measured, nothing written


def test_a_sound_checkpoint_still_resumes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    Tuner(_SPACE, seed=1, store=url, name="ck", checkpoint_every=2).run(_objective, 5)
    result = Tuner.resume("ck", url).run(_objective, 9)
    assert [t.id for t in result.trials] == list(range(9))


# ------------------------------------------------------------------ PostgreSQL


def _pg(url: str, *statements: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("statements", "found"),
    [
        (["ALTER TABLE runs RENAME TO runs_real", "CREATE VIEW runs AS SELECT * FROM runs_real"],
         "view 'runs'"),
        (["CREATE FUNCTION wipe() RETURNS trigger LANGUAGE plpgsql AS "
          "'BEGIN DELETE FROM samples; RETURN NEW; END'",
          "CREATE TRIGGER t AFTER INSERT ON trials FOR EACH ROW EXECUTE FUNCTION wipe()"], "trigger 't'"),
        (["CREATE RULE r AS ON INSERT TO trials DO ALSO DELETE FROM samples"], "rule 'r'"),
    ],
    ids=["view", "trigger", "rule"],
)
def test_postgres_views_triggers_and_rules_on_perftune_s_tables_are_refused(
        fresh_postgres_url: str, statements: list[str], found: str) -> None:
    with open_store(fresh_postgres_url) as store:
        store.create_run("r", _SPACE)
    _pg(fresh_postgres_url, *statements)
    for read_only in (False, True):
        with pytest.raises(StoreError, match=rf"refused: it holds {found}") as info:
            open_store(fresh_postgres_url, read_only=read_only)
        _one_line(info.value)


@pytest.mark.postgres
def test_postgres_read_only_refuses_writes(fresh_postgres_url: str) -> None:
    with open_store(fresh_postgres_url) as store:
        store.create_run("r", _SPACE)
    with open_store(fresh_postgres_url, read_only=True) as store:
        assert [r.name for r in store.list_runs()] == ["r"]
        with pytest.raises(StoreError, match="opened for reading only"):
            store.create_run("s", _SPACE)
        # The server refuses a write of this session too, whatever asks for it.
        with pytest.raises(StoreError, match="read-only transaction"):
            store._run(lambda conn: conn.exec_driver_sql("DELETE FROM runs"), "cannot delete", write=False)
    with open_store(fresh_postgres_url) as store:
        assert [r.name for r in store.list_runs()] == ["r"]
