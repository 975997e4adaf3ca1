"""``perftune techniques``: every name a run may use, with where it comes from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from perftune.cli import cli

PLUGIN = '''
from dataclasses import dataclass

from perftune.search import BaseTechnique


class HillClimb(BaseTechnique):
    name = "hill-climb"

    @dataclass(frozen=True)
    class Settings:
        pass
'''


def test_built_ins_and_aliases_are_listed() -> None:
    result = CliRunner().invoke(cli, ["techniques"], catch_exceptions=False)
    assert result.exit_code == 0
    rows = {line.split()[0]: line.split(None, 1)[1] for line in result.output.splitlines()}
    assert rows["bandit"] == "built-in" and rows["random"] == "built-in" and rows["mo-bandit"] == "built-in"
    assert rows["default"] == "alias of staged"


def test_an_installed_plug_in_is_listed_with_its_distribution(tmp_path: Path) -> None:
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    info = tmp_path / "my_plugin-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[perftune.techniques]\nhill-climb = my_plugin:HillClimb\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "perftune", "techniques"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    [row] = [line for line in done.stdout.splitlines() if line.startswith("hill-climb ")]
    assert row.split(None, 1)[1] == "plug-in from my-plugin 0.3 (my_plugin:HillClimb)"
