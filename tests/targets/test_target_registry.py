"""The target registry: built-ins by kind, explicit registration, plug-ins from entry points, dispatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perftune import targets
from perftune.errors import PerftuneError
from perftune.space import Config, Int, Space
from perftune.targets import _registry
from perftune.trial import Status

PERFTUNE = Path(sys.executable).with_name("perftune")

# A toy target, written as a plug-in module of its own distribution.
TOY_MODULE = '''
from perftune.drive import Outcome
from perftune.space import Int, Space
from perftune.targets import TargetBase
from perftune.trial import Status


class ToyTarget(TargetBase):
    kind = "toy"
    deterministic = True

    def __init__(self, offset):
        self.offset = offset
        self._space = Space({"x": Int(0, 20)})

    @classmethod
    def from_task(cls, path, table):
        return cls(int(table.get("offset", 0)))

    def space(self):
        return self._space

    def evaluate(self, config):
        if config["x"] >= 13:
            return Outcome(Status.FAILED, reason="unlucky: x >= 13")
        return Outcome(Status.OK, value=float((config["x"] - 5) ** 2 + self.offset))

    def explain(self, config):
        return f"toy x={config['x']}"
'''


def _toy_distribution(root: Path) -> Path:
    """A module and a ``*.dist-info`` folder declaring it under the ``perftune.targets`` group."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "toy_target.py").write_text(TOY_MODULE)
    info = root / "toy_target-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-target\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[perftune.targets]\ntoy = toy_target:ToyTarget\n")
    return root


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_registered", {})
    monkeypatch.setattr(_registry, "_entry_points", None)


class _Square(targets.TargetBase):
    kind = "square-test"

    def space(self) -> Space:
        return Space({"x": Int(-3, 3)})

    def evaluate(self, config: Config) -> targets.Outcome:
        return targets.Outcome(Status.OK, value=float(config["x"] ** 2))


def test_builtin_kinds_are_known_and_load_their_adapters() -> None:
    assert {"command", "flags", "llvm", "choice", "replay"} <= set(targets.names())
    for kind in ("command", "flags", "llvm", "choice", "replay"):
        assert targets.get(kind).kind == kind  # type: ignore[attr-defined]


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(PerftuneError, match=r"unknown target 'rust'; known targets: .*command.*flags"):
        targets.get("rust")


def test_register_is_explicit_and_refuses_clashes(clean_registry: None) -> None:
    assert "square-test" not in targets.names()
    assert targets.register(_Square) is _Square
    assert targets.get("square-test") is _Square and "square-test" in targets.names()
    assert targets.register(_Square) is _Square  # again: the same class is fine

    class Other(_Square):
        pass

    with pytest.raises(PerftuneError, match="already registered"):
        targets.register(Other)

    class Flags(_Square):
        kind = "flags"

    with pytest.raises(PerftuneError, match="built-in target"):
        targets.register(Flags)

    class Nameless(_Square):
        kind = ""

    with pytest.raises(PerftuneError, match="non-empty `kind`"):
        targets.register(Nameless)

    class NoEvaluate:
        kind = "no-evaluate"

        def space(self) -> Space:
            return Space({"x": Int(0, 1)})

    with pytest.raises(PerftuneError, match=r"no evaluate\(\)"):
        targets.register(NoEvaluate)


