"""A ``pass-sequence`` parameter in a task file: its values render joined by ``,`` and the run reads back."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from perftune.cli import cli
from perftune.store import open_store
from perftune.trial import Status

TASK = """name = "steps"
[space]
steps = { type = "pass-sequence", options = ["ab", "c", "def"], max_length = 3, default = ["ab", "c"] }
[run]
shell = true
command = "printf %s {steps} | wc -c"
[objective]
metric = "stdout_regex"
pattern = '([0-9]+)'
goal = "min"
"""


def test_a_task_file_tunes_a_pass_sequence_rendered_with_commas(public_tmp_path: Path) -> None:
    task = public_tmp_path / "steps.toml"
    task.write_text(TASK)
    task.chmod(0o644)
    db = f"sqlite:///{public_tmp_path / 'r.db'}"
    result = CliRunner().invoke(cli, ["--store", db, "run", str(task), "--budget", "6", "--quiet"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        info = store.get_run("steps")
        trials = store.trials(info.id)
        best = store.best(info.id)
    assert len(trials) == 6 and all(t.status is Status.OK for t in trials)
    for t in trials:
        # The command printed the rendered value: the items joined by commas (empty: nothing).
        assert t.value == len(",".join(t.config["steps"]))
    assert trials[0].config["steps"] == ("ab", "c") and best is not None
    assert best.value == min(t.value for t in trials)
