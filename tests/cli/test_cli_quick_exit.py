"""The ``perftune`` executable leaves without the interpreter's teardown, and loses nothing by it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ENTRY = """
import atexit, sys, threading, time
from perftune.cli import entry
out = sys.argv[1]
atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
if sys.argv[2] == "thread":
    def late():
        time.sleep(0.5)
        open(out + ".thread", "w").write("done")
    threading.Thread(target=late).start()  # not a daemon: the exit waits for it
sys.argv = ["perftune", *sys.argv[3:]]
entry()
"""


def _entry(tmp_path: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, str(tmp_path / "out"), mode, *args],
        capture_output=True, text=True, timeout=120,
    )


def test_output_exit_code_and_atexit_handlers_survive_the_quick_exit(tmp_path: Path) -> None:
    done = _entry(tmp_path, "plain", "--help")
    assert done.returncode == 0 and "Usage:" in done.stdout and done.stdout.endswith("\n")
    assert (tmp_path / "out.atexit").read_text() == "ran"
    failed = _entry(tmp_path, "plain", "runs", "--store", f"sqlite:///{tmp_path / 'missing.db'}")
    assert failed.returncode == 2
    assert failed.stderr.startswith("perftune: error:") and failed.stderr.count("\n") == 1


def test_a_running_thread_gets_the_ordinary_exit(tmp_path: Path) -> None:
    done = _entry(tmp_path, "thread", "--help")
    assert done.returncode == 0
    assert (tmp_path / "out.thread").read_text() == "done"
    assert (tmp_path / "out.atexit").read_text() == "ran"


def test_python_m_perftune_is_the_quick_exit_entry() -> None:
    done = subprocess.run([sys.executable, "-m", "perftune", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip()
