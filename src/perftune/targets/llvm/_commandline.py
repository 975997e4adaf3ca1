"""The ``opt`` command line that replays a sequence of actions, as printed to users and run to validate.

Both the environment (:mod:`perftune.targets.llvm._env`) and the validation
(:mod:`perftune.targets.llvm._validate`) print these command lines; they live here so that neither
imports the other.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence

from perftune.targets.llvm._actions import ACTIONS, pipeline_of
from perftune.targets.llvm._errors import LlvmError
from perftune.targets.llvm._tools import find_tool

__all__ = ["opt_commandline", "opt_program", "passes_text"]


def opt_program() -> str:
    """How a printed command line names LLVM 14's ``opt``: the installed one (``opt-14`` on Debian,
    where a plain ``opt`` may be missing or another version), by name when that name is on PATH."""
    try:
        path = find_tool("opt")
    except LlvmError:
        return "opt"
    name = os.path.basename(path)
    found = shutil.which(name)
    return name if found is not None and os.path.realpath(found) == os.path.realpath(path) else path


def opt_commandline(
    actions: Sequence[int], input_path: str, *, isolate_steps: bool = False, output_path: str = "out.bc"
) -> str:
    """``opt-14 -passes='...' INPUT -o OUTPUT`` for a sequence of actions (shell-quoted)."""
    passes = passes_text(actions, isolate_steps=isolate_steps)
    return f"{opt_program()} -passes='{passes}' {shlex.quote(input_path)} -o {shlex.quote(output_path)}"


def passes_text(actions: Sequence[int], *, isolate_steps: bool = False) -> str:
    """The ``-passes=`` value for a sequence of actions (``verify`` when empty)."""
    if not actions:
        return "verify"
    if isolate_steps:
        return ",invalidate<all>,".join(ACTIONS[i].pipeline for i in actions)
    return pipeline_of(list(actions))
