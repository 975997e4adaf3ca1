"""What the store holds reaches the terminal as text: objective names and goals, run names and compare
lines are never rich markup nor raw escape sequences, Unicode's format characters (a bidirectional
override) are shown escaped, ``export -o -`` escapes them on a terminal only, the console has rich's
highlighter off, a damaged lease or objectives are one line, and an id past 64 bits is no run."""

from __future__ import annotations

import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import _console, _printable, cli
from perftune.space import Config, Int, Space

SPACE = Space({"x": Int(0, 20)})
ESC = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\x1b[0m"


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def _two(config: Config) -> dict[str, float]:
    return {"time": float(config["x"] + 1), "size": float(21 - config["x"])}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "runs.db"
    perftune.tune(_two, SPACE, budget=10, seed=0, store=str(path), name="multi",
                  goal={"time": "min", "size": "min"})
    perftune.tune(lambda c: float(c["x"] + 1), SPACE, budget=10, seed=1, store=str(path), name="one")
    perftune.tune(lambda c: float(c["x"] + 2), SPACE, budget=10, seed=2, store=str(path), name="two")
    return path


def _copy(base: Path, tmp_path: Path, *statements: tuple[str, tuple[Any, ...]]) -> str:
    path = tmp_path / "s.db"
    path.write_bytes(base.read_bytes())
    path.chmod(0o600)
    con = sqlite3.connect(path)
    for sql, params in statements:
        con.execute(sql, params)
    con.commit()
    con.close()
    return str(path)


def _rename_objectives(db: str, names: list[Any], goals: list[Any]) -> None:
    con = sqlite3.connect(db)
    settings = json.loads(con.execute("SELECT settings FROM runs WHERE name = 'multi'").fetchone()[0])
    old = settings["objectives"]["names"]
    settings["objectives"].update(names=names, goals=goals)
    con.execute("UPDATE runs SET settings = ? WHERE name = 'multi'", (json.dumps(settings),))
    if all(isinstance(n, str) for n in names):
        rows = con.execute("SELECT trial_id, metrics FROM trials WHERE run_id = 1").fetchall()
        for trial_id, metrics in rows:
            m = json.loads(metrics) if metrics else {}
            new = {n: m.get(o) for n, o in zip(names, old, strict=True)}
            con.execute("UPDATE trials SET metrics = ? WHERE run_id = 1 AND trial_id = ?",
                        (json.dumps(new), trial_id))
    con.commit()
    con.close()


def test_objective_names_and_goals_are_text_in_the_front_table(base: Path, tmp_path: Path) -> None:
    db = _copy(base, tmp_path)
    _rename_objectives(db, ["t[/]" + ESC, "[bold red]size"], ["min", "min"])
    result = _invoke("--store", db, "show", "multi")
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "t[/]\\x1b]0;PWNED\\x07" in result.output  # the header, shown as stored, made printable
    assert "[bold red]size" in result.output
    assert "Pareto front:" in result.output


def test_printable_escapes_unicode_format_characters() -> None:
    assert _printable("tune-\u202egpj.exe") == "tune-\\u202egpj.exe"
    assert _printable("a\u2066b\u2069c\u200bd\ufeffe\u2028f") == "a\\u2066b\\u2069c\\u200bd\\ufeffe\\u2028f"
    assert _printable("tag\U000e0041") == "tag\\U000e0041"
    assert _printable("tab\tnew\nline \u00e9 \u4e2d") == "tab\tnew\nline \u00e9 \u4e2d"
    # Every format character (and line/paragraph separator) this Python knows of is escaped.
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in ("Cf", "Zl", "Zp"):
            assert _printable(char) != char, hex(code)


def test_a_bidi_override_in_a_run_name_is_shown_escaped(base: Path, tmp_path: Path) -> None:
    db = _copy(base, tmp_path, ("UPDATE runs SET name = ? WHERE name = 'one'", ("tune-\u202egpj.exe",)))
    for command in (["runs"], ["show", "tune-\u202egpj.exe"]):
        result = _invoke("--store", db, *command)
        assert result.exit_code == 0, result.output
        assert "\u202e" not in result.output and "tune-\\u202egpj.exe" in result.output


def test_compare_lines_are_printable(base: Path, tmp_path: Path) -> None:
    db = _copy(base, tmp_path, ("UPDATE runs SET name = 'first' || ? WHERE name = 'one'", (ESC + "[bold]",)),
               ("UPDATE runs SET goal = ? WHERE name IN ('two')", ("min",)))
    result = _invoke("--store", db, "compare", "2", "3")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "first\\x1b]0;PWNED" in result.output


def _run_on_a_terminal(*args: str) -> str:
    """The output of ``perftune ARGS`` with its standard output a pseudo-terminal."""
    exe = Path(sys.executable).with_name("perftune")
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(exe), *args], stdout=follower, stderr=subprocess.DEVNULL, close_fds=True)
    os.close(follower)
    out = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process ended
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, out
    return out.decode("utf-8", "replace")


