"""``perftune adapt`` with its output piped: periodic lines for the landmark searches, then for the inputs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "perftune" / "examples" / "adapt" / "task"
_SEARCH = re.compile(r"^perftune adapt: landmark searches: (\d+)/(\d+) trials, "
                     r"(?:best \S+ \(landmark (\d) of (\d)\)|no success yet), "
                     r"\d+:\d\d elapsed, ETA \d+:\d\d(?:, \S+/(?:s|min))?$")
_INPUTS = re.compile(r"^perftune adapt: every landmark on every input: (\d+)/(\d+) inputs, "
                     r"\d+:\d\d elapsed, ETA \d+:\d\d(?:, \S+/(?:s|min))?$")


@pytest.fixture
def task(tmp_path: Path) -> Path:
    dest = tmp_path / "task"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("train"))
    # Small files: this is about the progress lines, not about what the dispatcher learns.
    subprocess.run([sys.executable, str(dest / "make_train.py"), "3000"], check=True, timeout=120)
    return dest / "task.toml"


def _adapt(task: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("perftune")
    return subprocess.run([str(exe), "adapt", str(task), "--seed", "0", "--out", str(task.parent / "d.json"),
                           *extra], capture_output=True, text=True, timeout=280, check=False, cwd=task.parent)


@pytest.mark.slow
def test_piped_adapt_prints_the_searches_then_the_inputs(task: Path) -> None:
    done = _adapt(task, "--progress-every", "0.3")
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "perftune adapt:" not in done.stdout  # progress goes to stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("perftune adapt:")]
    search = [m for line in lines if (m := _SEARCH.match(line))]
    inputs = [m for line in lines if (m := _INPUTS.match(line))]
    # Every line is one of the two kinds. The seeds (here every sort: the space is one choice) are timed
    # on every input first, then the landmark searches run, then any new landmarks are timed on every
    # input (when the searches found only seeds, that table is done at once: one line): three blocks,
    # never interleaved, and one input counter across both tables.
    assert len(search) + len(inputs) == len(lines) and len(search) >= 2 and len(inputs) >= 2, lines
    kinds = ["search" if _SEARCH.match(line) else "input" for line in lines]
    blocks = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert blocks in (["input", "search", "input"], ["search", "input"]), blocks
    trials = [int(m.group(1)) for m in search]
    # The task's [adapt] budget is 8 trials for 2 clusters; the choice of 3 sorts can end a search early.
    assert trials == sorted(trials) and {int(m.group(2)) for m in search} == {8} and trials[-1] <= 8
    landmarks = [(int(m.group(3)), int(m.group(4))) for m in search if m.group(3)]
    assert landmarks and len({n for _, n in landmarks}) == 1
    assert [k for k, _ in landmarks] == sorted(k for k, _ in landmarks)
    counts = [int(m.group(1)) for m in inputs]
    totals = {int(m.group(2)) for m in inputs}
    assert counts == sorted(counts) and len(totals) == 1 and counts[-1] == totals.pop()

@pytest.mark.slow
def test_quiet_adapt_prints_no_progress(task: Path) -> None:
    done = _adapt(task, "--quiet")
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "perftune adapt:" not in done.stderr
