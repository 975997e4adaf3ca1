"""`perftune examples`: the bundled examples, written where a pip-installed user can run them."""

from __future__ import annotations

import os
import re
import shutil
import stat
from importlib.resources import files
from pathlib import Path

import pytest
from click.testing import CliRunner

from perftune.cli import cli
from perftune.targets.command import load_task
from perftune.targets.flags import task_from_toml

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = Path(str(files("perftune") / "examples"))


@pytest.fixture
def tmp_path(public_tmp_path: Path) -> Path:
    return public_tmp_path  # the written tasks are loaded, and root's candidates run as another user


def _bundled_files() -> dict[str, bytes]:
    return {p.relative_to(BUNDLED).as_posix(): p.read_bytes() for p in sorted(BUNDLED.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _examples(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["examples", *args])
    return result.exit_code, result.output


def test_writes_every_bundled_file_and_names_the_next_command(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    code, out = _examples(str(target))
    assert code == 0, out
    written = {p.relative_to(target).as_posix(): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    assert written == _bundled_files()
    for needed in ("python_metric/task.toml", "python_metric/compress.py", "python_metric/input.txt",
                   "c_matmul/task.toml", "c_matmul/matmul.c", "gcc_flags/task.toml", "gcc_flags/stencil.c",
                   "choice/sort.py", "dask_local/tune_on_dask.py", "TASK_FILES.md"):
        assert needed in written, needed
        assert str(target / needed) in out
    next_line = out.strip().splitlines()[-1]
    assert next_line.startswith("next: perftune run ")
    assert (Path(next_line.split()[3])).is_file()


def test_default_folder_is_perftune_examples_in_the_current_folder(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _examples()
    assert code == 0, out
    assert (tmp_path / "perftune-examples" / "python_metric" / "task.toml").is_file()
    assert "next: perftune run perftune-examples/python_metric/task.toml" in out


def test_written_tasks_load_from_their_new_place(tmp_path: Path) -> None:
    code, out = _examples(str(tmp_path / "ex"))
    assert code == 0, out
    for name in ("python_metric", "c_matmul"):
        task = load_task(tmp_path / "ex" / name / "task.toml", prepare=False)
        assert task.space.is_valid(task.space.default())
    import tomllib

    flags_toml = tmp_path / "ex" / "gcc_flags" / "task.toml"
    flags = task_from_toml(tomllib.loads(flags_toml.read_text())["target"], str(flags_toml))
    # The flags example names its source next to the task file, so the copy is self-contained.
    assert all((tmp_path / "ex" / "gcc_flags" / src).is_file() for src in flags.sources)


def test_modes_let_the_sandbox_user_read_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        code, out = _examples(str(tmp_path / "ex"))
    finally:
        os.umask(old)
    assert code == 0, out
    for path in (tmp_path / "ex").rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))
    assert stat.S_IMODE((tmp_path / "ex").stat().st_mode) == 0o755


def test_existing_files_are_kept_unless_force(tmp_path: Path) -> None:
    target = tmp_path / "ex"
    mine = target / "python_metric" / "task.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# my own edits\n")
    (target / "c_matmul").mkdir()  # a file deleted from the copy: written again, the others kept
    code, out = _examples(str(target))
    assert code == 0, out
    assert mine.read_text() == "# my own edits\n"
    assert f"  {mine}\n" not in out and "kept 1 file that exists already (--force overwrites them)" in out
    assert (target / "c_matmul" / "matmul.c").read_bytes() == _bundled_files()["c_matmul/matmul.c"]
    code, out = _examples(str(target))
    assert code == 0 and out.startswith(f"wrote 0 files to {target}\nkept "), out

    code, out = _examples(str(target), "--force")
    assert code == 0, out
    assert mine.read_bytes() == _bundled_files()["python_metric/task.toml"]


def test_force_replaces_a_planted_link_and_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "ex"
    (target / "c_matmul").mkdir(parents=True)
    (target / "c_matmul" / "matmul.c").symlink_to(victim)
    code, out = _examples(str(target))
    assert code == 0 and "c_matmul/matmul.c" not in out  # a dangling or live link is kept as it is
    assert (target / "c_matmul" / "matmul.c").is_symlink() and victim.read_text() == "keep me\n"
    code, out = _examples(str(target), "--force")
    assert code == 0, out
    assert victim.read_text() == "keep me\n"
    link = target / "c_matmul" / "matmul.c"
    assert not link.is_symlink() and link.read_bytes() == _bundled_files()["c_matmul/matmul.c"]


def test_a_file_in_the_way_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "ex").mkdir()
    (tmp_path / "ex" / "choice").write_text("not a folder\n")
    code, out = _examples(str(tmp_path / "ex"), "--force")
    assert code == 2 and out.count("\n") == 1
    assert out.startswith("perftune: error: examples: ") and "choice is in the way" in out
    assert not (tmp_path / "ex" / "c_matmul").exists()  # refused before writing anything


def test_start_here_of_the_help_works_after_perftune_examples(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    help_text = CliRunner().invoke(cli, ["--help"]).output
    start = help_text.split("Start here:", 1)[1].split("\n\n", 1)[0]
    commands = [line.split("#")[0].split() for line in start.strip().splitlines()]
    assert commands[0] == ["perftune", "examples"]
    monkeypatch.chdir(tmp_path)
    assert _examples()[0] == 0
    runs = [c for c in commands if c[:2] == ["perftune", "run"]]
    assert runs and all(Path(c[2]).is_file() for c in runs)


def test_the_repository_examples_are_the_bundled_ones() -> None:
    # One copy: examples/ of a checkout (used by `make demo`) is the package's folder, not a second copy.
    assert (ROOT / "examples").resolve() == BUNDLED.resolve()
    assert (ROOT / "examples" / "c_matmul" / "task.toml").is_file()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"perftune run examples/c_matmul/task.toml", makefile)
    stencil = BUNDLED / "gcc_flags" / "stencil.c"
    assert stencil.samefile(BUNDLED.parent / "targets" / "flags" / "programs" / "stencil.c")


# -- TASK_FILES.md says what the loader does --------------------------------------------------------------

TASK_FILES = BUNDLED / "TASK_FILES.md"


def _complete_example(folder: Path) -> Path:
    """The ```toml block of "A complete example", written as it is, with the files it names."""
    text = TASK_FILES.read_text()
    block = text.split("## A complete example", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    (folder / "data").mkdir()
    (folder / "data" / "input.txt").write_text("1 2 3\n")
    (folder / "data" / "other.txt").write_text("4 5 6\n")
    (folder / "mm.c").write_text("int main(void) { return 0; }\n")
    task = folder / "task.toml"
    task.write_text(block)
    return task


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the example's build step runs gcc")
def test_the_complete_example_of_task_files_loads_as_written(tmp_path: Path) -> None:
    task = load_task(_complete_example(tmp_path), prepare=False)
    assert task.name == "matmul" and task.technique == "default"
    assert task.seeds == [{"block": 64, "unroll": 4, "order": "ikj", "fast": False, "passes": ("b", "a", "c"),
                           "tile": 2}]
    assert all(task.space.is_valid(s) for s in task.seeds)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the example's build step runs gcc")
def test_every_key_a_task_file_may_hold_is_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every table's allowed keys, as the loader checks them, recorded while it reads the complete example
    # (with a budget table, the one table it does not have).
    from perftune.targets.command import _sections, _task

    allowed: dict[str, set[str]] = {}
    original = _sections.check_keys

    def recording(table: object, keys: set[str], where: object, prefix: str) -> None:
        allowed.setdefault(prefix, set()).update(keys)
        original(table, keys, where, prefix)  # type: ignore[arg-type]

    monkeypatch.setattr(_sections, "check_keys", recording)
    monkeypatch.setattr(_task, "check_keys", recording)
    task = _complete_example(tmp_path)
    task.write_text(task.read_text().replace("budget = 100 ", "budget = { evals = 100 }"))
    load_task(task, prepare=False)
    assert {"", "build.", "run.", "objective.", "check.", "check.expensive.", "timing.", "sandbox.",
            "tuning.", "tuning.budget."} <= set(allowed)
    text = TASK_FILES.read_text()

    def documented(prefix: str, key: str) -> bool:  # `key = ...` in the example, `key` or [table] in prose
        return bool(re.search(rf"(?<![\w.-]){re.escape(key)}\s*=|`{re.escape(key)}`", text)) \
            or f"[{prefix}{key}]" in text

    undocumented = [f"{prefix}{key}" for prefix, keys in sorted(allowed.items()) for key in sorted(keys)
                    if not documented(prefix, key)]
    assert undocumented == []


def test_the_dask_example_stores_its_run_only_when_told_where(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import perftune

    script = BUNDLED / "dask_local" / "tune_on_dask.py"
    spec = importlib.util.spec_from_file_location("tune_on_dask", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stores: list[object] = []

    def fake_tune(*args: object, store: object = None, **kwargs: object) -> object:
        stores.append(store)
        raise SystemExit(0)

    monkeypatch.setattr(perftune, "tune", fake_tune)
    for argv in (["tune_on_dask.py"], ["tune_on_dask.py", "local:2", "perftune.db"]):
        monkeypatch.setattr("sys.argv", argv)
        with pytest.raises(SystemExit):
            module.main()
    assert stores == [None, "perftune.db"]
    doc = module.__doc__ or ""
    assert "kept in memory only" in doc and "local:2 perftune.db" in doc
