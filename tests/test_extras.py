"""Extra-only features reached without their extra: one line that names the extra to install.

Each test hides the optional package (``sys.modules[name] = None`` makes its import fail as it does
when the package is not installed); tests/test_wheel.py checks the same in a real core install.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import perftune
from perftune.cli import cli
from perftune.errors import PerftuneError, StoreError
from perftune.space import Int, Space


def _hide(monkeypatch: pytest.MonkeyPatch, *packages: str) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in packages]:
        monkeypatch.delitem(sys.modules, name)
    for package in packages:
        monkeypatch.setitem(sys.modules, package, None)


def test_import_perftune_gym_without_gymnasium_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "gymnasium")
    monkeypatch.delitem(sys.modules, "perftune.gym", raising=False)
    with pytest.raises(ImportError) as caught:
        importlib.import_module("perftune.gym")
    assert str(caught.value) == "perftune.gym needs gymnasium: pip install 'perftune[gym]'"
    assert caught.value.name == "gymnasium"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_dask_executor_without_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "dask", "distributed")
    with pytest.raises(PerftuneError, match=r"pip install 'perftune\[dask\]'"):
        perftune.tune(lambda c: float(c["x"]), Space({"x": Int(0, 3)}), budget=2, executor="dask")


def test_postgres_store_without_psycopg2_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from perftune.store import open_store

    _hide(monkeypatch, "psycopg2", "psycopg")  # plain postgresql:// falls back to psycopg 3
    with pytest.raises(StoreError, match=r"pip install 'perftune\[postgres\]'"):
        open_store("postgresql://nobody@127.0.0.1:1/none")


def test_cli_with_a_postgres_url_without_psycopg2_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "psycopg2", "psycopg")
    result = CliRunner().invoke(cli, ["--store", "postgresql://nobody@127.0.0.1:1/none", "runs"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "pip install 'perftune[postgres]'" in result.output


def test_cli_llvm_passes_runs_without_gymnasium(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The pass search needs opt, not Gymnasium: only the Gym environments (perftune.gym) need the extra.
    _hide(monkeypatch, "gymnasium")
    for name in [m for m in sys.modules if m.startswith("perftune.targets.llvm")]:
        monkeypatch.delitem(sys.modules, name)  # imported again, now without gymnasium
    source = tmp_path / "prog.c"
    source.write_text("int main(void) { return 0; }\n")
    result = CliRunner().invoke(cli, ["llvm-passes", str(source), "--budget", "1s"])
    assert result.exit_code == 0, result.output
    assert sys.modules.get("gymnasium") is None


def test_cli_lets_other_import_errors_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only a missing extra is a user's matter; a broken installation keeps its traceback.
    import perftune.measure

    def broken() -> None:
        raise ImportError("cannot import name 'x' from 'somewhere'")

    monkeypatch.setattr(perftune.measure, "doctor", broken)
    result = CliRunner().invoke(cli, ["doctor"])
    assert isinstance(result.exception, ImportError)
