"""A stored LLVM run reads back: ``perftune show``, ``store.best()``, ``store.trials()``, ``perftune report``.

Its space holds a :class:`~perftune.space.PassSequence`, which the store rebuilds with
``Space.from_dict``; before the type lived in perftune.space, every one of these failed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.space import PassSequence, Space
from perftune.store import open_store
from perftune.trial import Status


def _invoke(*args: str) -> str:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def llvm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A real 5-trial ``perftune run`` of the LLVM target (bundled crc32, up to 4 passes, ``opt``)."""
    if shutil.which("opt-14") is None or shutil.which("clang-14") is None:
        pytest.skip("needs opt-14 and clang-14 (apt-get install clang-14 llvm-14)")
    folder = tmp_path_factory.mktemp("llvm-run")
    task = folder / "crc.toml"
    task.write_text('name = "crc-passes"\n[target]\nkind = "llvm"\nbenchmark = "benchmark://perftune-v0/crc32"\n'
                    'length = 4\nengine = "opt"\n')
    db = f"sqlite:///{folder / 'runs.db'}"
    _invoke("--store", db, "run", str(task), "--budget", "5", "--seed", "1", "--quiet")
    return db, folder


def test_the_store_gives_back_the_trials_and_the_best_of_an_llvm_run(llvm_run: tuple[str, Path]) -> None:
    db, _ = llvm_run
    with open_store(db) as store:
        info = store.get_run("crc-passes")
        trials = store.trials(info.id)
        best = store.best(info.id)
    assert len(trials) == 5
    ok = [t for t in trials if t.status is Status.OK]
    assert ok and best is not None and best.value == min(t.value for t in ok)
    # The stored space is rebuilt with its PassSequence, and every stored value is one of its sequences.
    assert info.space is not None
    param = Space.from_dict(info.space).params["passes"]
    assert isinstance(param, PassSequence) and param.max_length == 4
    assert all(param.contains(t.config["passes"]) for t in trials)
    assert len({t.config["passes"] for t in trials}) == 5


def test_perftune_show_prints_the_best_pass_sequence(llvm_run: tuple[str, Path]) -> None:
    db, _ = llvm_run
    shown = json.loads(_invoke("--store", db, "show", "crc-passes", "--json"))
    assert shown["run"]["name"] == "crc-passes" and sum(shown["counts"].values()) == 5
    with open_store(db) as store:
        best = store.best(store.get_run("crc-passes").id)
    assert best is not None
    assert shown["best"]["config"]["passes"] == list(best.config["passes"])
    text = _invoke("--store", db, "show", "crc-passes")
    assert "crc-passes" in text and "best" in text.lower()


def test_perftune_report_writes_the_page_of_an_llvm_run(llvm_run: tuple[str, Path]) -> None:
    db, folder = llvm_run
    out = folder / "crc.html"
    assert "wrote" in _invoke("--store", db, "report", "crc-passes", "-o", str(out))
    page = out.read_text()
    assert "crc-passes" in page and "passes" in page


@pytest.mark.parametrize(("benchmark", "message"), [
    ("broken.c", "broken.c: clang-14 cannot compile it"),
    ("nope.c", "nope.c: no such file"),
    ("broken.ll", "broken.ll: cannot parse LLVM IR"),
    ("cbench-v1/crc32", "cbench-v1/crc32: unknown dataset"),
])
def test_a_task_with_a_bad_benchmark_fails_before_any_trial(tmp_path: Path, benchmark: str,
                                                            message: str) -> None:
    (tmp_path / "broken.c").write_text("int main(void) { return ; }\n")
    (tmp_path / "broken.ll").write_text("this is not IR\n")
    task = tmp_path / "llvm.toml"
    task.write_text(f'name = "llvmtask"\n[target]\nkind = "llvm"\nbenchmark = "{benchmark}"\nlength = 4\n'
                    "[tuning]\nbudget = 3\n")
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "run", str(task)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{task}: key target.benchmark:" in lines[0] and message in lines[0], lines