def test_export_to_a_terminal_escapes_control_characters_and_a_pipe_gets_them(base: Path,
                                                                             tmp_path: Path) -> None:
    db = _copy(base, tmp_path, ("UPDATE trials SET technique = ? WHERE run_id = 2 AND trial_id = 1",
                                ("tech" + ESC + "\u202e",)))
    shown = _run_on_a_terminal("export", "one", "-o", "-", "--store", db)
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "tech\\x1b]0;PWNED\\x07\\x1b[2J" in shown and "\\u202e" in shown
    piped = _invoke("--store", db, "export", "one", "-o", "-")
    assert piped.exit_code == 0
    assert "tech" + ESC + "\u202e" in piped.output  # the bytes as stored


def test_the_console_has_rich_s_highlighter_off(base: Path, tmp_path: Path) -> None:
    # rich's highlighter runs its regular expressions over every string (quadratic on a long name) and
    # colours parts of it: the console that prints store strings has it off.
    console = _console()
    assert console._highlight is False
    from rich.text import Text

    rendered = console.render_str("run 12345 'quoted' http://x.example/ 0x1f")
    assert isinstance(rendered, Text) and rendered.spans == []
    # In a colour terminal, the numbers of a run's name are not coloured.
    db = _copy(base, tmp_path, ("UPDATE runs SET name = ? WHERE name = 'one'", ("run-12345 'q'",)))
    exe = Path(sys.executable).with_name("perftune")
    out = subprocess.run([str(exe), "show", "run-12345 'q'", "--store", db], capture_output=True, text=True,
                         timeout=120, check=False, env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert "run-12345 'q'" in first, first


def test_runs_lists_the_others_when_one_lease_is_damaged(base: Path, tmp_path: Path) -> None:
    db = _copy(base, tmp_path, ("UPDATE runs SET status = 'running' WHERE name = 'one'", ()),
               ("INSERT INTO leases VALUES (2, 'tok', 'host', 'pid', 'x', 'y', NULL)", ()))
    result = _invoke("--store", db, "runs")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    cells = [[c.strip() for c in line.split("\u2502")[1:-1]] for line in result.output.splitlines()]
    rows = {c[1]: c for c in cells if c and c[0] in ("1", "2", "3")}
    assert set(rows) == {"multi", "one", "two"}
    assert rows["one"][2] == "damaged" and rows["two"][2] == "finished"
    assert "run 'one' (id 2) is damaged" in result.output


@pytest.mark.parametrize("names, goals", [([1, [2]], ["min", "max"]), (["a", "b"], [["min"], "max"]),
                                          (["a", "a"], ["min", "min"])])
def test_objectives_of_other_types_are_one_line(base: Path, tmp_path: Path, names: list[Any],
                                                goals: list[Any]) -> None:
    db = _copy(base, tmp_path)
    _rename_objectives(db, names, goals)
    for command in (["show", "multi"], ["show", "multi", "--json"]):
        result = _invoke("--store", db, *command)
        assert result.exit_code == 2, result.output
        assert not isinstance(result.exception, TypeError)
        line = result.output.strip()
        assert "\n" not in line and "run 'multi' (id 1) is damaged: settings.objectives:" in line, line


def test_a_run_id_past_64_bits_is_no_run(base: Path) -> None:
    result = _invoke("--store", str(base), "show", "99999999999999999999999")
    assert result.exit_code == 2
    assert result.output.strip().endswith("no run '99999999999999999999999' (perftune runs lists the runs)")
