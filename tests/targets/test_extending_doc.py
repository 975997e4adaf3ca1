"""docs/extending.md: its code runs as printed, and its target passes the target conformance suite."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from perftune.search import _registry as technique_registry
from perftune.targets import _registry as target_registry
from perftune.testing.targets import TargetConformance

PAGE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), flags=re.S | re.M)


def _run_python_blocks(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    # The page registers a technique and a target: into registries that are put back after the test.
    monkeypatch.setattr(technique_registry, "_registered", {})
    monkeypatch.setattr(target_registry, "_registered", {})
    # A module of its own, as a user's file would be (dataclasses look their module up).
    module = types.ModuleType("extending_doc")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for block in _blocks("python"):
        exec(compile(block, str(PAGE), "exec"), module.__dict__)
    return module.__dict__


def test_the_examples_run_and_are_short(monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = _run_python_blocks(monkeypatch)
    assert namespace["HillClimb"].name in technique_registry.names()
    assert "quadrature" in target_registry.names()
    classes = [b for b in _blocks("python") if "@register" in b]
    assert len(classes) == 2
    for block in classes:
        body = block[block.index("@register"):].split("\n\n\n")[0]
        assert len(body.strip().splitlines()) <= 45, body


def test_the_toml_snippets_parse() -> None:
    snippets = [tomllib.loads(block) for block in _blocks("toml")]
    assert {"quadrature", "hill-climb"} <= {
        name for doc in snippets for group in doc.get("project", {}).get("entry-points", {}).values()
        for name in group
    }
    task = next(doc for doc in snippets if "target" in doc)
    assert task["target"]["kind"] == "quadrature"


class TestTheDocsTarget(TargetConformance):
    @pytest.fixture
    def conformance_kind(self, monkeypatch: pytest.MonkeyPatch) -> str:
        _run_python_blocks(monkeypatch)
        return "quadrature"


from perftune.testing.techniques import TechniqueConformance  # noqa: E402


class TestTheDocsTechnique(TechniqueConformance):
    @pytest.fixture
    def conformance_technique(self, monkeypatch: pytest.MonkeyPatch) -> str:
        _run_python_blocks(monkeypatch)
        return "hill-climb"


def test_the_task_file_runs_with_its_technique_and_seeds(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli
    from perftune.store import open_store

    _run_python_blocks(monkeypatch)
    block = next(b for b in _blocks("toml") if "[target]" in b)
    assert tomllib.loads(block)["tuning"]["technique"] == "hill-climb"
    task = tmp_path / "quad.toml"
    task.write_text(block.replace("budget = 40", "budget = 6"))
    db = f"sqlite:///{tmp_path / 'q.db'}"
    done = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--seed", "0"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    with open_store(db) as store:
        run = store.get_run("quadrature")
        trials = store.trials(run.id)
    assert run.settings["technique"] == "hill-climb"
    assert (trials[1].technique, dict(trials[1].config)) == ("seed", {"h": 0.001})
    assert {t.technique for t in trials[2:]} == {"hill-climb"}


@pytest.mark.parametrize(("tuning", "message"), [
    ('technique = "hill-clim"', "key tuning.technique: unknown technique 'hill-clim' (known: "),
    ("seeds = [{ h = 0.9 }]", "key tuning.seeds[0]: parameter 'h': 0.9 is outside the domain"),
    ('seeds = [{ step = 0.1 }]', "key tuning.seeds[0]: unknown parameter 'step' (parameters: h)"),
])
def test_a_bad_technique_or_seed_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tuning: str,
                                             message: str) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    _run_python_blocks(monkeypatch)
    task = tmp_path / "quad.toml"
    task.write_text(f'name = "q"\n[target]\nkind = "quadrature"\n[tuning]\nbudget = 3\n{tuning}\n')
    done = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path / 'q.db'}", "run", str(task)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert f"perftune: error: {task}: {message}" in done.output
