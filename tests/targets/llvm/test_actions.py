from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from perftune.targets.llvm import ACTIONS, COMPILERGYM_FLAGS, UNMAPPED, action_index, pipeline_of
from perftune.targets.llvm._tools import find_tool

DOC = Path(__file__).resolve().parents[3] / "docs" / "llvm-actions.md"


def test_action_space_is_compilergyms_minus_the_unmapped() -> None:
    assert len(COMPILERGYM_FLAGS) == 124
    assert len(set(COMPILERGYM_FLAGS)) == 124
    assert len(ACTIONS) == 118
    assert sorted(UNMAPPED) == sorted(
        ["-barrier", "-constprop", "-die", "-ipconstprop", "-loop-unswitch", "-prune-eh"]
    )
    assert [a.flag for a in ACTIONS] == [f for f in COMPILERGYM_FLAGS if f not in UNMAPPED]


def test_names_and_errors() -> None:
    assert action_index("-licm") == action_index("licm")
    assert ACTIONS[action_index("-licm")].pipeline == "function(loop-mssa(licm))"
    assert ACTIONS[action_index("-functionattrs")].pipeline == "cgscc(function-attrs)"
    with pytest.raises(ValueError, match="no LLVM 14 counterpart"):
        action_index("-prune-eh")
    with pytest.raises(ValueError, match="unknown action"):
        action_index("-frobnicate")


def test_every_action_runs_alone(helper, loop_ll: Path) -> None:  # type: ignore[no-untyped-def]
    start = helper.load(loop_ll)
    for action in ACTIONS:
        helper.reset()
        count = helper.apply(action.pipeline)
        assert count > 0, action.flag
    assert helper.reset() == start


def test_every_action_is_accepted_by_opt(loop_ll: Path) -> None:
    # One opt process checks the whole list parses with LLVM 14's own pipeline parser.
    result = subprocess.run(
        [
            find_tool("opt"),
            f"-passes={pipeline_of(list(range(len(ACTIONS))))}",
            str(loop_ll),
            "-o",
            "/dev/null",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_unmapped_actions_are_documented() -> None:
    text = DOC.read_text()
    for flag in UNMAPPED:
        assert f"`{flag}`" in text
    for action in ACTIONS:
        assert f"`{action.flag}`" in text
