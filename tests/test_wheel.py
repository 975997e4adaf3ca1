"""The pip path: build the wheel, install it in a fresh plain venv, follow the README and --help there.

The wheel is built from a copy of what the build needs (pyproject.toml, README.md, LICENSE, src/), so
a stale build/ folder of the checkout cannot leak into it. The venv has no system site packages and
only the core dependencies (from the package index, through pip's cache), so every extra-only
feature is missing there, as for a new user. Every command runs from a folder outside the repository.

When the suite runs as root, candidates run as an unprivileged user, who must reach the task folder:
the tour runs in a world-readable folder, and ``test_tour_in_a_private_folder`` checks what a root
user meets in a folder only root can enter (pytest's own temporary folders).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
SMALL_BUDGET = "5"


@dataclass
class Venv:
    """A fresh virtual environment with the built wheel installed."""

    root: Path
    wheel: Path
    env: dict[str, str]

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(self, args: list[str], cwd: Path, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        exe = str(self.bin / args[0]) if (self.bin / args[0]).exists() else args[0]
        return subprocess.run([exe, *args[1:]], cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout_s)

    def ok(self, args: list[str], cwd: Path, timeout_s: float = 180) -> str:
        done = self.run(args, cwd, timeout_s)
        assert done.returncode == 0, f"{' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        return done.stdout

    def one_line_error(self, args: list[str], cwd: Path) -> str:
        done = self.run(args, cwd)
        assert done.returncode == 2, f"{' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("perftune: error: ")
        return done.stderr


def _public_dir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)  # root's candidates run as an unprivileged user, who must reach the tasks (and python3)
    return path


def _clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PERFTUNE_STORE", "PERFTUNE_CHOICES")}
    # As an activated venv: its bin first, and nothing of the checkout (its .venv) on the PATH.
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(ROOT))]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def venv() -> Iterator[Venv]:
    base = _public_dir("perftune-wheel-")
    try:
        source = base / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy2(ROOT / name, source / name)
        # symlinks=True: links in the package (gcc_flags/stencil.c) reach the build as a checkout has them.
        shutil.copytree(ROOT / "src", source / "src", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        root = base / "venv"
        # A plain venv (no --system-site-packages) from the interpreter that runs the tests.
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
        env = _clean_env(root)
        pip = [str(root / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        built = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(base / "wheelhouse"), str(source)],
                               env=env, capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stdout + built.stderr
        assert "deprecated" not in built.stdout + built.stderr, built.stdout + built.stderr
        (wheel,) = (base / "wheelhouse").glob("perftune-*.whl")
        # The core dependencies come from the package index, through pip's usual cache.
        installed = subprocess.run([*pip, "install", str(wheel)], env=env, capture_output=True, text=True,
                                   timeout=400)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        yield Venv(root, wheel, env)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _readme_block(heading: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    after = text.split(heading, 1)[1]
    return after.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def _commands(block: str) -> list[list[str]]:
    out = []
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            out.append(words)
    return out


def _small(words: list[str]) -> list[str]:
    """A command as shown, with a small budget so that the tour stays short."""
    out = list(words)
    for i, word in enumerate(out[:-1]):
        if word == "--budget":
            out[i + 1] = "+2" if out[i + 1].startswith("+") else SMALL_BUDGET
    return out


def test_wheel_holds_the_license_and_the_examples(venv: Venv) -> None:
    with zipfile.ZipFile(venv.wheel) as whl:
        names = set(whl.namelist())
        licences = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licences, sorted(n for n in names if "dist-info" in n)
        licence = whl.read(licences[0]).decode()
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        stencil = whl.read("perftune/examples/gcc_flags/stencil.c")
    assert licence == (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "Copyright (c) 2026 the perftune authors" in licence
    assert "License-Expression: MIT" in metadata
    bundled = ROOT / "src" / "perftune" / "examples"
    expected = {f"perftune/examples/{p.relative_to(bundled).as_posix()}" for p in bundled.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    assert expected <= names, sorted(expected - names)
    # The link of the checkout arrives as the file itself.
    assert stencil == (ROOT / "src/perftune/targets/flags/programs/stencil.c").read_bytes()


def test_the_venv_is_a_core_install_outside_the_repository(venv: Venv) -> None:
    where = venv.ok(["python", "-c", "import perftune; print(perftune.__file__)"], cwd=venv.root)
    assert where.strip().startswith(str(venv.root)) and not where.strip().startswith(str(ROOT))
    for extra_only in ("gymnasium", "matplotlib", "distributed", "psycopg2"):
        found = venv.ok(["python", "-c", f"import importlib.util as u; print(u.find_spec('{extra_only}'))"],
                        cwd=venv.root)
        assert found.strip() == "None", f"{extra_only} is installed in the core venv"


def test_import_perftune_gym_names_the_extra(venv: Venv) -> None:
    done = venv.run(["python", "-c", "import perftune.gym"], cwd=venv.root)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: perftune.gym needs gymnasium: pip install 'perftune[gym]'")


def test_readme_tour_and_help_start_here_work_for_a_pip_user(venv: Venv) -> None:
    work = _public_dir("perftune-tour-")
    try:
        _follow_the_tour(venv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _follow_the_tour(venv: Venv, work: Path) -> None:
    # perftune --help's "start here", command by command.
    help_text = venv.ok(["perftune", "--help"], cwd=work)
    start = _commands(help_text.split("Start here:", 1)[1].split("\n\n", 1)[0])
    assert start[0] == ["perftune", "examples"] and any(c[:2] == ["perftune", "run"] for c in start)
    written = venv.ok(start[0], cwd=work)
    assert "next: perftune run perftune-examples/python_metric/task.toml" in written
    for words in start[1:]:
        out = venv.ok(_small(words), cwd=work)
        if words[1] == "run":
            assert "best configuration:" in out
        if words[1] == "best":
            assert out.strip().startswith("{") and '"level"' in out
    assert (work / "perftune.db").is_file()

    # The README's command-line tour, as written (small budgets). `perftune examples` again keeps every file
    # the first one wrote (and says so) and writes none.
    tour = _commands(_readme_block("### Command line", "sh"))
    assert tour[0] == ["perftune", "examples"]
    kept = venv.ok(tour[0], cwd=work)
    assert "wrote 0 files" in kept and "--force overwrites them" in kept, kept
    for words in tour[1:]:
        out = venv.ok(_small(words), cwd=work)
        if words[1] == "run":
            assert "best configuration:" in out
        if words[1] == "report":
            # The core install has no matplotlib: the page is written with its tables, and says so.
            assert "tables only" in out and "pip install 'perftune[plot]'" in out
            wrote = re.search(r"wrote (\S+\.html)", out)
            assert wrote is not None, out
            page = (work / wrote.group(1)).read_text()
            assert "Best configuration" in page and "<img" not in page
        if words[1] == "doctor":
            assert "[active]" in out or "[missing]" in out
    with open(work / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= int(SMALL_BUDGET) + 2  # the run and its resume

    # The README's Python tour: the snippet as written, with a stand-in kernel and a small budget.
    snippet = _readme_block("### Python", "python")
    snippet = snippet.replace("budget=200", f"budget={SMALL_BUDGET}")
    kernel = ("def run_my_kernel(**config):\n"
              "    return float(config['block_x'] * config['block_y'] + config['unroll'])\n")
    script = work / "tour.py"
    script.write_text(kernel + snippet)
    out = venv.ok(["python", str(script)], cwd=work)
    assert out.strip()

    # The bundled C example (what `make demo` tunes in a checkout), when a C compiler is there.
    if shutil.which("gcc", path=venv.env["PATH"]):
        out = venv.ok(["perftune", "run", "perftune-examples/c_matmul/task.toml", "--budget", "3"], cwd=work,
                      timeout_s=300)
        assert "best configuration:" in out

    # Extra-only features without their extra: one line naming it.
    err = venv.one_line_error(["perftune", "run", "perftune-examples/python_metric/task.toml",
                               "--budget", "2", "--executor", "dask"], cwd=work)
    assert "pip install 'perftune[dask]'" in err
    err = venv.one_line_error(["perftune", "--store", "postgresql://nobody@127.0.0.1:1/none", "runs"],
                              cwd=work)
    assert "pip install 'perftune[postgres]'" in err
    # The LLVM pass search needs opt-14, not the gym extra (only perftune.gym does).
    if shutil.which("opt-14", path=venv.env["PATH"]) and shutil.which("clang-14", path=venv.env["PATH"]):
        (work / "prog.c").write_text("int main(void) { return 0; }\n")
        venv.ok(["perftune", "llvm-passes", "prog.c", "--budget", "1s"], cwd=work)


def test_tour_in_a_private_folder(venv: Venv, tmp_path: Path) -> None:
    """A folder only its owner can enter (0700, like /root): every command works as anywhere else,
    measuring candidates too (as root, the sandbox stages what candidates must read)."""
    work = tmp_path / "private"
    work.mkdir()
    work.chmod(0o700)
    out = venv.ok(["perftune", "examples"], cwd=work)
    assert (work / "perftune-examples" / "python_metric" / "task.toml").is_file(), out
    # A run that measures in-process (no sandbox), then every command that reads the store.
    venv.ok(["python", "-c", "import perftune; from perftune.space import Space, Int; "
             "perftune.tune(lambda c: float((c['x'] - 3) ** 2), Space({'x': Int(0, 9)}), budget=6, seed=1, "
             "store='perftune.db', name='private')"], cwd=work)
    assert "private" in venv.ok(["perftune", "runs"], cwd=work)
    shown = json.loads(venv.ok(["perftune", "show", "private", "--json"], cwd=work))
    assert len(shown["trials"]) == 6
    assert json.loads(venv.ok(["perftune", "best", "private"], cwd=work)) == shown["best"]["config"]
    venv.ok(["perftune", "export", "private", "--format", "json", "-o", "trials.json"], cwd=work)
    assert "tables only" in venv.ok(["perftune", "report", "private"], cwd=work)
    assert (work / "report-private.html").is_file()

    done = venv.run(["perftune", "run", "perftune-examples/python_metric/task.toml", "--budget", "3"],
                    cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "best configuration:" in done.stdout
