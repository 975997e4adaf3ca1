"""The command target: a program described by a TOML task file, as a :class:`perftune.targets.Target`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

from perftune.targets._target import Example, Outcome, TargetBase, outcome_of
from perftune.targets.command._task import Task, load_task

__all__ = ["CommandTarget"]

# A program for the example: its "score" is a parabola in x; x = 7 crashes and x = 9 hangs.
_EXAMPLE_PROGRAM = """\
import sys, time
x = int(sys.argv[1])
if x == 7:
    sys.exit("x = 7 is not supported")
if x == 9:
    time.sleep(60)
print(f"score: {(x - 3) ** 2 + 1}")
"""

_EXAMPLE_TASK = """\
name = "command-example"
[space]
x = {{ type = "int", min = 0, max = 9, default = 0 }}
[run]
command = ["python3", "{{task_dir}}/score.py", "{{x}}"]
timeout_s = 30
[objective]
metric = "stdout_regex"
pattern = 'score: ([0-9]+)'
goal = "min"
deterministic = true
"""


class CommandTarget(TargetBase):
    """A task file's program: every step sandboxed, the objective and check as the file declares them.

    Args:
        task: What :func:`perftune.targets.command.load_task` returned.

    Example:
        >>> target = CommandTarget(load_task("examples/python_metric/task.toml"))  # doctest: +SKIP
        >>> target.evaluate(target.space().default()).ok  # doctest: +SKIP
    """

    kind: ClassVar[str] = "command"

    def __init__(self, task: Task) -> None:
        self.task = task
        self.goal = task.goal
        # Only a file that declares it promises it: "auto" decides per run, from the default's output.
        self.deterministic = task.objective.objective.deterministic is True

    @classmethod
    def from_task(cls, path: str, table: Mapping[str, Any]) -> CommandTarget:
        """The whole task file is the command target's (``table`` is empty: it has no ``[target]``)."""
        return cls(load_task(path))

    @classmethod
    def example(cls, workdir: str) -> Example:
        """A Python program whose printed score is minimised; x = 7 fails, x = 9 sleeps for a minute."""
        import shutil

        if shutil.which("python3") is None:
            return Example(None, skip="python3 is not on PATH")
        from perftune.space import Config

        with open(os.path.join(workdir, "score.py"), "w") as f:
            f.write(_EXAMPLE_PROGRAM)
        path = os.path.join(workdir, "task.toml")
        with open(path, "w") as f:
            f.write(_EXAMPLE_TASK.format())
        for name in ("score.py", "task.toml"):
            os.chmod(os.path.join(workdir, name), 0o644)  # candidates may run as an unprivileged user
        os.chmod(workdir, 0o755)
        return Example(cls.from_task(path, {}), failing=Config({"x": 7}), slow=Config({"x": 9}))

    def space(self) -> Any:
        return self.task.space

    def evaluate(self, config: Any) -> Outcome:
        return outcome_of(self.task.objective, config, self.task.metric)

    def verify(self, config: Any) -> str | None:
        """The task's ``[check.expensive]`` on ``config`` (None without one, or when it passes)."""
        return self.task.verify(config)