def test_importing_the_registry_imports_no_target() -> None:
    code = ("import sys, perftune.targets as t; t.names(); "
            "print([m for m in sys.modules if m.startswith('perftune.targets.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) and all(m.startswith(("perftune.targets._",)) for m in eval(out)), out


def test_task_file_kind_dispatch(tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text('name = "x"\n')
    assert targets.task_kind(plain) == "command"
    assert targets.task_kind(tmp_path / "absent.toml") == "command"  # the command loader says it is absent
    bad = tmp_path / "bad.toml"
    bad.write_text("[target]\nkind = 3\n")
    with pytest.raises(PerftuneError, match="key target.kind: expected the name of a target"):
        targets.from_task_file(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[target]\nkind = "rust"\n')
    with pytest.raises(PerftuneError, match=r"unknown.toml: key target.kind: unknown target 'rust'"):
        targets.from_task_file(unknown)


def test_entry_point_plugin_is_found_in_process(tmp_path: Path, clean_registry: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_toy_distribution(tmp_path / "dist")))
    assert "toy" in targets.names()
    toy = targets.get("toy")(offset=1)
    assert toy.evaluate(Config({"x": 5})).value == 1.0


def test_toy_plugin_runs_with_perftune_run(tmp_path: Path) -> None:
    dist = _toy_distribution(tmp_path / "dist")
    task = tmp_path / "toy.toml"
    task.write_text('name = "toy-run"\n[target]\nkind = "toy"\noffset = 2\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(dist), os.environ.get("PYTHONPATH", "")])}
    store = f"sqlite:///{tmp_path / 'p.db'}"
    proc = subprocess.run([str(PERFTUNE), "--store", store, "run", str(task), "--budget", "10", "--seed", "1",
                           "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    payload: dict[str, Any] = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert payload["run"]["name"] == "toy-run"
    assert payload["best"]["status"] == "ok" and payload["best"]["value"] >= 2.0
    assert sum(payload["counts"].values()) == 10
    # The plug-in's failures are statuses with its reason, as any target's.
    proc = subprocess.run([str(PERFTUNE), "--store", store, "show", "toy-run", "--json"], capture_output=True,
                          text=True, env=env, timeout=60)
    trials = json.loads(proc.stdout)["trials"]
    failed = [t for t in trials if t["status"] == "failed"]
    assert failed and all("unlucky: x >= 13" in t["reason"] for t in failed)
    # Without the distribution on the path the kind is unknown: one line, exit 2.
    proc = subprocess.run([str(PERFTUNE), "--store", store, "run", str(task)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "key target.kind: unknown target 'toy'" in proc.stderr


def test_verified_winner_gives_way_to_the_next_best() -> None:
    from perftune.trial import Trial

    trials = [Trial(id=i, config=Config({"x": i}), status=Status.OK, value=float(v), loss=float(v))
              for i, v in enumerate([3.0, 1.0, 2.0])]
    trials.append(Trial(id=3, config=Config({"x": 3}), status=Status.FAILED, reason="boom"))
    warned: list[str] = []
    winner = targets.verified_winner(trials, lambda c: "wrong" if c["x"] == 1 else None, warn=warned.append)
    assert winner is not None and winner.id == 2
    assert warned == ["trial 1 failed verification: wrong"]
    assert targets.verified_winner(trials, lambda c: "no", max_checks=2, warn=warned.append) is None
    assert warned[-1] == "no verified winner among the best candidates"


def test_perftune_run_drives_a_builtin_target_from_its_table(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli
    from perftune.targets.replay._target import ReplayTarget

    ReplayTarget.example(str(tmp_path))  # writes example.T1.json and example.dev.T4.json
    task = tmp_path / "replayed.toml"
    task.write_text('[target]\nkind = "replay"\nt1 = "example.T1.json"\nt4 = "example.dev.T4.json"\n'
                    "[tuning]\nbudget = 12\nseed = 3\n")
    store = f"sqlite:///{tmp_path / 'p.db'}"
    result = CliRunner().invoke(cli, ["--store", store, "run", str(task), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    assert payload["run"]["name"] == "replayed"
    # Twelve recorded configurations, one of them failed: all tried, the optimum found.
    assert payload["counts"] == {"ok": 11, "failed": 1}
    assert payload["best"]["value"] == 1.0 and payload["best"]["config"] == {"bx": 4, "t": 1}
    missing = tmp_path / "missing.toml"
    missing.write_text('[target]\nkind = "replay"\nt1 = "example.T1.json"\n')
    result = CliRunner().invoke(cli, ["--store", store, "run", str(missing)])
    assert result.exit_code == 2 and "key target.t4: expected the path of the T4 file" in result.output


class _PickyTarget(_Square):
    """The best configuration (x = 0) fails its verification: the next best is the final answer."""

    kind = "picky-test"
    deterministic = True

    @classmethod
    def from_task(cls, path: str, table: Any) -> _PickyTarget:
        return cls()

    def verify(self, config: Config) -> str | None:
        return "x = 0 is too good to be true" if config["x"] == 0 else None

    def explain(self, config: Config) -> str:
        return f"picky x={config['x']}"


def test_perftune_run_verifies_the_winner_with_the_targets_verify(tmp_path: Path,
                                                                  clean_registry: None) -> None:
    from click.testing import CliRunner

    from perftune.cli import cli

    targets.register(_PickyTarget)
    task = tmp_path / "picky.toml"
    task.write_text('[target]\nkind = "picky-test"\n')
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{tmp_path / 'p.db'}", "run", str(task),
                                      "--budget", "7", "--seed", "0"])
    assert result.exit_code == 0, result.output
    assert "failed verification: x = 0 is too good to be true" in result.output
    assert "best: 1" in result.output and result.output.rstrip().endswith(("picky x=1", "picky x=-1"))
